#!/bin/bash
# Device call s25g (issue 25): the persistent 512 candidate (cand15 of
# library P3) against MLX's block (hopper, same library) where s25d left
# questions: 4 KV heads at 2k in MLX's own block order (4 groups; s25d ran
# 1), and why it loses at 32k with 4 KV heads: ncu's time, L2 hit rate,
# DRAM bytes and SM throughput of each. Carries .carry/libP3.
# Needs ../harness/persistent_harness.diff applied (run.py's cand15 and
# --persistent-blocks); main's run.py has neither.
. scripts/device_call.sh
budget_start 200
J=/tmp/s25g; mkdir -p $J
L=.carry/libP3/libattn_harness.so
for R in $(seq ${ROUNDS:-3}); do
  harness_bench $J P3_r$R $L "hopper cand15" 512 "2048" 4 --hkv 4
  harness_bench $J P3_r$R $L "hopper cand15" 512 "2048" 4
done
python3 scripts/device_summary.py harness $J/*.json | tee $OUT/harness.txt
MET=gpu__time_duration.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
for c in hopper cand15; do
  for n in 32768 2048; do
    go "ncu $c $n" && timeout 90 ncu --clock-control none --metrics $MET --csv -c 2 -k regex:sdpa_ws \
      $TP $H/run.py bench --lib $L --dims 512 --configs $c --lengths $n --iters 1 --no-torch \
      --q-tile-groups $([ $n = 2048 ] && echo 4 || echo 1) --hkv 4 2>/dev/null | grep '"' | tail -n +2 \
      | awk -F'","' -v c=$c -v n=$n '{print c, n, $(NF-2), $(NF-1), $NF}' | tee -a $OUT/ncu.txt
  done
done
tar -C /tmp -czf $OUT/s25g.tgz s25g
echo "done in $((SECONDS - T0)) s"
