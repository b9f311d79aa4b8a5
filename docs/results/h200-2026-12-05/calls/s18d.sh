#!/bin/bash
# Device call s18d (issue 25), prepared and NOT RUN: the device was withdrawn
# from this session before it ran. Harness build s18d = the landed 0020 (MLX's
# hopper tiles at 256 take P V as one m64n256k16 per k16 step) with cand12 at
# 256 = the same tiles with four m64n64k16 (MLX's before) and cand13 at 192 =
# WidePvTraits<192, 112> (one m64n192k16). Build it with
#   run.py build --mlx-src <tree> --arch 90a --out .carry/s18d/libattn_harness.so
# Checks of cand13 at 192 and hopper at 256 (every case); three alternating A/B
# runs of hopper vs cand13 at 192 and two of hopper vs cand12 at 256 with 4k
# added (torch in the first run); sanitizers on cand13.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
L=/tmp/s18d/libattn_harness.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/s18d && cp .carry/s18d/libattn_harness.so $L
timeout 60 $TP $H/run.py check --lib $L --config cand13 --dims 192 --seed 1814 2>&1 | tail -1 | sed "s/^/check cand13 D192 (all): /"
timeout 60 $TP $H/run.py check --lib $L --config hopper --dims 256 --seed 1815 2>&1 | tail -1 | sed "s/^/check hopper D256 (all): /"
for r in 1 2 3; do
  timeout 70 $TP $H/run.py bench --lib $L --dims 192 --configs hopper cand13 --lengths 2048 4096 8192 16384 32768 --iters 5 $([ $r = 1 ] || echo --no-torch) --q-tile-groups 4 --json $OUT/hb_d192_$r.json > /dev/null 2>&1
  [ $r = 3 ] || timeout 70 $TP $H/run.py bench --lib $L --dims 256 --configs hopper cand12 --lengths 2048 4096 8192 16384 32768 --iters 5 $([ $r = 1 ] || echo --no-torch) --q-tile-groups 4 --json $OUT/hb_d256_$r.json > /dev/null 2>&1
done
python3 - <<'P' | tee $OUT/harness.txt
import json,os,glob
O=os.environ["OUT"]
for f in sorted(glob.glob(O+"/hb_*.json")):
    for r in json.load(open(f)):
        print(os.path.basename(f)[3:-5], r["D"], r["Hkv"], r["L"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if not k.endswith("_ms") and isinstance(v,(int,float)) and k not in ("D","Hkv","L","qL","B","H","one_block_per_sm","q_tile_groups")))
P
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for t in memcheck synccheck racecheck; do
  timeout 40 $CS --tool $t $TP $H/run.py check --lib $L --config cand13 --dims 192 --quick --sample 3 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t cand13 D192: |"; echo
done
