"""Draws this folder's figure from its data (python plot.py)."""

import glob
import json
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
LENGTHS = [2048, 8192, 16384, 32768]


def harness(key, hkv):
    """Mean TFLOP/s by length over call 4's two alternate runs."""
    acc = {}
    for f in sorted(glob.glob(str(HERE / "harness" / f"call4-hb_kv{hkv}_*.json"))):
        for r in json.loads(Path(f).read_text()):
            acc.setdefault(r["L"], []).append(r[key])
    return [statistics.mean(acc[L]) for L in LENGTHS]


def mlx(label, hkv):
    """TFLOP/s by length through MLX or torch (call 5), head dim 512."""
    rows = [json.loads(line) for line in (HERE / "mlx" / "call5-cases.jsonl").open()]
    by_len = {r["qL"]: r["TFLOPs"] for r in rows
              if r["label"] == label and r["kind"] == "prefill" and r["D"] == 512
              and r.get("kv_heads") == hkv and "TFLOPs" in r}
    return [by_len.get(L) for L in LENGTHS]


def main():
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    x = range(len(LENGTHS))
    have_mlx = (HERE / "mlx" / "call5-cases.jsonl").exists()
    for ax, hkv in zip(axes, (16, 4)):
        ax.plot(x, harness("ours_hopper", hkv), "o-", color="C0",
                label="warp-specialized (harness)")
        ax.plot(x, harness("ours_cand10", hkv), "s--", color="C7",
                label="split block before (harness)")
        if have_mlx:
            ax.plot(x, mlx("default", hkv), "o-", color="C2",
                    label="warp-specialized through MLX")
            ax.plot(x, mlx("fallback", hkv), "v:", color="C3",
                    label="upstream's fallback through MLX")
            ax.plot(x, mlx("torch-efficient", hkv), "^:", color="C1",
                    label="torch mem-efficient")
        ax.axhline(500, color="k", lw=0.6, ls=":")
        ax.set_xticks(list(x), [f"{L // 1024}k" for L in LENGTHS])
        ax.set_xlabel("L (causal, qL = kL)")
        ax.set_title(f"head dim 512, 32 / {hkv} heads")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("TFLOP/s (bf16)")
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle("H200: head dim 512 prefill, 2026-12-02 (session 16)")
    fig.tight_layout()
    fig.savefig(HERE / "d512_tflops.png", dpi=110)


if __name__ == "__main__":
    main()
