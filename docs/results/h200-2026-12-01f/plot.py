"""Draws this folder's figure from its data (python plot.py)."""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
LENGTHS = [2048, 8192, 16384, 32768]


def harness(name, key):
    """TFLOP/s by length from one bench file of call 3 (the landed kernels)."""
    rows = json.loads((HERE / "harness" / f"call3-{name}.json").read_text())
    by_len = {r["L"]: r[key] for r in rows if r["qL"] == r["L"]}
    return [by_len[L] for L in LENGTHS]


def mlx(label, D):
    """TFLOP/s by length through MLX (call 5; torch in its own process)."""
    rows = [json.loads(line) for line in (HERE / "mlx" / "cases.jsonl").open()]
    by_len = {r["qL"]: r["TFLOPs"] for r in rows
              if r["label"] == label and r["kind"] == "prefill" and r["D"] == D
              and "TFLOPs" in r}
    return [by_len.get(L) for L in LENGTHS]


def draw_mlx():
    fig, axes = plt.subplots(1, 3, figsize=(13, 4), sharey=True)
    series = [("small", "ours, 99 KB tiles (GB10's)", "tab:blue", "-"),
              ("small-one-block", "ours, one block per SM (GB10 proxy)", "tab:cyan", "-."),
              ("torch-flash", "torch FA2 (128 KB tiles)", "tab:red", ":"),
              ("fallback", "upstream's fallback", "tab:gray", "--")]
    for ax, D in zip(axes, (192, 256, 512)):
        for label, name, color, style in series:
            ys = mlx(label, D)
            if any(y is not None for y in ys):
                ax.plot(LENGTHS, ys, style, marker="o", color=color, label=name)
        ax.set_xscale("log", base=2)
        ax.set_xticks(LENGTHS, [f"{L // 1024}k" for L in LENGTHS])
        ax.set_title(f"D{D}, through MLX")
        ax.set_xlabel("tokens (causal, qL = kL)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("TFLOP/s (bf16, 32 / 16 heads)")
    axes[1].legend(loc="center right", fontsize=8)
    fig.suptitle("H200, call 5: the landed wheel's mma.sync path forced (MLX_CUDA_SDPA_TILED_SMALL=1)")
    fig.tight_layout()
    fig.savefig(HERE / "mlx_small_tflops.png", dpi=110)


def main():
    draw_mlx()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    panels = [
        ("D256, 99 KB tiles", "b256",
         [("ours_cand5", "cp.async ring (before)", "tab:gray", "--"),
          ("ours_small", "TMA ring (now)", "tab:blue", "-"),
          ("torch_flash", "torch FA2 (128 KB tiles)", "tab:red", ":")]),
        ("D512, 99 KB tiles", "b512",
         [("ours_cand7", "cp.async ring (before)", "tab:gray", "--"),
          ("ours_small", "TMA ring (now)", "tab:blue", "-")]),
    ]
    for ax, (title, name, series) in zip(axes, panels):
        for key, label, color, style in series:
            ax.plot(LENGTHS, harness(name, key), style, marker="o", color=color,
                    label=label)
        ax.set_xscale("log", base=2)
        ax.set_xticks(LENGTHS, [f"{L // 1024}k" for L in LENGTHS])
        ax.set_title(title)
        ax.set_xlabel("tokens (causal, qL = kL)")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    axes[0].set_ylabel("TFLOP/s (bf16, 32 / 16 heads)")
    fig.suptitle("H200, kernel alone (harness, call 3): the mma.sync path's K / V by TMA")
    fig.tight_layout()
    fig.savefig(HERE / "tma_ring_tflops.png", dpi=110)


if __name__ == "__main__":
    main()
