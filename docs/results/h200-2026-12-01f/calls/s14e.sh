#!/bin/bash
# Device call s14e (issue 19 / 25): the TMA rings, with (libattn_harness_mid.so, -DMLX_ATTN_TRY_MID_EARLY) and without the second copy of a step tried before the softmax: the issuing thread refills the slot of K_j as soon as every warp has released it, instead of after the softmax. Same call, alternating libraries; check of the variant.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
B=$H/build
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
G="--q-tile-groups 4"
timeout 60 $TP $H/run.py check --lib $B/libattn_harness_mid.so --config all --sample 400 --seed 41 $G 2>&1 | tail -1 | sed "s/^/check mid-early, 400 sampled: /"
for r in 1 2; do for v in base mid; do lib=$B/libattn_harness.so; [ $v = mid ] && lib=$B/libattn_harness_mid.so
timeout 45 $TP $H/run.py bench --lib $lib --dims 256 512 --configs small medium --lengths 2048 8192 32768 --iters 5 --no-torch $G --json $OUT/ab_${v}_$r.json > /dev/null 2>&1; done; done
python3 - <<'P'
import json,os
O=os.environ["OUT"]
for r in (1,2):
  for v in ("base","mid"):
    try: rows=json.load(open(f"{O}/ab_{v}_{r}.json"))
    except Exception as e: print(v, r, "missing"); continue
    for x in rows: print(f"run {r} {v:4s} D{x['D']} L{x['L']}", " ".join(f"{k[5:]} {val:.1f}" for k,val in x.items() if k.startswith("ours_") and not k.endswith("_ms") and isinstance(val,(int,float))))
P
