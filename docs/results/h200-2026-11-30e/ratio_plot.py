"""Speed-up of the patched kernel over upstream's fallback (issue 6's targets),
from the two bench.json files of this folder: per call (latency) and queued.

    python docs/results/h200-2026-11-30e/ratio_plot.py
"""
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from mlx_builder.bench import speedups  # noqa: E402

HERE = Path(__file__).resolve().parent
TARGETS = {256: 4.0, 512: 3.0}


def ratios(path, dim):
    return speedups(json.loads(path.read_text()), dim).get("fallback", [])


fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
for ax, dim in zip(axes, (256, 512)):
    for name, sub, dy in (("per call", "bench", 6), ("queued 10", "bench_queued", -13)):
        pts = ratios(HERE / sub / "bench.json", dim)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=name)
            for L, r in pts:
                ax.annotate(f"{r:.2f}", (L, r), textcoords="offset points",
                            xytext=(0, dy), ha="center", fontsize=8)
    ax.axhline(TARGETS[dim], color="red", ls="--", lw=1,
               label=f"issue 6 target {TARGETS[dim]:g}x")
    ax.set_xscale("log", base=2)
    ax.set_xticks([2048, 8192, 16384, 32768], ["2k", "8k", "16k", "32k"])
    ax.set_title(f"head_dim {dim}: patched / upstream fallback")
    ax.set_xlabel("sequence length L (causal, bf16, 32/16 heads)")
    ax.set_ylabel("speed-up")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
fig.suptitle("H200, MLX wheel with the session-7 kernel (bench/, bench_queued/)")
fig.tight_layout()
fig.savefig(HERE / "speedup_vs_upstream.png", dpi=110)
print(HERE / "speedup_vs_upstream.png")
