#!/bin/bash
# Device call s25i (issue 25): where MLX's 512 block (as landed, library V)
# loses at 2k. ncu's stall samples of one launch at 2k in MLX's block order
# (4 groups), to compare with session 22's 8k samples
# (../../h200-2026-12-06c/harness/call3-sass.csv.gz). Read them with
# ../../h200-2026-12-06b/calls/stalls.py. Carries .carry/libV.
. scripts/device_call.sh
budget_start 120
J=/tmp/s25i; mkdir -p $J
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
go "ncu" && timeout 100 $NCU -o $J/d512 --kernel-name regex:kernel_sdpa_ws --launch-skip 2 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SourceCounters --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active $TP $H/run.py bench --lib .carry/libV/libattn_harness.so --dims 512 --configs hopper --lengths 2048 --iters 1 --no-torch --q-tile-groups 4 > $J/ncu_run.txt 2>&1
if [ -f $J/d512.ncu-rep ]; then
  $NCU -i $J/d512.ncu-rep --page details > $OUT/ncu-details.txt 2>&1
  $NCU -i $J/d512.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $OUT/sass.csv.gz
  grep -E "Duration|gmma|Warp Cycles Per Issued|SM Frequency" $OUT/ncu-details.txt | head -8
  python3 docs/results/h200-2026-12-06b/calls/stalls.py $OUT/sass.csv.gz 2>&1 | head -40 | tee $OUT/stalls.txt
else
  tail -5 $J/ncu_run.txt
fi
echo "done in $((SECONDS - T0)) s"
