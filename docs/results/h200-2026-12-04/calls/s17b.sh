#!/bin/bash
# Device call s17b (issue 25): harness build s17b = s17a plus cand8 = BN 112 at
# head dim 192. Host cost per call; checks of cand8; three alternating A/B runs
# of BN 64 (MLX's hopper tiles) against BN 80 at 256 and against 80 / 96 / 112 at
# 192 (torch in the first run); sanitizers on BN 96 and 112 at 192.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
L=/tmp/s17b/libattn_harness.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/s17b && cp .carry/s17b/libattn_harness.so $L
.carry/s17a/host_cost | tee $OUT/host_cost.txt
timeout 40 $TP $H/run.py check --lib $L --config cand8 --dims 192 --seed 1711 2>&1 | tail -1 | sed "s/^/check cand8 D192 (all): /"
for r in 1 2 3; do
  timeout 70 $TP $H/run.py bench --lib $L --dims 256 --configs hopper cand11 --lengths 2048 8192 16384 32768 --iters 5 $([ $r = 1 ] || echo --no-torch) --q-tile-groups 4 --json $OUT/hb_d256_$r.json > /dev/null 2>&1
  timeout 70 $TP $H/run.py bench --lib $L --dims 192 --configs hopper cand11 cand12 cand8 --lengths 2048 8192 16384 32768 --iters 5 $([ $r = 1 ] || echo --no-torch) --q-tile-groups 4 --json $OUT/hb_d192_$r.json > /dev/null 2>&1
done
python3 - <<'P' | tee $OUT/harness.txt
import json,os,glob
O=os.environ["OUT"]
for f in sorted(glob.glob(O+"/hb_*.json")):
    for r in json.load(open(f)):
        print(os.path.basename(f)[3:-5], r["D"], r["Hkv"], r["L"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if not k.endswith("_ms") and isinstance(v,(int,float)) and k not in ("D","Hkv","L","qL","B","H","one_block_per_sm","q_tile_groups")))
P
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for c in cand12 cand8; do for t in memcheck synccheck racecheck; do
  timeout 40 $CS --tool $t $TP $H/run.py check --lib $L --config $c --dims 192 --quick --sample 3 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t $c D192: |"; echo
done; done
