#!/bin/bash
# Device call 8 of session 24 (issue 25): how much of the harness's 2k
# figure is the host's launch? Library L (as landed; cand13 = the 512 block
# before). run.py bench timing 8 queued calls per pair of events
# (--per-event 8) against one (call 7), and ncu's kernel time (one process
# per configuration, L2 flushed between kernels, clocks not locked). Then
# head dim 256 beside torch's cuDNN, both timed 4 queued calls per pair of
# events. Carries .carry/libL.
. scripts/device_call.sh
budget_start 200
J=/tmp/s27g; mkdir -p $J
L=.carry/libL/libattn_harness.so
harness_bench $J Lq_r1 $L "hopper cand13" 512 "2048" 4 --per-event 8
harness_bench $J Lq_r1 $L "hopper cand13" 512 "2048" 4 --hkv 4 --per-event 8
harness_bench $J Lq_r1 $L "hopper cand13" 512 "8192" 1 --per-event 2
for c in hopper cand13; do
  for kv in 16 4; do
    go "ncu $c $kv" && timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum --csv -c 2 -k regex:sdpa_ws \
      $TP $H/run.py bench --lib $L --dims 512 --configs $c --lengths 2048 --iters 1 --no-torch \
      --q-tile-groups 4 --hkv $kv 2>/dev/null | grep '"' | tail -n +2 \
      | awk -F'","' -v c=$c -v kv=$kv '{print c, "2048/" kv "kv", $(NF-2), $(NF-1), $NF}' | tee -a $OUT/ncu.txt
  done
done
go "D256 beside cuDNN" && timeout 90 $TP $H/run.py bench --lib $L --dims 256 --configs hopper --lengths 8192 16384 32768 --iters 5 --q-tile-groups 1 --per-event 4 --json $J/Lq256_hopper_d256_torch_pe4.json > /dev/null 2>&1
python3 scripts/device_summary.py harness $J/*.json > $OUT/harness.txt
cat $OUT/harness.txt
tar -C /tmp -czf $OUT/s27g.tgz s27g
echo "done in $((SECONDS - T0)) s"
