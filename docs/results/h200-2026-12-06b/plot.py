"""Draws this folder's figures from its data (python plot.py)."""

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[2] / "scripts"))
from results_plot import plot_mlx_tflops  # noqa: E402


def harness():
    """(D, kv heads, kL, qL, variant) -> TFLOP/s readings of calls 4-6 (H100).

    A JSON file's name starts with its library (A: the series as landed
    before; B: 32-bit descriptor steps everywhere, and cand14 = one TMA
    copy per K / V tile) and its round.
    """
    acc = defaultdict(list)
    for call in ("call4-json", "call5-json", "call6-json"):
        for path in sorted((HERE / "harness" / call).glob("*.json")):
            rows = json.loads(path.read_text())
            for row in rows if isinstance(rows, list) else [rows]:
                for key, value in row.items():
                    if key.startswith("ours_") and not key.endswith("_ms"):
                        variant = f"{path.name[0]}.{key[len('ours_'):]}"
                        acc[(row["D"], row["Hkv"], row["L"], row["qL"], variant)].append(value)
    return acc


def plot_mlx():
    plot_mlx_tflops(
        HERE / "mlx" / "call1-cases.jsonl", HERE / "mlx_tflops.png",
        "The series' wheel with the new block order through MLX (H200, "
        "call 1; head dim 512 has no torch flash or cuDNN kernel)")


def plot_ab():
    acc = harness()
    shapes = sorted({k[:4] for k in acc})
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.6), sharey=True)
    for ax, D in zip(axes, (192, 256, 512)):
        mine = [s for s in shapes if s[0] == D]
        labels, desc, blocked = [], [], []
        for (d, kv, kL, qL) in mine:
            base = acc.get((d, kv, kL, qL, "A.hopper"))
            b = acc.get((d, kv, kL, qL, "B.hopper"))
            c = acc.get((d, kv, kL, qL, "B.cand14"))
            if not b or not c:
                continue
            tag = f"{kL // 1024}k" if qL == kL else f"2k×{kL // 1024}k"
            labels.append(tag + ("" if kv == 16 else f"\n{kv} kv"))
            desc.append(statistics.mean(b) / statistics.mean(base) if base else None)
            blocked.append(statistics.mean(c) / statistics.mean(b))
        x = range(len(labels))
        ax.bar([i - 0.2 for i in x], [v or 0 for v in desc], 0.4,
               label="32-bit descriptor steps (B.hopper / A.hopper)", color="C0")
        ax.bar([i + 0.2 for i in x], blocked, 0.4,
               label="one TMA copy per tile (B.cand14 / B.hopper)", color="C1")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(list(x), labels, fontsize=8)
        ax.set_ylim(0.85, 1.12)
        ax.set_title(f"head dim {D}")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("ratio of mean TFLOP/s (kernel alone)")
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, fontsize=9, loc="lower center", ncol=2)
    fig.suptitle("A/B in the harness, H100, causal bf16, 32 query heads "
                 "(no bar: not run in that library)")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(HERE / "ab_ratios.png", dpi=110)


if __name__ == "__main__":
    plot_mlx()
    plot_ab()
