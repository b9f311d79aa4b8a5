#!/bin/bash
# Device call s12e (issue 19): the grouped block order (q_tile_group sweep: speed, DRAM reads) and the medium (163 KB) configuration; checks incl. partial groups.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
for g in 3 8 0; do timeout 100 $TP $H/run.py check --config all --quick --sample 40 --seed 1$g --q-tile-group $g 2>&1 | tail -1 | sed "s/^/group $g: /"; done
timeout 60 $TP $H/run.py check --config medium --dims 256 --sample 60 --seed 21 2>&1 | tail -1 | sed "s/^/medium D256: /"
for g in 1 4 8 16 0; do
timeout 100 $TP $H/run.py bench --dims 256 512 --configs small medium hopper --lengths 2048 8192 32768 --iters 5 --no-torch --q-tile-group $g --json $OUT/b_$g.json > /dev/null 2>&1
timeout 60 $TP $H/run.py bench --dims 256 512 --configs small hopper --hkv 4 --q-len 2048 --lengths 32768 --iters 5 --no-torch --q-tile-group $g --json $OUT/c_$g.json > /dev/null 2>&1
done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
for c in "small 256 32768 1" "small 256 32768 8" "small 512 32768 1" "small 512 32768 8" "small 512 8192 1" "small 512 8192 8"; do set -- $c
timeout 80 $NCU --clock-control none -k regex:kernel_sdpa_tiled --launch-skip 2 --launch-count 1 --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct $TP $H/run.py bench --dims $2 --configs $1 --lengths $3 --iters 1 --no-torch --q-tile-group $4 2>&1 | grep -E "dram__|lts__" | sed "s/^/$1 D$2 L$3 group$4 /" >> $OUT/ncu.txt; done
python3 - <<'P'
import json,os
O=os.environ["OUT"]
for g in ("1","4","8","16","0"):
  for f in ("b_","c_"):
    for r in json.load(open(O+"/"+f+g+".json")):
        print("group",g, r["D"], r["qL"], r["L"], r["Hkv"], " ".join(f"{k[5:]} {v:.1f}" for k,v in r.items() if k.startswith("ours_") and not k.endswith("_ms")))
print(open(O+"/ncu.txt").read())
P
