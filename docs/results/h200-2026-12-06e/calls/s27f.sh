#!/bin/bash
# Device call 7 of session 24 (issue 25): harness library L, built from the
# series as landed (MLX's 512 block = K block waits + O staged, "hopper")
# with harness.cu as landed (cand13 = MLX's 512 block before). Every D512
# case of MLX's block against float64, the sanitizers on it, one
# interleaved A/B round against the block before at issue 25's shapes,
# and head dim 256 beside torch's cuDNN in the same process.
# Carries .carry/libL.
. scripts/device_call.sh
budget_start 300
J=/tmp/s27f; mkdir -p $J
L=.carry/libL/libattn_harness.so
go "check" && timeout 150 $TP $H/run.py check --lib $L --config hopper --dims 512 --seed 277 2>&1 | tail -1 | sed "s/^/check hopper D512 (all): /" | tee $OUT/checks.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for t in memcheck racecheck synccheck; do
  go "$t" && timeout 60 $CS --tool $t $TP $H/run.py check --lib $L --config hopper --dims 512 --quick --sample 3 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t hopper D512: |" | tee -a $OUT/checks.txt; echo
done
harness_bench $J L_r1 $L "hopper cand13" 512 "2048" 4 --iters 9
harness_bench $J L_r1 $L "hopper cand13" 512 "8192 16384 32768" 1
harness_bench $J L_r1 $L "hopper cand13" 512 "2048" 4 --hkv 4 --iters 9
harness_bench $J L_r1 $L "hopper cand13" 512 "8192 32768" 1 --hkv 4
harness_bench $J L_r1 $L "hopper cand13" 512 "32768" 4 --hkv 4 --q-len 2048
go "D256 beside cuDNN" && timeout 90 $TP $H/run.py bench --lib $L --dims 256 --configs hopper --lengths 8192 16384 32768 --iters 5 --q-tile-groups 1 --json $J/L256_hopper_d256_torch.json > /dev/null 2>&1
python3 scripts/device_summary.py harness $J/*.json > $OUT/harness.txt
cat $OUT/harness.txt
tar -C /tmp -czf $OUT/s27f.tgz s27f
echo "done in $((SECONDS - T0)) s"
