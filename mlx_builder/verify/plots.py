"""PNG plots of a `mlx-builder bench` result (matplotlib: extra ``plot``).

Three figures, one panel per head dim, one line per implementation:
prefill TFLOP/s vs L, prefill peak extra GiB vs L, decode TB/s vs kL. The
device and the versions are in each title. Out-of-memory and unsupported
points are left out of the lines and listed under the panel. A fourth,
prefill_speedup.png, shows how many times faster the wheel under test is than
each other run, with the ratios written at the points.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

FIGURES = (
    # file, mode, metric key, y label, log-scale y
    ("prefill_tflops.png", "prefill", "tflops", "TFLOP/s (causal)", False),
    ("prefill_memory.png", "prefill", "peak_gib", "peak extra memory (GiB)", True),
    ("decode_tbps.png", "decode", "tbps", "TB/s of K+V read", False),
)


class PlotsUnavailable(RuntimeError):
    """matplotlib is not installed."""


def _matplotlib() -> ModuleType:
    try:
        import matplotlib
    except ImportError:
        raise PlotsUnavailable(
            "matplotlib is not installed: pip install 'mlx-builder[plot]' "
            "(the JSON and markdown reports are written without it)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _length_label(x: float, _pos: Any = None) -> str:
    """FuncFormatter's form of benchdata.length_label (ticks are floats)."""
    from mlx_builder.verify.benchdata import length_label
    return length_label(round(x))


def series(result: Mapping[str, Any], mode: str, D: int,
           metric: str) -> dict[str, tuple[list[int], list[float], list[str]]]:
    """column -> (x, y, notes) for the points of one panel; x is kL."""
    from mlx_builder.verify.benchdata import column
    out: dict[str, tuple[list[int], list[float], list[str]]] = {}
    for rec in result["records"]:
        if rec["mode"] != mode or rec["D"] != D:
            continue
        xs, ys, notes = out.setdefault(column(rec), ([], [], []))
        if rec["status"] == "ok" and rec.get(metric) is not None:
            xs.append(rec["kL"])
            ys.append(rec[metric])
        elif rec["status"] in ("oom", "unsupported", "crashed"):
            notes.append(f"{rec['status']} at {rec['kL']}")
    return {k: v for k, v in out.items() if v[0] or v[2]}


def make_plots(result: Mapping[str, Any], out_dir: Path) -> list[Path]:
    """Write the figures that have data; their paths."""
    plt = _matplotlib()
    written = []
    for name, mode, metric, ylabel, logy in FIGURES:
        path = out_dir / name
        if _panels_figure(plt, result, mode, metric, ylabel, logy, path):
            written.append(path)
    from matplotlib import ticker

    from mlx_builder.verify.benchdata import device_and_versions
    device, versions = device_and_versions(result)
    speedup = _speedup_figure(plt, ticker, result, out_dir, device, versions)
    return written + ([speedup] if speedup else [])


def prefill_figure(result: Mapping[str, Any], path: Path) -> bool:
    """The prefill TFLOP/s figure alone, small (the performance page's
    picture of a GPU), as PNG whatever ``path`` is named (publish writes it
    under a staging name). False when the result has no prefill figures."""
    plt = _matplotlib()
    return _panels_figure(plt, result, "prefill", "tflops", "TFLOP/s (causal)", False,
                          path, panel_size=(3.6, 3.0), dpi=64, brief=True, fmt="png")


def _panels_figure(plt: Any, result: Mapping[str, Any], mode: str, metric: str,
                   ylabel: str, logy: bool, path: Path, *,
                   panel_size: tuple[float, float] = (5.2, 4.6), dpi: int = 110,
                   brief: bool = False, fmt: str | None = None) -> bool:
    """One panel per head dim with data, one line per implementation;
    ``brief``: without the versions and the list of missing points (the
    page around the figure gives them)."""
    from matplotlib import ticker

    from mlx_builder.verify.benchdata import device_and_versions
    device, versions = device_and_versions(result)
    panels = [(D, series(result, mode, D, metric)) for D in result["config"]["dims"]]
    panels = [(D, s) for D, s in panels if s]
    if not panels:
        return False
    # one colour per implementation in every panel
    colour = {label: f"C{i}" for i, label in enumerate(
        dict.fromkeys(label for _, lines in panels for label in lines))}
    fig, axes = plt.subplots(1, len(panels), squeeze=False,
                             figsize=(panel_size[0] * len(panels), panel_size[1]))
    for ax, (D, lines) in zip(axes[0], panels):
        notes, plotted = [], False
        for label, (xs, ys, missing) in lines.items():
            if xs:
                ax.plot(xs, ys, marker="o", label=label, color=colour[label])
                plotted = True
            notes += [f"{label}: {m}" for m in missing]
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(_length_label))
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel("sequence length L" if mode == "prefill" else "kv length kL")
        ax.set_ylabel(ylabel)
        ax.set_title(f"head_dim {D}")
        ax.grid(True, which="both", alpha=0.3)
        if plotted:
            ax.legend(fontsize=8)
        if notes and not brief:
            ax.text(0.0, -0.22, "\n".join(notes[:6]), transform=ax.transAxes,
                    fontsize=7, va="top")
    cfg = result["config"]
    title = f"{mode} SDPA on {device} — {cfg['dtype']}, {cfg['heads']}/{cfg['kv_heads']} heads"
    fig.suptitle(title if brief else f"{title}\n{versions}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi, bbox_inches="tight", format=fmt)
    plt.close(fig)
    return True


def _speedup_figure(plt: Any, ticker: Any, result: Mapping[str, Any], out_dir: Path,
                    device: str, versions: str) -> Path | None:
    from mlx_builder.verify.benchdata import speedups
    panels = [(D, speedups(result, D)) for D in result["config"]["dims"]]
    panels = [(D, lines) for D, lines in panels if lines]
    if not panels:
        return None
    reference = result["runs"][0]["label"]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.6),
                             squeeze=False)
    for ax, (D, lines) in zip(axes[0], panels):
        for label, points in lines.items():
            xs, ys = [p[0] for p in points], [p[1] for p in points]
            ax.plot(xs, ys, marker="o", label=f"÷ {label}")
            for x, y in points:
                ax.annotate(f"{y:.2f}", (x, y), textcoords="offset points",
                            xytext=(0, 5), ha="center", fontsize=7)
        ax.axhline(1.0, color="grey", lw=1, ls="--")
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(_length_label))
        ax.set_ylim(bottom=0)
        ax.set_xlabel("sequence length L")
        ax.set_ylabel(f"{reference} speed-up (×)")
        ax.set_title(f"head_dim {D}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"prefill speed-up of {reference} on {device}\n{versions}", fontsize=10)
    fig.tight_layout()
    path = out_dir / "prefill_speedup.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
