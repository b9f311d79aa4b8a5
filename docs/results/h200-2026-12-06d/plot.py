"""Draws this folder's figures from its data (python plot.py)."""

import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[2] / "scripts"))
from results_plot import CURVES, plot_ab, plot_mlx_tflops  # noqa: E402

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


if __name__ == "__main__":
    plot_ab(HERE / "harness", PANELS, HERE / "ab_512.png",
            "Head dim 512 candidates in the harness against MLX's block, H100, "
            "causal bf16, 32 query heads, means of 2-3 alternate runs",
            "candidate / MLX's 512 block (mean TFLOP/s)")
    cases = HERE / "mlx" / "call4-cases.jsonl"
    if cases.exists():
        plot_mlx_tflops(
            cases, HERE / "mlx_call4.png",
            "session 22's wheel (…58c0c33e) through MLX, H100: head dim 192, and the "
            "99 KB tiles (GB10's) forced with one block per multiprocessor",
            curves=CURVES + (("ours, 99 KB tiles, 1 block / SM", "small-1blk", "s--", "C6"),))
