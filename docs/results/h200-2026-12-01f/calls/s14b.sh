#!/bin/bash
# Device call s14b (issue 19 / 25): the TMA rings with a proxy fence before each slot is refilled (after Q's staging area is read, and in each warp's release): harness check over every configuration, sanitizers on small and medium, and the speed again against the rings before TMA.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
G="--q-tile-groups 4"
timeout 230 $TP $H/run.py check --config all $G --json $OUT/check_all.json 2>&1 | tail -1 | sed "s/^/check all: /"
for s in 11 12; do timeout 60 $TP $H/run.py check --config medium --dims 256 --seed $s $G 2>&1 | tail -1 | sed "s/^/check medium D256 seed $s: /"; done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for c in small medium; do for t in memcheck racecheck synccheck; do timeout 60 $CS --tool $t $TP $H/run.py check --config $c --dims 256 512 --quick --sample 2 --seed 5 --q-tile-groups 3 > $OUT/san_${t}_$c.txt 2>&1; echo "$t $c rc=$? $(grep -E 'SUMMARY' $OUT/san_${t}_$c.txt | tail -1) $(grep -E 'passed' $OUT/san_${t}_$c.txt | tail -1)"; done; done
timeout 100 $TP $H/run.py bench --dims 256 --configs small cand5 medium cand3 --lengths 2048 8192 16384 32768 --iters 5 $G --json $OUT/b256.json > /dev/null 2>&1
timeout 60 $TP $H/run.py bench --dims 512 --configs small cand7 large cand6 --lengths 8192 32768 --iters 5 --no-torch $G --json $OUT/b512.json > /dev/null 2>&1
python3 - <<'P'
import json,os
O=os.environ["OUT"]
for f in ("b256","b512"):
    try: rows=json.load(open(O+"/"+f+".json"))
    except Exception as e: print(f, "missing", e); continue
    for r in rows:
        print(f, r["D"], r["qL"], r["L"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if (k.startswith("ours_") or k.startswith("torch_")) and not k.endswith("_ms") and isinstance(v,(int,float))))
P
