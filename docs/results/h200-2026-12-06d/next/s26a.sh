#!/bin/bash
# Planned device call s26a (issue 25; written in session 23, not run: its
# budget ran out). MLX's 512 block with its score warpgroup
# waiting for each 64-column block of a K tile instead of the whole tile
# (harness cand15 of library KB = KBlockWaits<KCopiesByPv<
# WarpSpecializedTraits<512, 48, 2, 2>>>; headers ../harness/kblocks_headers.diff,
# harness.cu and run.py ../harness/kblocks_harness.diff; build the library
# with `run.py build --mlx-src <the series' tree with the headers diff>
# --arch 90a` into .carry/libKB, with the harness diff applied). The score
# warpgroup waited for K in 17-20 % of its stall samples (call 8, and
# session 22 at 8k). Checks against float64, A/B against MLX's block in
# the same library (hopper), the sanitizers, then a second A/B round.
# Carries .carry/libKB.
. scripts/device_call.sh
budget_start 150
J=/tmp/s26a; mkdir -p $J
L=.carry/libKB/libattn_harness.so
go "check cand15" && timeout 40 $TP $H/run.py check --lib $L --config cand15 --dims 512 --seed 261 --sample 48 2>&1 | tail -1 | sed "s/^/check cand15 D512 (48 sampled): /"
ab() {
  harness_bench $J KB_r$1 $L "hopper cand15" 512 "2048" 4
  harness_bench $J KB_r$1 $L "hopper cand15" 512 "8192 16384 32768" 1
  harness_bench $J KB_r$1 $L "hopper cand15" 512 "2048" 4 --hkv 4
  harness_bench $J KB_r$1 $L "hopper cand15" 512 "8192 32768" 1 --hkv 4
  harness_bench $J KB_r$1 $L "hopper cand15" 512 "32768" 4 --hkv 4 --q-len 2048
}
ab 1
python3 scripts/device_summary.py harness $J/*.json
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for t in memcheck racecheck synccheck; do
  go "$t cand15" && timeout 30 $CS --tool $t $TP $H/run.py check --lib $L --config cand15 --dims 512 --quick --sample 3 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t cand15 D512: |"; echo
done
ab 2
python3 scripts/device_summary.py harness $J/*.json > $OUT/harness.txt
grep KB_r2 $OUT/harness.txt
tar -C /tmp -czf $OUT/s26a.tgz s26a
echo "done in $((SECONDS - T0)) s"
