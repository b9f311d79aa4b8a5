#!/bin/bash
# Device call s21d (issue 25): one TMA copy per K / V tile, and 32-bit
# descriptor steps. Two harness libraries built here (nvcc 13.0, sm_90a):
#   .carry/libA = the series as landed (s21a's library);
#   .carry/libB = the same plus gmma_advance adding on the descriptor's low
#     word only (every wgmma kernel, `hopper` included) and cand14 =
#     BlockedTma<MLX's hopper traits> at 192 / 256 / 512: each K tile and
#     each (half) V tile by one tma_load_5d of encode_blocked_tile_map's box
#     instead of one copy per 64-column block.
# 1. Checks against float64: libB cand14 at 192 / 256 / 512 (all cases),
#    libB hopper (sampled); memcheck / synccheck / racecheck on cand14.
# 2. TFLOP/s, kernel alone, with MLX's block order: A.hopper, B.hopper and
#    B.cand14 in alternate rounds (torch cuDNN in the first).
# Steps run in order; one that would start past $BUDGET s is skipped.
export PYTHONUNBUFFERED=1
BUDGET=${BUDGET:-480}
T0=$SECONDS
go() { [ $((SECONDS - T0)) -lt $BUDGET ] || { echo "skipped (past ${BUDGET} s): $*"; return 1; }; }
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
A=.carry/libA/libattn_harness.so
B=.carry/libB/libattn_harness.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
J=/tmp/s21d; mkdir -p $J
go "check cand14" && timeout 120 $TP $H/run.py check --lib $B --config cand14 --dims 192 256 512 --seed 214 --q-tile-groups 1 2>&1 | tail -4 | sed "s/^/check B cand14: /"
go "check B hopper" && timeout 60 $TP $H/run.py check --lib $B --config hopper --dims 192 256 512 --seed 215 --sample 30 2>&1 | tail -1 | sed "s/^/check B hopper (30 sampled): /"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
san() { # dim
  for t in memcheck synccheck racecheck; do
    go "$t D$1" && timeout 45 $CS --tool $t $TP $H/run.py check --lib $B --config cand14 --dims $1 --quick --sample 3 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t B cand14 D$1: |"; echo
  done
}
san 512
bench() { # lib label configs dim lengths groups [extra]
  local lib=$1 label=$2 cfg=$3 d=$4 lens=$5 g=$6; shift 6
  go "$label D$d $lens" && timeout 90 $TP $H/run.py bench --lib $lib --dims $d --configs $cfg --lengths $lens --iters 5 --q-tile-groups $g "$@" --json $J/${label}_d${d}_${lens// /-}_g$g.json > /dev/null 2>&1
}
round() { # r
  local NT=$([ $1 = 1 ] || echo --no-torch)
  bench $A A$1 hopper 512 "8192 16384 32768" 1 --no-torch
  bench $B B$1 "hopper cand14" 512 "8192 16384 32768" 1 --no-torch
  bench $A A$1 hopper 512 "2048" 4 --no-torch
  bench $B B$1 "hopper cand14" 512 "2048" 4 --no-torch
  bench $A A$1 hopper 256 "16384 32768" 1 $NT
  bench $B B$1 "hopper cand14" 256 "16384 32768" 1 --no-torch
  bench $A A$1 hopper 256 "2048 8192" 1073741824 $NT
  bench $B B$1 "hopper cand14" 256 "2048 8192" 1073741824 --no-torch
}
round 1
san 256
round 2
go "D512 4kv" && bench $B B1 "hopper cand14" 512 "8192 32768" 1 --no-torch --hkv 4
go "D192" && { bench $A A1 hopper 192 "8192 16384 32768" 1 --no-torch; bench $B B1 "hopper cand14" 192 "8192 16384 32768" 1 --no-torch; }
round 3
tar -C /tmp -czf $OUT/s21d.tgz s21d
python3 scripts/device_summary.py harness $J/*.json | tee $OUT/harness.txt
echo "done in $((SECONDS - T0)) s"
