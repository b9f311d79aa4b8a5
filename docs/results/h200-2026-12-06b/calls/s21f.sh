#!/bin/bash
# Device call s21f (issue 25), inline right after s21e on the same warm
# H100 with library B: B.hopper against B.cand14 where s21d / s21e did not
# look: D256 / D192 at 1k and 4k (one tile per group) and mlx-lm's chunked
# step (2048 queries against 8k / 32k keys), D512 with 4 KV heads for 2048
# queries against 32k keys (four groups); three alternate rounds.
TP=/opt/torch/.venv/bin/python; H=scripts/attn_harness; B=.carry/libB/libattn_harness.so; J=/tmp/s21f; mkdir -p $J; T0=$SECONDS
for r in 1 2 3; do
  for d in 256 192; do
    timeout 60 $TP $H/run.py bench --lib $B --dims $d --configs hopper cand14 --lengths 1024 4096 --iters 5 --no-torch --json $J/B${r}_d${d}_short.json >/dev/null 2>&1
    timeout 60 $TP $H/run.py bench --lib $B --dims $d --configs hopper cand14 --lengths 8192 32768 --q-len 2048 --iters 5 --no-torch --json $J/B${r}_d${d}_chunked.json >/dev/null 2>&1
  done
  timeout 60 $TP $H/run.py bench --lib $B --dims 512 --configs hopper cand14 --lengths 32768 --q-len 2048 --hkv 4 --iters 5 --no-torch --q-tile-groups 4 --json $J/B${r}_d512_chunked.json >/dev/null 2>&1
  [ $((SECONDS-T0)) -gt 200 ] && break
done
tar -C /tmp -czf $OUT/s21f.tgz s21f; python3 scripts/device_summary.py harness $J/*.json; echo "done in $((SECONDS-T0)) s"
