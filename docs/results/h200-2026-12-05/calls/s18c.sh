#!/bin/bash
# Device call s18c (issue 25): harness build s18c = s18b plus cand12 at head dim
# 256 = MLX's hopper tiles with P V as one m64n256k16 wgmma per k16 step
# (WidePvTraits) instead of four m64n64k16. Checks of cand12 (every case);
# three alternating A/B runs hopper vs cand12 at 256 (torch in the first run);
# sanitizers on cand12.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
L=/tmp/s18c/libattn_harness.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/s18c && cp .carry/wp/libattn_harness.so $L
timeout 60 $TP $H/run.py check --lib $L --config cand12 --dims 256 --seed 1813 2>&1 | tail -1 | sed "s/^/check cand12 D256 (all): /"
for r in 1 2 3; do
  timeout 70 $TP $H/run.py bench --lib $L --dims 256 --configs hopper cand12 --lengths 2048 8192 16384 32768 --iters 5 $([ $r = 1 ] || echo --no-torch) --q-tile-groups 4 --json $OUT/hb_d256_$r.json > /dev/null 2>&1
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
  timeout 40 $CS --tool $t $TP $H/run.py check --lib $L --config cand12 --dims 256 --quick --sample 3 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t cand12 D256: |"; echo
done
