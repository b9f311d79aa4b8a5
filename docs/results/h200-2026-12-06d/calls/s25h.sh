#!/bin/bash
# Device call s25h (issue 25): issue 25's harness targets on whichever card
# comes (the session's first call to ask for an H200): MLX's blocks as
# landed (library V) in MLX's block order (q-tile groups: 4 below 128
# query tiles at 512, one tile per group at 256; 1 from 128 on), D512 32/16
# and 32/4 and mlx-lm's chunked step, D256; then run.py bench with torch's
# backends (flash, cuDNN, mem-efficient) in the same process; then the
# persistent 512 candidate (cand15 of library P3) at 2k in that order.
# Carries .carry/libV, .carry/libP3.
# Needs ../harness/persistent_harness.diff applied (run.py's cand15 and
# --persistent-blocks); main's run.py has neither.
. scripts/device_call.sh
budget_start 300
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee $OUT/card.txt
J=/tmp/s25h; mkdir -p $J
V_=.carry/libV/libattn_harness.so
P_=.carry/libP3/libattn_harness.so
ONE=1073741824
for R in 1 2; do
  harness_bench $J V_r$R $V_ "hopper" 512 "2048" 4
  harness_bench $J V_r$R $V_ "hopper" 512 "8192 16384 32768" 1
  harness_bench $J V_r$R $V_ "hopper" 512 "2048" 4 --hkv 4
  harness_bench $J V_r$R $V_ "hopper" 512 "8192 32768" 1 --hkv 4
  harness_bench $J V_r$R $V_ "hopper" 512 "32768" 4 --hkv 4 --q-len 2048
  harness_bench $J V_r$R $V_ "hopper" 256 "2048" $ONE
  harness_bench $J V_r$R $V_ "hopper" 256 "8192 16384 32768" 1
done
go "torch D256" && timeout 120 $TP $H/run.py bench --lib $V_ --dims 256 --configs hopper --lengths 8192 16384 32768 --iters 5 --q-tile-groups 1 --json $J/T_d256.json > /dev/null 2>&1
go "torch D512" && timeout 90 $TP $H/run.py bench --lib $V_ --dims 512 --configs hopper --lengths 8192 32768 --iters 3 --q-tile-groups 1 --json $J/T_d512.json > /dev/null 2>&1
for R in 1 2; do
  harness_bench $J P3_r$R $P_ "hopper cand15" 512 "2048" 4 --hkv 4
  harness_bench $J P3_r$R $P_ "hopper cand15" 512 "2048" 4
done
python3 scripts/device_summary.py harness $J/*.json | tee $OUT/harness.txt
tar -C /tmp -czf $OUT/s25h.tgz s25h
echo "done in $((SECONDS - T0)) s"
