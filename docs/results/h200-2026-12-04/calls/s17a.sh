#!/bin/bash
# Device call s17a (issues 25, 19): harness build s17a = the series with the TMA
# copies into .shared::cta (sm_90a SASS unchanged) plus wider key tiles for the
# wgmma blocks at 192 / 256 as candidates: cand11 = BN 80 (192 and 256), cand12 =
# BN 96 (192). Host cost per call (host_cost.cu); checks; A/B against MLX's hopper
# tiles (BN 64) beside torch; sanitizers on the new tiles.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
L=/tmp/s17a/libattn_harness.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/s17a && cp .carry/s17a/libattn_harness.so $L
.carry/s17a/host_cost | tee $OUT/host_cost.txt
timeout 60 $TP $H/run.py check --lib $L --config cand11 --dims 192 256 --seed 1701 --json $OUT/check_cand11.json 2>&1 | tail -1 | sed "s/^/check cand11 D192+256 (all): /"
timeout 40 $TP $H/run.py check --lib $L --config cand12 --dims 192 --seed 1702 2>&1 | tail -1 | sed "s/^/check cand12 D192 (all): /"
timeout 50 $TP $H/run.py check --lib $L --config all --dims 192 256 512 --sample 120 --seed 1703 2>&1 | tail -1 | sed "s/^/check all sample 120: /"
for r in 1 2; do
  timeout 70 $TP $H/run.py bench --lib $L --dims 256 --configs hopper cand11 --lengths 2048 8192 16384 32768 --iters 5 $([ $r = 1 ] || echo --no-torch) --q-tile-groups 4 --json $OUT/hb_d256_$r.json > /dev/null 2>&1
  timeout 60 $TP $H/run.py bench --lib $L --dims 192 --configs hopper cand11 cand12 --lengths 2048 8192 32768 --iters 5 --no-torch --q-tile-groups 4 --json $OUT/hb_d192_$r.json > /dev/null 2>&1
done
python3 - <<'P' | tee $OUT/harness.txt
import json,os,glob
O=os.environ["OUT"]
for f in sorted(glob.glob(O+"/hb_*.json")):
    for r in json.load(open(f)):
        print(os.path.basename(f)[3:-5], r["D"], r["Hkv"], r["L"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if not k.endswith("_ms") and isinstance(v,(int,float)) and k not in ("D","Hkv","L","qL","B","H")))
P
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for t in memcheck synccheck racecheck; do
  timeout 50 $CS --tool $t $TP $H/run.py check --lib $L --config cand11 --dims 256 --quick --sample 3 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t cand11 D256: |"; echo
done
