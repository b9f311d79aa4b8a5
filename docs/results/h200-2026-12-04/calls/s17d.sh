#!/bin/bash
# Device call s17d (issue 19): harness build s17d = the landed series plus, at head
# dim 192, cand5 / cand6 = MLX's 99 KB tiles (the half-Q ring) with a third K/V
# slot (88 KB), K's slot refilled after the softmax / early. Checks; three
# alternate A/B runs against MLX's small tiles (two slots), torch in the first;
# the same with GB10's occupancy (one block per SM); sanitizers.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
L=/tmp/s17d/libattn_harness.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/s17d && cp .carry/s17d/libattn_harness.so $L
for c in cand5 cand6; do
  timeout 40 $TP $H/run.py check --lib $L --config $c --dims 192 --seed 1741 2>&1 | tail -1 | sed "s/^/check $c D192 (all): /"
done
for r in 1 2 3; do
  timeout 60 $TP $H/run.py bench --lib $L --dims 192 --configs small cand5 cand6 --lengths 2048 8192 16384 32768 --iters 5 $([ $r = 1 ] || echo --no-torch) --q-tile-groups 4 --json $OUT/hb_$r.json > /dev/null 2>&1
done
timeout 60 $TP $H/run.py bench --lib $L --dims 192 --configs small cand5 cand6 --lengths 2048 8192 32768 --iters 5 --no-torch --q-tile-groups 4 --one-block-per-sm --json $OUT/hb_proxy.json > /dev/null 2>&1
timeout 60 $TP $H/run.py bench --lib $L --dims 192 --configs small cand5 cand6 --lengths 32768 --q-len 2048 --hkv 16 --iters 10 --no-torch --q-tile-groups 4 --json $OUT/hb_chunk.json > /dev/null 2>&1
python3 - <<'P' | tee $OUT/harness.txt
import json,os,glob
O=os.environ["OUT"]
for f in sorted(glob.glob(O+"/hb_*.json")):
    for r in json.load(open(f)):
        print(os.path.basename(f)[:-5], r["D"], r.get("qL"), r["L"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if not k.endswith("_ms") and isinstance(v,(int,float)) and k not in ("D","Hkv","L","qL","B","H","q_tile_groups")))
P
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for c in cand5 cand6; do for t in memcheck synccheck racecheck; do
  timeout 40 $CS --tool $t $TP $H/run.py check --lib $L --config $c --dims 192 --quick --sample 3 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t $c D192: |"; echo
done; done
