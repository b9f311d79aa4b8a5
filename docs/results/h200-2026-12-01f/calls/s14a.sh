#!/bin/bash
# Device call s14a (issue 19 / 25): the mma.sync rings take K and V by TMA into per-slot full / empty mbarriers (RingCopy::kTma; small, medium, large at 512 now) against the same rings with every thread's cp.async and block barriers (cand3 / cand5 / cand6 / cand7 "before TMA"), torch FA2 in the same process; harness check over every configuration; sanitizers on the TMA rings.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
G="--q-tile-groups 4"
timeout 60 $TP $H/run.py check --config small --dims 256 512 --sample 40 --seed 3 $G 2>&1 | tail -1 | sed "s/^/check small quick: /"
timeout 110 $TP $H/run.py bench --dims 256 --configs small cand5 medium cand3 large --lengths 2048 8192 16384 32768 --iters 5 $G --json $OUT/b256.json > /dev/null 2>&1
timeout 70 $TP $H/run.py bench --dims 192 --configs small cand6 --lengths 2048 8192 16384 32768 --iters 5 $G --json $OUT/b192.json > /dev/null 2>&1
timeout 90 $TP $H/run.py bench --dims 512 --configs small cand7 large cand6 --lengths 2048 8192 16384 32768 --iters 5 --no-torch $G --json $OUT/b512.json > /dev/null 2>&1
timeout 60 $TP $H/run.py bench --dims 256 512 --configs small cand5 cand7 --lengths 8192 32768 --iters 5 --no-torch --one-block-per-sm $G --json $OUT/b_1blk.json > /dev/null 2>&1
timeout 40 $TP $H/run.py bench --dims 256 --configs small cand5 --hkv 16 --q-len 2048 --lengths 32768 --iters 5 --no-torch $G --json $OUT/bchunk256.json > /dev/null 2>&1
timeout 40 $TP $H/run.py bench --dims 512 --configs small cand7 large cand6 --hkv 4 --q-len 2048 --lengths 32768 --iters 5 --no-torch $G --json $OUT/bchunk512.json > /dev/null 2>&1
python3 - <<'P'
import json,os
O=os.environ["OUT"]
for f in ("b256","b192","b512","b_1blk","bchunk256","bchunk512"):
    try: rows=json.load(open(O+"/"+f+".json"))
    except Exception as e: print(f, "missing", e); continue
    for r in rows:
        print(f, r["D"], r["qL"], r["L"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if (k.startswith("ours_") or k.startswith("torch_")) and not k.endswith("_ms") and isinstance(v,(int,float))))
P
timeout 200 $TP $H/run.py check --config all $G --json $OUT/check_all.json 2>&1 | tail -1 | sed "s/^/check all: /"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for t in memcheck racecheck synccheck; do timeout 45 $CS --tool $t $TP $H/run.py check --config small --dims 256 512 --sample 3 --seed 5 --q-tile-groups 3 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s/^/$t small: /"; echo; done
