#!/bin/bash
# Planned device call s22a (issue 25), not run yet. Three harness libraries
# built on the CPU machine (next/README.md says how):
#   .carry/libC  = the series as landed (session 21);
#   .carry/libD1 = C + softmax_fold.diff + qk_split.diff with kFoldScale
#                  false: the softmax's row max and sum as trees;
#   .carry/libF  = C + softmax_fold.diff + qk_split.diff: the trees and the
#                  scale folded into the exponential.
# In D1 and F (harness_s22.diff) cand2 / cand12 / cand13 at 512 are
# QkSplit<MLX's warp-specialized traits, 8 / 16 / 24>: that many of Q K^T's
# 32 k16 steps for the next tile before the softmax, the rest after P is
# handed over (MLX's: all 32 before).
# 1. Checks against float64 (negative scales take the unfolded path) and
#    sanitizers on F.
# 2. TFLOP/s, kernel alone, MLX's block order, C / D1 / F alternating: the
#    wgmma configuration at 192 / 256 / 512 (and the splits at 512), the
#    99 KB one (GB10's) at 256 / 512.
. scripts/device_call.sh
budget_start 480
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
J=/tmp/s22a; mkdir -p $J
lib() { echo .carry/lib$1/libattn_harness.so; }
go "check F hopper" && timeout 120 $TP $H/run.py check --lib $(lib F) --config hopper --dims 192 256 512 --seed 221 2>&1 | tail -1 | sed "s/^/check F hopper: /"
for c in cand2 cand12 cand13; do
  go "check F $c" && timeout 60 $TP $H/run.py check --lib $(lib F) --config $c --dims 512 --seed 222 2>&1 | tail -1 | sed "s/^/check F $c D512: /"
done
go "check F all" && timeout 90 $TP $H/run.py check --lib $(lib F) --config all --dims 192 256 512 --seed 223 --sample 60 2>&1 | tail -1 | sed "s/^/check F all configs (60 sampled): /"
go "check D1" && timeout 60 $TP $H/run.py check --lib $(lib D1) --config hopper --dims 192 256 512 --seed 224 --sample 40 2>&1 | tail -1 | sed "s/^/check D1 hopper (40 sampled): /"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for c in "cand12 512" "small 256"; do
  set -- $c
  for t in memcheck racecheck synccheck; do
    go "$t $1 D$2" && timeout 45 $CS --tool $t $TP $H/run.py check --lib $(lib F) --config $1 --dims $2 --quick --sample 3 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t F $1 D$2: |"; echo
  done
done
bench() { # lib "configs" dim "lengths" groups [extra]
  local l=$1 c=$2 d=$3 lens=$4 g=$5; shift 5
  go "$l $c D$d $lens" && timeout 90 $TP $H/run.py bench --lib $(lib $l) --dims $d --configs $c --lengths $lens --iters 5 --no-torch --q-tile-groups $g "$@" --json $J/${l}_r${R}_${c// /-}_d${d}_${lens// /-}.json > /dev/null 2>&1
}
for R in 1 2 3; do
  bench C hopper 512 "8192 16384 32768" 1
  bench D1 "hopper cand12" 512 "8192 16384 32768" 1
  bench F "hopper cand2 cand12 cand13" 512 "8192 16384 32768" 1
  bench C hopper 512 "2048" 4
  bench F "hopper cand12" 512 "2048" 4
  for l in C D1 F; do
    bench $l hopper 256 "2048 8192" 1073741824
    bench $l hopper 256 "16384 32768" 1
    bench $l hopper 192 "8192 32768" 1
    bench $l small 256 "8192 32768" 4
    bench $l small 512 "8192 32768" 4
  done
done
tar -C /tmp -czf $OUT/s22a.tgz s22a
python3 scripts/device_summary.py harness $J/*.json | tee $OUT/harness.txt
echo "done in $((SECONDS - T0)) s"
