"""Draws this folder's figures from its data (python plot.py)."""

import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[2] / "scripts"))
from results_plot import CURVES, harness_readings, plot_mlx_tflops  # noqa: E402

# Panels of the A/B figure: (title, folder, baseline, ((variant, legend), ...)).
# A variant is "<library>.<configuration>"; the library is the JSON file
# name's first field (harness/README.md names them).
PANELS = (
    ("32-key tiles, third K slot (call 1)", "call1-json", "K.hopper",
     (("K.cand15", "3 K / 3 V slots"), ("K.cand16", "3 K / 2 V slots"))),
    ("clusters of two, K / V multicast (call 1)", "call1-json", "CL.hopper",
     (("CL.cand15", "cluster of the two query heads of a KV head"),)),
    ("persistent block (call 3)", "call3-json", "V.hopper",
     (("P.cand15", "persistent (P2.cand15)"),
      ("P.hopper", "P2's own block, not persistent"))),
)


def readings(folder):
    """(D, kv heads, kL, qL, variant) -> TFLOP/s readings of one call
    (harness/README.md names the libraries)."""
    return harness_readings(HERE / "harness" / folder)


def label(shape):
    _, kv, kL, qL = shape
    name = f"{kL // 1024}k" if qL == kL else f"2k×{kL // 1024}k"
    return name + ("" if kv == 16 else f"\n{kv} kv")


def plot_ab(out):
    fig, axes = plt.subplots(1, len(PANELS), figsize=(5.2 * len(PANELS), 4.6),
                             sharey=True)
    for ax, (title, folder, base, variants) in zip(axes, PANELS):
        acc = readings(folder)
        shapes = sorted({k[:4] for k in acc if k[4] == base},
                        key=lambda s: (s[1] != 16, s[3] != s[2], s[2]))
        width = 0.8 / len(variants)
        for i, (variant, legend) in enumerate(variants):
            ratios = []
            for s in shapes:
                x = acc.get((*s, variant))
                ratios.append(statistics.mean(x) / statistics.mean(acc[(*s, base)])
                              if x else 0)
            ax.bar([j + (i - (len(variants) - 1) / 2) * width for j in range(len(shapes))],
                   ratios, width, label=legend)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(range(len(shapes)), [label(s) for s in shapes], fontsize=8)
        ax.set_ylim(0.75, 1.1)
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="lower left")
    axes[0].set_ylabel("candidate / MLX's 512 block (mean TFLOP/s)")
    fig.suptitle("Head dim 512 candidates in the harness against MLX's block, H100, "
                 "causal bf16, 32 query heads, means of 2-3 alternate runs",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(HERE / out, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    plot_ab("ab_512.png")
    cases = HERE / "mlx" / "call4-cases.jsonl"
    if cases.exists():
        plot_mlx_tflops(
            cases, HERE / "mlx_call4.png",
            "session 22's wheel (…58c0c33e) through MLX, H100: head dim 192, and the "
            "99 KB tiles (GB10's) forced with one block per multiprocessor",
            curves=CURVES + (("ours, 99 KB tiles, 1 block / SM", "small-1blk", "s--", "C6"),))
