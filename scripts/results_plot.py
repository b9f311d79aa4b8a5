"""The figure most results folders draw: TFLOP/s through MLX and torch by
sequence length, one panel per head dim, from a device call's cases JSONL
(scripts/mlx_sdpa_cases.py and scripts/torch_sdpa_cases.py lines).

A folder's plot.py imports it:

    sys.path.insert(0, str(HERE.parents[2] / "scripts"))
    from results_plot import plot_mlx_tflops
"""

import json
import statistics
from collections import defaultdict
from pathlib import Path

LENGTHS = (2048, 8192, 16384, 32768)
DIMS = (192, 256, 512)
# (legend, label in the JSONL, line style, color)
CURVES = (
    ("ours through MLX, waited", "default", "o-", "C0"),
    ("ours, 8 queued per wait", "default-queued8", "o:", "C1"),
    ("torch cuDNN", "torch-cudnn", "^-", "C2"),
    ("torch FA2", "torch-flash", "v-", "C3"),
    ("torch mem-efficient", "torch-efficient", "d-", "C4"),
    ("upstream fallback", "fallback", "x-", "C5"),
)


def read_cases(cases: Path) -> list:
    return [json.loads(line) for line in cases.read_text().splitlines()]


def prefill_tflops(cases, label: str, D: int, kv_heads: int = 16,
                   lengths=LENGTHS) -> list:
    """TFLOP/s of causal prefill (qL = kL) by length; None where absent.
    `cases`: a JSONL path, or its rows (read_cases)."""
    rows = read_cases(cases) if isinstance(cases, Path) else cases
    by_len = {}
    for r in rows:
        if (r.get("label") == label and r.get("kind") == "prefill" and r.get("D") == D
                and r.get("kv_heads") == kv_heads and "TFLOPs" in r
                and r.get("qL") == r.get("kL")):
            by_len[r["qL"]] = r["TFLOPs"]
    return [by_len.get(L) for L in lengths]


def harness_readings(folder: Path) -> dict:
    """(D, KV heads, kL, qL, variant) -> TFLOP/s readings of one call's
    harness JSON files (`attn_harness/run.py bench --json`). A file's name
    starts with its library and an underscore; a variant is
    "<library>.<configuration>". Times (`*_ms`) and missing figures are
    left out."""
    acc: dict = defaultdict(list)
    for path in sorted(folder.glob("*.json")):
        lib = path.name.split("_")[0]
        for row in json.loads(path.read_text()):
            for key, value in row.items():
                if key.startswith("ours_") and not key.endswith("_ms") and value:
                    variant = f"{lib}.{key[len('ours_'):]}"
                    acc[(row["D"], row["Hkv"], row["L"], row["qL"], variant)].append(value)
    return acc


def shape_label(shape) -> str:
    """An A/B figure's tick: "8k", or "2k×32k" for 2048 queries against
    32k keys, with the KV heads below where they are not 16."""
    _, kv, kL, qL = shape
    name = f"{kL // 1024}k" if qL == kL else f"2k×{kL // 1024}k"
    return name + ("" if kv == 16 else f"\n{kv} kv")


def ab_ratios(acc: dict, base: str, variant: str) -> tuple[list, list]:
    """The shapes `base` ran (16 KV heads first, then 4; qL = kL before the
    chunked step; by length) and variant's mean TFLOP/s over base's at
    each (0 where the variant did not run). `acc`: harness_readings."""
    shapes = sorted({k[:4] for k in acc if k[4] == base},
                    key=lambda s: (s[1] != 16, s[3] != s[2], s[2]))
    ratios = []
    for s in shapes:
        x = acc.get((*s, variant))
        ratios.append(statistics.mean(x) / statistics.mean(acc[(*s, base)]) if x else 0)
    return shapes, ratios


def plot_ab(harness: Path, panels, out: Path, title: str, ylabel: str,
            ylim=(0.75, 1.1), panel_width=5.2, legend=None) -> list:
    """Bars of candidates against a baseline, one panel per call. `panels`:
    (title, folder under `harness`, baseline, ((variant, legend), ...)),
    each variant "<library>.<configuration>" (harness_readings). Returns
    (panel, legend, ratios) of every bar group drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(panel_width * len(panels), 4.6),
                             sharey=True)
    drawn = []
    for ax, (name, folder, base, variants) in zip(axes, panels):
        acc = harness_readings(harness / folder)
        width = 0.8 / len(variants)
        for i, (variant, label) in enumerate(variants):
            shapes, ratios = ab_ratios(acc, base, variant)
            ax.bar([j + (i - (len(variants) - 1) / 2) * width for j in range(len(shapes))],
                   ratios, width, label=label)
            drawn.append((name, label, ratios))
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(range(len(shapes)), [shape_label(s) for s in shapes], fontsize=8)
        ax.set_ylim(*ylim)
        ax.set_title(name, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(**(legend or {"fontsize": 8, "loc": "lower left"}))
    axes[0].set_ylabel(ylabel)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return drawn


def plot_mlx_tflops(cases: Path, out: Path, title: str, dims=DIMS,
                    lengths=LENGTHS, curves=CURVES) -> list:
    """Draws the figure; returns the (head dim, legend) of each curve drawn.
    `curves`: CURVES, or CURVES plus a folder's own labels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_cases(cases)
    fig, axes = plt.subplots(1, len(dims), figsize=(5 * len(dims), 4.2))
    x = range(len(lengths))
    drawn = []
    for ax, D in zip(axes, dims):
        for legend, label, style, color in curves:
            pts = [(i, y) for i, y in zip(x, prefill_tflops(rows, label, D, lengths=lengths))
                   if y is not None]
            if pts:
                ax.plot(*zip(*pts), style, color=color, label=legend)
                drawn.append((D, legend))
        ax.set_xticks(list(x), [f"{L // 1024}k" for L in lengths])
        ax.set_title(f"head dim {D}")
        ax.set_xlabel("sequence length (causal, 32 / 16 heads, bf16)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("TFLOP/s")
    # One legend of every curve drawn in any panel.
    handles, names = [], []
    for ax in axes:
        for h, n in zip(*ax.get_legend_handles_labels()):
            if n not in names:
                handles.append(h)
                names.append(n)
    axes[min(1, len(dims) - 1)].legend(handles, names, fontsize=8, loc="center right")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return drawn
