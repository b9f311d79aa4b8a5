#!/bin/bash
# Device call s21i (issue 25), inline on the same warm H100: F against C
# at head dim 256 (wgmma configuration, one group per head, 8k / 32k) and
# in the 99 KB configuration (GB10's, four groups, 8k) at 256 / 512, two
# alternate rounds. Carries .carry/libC, .carry/libF.
. scripts/device_call.sh; budget_start 80; J=/tmp/q2; mkdir -p $J
F=.carry/libF/libattn_harness.so; C=.carry/libC/libattn_harness.so
for r in 1 2; do
  for l in C F; do
    L=$([ $l = C ] && echo $C || echo $F)
    go $l$r && timeout 30 $TP $H/run.py bench --lib $L --dims 256 --configs hopper --lengths 8192 32768 --iters 5 --no-torch --q-tile-groups 1 --json $J/${l}${r}_h.json >/dev/null 2>&1
    go $l$r && timeout 30 $TP $H/run.py bench --lib $L --dims 256 512 --configs small --lengths 8192 --iters 3 --no-torch --q-tile-groups 4 --json $J/${l}${r}_s.json >/dev/null 2>&1
  done
done
tar -C /tmp -czf $OUT/q2.tgz q2; python3 scripts/device_summary.py harness $J/*.json; echo "done in $((SECONDS-T0)) s"
