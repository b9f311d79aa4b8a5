#!/bin/bash
# Device call s23c (issue 25). Libraries C (the series as session 21 left
# it) and H (this session's series, MLX's 512 block = harness cand13, plus
# two candidates at 512: cand15 = P stored by stmatrix, cand16 = the
# softmax's chains instead of trees).
# 1. Checks against float64 for cand15 / cand16 and the new MLX hopper
#    configuration; sanitizers on cand15 (its stores).
# 2. TFLOP/s, kernel alone, C / H alternating: the shapes s23a meant to
#    time and did not (its bench() put a space into the JSON file's name
#    when given extra options, so run.py refused them): 512 with gemma-4's 4
#    KV heads, prefill and mlx-lm's chunked step (2048 queries against
#    32768 keys), and the chunked step at 256; and cand15 / cand16.
# 3. ncu's stall samples of the new 512 block at 8k.
. scripts/device_call.sh
budget_start 300
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
J=/tmp/s23c; mkdir -p $J
lib() { echo .carry/lib$1/libattn_harness.so; }
go "check H hopper" && timeout 90 $TP $H/run.py check --lib $(lib H) --config hopper --dims 512 --seed 234 2>&1 | tail -1 | sed "s/^/check H hopper D512: /"
for c in cand15 cand16; do
  go "check H $c" && timeout 60 $TP $H/run.py check --lib $(lib H) --config $c --dims 512 --seed 235 2>&1 | tail -1 | sed "s/^/check H $c D512: /"
done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for t in memcheck racecheck; do
  go "$t cand15" && timeout 45 $CS --tool $t $TP $H/run.py check --lib $(lib H) --config cand15 --dims 512 --quick --sample 3 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t H cand15 D512: |"; echo
done
bench() { # lib "configs" dim "lengths" groups [extra]
  local l=$1 c=$2 d=$3 lens=$4 g=$5; shift 5
  local tag; tag=$(echo "$*" | tr -d ' -')
  go "$l $c D$d $lens $*" && timeout 90 $TP $H/run.py bench --lib $(lib $l) --dims $d --configs $c --lengths $lens --iters 5 --no-torch --q-tile-groups $g "$@" --json "$J/${l}_r${R}_${c// /-}_d${d}_${lens// /-}${tag:+_$tag}.json" > /dev/null 2>&1
}
N="hopper cand15 cand16"
for R in 1 2 3; do
  bench C hopper 512 "8192 16384 32768" 1
  bench H "$N" 512 "8192 16384 32768" 1
  bench C hopper 512 "2048" 4
  bench H "$N" 512 "2048" 4
  bench C hopper 512 "8192 16384 32768" 1 --hkv 4
  bench H "$N" 512 "8192 16384 32768" 1 --hkv 4
  bench C hopper 512 "2048" 4 --hkv 4
  bench H "$N" 512 "2048" 4 --hkv 4
  bench C hopper 512 "32768" 4 --hkv 4 --q-len 2048
  bench H "$N" 512 "32768" 4 --hkv 4 --q-len 2048
  bench C hopper 256 "32768" 1073741824 --q-len 2048
  bench H hopper 256 "32768" 1073741824 --q-len 2048
done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
go "ncu" && timeout 120 $NCU -o $J/d512 --kernel-name regex:kernel_sdpa_ws --launch-skip 2 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SourceCounters --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active $TP $H/run.py bench --lib $(lib H) --dims 512 --configs hopper --lengths 8192 --iters 1 --no-torch --q-tile-groups 1 > $J/ncu_run.txt 2>&1
if [ -f $J/d512.ncu-rep ]; then
  $NCU -i $J/d512.ncu-rep --page details > $J/ncu.txt 2>&1
  $NCU -i $J/d512.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $OUT/sass.csv.gz
  grep -E "Duration|gmma|Warp Cycles Per Issued|SM Frequency" $J/ncu.txt | head -8
  rm -f $J/d512.ncu-rep
fi
tar -C /tmp -czf $OUT/s23c.tgz s23c
python3 scripts/device_summary.py harness $J/*.json | tee $OUT/harness.txt
echo "done in $((SECONDS - T0)) s"
