#!/bin/bash
# Device call s12g (issue 19): final harness of this session's series: checks over every configuration with MLX's block order (4 groups), sanitizers on the new configuration and order, speed against torch FA2, DRAM reads per order.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
timeout 150 $TP $H/run.py check --config all --q-tile-groups 4 --json $OUT/check_all.json 2>&1 | tail -1 | sed "s/^/all configs, 4 groups: /" | tee $OUT/check.txt
timeout 40 $TP $H/run.py check --config all --quick --sample 60 --seed 41 2>&1 | tail -1 | sed "s/^/all configs, one tile per group: /" | tee -a $OUT/check.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
for t in memcheck racecheck synccheck; do timeout 70 $CS --tool $t --error-exitcode 9 $TP $H/run.py check --config medium --dims 256 --quick --sample 6 --seed 5 --q-tile-groups 3 2>&1 | tail -2 | tr '\n' ' ' | sed "s/^/$t medium: /"; echo; done | tee $OUT/sanitizers.txt
timeout 70 $CS --tool memcheck --error-exitcode 9 $TP $H/run.py check --config small --quick --sample 8 --seed 6 --q-tile-groups 3 2>&1 | tail -2 | tr '\n' ' ' | sed "s/^/memcheck small: /" | tee -a $OUT/sanitizers.txt; echo
timeout 120 $TP $H/run.py bench --dims 256 --configs small medium large hopper --lengths 2048 8192 16384 32768 --iters 5 --q-tile-groups 4 --json $OUT/b256.json > /dev/null 2>&1
timeout 60 $TP $H/run.py bench --dims 512 192 --configs small medium large hopper --lengths 2048 8192 32768 --iters 5 --no-torch --q-tile-groups 4 --json $OUT/b512.json > /dev/null 2>&1
timeout 40 $TP $H/run.py bench --dims 256 512 --configs small medium hopper --hkv 4 --q-len 2048 --lengths 32768 --iters 5 --no-torch --q-tile-groups 4 --json $OUT/bchunk.json > /dev/null 2>&1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
for c in "small 256 4" "small 512 4" "hopper 512 4" "hopper 512 1073741824"; do set -- $c
timeout 60 $NCU --clock-control none -k regex:kernel_sdpa_tiled --launch-skip 2 --launch-count 1 --metrics dram__bytes_read.sum,gpu__time_duration.sum $TP $H/run.py bench --dims $2 --configs $1 --lengths 32768 --iters 1 --no-torch --q-tile-groups $3 2>&1 | grep -E "dram__|gpu__" | sed "s/^/$1 D$2 groups$3 /" >> $OUT/ncu.txt; done
python3 - <<'P'
import json,os
O=os.environ["OUT"]
for f in ("b256","b512","bchunk"):
    for r in json.load(open(O+"/"+f+".json")):
        print(r["D"], r["qL"], r["L"], r["Hkv"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if isinstance(v,float) and not k.endswith("_ms")))
print(open(O+"/ncu.txt").read())
P
