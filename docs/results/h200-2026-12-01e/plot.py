"""Draws this folder's figure from its data (python plot.py)."""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
LENGTHS = [2048, 8192, 16384, 32768]


def mlx_tflops(label):
    rows = [json.loads(line) for line in (HERE / "mlx" / "cases.jsonl").open()]
    by_len = {r["qL"]: r["TFLOPs"] for r in rows
              if r["label"] == label and r["kind"] == "prefill" and r["D"] == 256}
    return [by_len[L] for L in LENGTHS]


def torch_tflops(backend):
    """torch's lines as the device call printed them (torch.jsonl did not come back)."""
    by_len = {}
    for line in (HERE / "mlx" / "torch.txt").read_text().splitlines():
        p = line.split()
        if p[0] == f"torch-{backend}" and p[1] == "prefill" and p[2] == "256":
            by_len[int(p[3])] = float(p[-2])
    return [by_len[L] for L in LENGTHS]


def before_tflops():
    """The 99 KB tiles before this session, through MLX (h200-2026-12-01d)."""
    path = HERE.parent / "h200-2026-12-01d" / "mlx" / "cases.jsonl"
    rows = [json.loads(line) for line in path.open()]
    by_len = {r["qL"]: r["TFLOPs"] for r in rows
              if r["label"] == "small" and r["kind"] == "prefill" and r["D"] == 256}
    return [by_len[L] for L in LENGTHS]


def main() -> None:
    series = {
        "99 KB before (12-01d run)": before_tflops(),
        "99 KB now (half of Q in smem)": mlx_tflops("small"),
        "99 KB now, one block per SM": mlx_tflops("small-one-block"),
        "large mma.sync (192 KB)": mlx_tflops("mma-large"),
        "torch FA2": torch_tflops("flash"),
        "upstream fallback": mlx_tflops("fallback"),
    }
    fig, ax = plt.subplots(figsize=(8, 4.2))
    width = 0.13
    for i, (name, values) in enumerate(series.items()):
        ax.bar([x + (i - 2.5) * width for x in range(len(LENGTHS))], values, width, label=name)
    ax.set_xticks(range(len(LENGTHS)), [f"{L // 1024}k" for L in LENGTHS])
    ax.set_ylabel("TFLOP/s (causal, bf16, 32/16 heads)")
    ax.set_title("Head dim 256 on mma.sync, H200, through MLX; torch timed the same way")
    ax.set_ylim(0, 390)
    ax.legend(fontsize=8, ncol=3, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(HERE / "mma_d256_tflops.png", dpi=120)


if __name__ == "__main__":
    main()
