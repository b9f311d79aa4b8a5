#!/bin/bash
# Device call 2 of session 24 (issue 25): MLX's 512 block writing O through
# shared memory in 16-byte stores (cand17 = StagedOutput<MLX's block>,
# cand18 = the same over cand15's K block waits), against MLX's block and
# cand15, all from harness library SO (the series with exp/epilogue's
# headers; harness.cu and run.py with ../harness/staged_output_harness.diff).
# Checks against float64, an A/B round, the sanitizers, a second round.
# Carries .carry/libSO.
. scripts/device_call.sh
budget_start 300
J=/tmp/s27a; mkdir -p $J
L=.carry/libSO/libattn_harness.so
C="hopper cand15 cand17 cand18"
for c in cand17 cand18; do
  go "check $c" && timeout 60 $TP $H/run.py check --lib $L --config $c --dims 512 --seed 271 --sample 48 2>&1 | tail -1 | sed "s/^/check $c D512 (48 sampled): /"
done
ab() {
  harness_bench $J SO_r$1 $L "$C" 512 "2048" 4
  harness_bench $J SO_r$1 $L "$C" 512 "8192 16384 32768" 1
  harness_bench $J SO_r$1 $L "$C" 512 "2048" 4 --hkv 4
  harness_bench $J SO_r$1 $L "$C" 512 "8192 32768" 1 --hkv 4
  harness_bench $J SO_r$1 $L "$C" 512 "32768" 4 --hkv 4 --q-len 2048
}
ab 1
python3 scripts/device_summary.py harness $J/*.json
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for c in cand17; do
  for t in memcheck racecheck synccheck; do
    go "$t $c" && timeout 60 $CS --tool $t $TP $H/run.py check --lib $L --config $c --dims 512 --quick --sample 3 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t $c D512: |"; echo
  done
done
ab 2
python3 scripts/device_summary.py harness $J/*.json > $OUT/harness.txt
grep SO_r2 $OUT/harness.txt
tar -C /tmp -czf $OUT/s27a.tgz s27a
echo "done in $((SECONDS - T0)) s"
