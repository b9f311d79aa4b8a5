#!/bin/bash
# Device call s21h (issue 25), inline on the same warm H100: library F
# (next/README.md: the softmax's trees and folded scale, and QkSplit at
# 512 in cand2 / cand12 / cand13 = 8 / 16 / 24 early steps) against C (the
# series as landed), D512 at 8k / 32k, one group per head, two rounds; a
# sampled check of cand12 first. Carries .carry/libC, .carry/libF.
. scripts/device_call.sh; budget_start 120; J=/tmp/q; mkdir -p $J
F=.carry/libF/libattn_harness.so; C=.carry/libC/libattn_harness.so
go chk && timeout 40 $TP $H/run.py check --lib $F --config cand12 --dims 512 --seed 5 --sample 12 2>&1 | tail -1 | sed "s/^/check F cand12: /"
for r in 1 2; do
  go C$r && timeout 40 $TP $H/run.py bench --lib $C --dims 512 --configs hopper --lengths 8192 32768 --iters 5 --no-torch --q-tile-groups 1 --json $J/C$r.json >/dev/null 2>&1
  go F$r && timeout 60 $TP $H/run.py bench --lib $F --dims 512 --configs hopper cand2 cand12 cand13 --lengths 8192 32768 --iters 5 --no-torch --q-tile-groups 1 --json $J/F$r.json >/dev/null 2>&1
done
tar -C /tmp -czf $OUT/q.tgz q; python3 scripts/device_summary.py harness $J/*.json; echo "done in $((SECONDS-T0)) s"
