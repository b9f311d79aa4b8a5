#!/bin/bash
# Planned device call (written in session 24, not run: the device budget
# ended with no start allowed): the staged
# output for the other tiled blocks. Library ST: the landed series with
# exp/staged-tiled's headers (../harness/staged_tiled_headers.diff;
# harness.cu and run.py with ../harness/staged_tiled_harness.diff):
# cand17 = MLX's 99 KB tiles (GB10's) writing O through shared memory,
# cand18 = MLX's hopper tiles at 192 / 256 the same. Checks against
# float64, A/B one run of each in turn with 4 calls per event (the 99 KB
# tiles with one block per multiprocessor, GB10's occupancy), racecheck.
# Carries .carry/libST.
. scripts/device_call.sh
budget_start 110
J=/tmp/s27h; mkdir -p $J
L=.carry/libST/libattn_harness.so
go "check 17" && timeout 40 $TP $H/run.py check --lib $L --config cand17 --dims 192 256 512 --seed 281 --sample 36 2>&1 | tail -1 | sed "s/^/check cand17 (36 sampled): /" | tee $OUT/checks.txt
go "check 18" && timeout 30 $TP $H/run.py check --lib $L --config cand18 --dims 192 256 --seed 282 --sample 24 2>&1 | tail -1 | sed "s/^/check cand18 (24 sampled): /" | tee -a $OUT/checks.txt
harness_bench $J ST $L "hopper cand18" 256 "2048 8192" 1073741824 --per-event 4
harness_bench $J ST $L "small cand17" 256 "2048 8192" 4 --one-block-per-sm --per-event 4
harness_bench $J ST $L "small cand17" 512 "2048 8192" 4 --one-block-per-sm --per-event 2
harness_bench $J ST $L "hopper cand18" 192 "2048 8192" 1073741824 --per-event 4
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for c in cand18 cand17; do
  go "racecheck $c" && timeout 30 $CS --tool racecheck $TP $H/run.py check --lib $L --config $c --dims 256 --quick --sample 2 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|racecheck $c D256: |" | tee -a $OUT/checks.txt; echo
done
python3 scripts/device_summary.py harness $J/*.json > $OUT/harness.txt
cat $OUT/harness.txt
tar -C /tmp -czf $OUT/s27h.tgz s27h
echo "done in $((SECONDS - T0)) s"
