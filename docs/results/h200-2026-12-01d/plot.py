"""Draws this folder's two figures from its data (python plot.py)."""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent


def mlx_rows():
    return [json.loads(line) for line in (HERE / "mlx" / "cases.jsonl").open()]


def mma_tflops():
    """TFLOP/s through MLX of the mma.sync configurations at head dim 256, and
    torch's FA2 from the harness call of the same session (its own process)."""
    lengths = [2048, 8192, 16384, 32768]
    series = {}
    for label, name in [("small", "small (99 KB)"), ("medium", "medium (163 KB)"),
                        ("mma-large", "large (192 KB)"), ("fallback", "upstream fallback")]:
        by_len = {r["qL"]: r["TFLOPs"] for r in mlx_rows()
                  if r["label"] == label and r["kind"] == "prefill" and r["D"] == 256}
        series[name] = [by_len[L] for L in lengths]
    torch = {r["L"]: r["torch_flash"]
             for r in json.load((HERE / "harness" / "call7-b256.json").open())}
    series["torch FA2"] = [torch[L] for L in lengths]
    return lengths, series


def dram_reads():
    """DRAM GB read by one causal 32k call (ncu), per block order."""
    rows = {}
    for line in (HERE / "harness" / "call6-ncu.txt").read_text().splitlines():
        parts = line.split()
        if parts and parts[0] == "small" and "dram__bytes_read.sum" in line and "L32768" in line:
            rows[(parts[1], parts[3])] = float(parts[-1])
    for line in (HERE / "harness" / "call5-ncu_dram.txt").read_text().splitlines():
        parts = line.split()
        if parts and parts[0] == "small" and "dram__bytes_read.sum" in line and parts[2] == "tiles":
            rows[(parts[1], "all")] = float(parts[-1])
    for line in (HERE / "harness" / "call7-ncu.txt").read_text().splitlines():
        parts = line.split()
        if parts and parts[0] == "small" and "dram__bytes_read.sum" in line:
            rows[(parts[1], "four")] = float(parts[-1])
    return rows


def main() -> None:
    lengths, series = mma_tflops()
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.16
    for i, (name, values) in enumerate(series.items()):
        ax.bar([x + (i - 2) * width for x in range(len(lengths))], values, width, label=name)
    ax.set_xticks(range(len(lengths)), [f"{L // 1024}k" for L in lengths])
    ax.set_ylabel("TFLOP/s (causal, bf16, 32/16 heads)")
    ax.set_title("Head dim 256 on mma.sync, H200, through MLX")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(HERE / "mma_d256_tflops.png", dpi=120)

    rows = dram_reads()
    orders = [("group1", "one tile per group\n(the order before)"), ("group8", "8 tiles per group"),
              ("four", "4 groups per head\n(MLX's default)"), ("all", "one group per head")]
    fig, ax = plt.subplots(figsize=(7, 4))
    for j, dim in enumerate(["D256", "D512"]):
        values = [rows.get((dim, key), 0.0) for key, _ in orders]
        ax.bar([x + (j - 0.5) * 0.38 for x in range(len(orders))], values, 0.38, label=dim)
    ax.set_xticks(range(len(orders)), [name for _, name in orders], fontsize=8)
    ax.set_ylabel("GB read from DRAM per call (ncu)")
    ax.set_title("Block order: DRAM reads of one causal 32k call, 99 KB tiles, H200")
    ax.legend()
    fig.tight_layout()
    fig.savefig(HERE / "dram_reads_by_order.png", dpi=120)


if __name__ == "__main__":
    main()
