#!/bin/bash
# Device call s16a (issue 25), harness build ws1: the warp-specialized head-dim-512
# block (cand10-13: BN / K slots / V slots 32/3/3, 32/2/4, 48/2/2, 32/4/2) checked
# against float64, timed beside MLX's wgmma tiles (hopper, the split block) at
# 32/16 and 32/4 heads, sanitized, and both profiled (ncu) at 8k.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
L=/tmp/ws1/libattn_harness.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/ws1 && cp .carry/ws1/libattn_harness.so $L
for c in cand10 cand11 cand12 cand13; do
  timeout 60 $TP $H/run.py check --lib $L --config $c --dims 512 --quick --seed 101 --json $OUT/check_$c.json 2>&1 | tail -2 | sed "s/^/check $c: /"
done
for hkv in 16 4; do
  timeout 90 $TP $H/run.py bench --lib $L --dims 512 --configs hopper cand10 cand11 cand12 cand13 --lengths 2048 8192 32768 --iters 5 --no-torch --q-tile-groups 4 --hkv $hkv --json $OUT/bench_kv$hkv.json > /dev/null 2>&1
done
python3 - <<'P'
import json,os,glob
O=os.environ["OUT"]
for f in sorted(glob.glob(O+"/bench_*.json")):
    for r in json.load(open(f)):
        print(os.path.basename(f)[:-5], r["D"], r["L"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if k.startswith("ours_") and not k.endswith("_ms") and isinstance(v,(int,float))))
P
timeout 100 $TP $H/run.py check --lib $L --config cand10 --dims 512 --seed 102 --json $OUT/check_full_cand10.json 2>&1 | tail -2 | sed "s/^/check full cand10: /"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for t in memcheck synccheck racecheck; do
  timeout 60 $CS --tool $t $TP $H/run.py check --lib $L --config cand10 --dims 512 --quick --sample 3 --seed 7 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t cand10: |"; echo
done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for c in hopper cand10; do
  timeout 60 $NCU --clock-control none --kernel-name regex:kernel_sdpa --launch-skip 2 --launch-count 1 --section SpeedOfLight --metrics lts__t_bytes.sum.per_second,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,sm__inst_executed_pipe_tensor_op_gmma.sum \
    $TP $H/run.py bench --lib $L --dims 512 --configs $c --lengths 8192 --iters 1 --no-torch --q-tile-groups 4 > $OUT/ncu_$c.txt 2>&1
  grep -E "Throughput|Duration|lts__t_bytes|wavefronts|inst_executed|Elapsed Cycles" $OUT/ncu_$c.txt | sed "s/^/ncu $c: /"
done
