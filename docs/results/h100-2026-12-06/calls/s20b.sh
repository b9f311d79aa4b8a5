#!/bin/bash
# Device call s20b (issue 25): the block order's query-tile groups through
# MLX, on the landed series' cuda-sm90 wheel (the one s19b ran), set by
# MLX_CUDA_SDPA_TILED_Q_TILE_GROUPS: the default (one tile per group at
# 192 / 256, four groups at 512), one group per head, eight groups. Each
# setting in its own process; queued 8 per wait, two alternate rounds, then
# one round waited for. Then the suite's long and 4097-token cases with one
# group per head, against float64. Carries .carry/whl and .carry/wh2.
export PYTHONUNBUFFERED=1
BUDGET=${BUDGET:-240}
T0=$SECONDS
go() { [ $((SECONDS - T0)) -lt $BUDGET ] || { echo "skipped (past ${BUDGET} s): $*"; return 1; }; }
TP=/opt/torch/.venv/bin/python
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
if [ ! -x /tmp/tv/bin/python ]; then
  SP=$($TP -c "import site;print(site.getsitepackages()[0])")
  $TP -m venv /tmp/tv || exit 3
  VS=/tmp/tv/lib/python3.12/site-packages
  /tmp/tv/bin/pip install -q --no-index --no-deps .carry/whl/mlx-*.whl .carry/wh2/*.whl || exit 4
  for d in nvidia numpy numpy.libs; do [ -e $SP/$d ] && ln -s $SP/$d $VS/$d; done
fi
P=/tmp/tv/bin/python
M=$OUT/cases.jsonl
run() { # label, groups (0: the default), extra options
  local label=$1 g=$2; shift 2
  go "$label" || return
  if [ $g = 0 ]; then
    timeout 60 $P scripts/mlx_sdpa_cases.py --label $label --iters 3 --kinds prefill chunked --out $M "$@" > /dev/null 2>&1
  else
    MLX_CUDA_SDPA_TILED_Q_TILE_GROUPS=$g timeout 60 $P scripts/mlx_sdpa_cases.py --label $label --iters 3 --kinds prefill chunked --out $M "$@" > /dev/null 2>&1
  fi
}
for r in 1 2; do
  for g in 0 1 8; do run q8-g$g-r$r $g --queued 8; done
done
for g in 0 1 8; do run waited-g$g $g; done
S=mlx_builder/suites/sdpa
go "suite, one group" && MLX_BUILDER_LONG=1 MLX_CUDA_SDPA_TILED_Q_TILE_GROUPS=1 timeout -s INT 90 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_sdpa_large_head.py -k "test_lengths and (D192 or D256 or D512) and (q16384k16384 or q4097k4097 or q1000k4097 or q1000k16384)" 2>&1 | tail -1 | sed "s/^/suite, one group per head: /" | tee $OUT/tests.txt
python3 scripts/device_summary.py cases $M > $OUT/mlx.txt
echo "done in $((SECONDS - T0)) s"
