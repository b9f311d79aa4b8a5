#!/bin/bash
# Device call s20a (issue 25): the block order's query-tile groups for the
# wgmma tiles at 192 / 256 (MLX: one tile per group, "none" here) and the
# warp-specialized block at 512 (MLX: 4), after s19a's g4 reading at 256.
# Harness build s19a (../../h200-2026-12-06/calls/s19a.sh header): hopper =
# MLX's tiles, cand13 at 192 = WidePvTraits<192, 112>. Two alternate runs;
# torch cuDNN in the first.
export PYTHONUNBUFFERED=1
BUDGET=${BUDGET:-400}
T0=$SECONDS
go() { [ $((SECONDS - T0)) -lt $BUDGET ] || { echo "skipped (past ${BUDGET} s): $*"; return 1; }; }
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
L=/tmp/s19a/libattn_harness.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
[ -f $L ] || { mkdir -p /tmp/s19a && cp .carry/s19a/libattn_harness.so $L; } || exit 6
LEN="2048 4096 8192 16384 32768"
for r in 1 2; do
  for g in none 1 2 4 8; do
    G=$([ $g = none ] || echo --q-tile-groups $g)
    NT=$([ $r = 1 ] && [ $g = none ] || echo --no-torch)
    go "D256 g$g run $r" && timeout 60 $TP $H/run.py bench --lib $L --dims 256 --configs hopper --lengths $LEN --iters 5 $NT $G --json $OUT/g_d256_g${g}_$r.json > /dev/null 2>&1
    go "D192 g$g run $r" && timeout 60 $TP $H/run.py bench --lib $L --dims 192 --configs hopper cand13 --lengths $LEN --iters 5 $NT $G --json $OUT/g_d192_g${g}_$r.json > /dev/null 2>&1
  done
  for hkv in 16 4; do
    for g in 1 4; do
      go "D512 $hkv g$g run $r" && timeout 60 $TP $H/run.py bench --lib $L --dims 512 --configs hopper --lengths $LEN --iters 5 --no-torch --hkv $hkv --q-tile-groups $g --json $OUT/g_d512_h${hkv}_g${g}_$r.json > /dev/null 2>&1
    done
  done
done
python3 scripts/device_summary.py harness $OUT/g_*.json | tee $OUT/harness.txt
