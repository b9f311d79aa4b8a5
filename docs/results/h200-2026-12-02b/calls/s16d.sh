#!/bin/bash
# Device call s16d (issue 25): the landed kernels in harness build ws4 (the series
# as exported): MLX's hopper configuration at head dim 512 is now the
# warp-specialized block (array masks keep the split block, which is cand10 here);
# cand11 = the warp-specialized block for every mask kind. Checks, A/B (causal
# 32/16 and 32/4, sliding windows, the chunked step), sanitizers.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
L=/tmp/ws4/libattn_harness.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/ws4 && cp .carry/ws4/libattn_harness.so $L
timeout 60 $TP $H/run.py check --lib $L --config hopper --dims 512 --seed 401 --json $OUT/check_hopper512.json 2>&1 | tail -1 | sed "s/^/check hopper D512 (all 96): /"
timeout 40 $TP $H/run.py check --lib $L --config cand11 --dims 512 --quick --seed 402 2>&1 | tail -1 | sed "s/^/check cand11 (ws, all masks): /"
timeout 40 $TP $H/run.py check --lib $L --config all --dims 192 256 --quick --sample 60 --seed 403 2>&1 | tail -1 | sed "s/^/check all D192+256 sample: /"
for r in 1 2; do for hkv in 16 4; do
  timeout 60 $TP $H/run.py bench --lib $L --dims 512 --configs hopper cand10 --lengths 2048 8192 16384 32768 --iters 5 --no-torch --q-tile-groups 4 --hkv $hkv --json $OUT/hb_kv${hkv}_$r.json > /dev/null 2>&1
done; done
timeout 40 $TP $H/run.py bench --lib $L --dims 512 --configs hopper cand11 --lengths 8192 32768 --window 1024 --no-torch --q-tile-groups 4 --json $OUT/hb_window.json > /dev/null 2>&1
timeout 40 $TP $H/run.py bench --lib $L --dims 512 --configs hopper cand11 --lengths 8192 32768 --window 1024 --bool-mask --no-torch --q-tile-groups 4 --json $OUT/hb_wbool.json > /dev/null 2>&1
timeout 40 $TP $H/run.py bench --lib $L --dims 512 --configs hopper cand10 --lengths 32768 --q-len 2048 --hkv 4 --iters 10 --no-torch --q-tile-groups 4 --json $OUT/hb_chunk.json > /dev/null 2>&1
python3 - <<'P' | tee $OUT/harness.txt
import json,os,glob
O=os.environ["OUT"]
for f in sorted(glob.glob(O+"/hb_*.json")):
    for r in json.load(open(f)):
        print(os.path.basename(f)[3:-5], r["D"], r["Hkv"], r["qL"], r["L"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if k.startswith("ours_") and not k.endswith("_ms") and isinstance(v,(int,float))))
P
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for t in memcheck synccheck racecheck; do
  timeout 50 $CS --tool $t $TP $H/run.py check --lib $L --config hopper --dims 512 --quick --sample 3 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t hopper D512: |"; echo
done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for c in hopper cand10; do
  timeout 50 $NCU --clock-control none --kernel-name regex:kernel_sdpa --launch-skip 2 --launch-count 1 --section SpeedOfLight --metrics lts__t_bytes.sum.per_second,sm__inst_executed_pipe_tensor_op_gmma.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
    $TP $H/run.py bench --lib $L --dims 512 --configs $c --lengths 8192 --iters 1 --no-torch --q-tile-groups 4 > $OUT/ncu_$c.txt 2>&1
  grep -E "Duration|lts__t_bytes|gmma|L2 Cache Throughput|Compute \(SM\)|ERR" $OUT/ncu_$c.txt | sed "s/^/ncu $c: /" | head -8
done
