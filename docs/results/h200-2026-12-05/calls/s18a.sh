#!/bin/bash
# Device call s18a (issue 25): harness build s18a = landed 0020 plus
# ProducerTiledTraits (cand13: the wgmma tiles at 192 / 256 with a producer
# warpgroup). Checks of cand13 (every case) and of hopper (sampled, the loop
# now shares StageRings); two alternating A/B runs hopper vs cand13 at 256 and
# 192 (torch in the first run); sanitizers on cand13.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
L=/tmp/s18a/libattn_harness.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/s18a && cp .carry/pc/libattn_harness.so $L
for D in 192 256; do
  timeout 60 $TP $H/run.py check --lib $L --config cand13 --dims $D --seed 1811 2>&1 | tail -1 | sed "s/^/check cand13 D$D (all): /"
done
timeout 60 $TP $H/run.py check --lib $L --config hopper --dims 192 256 --sample 40 --seed 1812 2>&1 | tail -1 | sed "s/^/check hopper D192+256 (40 sampled): /"
for r in 1 2; do
  timeout 80 $TP $H/run.py bench --lib $L --dims 256 --configs hopper cand13 --lengths 2048 8192 16384 32768 --iters 5 $([ $r = 1 ] || echo --no-torch) --q-tile-groups 4 --json $OUT/hb_d256_$r.json > /dev/null 2>&1
  timeout 80 $TP $H/run.py bench --lib $L --dims 192 --configs hopper cand13 --lengths 2048 8192 16384 32768 --iters 5 $([ $r = 1 ] || echo --no-torch) --q-tile-groups 4 --json $OUT/hb_d192_$r.json > /dev/null 2>&1
done
python3 - <<'P' | tee $OUT/harness.txt
import json,os,glob
O=os.environ["OUT"]
for f in sorted(glob.glob(O+"/hb_*.json")):
    for r in json.load(open(f)):
        print(os.path.basename(f)[3:-5], r["D"], r["Hkv"], r["L"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if not k.endswith("_ms") and isinstance(v,(int,float)) and k not in ("D","Hkv","L","qL","B","H","one_block_per_sm","q_tile_groups")))
P
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for D in 192 256; do for t in memcheck synccheck racecheck; do
  timeout 40 $CS --tool $t $TP $H/run.py check --lib $L --config cand13 --dims $D --quick --sample 3 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t cand13 D$D: |"; echo
done; done
