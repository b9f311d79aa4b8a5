#!/bin/bash
# Planned device call s24b (issue 25), not run: session 22 had no device
# time left. The 512 block in clusters of two query heads of one KV head,
# each K and V tile copied once into both blocks by TMA multicast (harness
# cand15 of library CL: `run.py build --mlx-src <the series' tree with
# cluster_kv_headers.diff> --arch 90a`, harness.cu and run.py with
# cluster_kv_harness.diff). Array masks and odd GQA factors are refused
# (the check skips them). Checks against float64 and the sanitizers first
# (a hang shows as a timeout), then A/B against MLX's block.
. scripts/device_call.sh
budget_start 200
J=/tmp/s24b; mkdir -p $J
L=.carry/libCL/libattn_harness.so
go "check cand15" && timeout 60 $TP $H/run.py check --lib $L --config cand15 --dims 512 --seed 241 2>&1 | tail -1 | sed "s/^/check cand15 D512: /"
go "check hopper" && timeout 60 $TP $H/run.py check --lib $L --config hopper --dims 512 --seed 242 --sample 30 2>&1 | tail -1 | sed "s/^/check hopper D512 (30 sampled): /"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for t in memcheck synccheck; do
  go "$t cand15" && timeout 45 $CS --tool $t $TP $H/run.py check --lib $L --config cand15 --dims 512 --quick --sample 3 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t cand15 D512: |"; echo
done
for R in 1 2 3; do
  harness_bench $J CL_r$R $L "hopper cand15" 512 "8192 16384 32768" 1
  harness_bench $J CL_r$R $L "hopper cand15" 512 "2048" 4
  harness_bench $J CL_r$R $L "hopper cand15" 512 "8192 32768" 1 --hkv 4
  harness_bench $J CL_r$R $L "hopper cand15" 512 "32768" 4 --hkv 4 --q-len 2048
done
python3 scripts/device_summary.py harness $J/*.json | tee $OUT/harness.txt
tar -C /tmp -czf $OUT/s24b.tgz s24b
echo "done in $((SECONDS - T0)) s"
