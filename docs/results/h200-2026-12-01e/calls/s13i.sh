#!/bin/bash
# Device call s13i (issue 19): head dim 512 with a quarter of each warp's Q head dims kept in shared memory (cand8, 96 KB: fits 99 KB) against the half (cand7, 112 KB) and MLX's small; checks.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
timeout 60 $TP $H/run.py check --config cand8 --dims 512 --sample 60 --seed 81 --q-tile-groups 4 2>&1 | tail -1 | sed "s/^/check cand8 D512: /"
timeout 120 $TP $H/run.py bench --dims 512 --configs small cand7 cand8 --lengths 2048 8192 32768 --iters 5 --no-torch --q-tile-groups 4 --json $OUT/b512.json > /dev/null 2>&1
timeout 60 $TP $H/run.py bench --dims 512 --configs small cand8 --lengths 8192 32768 --iters 5 --no-torch --one-block-per-sm --q-tile-groups 4 --json $OUT/b512_1blk.json > /dev/null 2>&1
python3 - <<'P'
import json,os
O=os.environ["OUT"]
for f in ("b512","b512_1blk"):
    try: rows=json.load(open(O+"/"+f+".json"))
    except Exception as e: print(f, "missing", e); continue
    for r in rows:
        print(f, r["D"], r["qL"], r["L"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if k.startswith("ours_") and not k.endswith("_ms")))
P
