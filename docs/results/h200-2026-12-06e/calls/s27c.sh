#!/bin/bash
# Device call 4 of session 24 (issue 25): MLX's 512 block (hopper), cand15
# (K block waits), cand17 (O staged) and cand18 (both), library SO, with
# run.py's bench timing one run of each configuration in turn, the order
# rotated every round (calls 2 and 3 timed them one after another and
# favoured whichever ran first). Two rounds of every issue-25 shape.
# Carries .carry/libSO.
. scripts/device_call.sh
budget_start 300
J=/tmp/s27c; mkdir -p $J
L=.carry/libSO/libattn_harness.so
C="hopper cand15 cand17 cand18"
for R in 1 2; do
  harness_bench $J SOi_r$R $L "$C" 512 "2048" 4 --iters 9
  harness_bench $J SOi_r$R $L "$C" 512 "8192 16384 32768" 1
  harness_bench $J SOi_r$R $L "$C" 512 "2048" 4 --hkv 4 --iters 9
  harness_bench $J SOi_r$R $L "$C" 512 "8192 32768" 1 --hkv 4
  harness_bench $J SOi_r$R $L "$C" 512 "32768" 4 --hkv 4 --q-len 2048
done
python3 scripts/device_summary.py harness $J/*.json > $OUT/harness.txt
cat $OUT/harness.txt
tar -C /tmp -czf $OUT/s27c.tgz s27c
echo "done in $((SECONDS - T0)) s"
