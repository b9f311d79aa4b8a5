"""Draws this folder's figures from its data (python plot.py)."""

import glob
import json
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
LENGTHS = [2048, 8192, 16384, 32768]
DIMS = (256, 192)


def harness_mean(pattern, key, D):
    """Mean TFLOP/s by length of `key` over the harness runs matching `pattern`."""
    acc = {}
    for f in sorted(glob.glob(str(HERE / "harness" / pattern))):
        for r in json.loads(Path(f).read_text()):
            if r["D"] == D and key in r:
                acc.setdefault(r["L"], []).append(r[key])
    return [statistics.mean(acc[L]) if L in acc else None for L in LENGTHS]


def mlx(label, D):
    """TFLOP/s by length through MLX or torch (call 5, each in its own process)."""
    path = HERE / "mlx" / "cases.jsonl"
    rows = [json.loads(line) for line in path.open()] if path.exists() else []
    by_len = {r["qL"]: r["TFLOPs"] for r in rows
              if r["label"] == label and r["kind"] == "prefill" and r["D"] == D
              and r.get("kv_heads") == 16 and "TFLOPs" in r}
    return [by_len.get(L) for L in LENGTHS]


def panels(curves, title, out):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    x = range(len(LENGTHS))
    for ax, D in zip(axes, DIMS):
        for label, ys, style in curves(D):
            pts = [(i, y) for i, y in zip(x, ys) if y is not None]
            if pts:
                ax.plot(*zip(*pts), style, label=label)
        ax.set_xticks(list(x), [f"{L // 1024}k" for L in LENGTHS])
        ax.set_title(f"head dim {D}")
        ax.set_xlabel("sequence length (causal, 32 / 16 heads, bf16)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("TFLOP/s")
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(HERE / out, dpi=110)


def harness_curves(D):
    return [
        ("ours, landed (BN 80 at 256, 112 at 192)", harness_mean("call3-hb_*.json", "ours_hopper", D), "o-"),
        ("ours, BN 64 (before)", harness_mean("call3-hb_*.json", "ours_cand11", D), "s--"),
        ("torch cuDNN", harness_mean("call3-hb_1.json", "torch_cudnn", D), "^-"),
        ("torch FA2", harness_mean("call3-hb_1.json", "torch_flash", D), "v-"),
    ]


def mlx_curves(D):
    return [
        ("ours through MLX, waited", mlx("default", D), "o-"),
        ("ours, 8 queued per wait", mlx("default-queued8", D), "o:"),
        ("torch cuDNN", mlx("torch-cudnn", D), "^-"),
        ("torch FA2", mlx("torch-flash", D), "v-"),
        ("upstream fallback", mlx("fallback", D), "x-"),
    ]


if __name__ == "__main__":
    panels(harness_curves, "wgmma tiles at 192 / 256, kernel alone (harness, H200, MLX's block order)",
           "wgmma_bn_tflops.png")
    if (HERE / "mlx" / "cases.jsonl").exists():
        panels(mlx_curves, "wgmma tiles at 192 / 256 through MLX (H200)", "mlx_wgmma_tflops.png")
