#!/bin/bash
# Device call 3 of session 24 (issue 25): are call 2's long-length
# differences between MLX's block and cand17 (same loop, O staged) the
# blocks' own or the order they ran in? The same library SO with the
# configurations in the reverse order, twice, then ncu's time, L2 hit rate
# and DRAM bytes of each at 32k (32 / 16 heads) and mlx-lm's 2048 x 32k
# step (4 KV heads). Carries .carry/libSO.
. scripts/device_call.sh
budget_start 300
J=/tmp/s27b; mkdir -p $J
L=.carry/libSO/libattn_harness.so
C="cand18 cand17 cand15 hopper"
for R in 1 2; do
  harness_bench $J SOrev_r$R $L "$C" 512 "32768" 4 --hkv 4 --q-len 2048
  harness_bench $J SOrev_r$R $L "$C" 512 "32768" 1
  harness_bench $J SOrev_r$R $L "$C" 512 "32768" 1 --hkv 4
  harness_bench $J SOrev_r$R $L "$C" 512 "2048" 4
done
python3 scripts/device_summary.py harness $J/*.json | tee $OUT/harness.txt
MET=gpu__time_duration.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
for c in hopper cand17 cand18; do
  go "ncu $c chunk" && timeout 60 ncu --clock-control none --metrics $MET --csv -c 2 -k regex:sdpa_ws \
    $TP $H/run.py bench --lib $L --dims 512 --configs $c --lengths 32768 --q-len 2048 --iters 1 --no-torch \
    --q-tile-groups 4 --hkv 4 2>/dev/null | grep '"' | tail -n +2 \
    | awk -F'","' -v c=$c '{print c, "2048x32768/4kv", $(NF-2), $(NF-1), $NF}' | tee -a $OUT/ncu.txt
  go "ncu $c 32k" && timeout 90 ncu --clock-control none --metrics $MET --csv -c 1 -k regex:sdpa_ws \
    $TP $H/run.py bench --lib $L --dims 512 --configs $c --lengths 32768 --iters 1 --no-torch \
    --q-tile-groups 1 --hkv 16 2>/dev/null | grep '"' | tail -n +2 \
    | awk -F'","' -v c=$c '{print c, "32768/16kv", $(NF-2), $(NF-1), $NF}' | tee -a $OUT/ncu.txt
done
tar -C /tmp -czf $OUT/s27b.tgz s27b
echo "done in $((SECONDS - T0)) s"
