"""Draws this folder's figures from its data (python plot.py)."""

import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[2] / "scripts"))
from results_plot import CURVES, plot_ab, plot_mlx_tflops  # noqa: E402


def staged(lib):
    return ((f"{lib}.cand15", "K block waits"), (f"{lib}.cand17", "O staged"),
            (f"{lib}.cand18", "both (MLX's now)"))


# Panels of the A/B figure: (title, folder, baseline, ((variant, legend), ...)).
# A variant is "<library>.<configuration>"; the library is the JSON file
# name's first field (calls/README.md names them).
PANELS = (
    ("call 1: seesaw block (cand16)", "call1-json", "SS.hopper",
     (("SS.cand15", "K block waits"), ("SS.cand16", "seesaw"))),
    ("call 2: one after another, MLX's block first", "call2-json", "SO.hopper", staged("SO")),
    ("call 3: one after another, cand18 first", "call3-json", "SOrev.hopper",
     staged("SOrev")),
    ("call 4: one run of each in turn", "call4-json", "SOi.hopper", staged("SOi")),
    ("call 7: as landed, one run of each in turn", "call7-json", "L.cand13",
     (("L.hopper", "MLX's block now"),)),
)


if __name__ == "__main__":
    plot_ab(HERE / "harness", PANELS, HERE / "ab_512.png",
            "Head dim 512 candidates in the harness, H100, causal bf16, 32 query heads, "
            "means of each call's rounds (two; call 7 one)",
            "candidate / MLX's 512 block as landed before (mean TFLOP/s)",
            ylim=(0.6, 1.3), panel_width=4.8,
            legend={"fontsize": 8, "loc": "upper left", "ncol": 2})
    cases = HERE / "mlx" / "call5-cases.jsonl"
    if cases.exists():
        plot_mlx_tflops(
            cases, HERE / "mlx_call5.png",
            "this session's wheel through MLX, H100, beside torch and upstream's path",
            dims=(256, 512), curves=CURVES + (("ours, second round", "default-r2", "o--", "C7"),))
