"""Draws this folder's figures from its data (python plot.py)."""

import glob
import json
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
AB_LENGTHS = [2048, 8192, 32768]


def ab_mean(lib, key, D):
    """Mean TFLOP/s by length over call 2's three alternate runs of `lib`."""
    acc = {}
    for f in sorted(glob.glob(str(HERE / "harness" / f"call2-ab_{lib}_*.json"))):
        for r in json.loads(Path(f).read_text()):
            if r["D"] == D:
                acc.setdefault(r["L"], []).append(r[key])
    return [statistics.mean(acc[L]) for L in AB_LENGTHS]


def hopper_mean(D):
    """The cp.async wgmma tiles: the same code in both builds, six runs."""
    acc = {}
    for f in glob.glob(str(HERE / "harness" / "call2-ab_*.json")):
        for r in json.loads(Path(f).read_text()):
            if r["D"] == D:
                acc.setdefault(r["L"], []).append(r["ours_hopper"])
    return [statistics.mean(acc[L]) for L in AB_LENGTHS]


def torch_call1(key, D):
    """torch's kernel in call 1 (same process as the harness, one run)."""
    rows = json.loads((HERE / "harness" / "call1-b90.json").read_text())
    by_len = {r["L"]: r[key] for r in rows if r["D"] == D}
    return [by_len[L] for L in AB_LENGTHS]


MLX_LENGTHS = [2048, 8192, 16384, 32768]


def mlx(label, D):
    """TFLOP/s by length through MLX (call 4; torch in its own process)."""
    rows = [json.loads(line) for line in (HERE / "mlx" / "cases.jsonl").open()]
    by_len = {r["qL"]: r["TFLOPs"] for r in rows
              if r["label"] == label and r["kind"] == "prefill" and r["D"] == D
              and "TFLOPs" in r}
    return [by_len.get(L) for L in MLX_LENGTHS]


def two_panels(lengths, curves, title, ylabel, legend_at, out):
    """Head dims 256 and 192 side by side; `curves(ax, x, D)` draws a panel."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, D in zip(axes, (256, 192)):
        x = range(len(lengths))
        curves(ax, x, D)
        ax.set_xticks(list(x), [f"{L // 1024}k" for L in lengths])
        ax.set_title(title.format(D=D))
        ax.set_xlabel("L (qL = kL)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(ylabel)
    axes[0].legend(fontsize=8, loc=legend_at)
    fig.tight_layout()
    fig.savefig(HERE / out, dpi=110)


def mlx_curves(ax, x, D):
    ax.plot(x, mlx("default", D), "o-", lw=2, label="ours (wgmma), each call waited for")
    ax.plot(x, mlx("default-queued8", D), "o--", label="ours (wgmma), 8 calls queued")
    ax.plot(x, mlx("torch-cudnn", D), "k-", alpha=0.6, label="torch cuDNN")
    ax.plot(x, mlx("torch-flash", D), "k--", alpha=0.6, label="torch FA2")
    if D == 256:
        ax.plot(x, mlx("fallback", D), "r:", label="upstream's fallback")


def harness_curves(ax, x, D):
    ax.plot(x, ab_mean("hpp", "ours_cand10", D), "o-", lw=2,
            label="wgmma, TMA + warpgroup turns (landed)")
    ax.plot(x, ab_mean("h90", "ours_cand10", D), "s--", label="wgmma, TMA, no turns")
    ax.plot(x, hopper_mean(D), "^:", label="wgmma, cp.async + block barriers (before)")
    ax.plot(x, torch_call1("torch_cudnn", D), "k-", alpha=0.6, label="torch cuDNN")
    ax.plot(x, torch_call1("torch_flash", D), "k--", alpha=0.6, label="torch FA2")


def main():
    two_panels(MLX_LENGTHS, mlx_curves,
               "head dim {D} through MLX, causal bf16, 32 / 16 heads",
               "TFLOP/s (H200)", "center right", "mlx_wgmma_tflops.png")
    two_panels(AB_LENGTHS, harness_curves, "head dim {D}, causal bf16, 32 / 16 heads",
               "TFLOP/s (harness, H200)", "lower right", "wgmma_tma_tflops.png")


if __name__ == "__main__":
    main()
