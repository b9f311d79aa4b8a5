#!/bin/bash
# Device call s13h (issue 19): the half-Q ring at head dim 512 (cand7: each warp keeps the last 128 of its 256 head dims in shared memory, 112 KB) against MLX's small (Q in registers, 80 KB); checks; D256 small re-checked after the traits change.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
timeout 90 $TP $H/run.py check --config cand7 --dims 512 --sample 60 --seed 71 --q-tile-groups 4 2>&1 | tail -1 | sed "s/^/check cand7 D512: /"
timeout 90 $TP $H/run.py check --config small --dims 192 256 512 --sample 60 --seed 72 --q-tile-groups 4 2>&1 | tail -1 | sed "s/^/check small: /"
timeout 150 $TP $H/run.py bench --dims 512 --configs small cand7 --lengths 2048 8192 16384 32768 --iters 5 --no-torch --q-tile-groups 4 --json $OUT/b512.json > /dev/null 2>&1
timeout 60 $TP $H/run.py bench --dims 512 --configs small cand7 --hkv 4 --q-len 2048 --lengths 32768 --iters 5 --no-torch --q-tile-groups 4 --json $OUT/bchunk.json > /dev/null 2>&1
python3 - <<'P'
import json,os
O=os.environ["OUT"]
for f in ("b512","bchunk"):
    try: rows=json.load(open(O+"/"+f+".json"))
    except Exception as e: print(f, "missing", e); continue
    for r in rows:
        print(f, r["D"], r["qL"], r["L"], r["Hkv"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if k.startswith("ours_") and not k.endswith("_ms")))
P
