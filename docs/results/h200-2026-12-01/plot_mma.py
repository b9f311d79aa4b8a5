"""Speed-up over upstream's unfused fallback per variant (mlx/mlx_cases.jsonl)."""
import json
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
rows = [json.loads(line) for line in (HERE / "mlx" / "mlx_cases.jsonl").open()]
ms = {(r["label"], r["kind"], r["D"], r["qL"], r["kL"]): r["ms"] for r in rows if "ms" in r}
cases = sorted({k[1:] for k in ms if k[1] != "decode"}, key=lambda c: (c[0] != "prefill", c[1], c[3]))
labels = {"patched": "default (wgmma on sm_90a)", "mma": "large mma.sync (B200's)",
          "small": "99 KB ring (GB10, RTX, L4/L40, A100)", "proxy": "99 KB ring, 1 block/SM (GB10 proxy)"}
fig, ax = plt.subplots(figsize=(11, 4.8))
width = 0.2
for i, (lab, text) in enumerate(labels.items()):
    ys = [ms[("fallback", *c)] / ms[(lab, *c)] for c in cases]
    ax.bar([x + (i - 1.5) * width for x in range(len(cases))], ys, width, label=text)
ax.axhline(1.0, color="black", lw=0.8)
ax.set_xticks(range(len(cases)))
ax.set_xticklabels([f"{k} D{d}\n{q // 1024}k×{kl // 1024}k" for k, d, q, kl in cases], fontsize=8)
ax.set_ylabel("× upstream's unfused fallback (same wheel)")
ax.set_title("H200, bf16 causal, 32 query heads (16 KV; chunked D512: 4), each call waited for\n"
             f"wheel {rows[0]['mlx']}")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(HERE / "speedup_vs_fallback.png", dpi=110)
