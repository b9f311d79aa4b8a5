#!/bin/bash
# Device call s21e (issue 25), run inline right after s21d on the same warm
# H100 with the same two libraries: D512 at 8k / 32k (32 / 16 and 32 / 4
# heads, one group per head) of A.hopper, B.hopper and B.cand14, and D256 /
# D192 at 16k of B.hopper and B.cand14; three alternate rounds.
TP=/opt/torch/.venv/bin/python; H=scripts/attn_harness; A=.carry/libA/libattn_harness.so; B=.carry/libB/libattn_harness.so; J=/tmp/s21e; mkdir -p $J; T0=$SECONDS
for r in 1 2 3; do
  for kv in 16 4; do
    timeout 60 $TP $H/run.py bench --lib $A --dims 512 --configs hopper --lengths 8192 32768 --iters 5 --no-torch --q-tile-groups 1 --hkv $kv --json $J/A${r}_d512_kv${kv}.json >/dev/null 2>&1
    timeout 60 $TP $H/run.py bench --lib $B --dims 512 --configs hopper cand14 --lengths 8192 32768 --iters 5 --no-torch --q-tile-groups 1 --hkv $kv --json $J/B${r}_d512_kv${kv}.json >/dev/null 2>&1
  done
  for d in 256 192; do
    timeout 60 $TP $H/run.py bench --lib $B --dims $d --configs hopper cand14 --lengths 16384 --iters 5 --no-torch --q-tile-groups 1 --json $J/B${r}_d${d}_16k.json >/dev/null 2>&1
  done
  [ $((SECONDS-T0)) -gt 230 ] && break
done
tar -C /tmp -czf $OUT/s21e.tgz s21e; python3 scripts/device_summary.py harness $J/*.json; echo "done in $((SECONDS-T0)) s"
