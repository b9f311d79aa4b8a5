"""Draws this folder's figures from its data (python plot.py)."""

import json
import re
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
MLX_LENGTHS = [2048, 8192, 16384, 32768]
GROUP_LENGTHS = [2048, 4096, 8192, 16384, 32768]
GROUPS = ["none", "8", "4", "2", "1"]  # "none": one tile per group


def mlx(label, D):
    """TFLOP/s by length through MLX or torch (call 1, each in its own process)."""
    rows = [json.loads(line) for line in (HERE / "mlx" / "call1-cases.jsonl").open()]
    by_len = {r["qL"]: r["TFLOPs"] for r in rows
              if r["label"] == label and r["kind"] == "prefill" and r["D"] == D
              and r.get("kv_heads") == 16 and "TFLOPs" in r}
    return [by_len.get(L) for L in MLX_LENGTHS]


def harness_lines():
    """(D, kv heads, groups, L, config) -> TFLOP/s readings of calls 4 and 6.

    Each line of harness/call{4,6}-harness.txt is `label D Hkv L` and then
    `config TFLOP/s` pairs; the label names the groups (`_g<N>_`, `_gnone_`).
    """
    acc = {}
    for name in ("call4-harness.txt", "call6-harness.txt"):
        for line in (HERE / "harness" / name).read_text().splitlines():
            t = line.split()
            group = re.search(r"_g(none|\d+)_", t[0]).group(1)
            for config, value in zip(t[4::2], t[5::2]):
                key = (int(t[1]), int(t[2]), group, int(t[3]), config)
                acc.setdefault(key, []).append(float(value))
    return acc


def plot_mlx():
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    x = range(len(MLX_LENGTHS))
    for ax, D in zip(axes, (192, 256, 512)):
        for label, key, style, color in [
                ("ours through MLX, waited", "default", "o-", "C0"),
                ("ours, 8 queued per wait", "default-queued8", "o:", "C1"),
                ("torch cuDNN", "torch-cudnn", "^-", "C2"),
                ("torch FA2", "torch-flash", "v-", "C3"),
                ("torch mem-efficient", "torch-efficient", "d-", "C4"),
                ("upstream fallback (256 / 512 only)", "fallback", "x-", "C5")]:
            pts = [(i, y) for i, y in zip(x, mlx(key, D)) if y is not None]
            if pts:
                ax.plot(*zip(*pts), style, color=color, label=label)
        ax.set_xticks(list(x), [f"{L // 1024}k" for L in MLX_LENGTHS])
        ax.set_title(f"head dim {D}")
        ax.set_xlabel("sequence length (causal, 32 / 16 heads, bf16)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("TFLOP/s")
    axes[1].legend(fontsize=8, loc="center right")
    fig.suptitle("The landed series' wheel through MLX (H100, call 1; "
                 "head dim 512 has no torch flash or cuDNN kernel)")
    fig.tight_layout()
    fig.savefig(HERE / "mlx_tflops.png", dpi=110)


def plot_groups():
    acc = harness_lines()
    panels = [(192, "hopper", "192, MLX's tiles"),
              (192, "cand13", "192, wide P V (not landed)"),
              (256, "hopper", "256, MLX's tiles"),
              (512, "hopper", "512, warp-specialized")]
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
    x = range(len(GROUP_LENGTHS))
    for ax, (D, config, title) in zip(axes, panels):
        for color, group in enumerate(GROUPS):
            ys = [acc.get((D, 16, group, L, config)) for L in GROUP_LENGTHS]
            pts = [(i, statistics.mean(y)) for i, y in zip(x, ys) if y]
            if pts:
                name = "one tile per group" if group == "none" else f"{group} per head"
                ax.plot(*zip(*pts), "o-", color=f"C{color}", label=name)
        ax.set_xticks(list(x), [f"{L // 1024}k" for L in GROUP_LENGTHS])
        ax.set_title(f"head dim {title}")
        ax.set_xlabel("sequence length (causal, 32 / 16 heads)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("TFLOP/s (mean of 2-6 runs)")
    axes[0].legend(fontsize=8, loc="lower right", title="query-tile groups")
    fig.suptitle("Block order: query-tile groups per head, kernel alone "
                 "(harness, H100, calls 4 and 6)")
    fig.tight_layout()
    fig.savefig(HERE / "groups_tflops.png", dpi=110)


if __name__ == "__main__":
    plot_mlx()
    plot_groups()
