#!/bin/bash
# Planned device call s22a (issue 25), not run yet: the shared softmax with
# tree reductions (D1) and with the scale folded into the exponential as
# well (D2, softmax_fold.diff), against the landed series (C). Three harness
# libraries built on the CPU machine from the series' headers:
#   .carry/libC  = the series as landed (session 21);
#   .carry/libD1 = C + softmax_fold.diff with kFoldScale = false;
#   .carry/libD2 = C + softmax_fold.diff.
# ncu put most of the D512 score warpgroup's time in the softmax and its
# dependency chains (docs/results/h200-2026-12-06b, call 2).
# 1. Checks of D2 against float64 (negative scales included: they keep the
#    unfolded path) and sanitizers.
# 2. TFLOP/s, kernel alone, MLX's block order, C / D1 / D2 alternating:
#    the wgmma configuration at 192 / 256 / 512 and the 99 KB one (GB10's).
. scripts/device_call.sh
budget_start 480
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
J=/tmp/s22a; mkdir -p $J
lib() { echo .carry/lib$1/libattn_harness.so; }
go "check D2 hopper" && timeout 120 $TP $H/run.py check --lib $(lib D2) --config hopper --dims 192 256 512 --seed 221 2>&1 | tail -1 | sed "s/^/check D2 hopper: /"
go "check D2 all" && timeout 90 $TP $H/run.py check --lib $(lib D2) --config all --dims 192 256 512 --seed 222 --sample 60 2>&1 | tail -1 | sed "s/^/check D2 all configs (60 sampled): /"
go "check D1 hopper" && timeout 60 $TP $H/run.py check --lib $(lib D1) --config hopper --dims 192 256 512 --seed 223 --sample 40 2>&1 | tail -1 | sed "s/^/check D1 hopper (40 sampled): /"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for c in "hopper 512" "small 256"; do
  set -- $c
  for t in memcheck racecheck; do
    go "$t $1 D$2" && timeout 45 $CS --tool $t $TP $H/run.py check --lib $(lib D2) --config $1 --dims $2 --quick --sample 3 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t D2 $1 D$2: |"; echo
  done
done
bench() { # lib config dim "lengths" groups [extra]
  local l=$1 c=$2 d=$3 lens=$4 g=$5; shift 5
  go "$l $c D$d $lens" && timeout 90 $TP $H/run.py bench --lib $(lib $l) --dims $d --configs $c --lengths $lens --iters 5 --no-torch --q-tile-groups $g "$@" --json $J/${l}_r${R}_${c}_d${d}_${lens// /-}.json > /dev/null 2>&1
}
for R in 1 2 3; do
  for l in C D1 D2; do
    bench $l hopper 512 "8192 16384 32768" 1
    bench $l hopper 512 "2048" 4
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
