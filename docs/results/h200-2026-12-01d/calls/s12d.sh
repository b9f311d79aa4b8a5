#!/bin/bash
# Device call s12d (issue 19): block order (heads vs query tiles fastest): speed and DRAM traffic; sm_80-sized Q-in-smem rings.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
for c in "small 256" "cand7 256" "cand6 192" "small 512" "hopper 256" "hopper 512"; do set -- $c
  timeout 60 $TP $H/run.py check --config $1 --dims $2 --quick --sample 25 --seed 8 --tile-order tiles 2>&1 | tail -1 | sed "s/^/tiles $1 D$2: /"; done
for o in heads tiles; do
timeout 100 $TP $H/run.py bench --dims 256 512 --configs small large cand7 cand8 hopper --lengths 8192 32768 --iters 5 --no-torch --tile-order $o --json $OUT/b_$o.json > /dev/null 2>&1
timeout 60 $TP $H/run.py bench --dims 256 512 --configs small hopper --hkv 4 --q-len 2048 --lengths 32768 --iters 5 --no-torch --tile-order $o --json $OUT/c_$o.json > /dev/null 2>&1
done
timeout 60 $TP $H/run.py bench --dims 192 --configs small large cand6 cand8 --lengths 2048 8192 32768 --iters 5 --no-torch --json $OUT/b192.json > /dev/null 2>&1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
for c in "small 256 heads" "small 256 tiles" "small 512 heads" "small 512 tiles"; do set -- $c
timeout 80 $NCU --clock-control none -k regex:kernel_sdpa_tiled --launch-skip 2 --launch-count 1 --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum,lts__t_bytes.sum $TP $H/run.py bench --dims $2 --configs $1 --lengths 32768 --iters 1 --no-torch --tile-order $3 2>&1 | grep -E "dram__|lts__|gpu__" | sed "s/^/$1 D$2 $3 /" >> $OUT/ncu.txt; done
python3 - <<'P'
import json,os
O=os.environ["OUT"]
for f in ("b_heads","b_tiles","c_heads","c_tiles","b192"):
    for r in json.load(open(O+"/"+f+".json")):
        print(f, {k:(round(v,1) if isinstance(v,float) else v) for k,v in r.items() if not k.endswith('_ms') and k not in('one_block_per_sm','tile_order')})
print(open(O+"/ncu.txt").read())
P
