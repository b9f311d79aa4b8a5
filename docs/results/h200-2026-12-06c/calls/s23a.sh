#!/bin/bash
# Device call s23a (issue 25): harness A/B of library G against C.
#   .carry/libC = the series as landed (session 21);
#   .carry/libG = C + the shared softmax with tree reductions and the scale
#                 folded into the exponential, for the wgmma traits only
#                 (kSoftmaxTrees; the mma.sync tiles keep their chains), and
#                 harness cand13 at 512 = KCopiesByPv<MLX's warp-specialized
#                 traits>: the K tiles copied by the first P V warpgroup.
# 1. Checks against float64 and sanitizers on G.
# 2. TFLOP/s, kernel alone, MLX's block order, C / G alternating.
. scripts/device_call.sh
budget_start 420
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
J=/tmp/s23a; mkdir -p $J
lib() { echo .carry/lib$1/libattn_harness.so; }
go "check G hopper" && timeout 120 $TP $H/run.py check --lib $(lib G) --config hopper --dims 192 256 512 --seed 231 2>&1 | tail -1 | sed "s/^/check G hopper: /"
go "check G cand13" && timeout 60 $TP $H/run.py check --lib $(lib G) --config cand13 --dims 512 --seed 232 2>&1 | tail -1 | sed "s/^/check G cand13 D512: /"
go "check G all" && timeout 60 $TP $H/run.py check --lib $(lib G) --config all --dims 192 256 512 --seed 233 --sample 40 2>&1 | tail -1 | sed "s/^/check G all configs (40 sampled): /"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for c in "cand13 512" "hopper 256"; do
  set -- $c
  for t in memcheck racecheck synccheck; do
    go "$t $1 D$2" && timeout 45 $CS --tool $t $TP $H/run.py check --lib $(lib G) --config $1 --dims $2 --quick --sample 3 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t G $1 D$2: |"; echo
  done
done
bench() { # lib "configs" dim "lengths" groups [extra]
  local l=$1 c=$2 d=$3 lens=$4 g=$5; shift 5
  local tag=${*// /}; tag=${tag//-/}
  go "$l $c D$d $lens $*" && timeout 90 $TP $H/run.py bench --lib $(lib $l) --dims $d --configs $c --lengths $lens --iters 5 --no-torch --q-tile-groups $g "$@" --json $J/${l}_r${R}_${c// /-}_d${d}_${lens// /-}${tag:+_$tag}.json > /dev/null 2>&1
}
for R in 1 2 3; do
  bench C hopper 512 "8192 16384 32768" 1
  bench G "hopper cand13" 512 "8192 16384 32768" 1
  bench C hopper 512 "2048" 4
  bench G "hopper cand13" 512 "2048" 4
  bench C hopper 512 "8192 32768" 1 --hkv 4
  bench G "hopper cand13" 512 "8192 32768" 1 --hkv 4
  bench C hopper 512 "32768" 4 --hkv 4 --q-len 2048
  bench G "hopper cand13" 512 "32768" 4 --hkv 4 --q-len 2048
  for l in C G; do
    bench $l hopper 256 "2048 8192" 1073741824
    bench $l hopper 256 "16384 32768" 1
    bench $l hopper 256 "32768" 1073741824 --q-len 2048
    bench $l hopper 192 "8192 32768" 1
  done
done
tar -C /tmp -czf $OUT/s23a.tgz s23a
python3 scripts/device_summary.py harness $J/*.json | tee $OUT/harness.txt
echo "done in $((SECONDS - T0)) s"
