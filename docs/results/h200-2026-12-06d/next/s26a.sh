#!/bin/bash
# Planned device call s26a (issue 25; written in session 23, not run: its
# device budget ran out). Two 512 candidates against MLX's block (hopper),
# all three from harness library SS (the series with
# ../harness/seesaw_headers.diff, harness.cu and run.py with
# ../harness/seesaw_harness.diff; `run.py build --mlx-src <tree> --arch
# 90a` into .carry/libSS):
# - cand15 = KBlockWaits<KCopiesByPv<WarpSpecializedTraits<512, 48, 2, 2>>>:
#   MLX's block, its score warpgroup waiting for each 64-column block of
#   a K tile instead of the whole tile;
# - cand16 = SeesawTraits<512, 32>: two warpgroups, each scoring one key
#   tile of a pair and owning half of O (attention_seesaw.cuh).
# Checks against float64 (cand16 every mask kind first: a hang shows as a
# timeout), an A/B round, the sanitizers, a second round.
# Carries .carry/libSS.
. scripts/device_call.sh
budget_start 240
J=/tmp/s26a; mkdir -p $J
L=.carry/libSS/libattn_harness.so
go "check cand16" && timeout 60 $TP $H/run.py check --lib $L --config cand16 --dims 512 --seed 262 --sample 48 2>&1 | tail -1 | sed "s/^/check cand16 D512 (48 sampled): /"
go "check cand15" && timeout 40 $TP $H/run.py check --lib $L --config cand15 --dims 512 --seed 261 --sample 48 2>&1 | tail -1 | sed "s/^/check cand15 D512 (48 sampled): /"
ab() {
  harness_bench $J SS_r$1 $L "hopper cand15 cand16" 512 "2048" 4
  harness_bench $J SS_r$1 $L "hopper cand15 cand16" 512 "8192 16384 32768" 1
  harness_bench $J SS_r$1 $L "hopper cand15 cand16" 512 "2048" 4 --hkv 4
  harness_bench $J SS_r$1 $L "hopper cand15 cand16" 512 "8192 32768" 1 --hkv 4
  harness_bench $J SS_r$1 $L "hopper cand15 cand16" 512 "32768" 4 --hkv 4 --q-len 2048
}
ab 1
python3 scripts/device_summary.py harness $J/*.json
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for c in cand16 cand15; do
  for t in memcheck racecheck synccheck; do
    go "$t $c" && timeout 30 $CS --tool $t $TP $H/run.py check --lib $L --config $c --dims 512 --quick --sample 3 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t $c D512: |"; echo
  done
done
ab 2
python3 scripts/device_summary.py harness $J/*.json > $OUT/harness.txt
grep SS_r2 $OUT/harness.txt
tar -C /tmp -czf $OUT/s26a.tgz s26a
echo "done in $((SECONDS - T0)) s"
