#!/bin/bash
# Planned device call s24a (issue 25), not run: session 22 had no device
# time left. The score warpgroup of the 512 block waits for its K tile
# (call 3's stall samples). Two K slots of 48 keys are all
# that fit; with 32-key tiles a third K slot fits. Harness library K (the
# series as landed, harness.cu with cand15 = KCopiesByPv<512, 32 keys, 3 K
# slots, 3 V slots>, cand16 = the same with 2 V slots) against MLX's
# (hopper): checks, then 8k / 32k and 2k, alternating. Library K:
# `run.py build --mlx-src <the series' tree> --arch 90a` with
# k3_slots_harness.diff applied to harness.cu and run.py.
. scripts/device_call.sh
budget_start 75
J=/tmp/s24a; mkdir -p $J
L=.carry/libK/libattn_harness.so
for c in cand15 cand16; do
  go "check $c" && timeout 30 $TP $H/run.py check --lib $L --config $c --dims 512 --seed 236 --sample 24 2>&1 | tail -1 | sed "s/^/check $c D512 (24 sampled): /"
done
for R in 1 2; do
  harness_bench $J K_r$R $L "hopper cand15 cand16" 512 "8192 32768" 1
  harness_bench $J K_r$R $L "hopper cand15 cand16" 512 "2048" 4
done
python3 scripts/device_summary.py harness $J/*.json | tee $OUT/harness.txt
tar -C /tmp -czf $OUT/s24a.tgz s24a
echo "done in $((SECONDS - T0)) s"
