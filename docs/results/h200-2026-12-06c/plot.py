"""Draws this folder's figures from its data (python plot.py)."""

import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[2] / "scripts"))
from results_plot import harness_readings, plot_mlx_tflops  # noqa: E402

# (folder, the variants drawn against C.hopper, their legends)
AB = {
    "call1-json": (("G.hopper", "tree softmax, scale folded (G.hopper / C.hopper)"),
                   ("G.cand13", "and K copied by a P V warpgroup (G.cand13 / C.hopper)")),
    "call3-json": (("H.hopper", "this session's MLX configuration (H.hopper / C.hopper)"),
                   ("H.cand15", "MLX's with P stored by stmatrix (H.cand15 / C.hopper)"),
                   ("H.cand16", "MLX's with the softmax's chains (H.cand16 / C.hopper)")),
}


def readings(folder):
    """(D, kv heads, kL, qL, variant) -> TFLOP/s readings of one call
    (harness/README.md names the libraries)."""
    return harness_readings(HERE / "harness" / folder)


def plot_ab(folder, out):
    acc = readings(folder)
    variants = AB[folder]
    shapes = sorted({k[:4] for k in acc if (*k[:4], "C.hopper") in acc})
    dims = sorted({s[0] for s in shapes})
    fig, axes = plt.subplots(1, len(dims), figsize=(5.5 * len(dims), 4.6),
                             sharey=True, squeeze=False)
    width = 0.8 / len(variants)
    for ax, D in zip(axes[0], dims):
        mine = [s for s in shapes if s[0] == D]
        labels = [(f"{kL // 1024}k" if qL == kL else f"2k×{kL // 1024}k")
                  + ("" if kv == 16 else f"\n{kv} kv") for (_, kv, kL, qL) in mine]
        present = [(v, legend) for v, legend in variants
                   if any((*s, v) in acc for s in mine)]
        for i, (variant, legend) in enumerate(present):
            ratios = []
            for s in mine:
                x = acc.get((*s, variant))
                ratios.append(statistics.mean(x) / statistics.mean(acc[(*s, "C.hopper")])
                              if x else 0)
            color = f"C{[v for v, _ in variants].index(variant)}"
            ax.bar([j + (i - (len(present) - 1) / 2) * width for j in range(len(mine))],
                   ratios, width, label=legend, color=color)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(range(len(mine)), labels, fontsize=8)
        ax.set_ylim(0.9, 1.1)
        ax.set_title(f"head dim {D}")
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("ratio of mean TFLOP/s (kernel alone)")
    handles, names = axes[0][0].get_legend_handles_labels()
    for ax in axes[0][1:]:
        for h, n in zip(*ax.get_legend_handles_labels()):
            if n not in names:
                handles.append(h)
                names.append(n)
    fig.legend(handles, names, fontsize=9, loc="lower center", ncol=2)
    fig.suptitle("A/B in the harness against the series as session 21 left it "
                 "(C.hopper), H100, causal bf16, 32 query heads,\n"
                 "means of 3 alternate runs (no bar: not run)", fontsize=10)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(HERE / out, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    plot_ab("call1-json", "ab_call1.png")
    if (HERE / "harness" / "call3-json").is_dir():
        plot_ab("call3-json", "ab_call3.png")
    for call, title in (("call2", "session 21's wheel (whl21) through MLX, H100"),
                        ("call4", "this session's wheel (…58c0c33e) through MLX, H100")):
        cases = HERE / "mlx" / f"{call}-cases.jsonl"
        if cases.exists():
            plot_mlx_tflops(cases, HERE / f"mlx_{call}.png",
                            f"{title} (head dim 512 has no torch flash or cuDNN kernel)")
