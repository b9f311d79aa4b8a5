#!/bin/bash
# Device call s21b (issue 25): the harness library s21a built (the series'
# headers with patch 0020's block order) on the same warm machine.
# 1. Checks against float64 of MLX's wgmma configuration (hopper) at 192 /
#    256 / 512 with one group per head (the order the wgmma tiles now take
#    from 128 query tiles per head) and with the default order.
# 2. memcheck / synccheck / racecheck on hopper at 256 and 512, one group.
# 3. TFLOP/s, kernel alone, torch cuDNN in the same process, with MLX's
#    groups: D256 one tile per group at 2k / 8k and one group from 16k;
#    D512 four groups at 2k and one from 8k (32 / 16 and 32 / 4 heads).
#    Two alternate rounds.
# 4. ncu of the D512 block at 8k: throughput of the tensor pipe, shared
#    memory and L2, and where its warps stall.
# Steps run in order; one that would start past $BUDGET s is skipped.
export PYTHONUNBUFFERED=1
BUDGET=${BUDGET:-520}
T0=$SECONDS
go() { [ $((SECONDS - T0)) -lt $BUDGET ] || { echo "skipped (past ${BUDGET} s): $*"; return 1; }; }
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
L=/tmp/s21/libattn_harness.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
[ -f $L ] || { echo "no harness library from s21a"; exit 6; }
J=/tmp/s21/json; mkdir -p $J
go "check one group" && timeout 120 $TP $H/run.py check --lib $L --config hopper --dims 192 256 512 --seed 21 --q-tile-groups 1 2>&1 | tail -1 | sed "s/^/check hopper (192 256 512, one group per head): /"
go "check default order" && timeout 60 $TP $H/run.py check --lib $L --config hopper --dims 192 256 512 --seed 22 --sample 40 2>&1 | tail -1 | sed "s/^/check hopper (40 sampled, one tile per group): /"
bench() { # round
  local NT=$([ $1 = 1 ] || echo --no-torch)
  go "D256 r$1" && timeout 60 $TP $H/run.py bench --lib $L --dims 256 --configs hopper --lengths 2048 8192 --iters 5 $NT --json $J/d256_short_$1.json > /dev/null 2>&1
  go "D256 long r$1" && timeout 60 $TP $H/run.py bench --lib $L --dims 256 --configs hopper --lengths 16384 32768 --iters 5 $NT --q-tile-groups 1 --json $J/d256_long_$1.json > /dev/null 2>&1
  go "D512 r$1" && timeout 40 $TP $H/run.py bench --lib $L --dims 512 --configs hopper --lengths 2048 --iters 5 --no-torch --q-tile-groups 4 --json $J/d512_short_$1.json > /dev/null 2>&1
  go "D512 long r$1" && timeout 60 $TP $H/run.py bench --lib $L --dims 512 --configs hopper --lengths 8192 16384 32768 --iters 5 --no-torch --q-tile-groups 1 --json $J/d512_long_$1.json > /dev/null 2>&1
  go "D512 4kv r$1" && timeout 60 $TP $H/run.py bench --lib $L --dims 512 --configs hopper --lengths 8192 32768 --iters 5 --no-torch --q-tile-groups 1 --hkv 4 --json $J/d512_4kv_$1.json > /dev/null 2>&1
}
bench 1
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for d in 256 512; do
  for t in memcheck synccheck racecheck; do
    go "$t D$d" && timeout 45 $CS --tool $t $TP $H/run.py check --lib $L --config hopper --dims $d --quick --sample 3 --seed 9 --q-tile-groups 1 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t hopper D$d, one group: |"; echo
  done
done
bench 2
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
go "ncu" && timeout 150 $NCU -o /tmp/s21/d512 --kernel-name regex:kernel_sdpa_ws --launch-skip 2 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SourceCounters --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed $TP $H/run.py bench --lib $L --dims 512 --configs hopper --lengths 8192 --iters 1 --no-torch --q-tile-groups 1 > /tmp/s21/ncu_run.txt 2>&1
if [ -f /tmp/s21/d512.ncu-rep ]; then
  $NCU -i /tmp/s21/d512.ncu-rep --page details > /tmp/s21/ncu.txt 2>&1
  $NCU -i /tmp/s21/d512.ncu-rep --page source --csv --print-source sass > /tmp/s21/sass.csv 2>/tmp/s21/sass.err
  grep -E "Duration|Throughput|gmma|wavefronts|Stall|Warp Cycles Per Issued|Issue Slot|SM Frequency|L2 Hit|Eligible" /tmp/s21/ncu.txt | head -30
  python3 docs/results/h200-2026-12-06b/calls/stalls.py /tmp/s21/sass.csv 2>&1 | head -45
else
  tail -5 /tmp/s21/ncu_run.txt
fi
tar -C /tmp/s21 -czf $OUT/s21b.tgz json ncu.txt ncu_run.txt sass.csv sass.err
python3 scripts/device_summary.py harness $J/*.json | tee $OUT/harness.txt
echo "done in $((SECONDS - T0)) s"
