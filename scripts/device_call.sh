# Helpers for device call scripts (docs/h200-runbook.md), sourced from the
# repository root on the device machine:
#
#   . scripts/device_call.sh
#   budget_start 480             # steps past 480 s are skipped, and say so
#   go "step name" && command    # run a step while the budget lasts
#   mlx_venv .carry/whl          # /tmp/tv: the wheel over torch's numpy
#   harness_build SRC OUT &      # SRC: the series' headers and harness.cu
#   harness_bench DIR NAME LIB "CONFIGS" D "LENGTHS" GROUPS [run.py options]
#
# Every call script before session 22 spelled these out itself.

export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python   # torch, cuDNN, pytest, numpy
P=/tmp/tv/bin/python             # the wheel under test, after mlx_venv
H=scripts/attn_harness

budget_start() { BUDGET=${BUDGET:-$1}; T0=$SECONDS; }

go() {
  [ $((SECONDS - T0)) -lt "$BUDGET" ] || { echo "skipped (past ${BUDGET} s): $*"; return 1; }
}

# A venv with the wheel(s) in $1 and the pure-Python wheels in .carry/wh2,
# reusing the torch venv's numpy and CUDA libraries.
mlx_venv() {
  [ -x "$P" ] && return 0
  local sp
  sp=$($TP -c "import site; print(site.getsitepackages()[0])")
  $TP -m venv /tmp/tv || return 3
  /tmp/tv/bin/pip install -q --no-index --no-deps "$1"/mlx-*.whl .carry/wh2/*.whl || return 4
  for d in nvidia numpy numpy.libs; do
    [ -e "$sp/$d" ] && ln -s "$sp/$d" /tmp/tv/lib/python3.12/site-packages/$d
  done
  $P -c "import mlx.core as mx; print(mx.__version__, mx.default_device())"
}

# The harness library from a copy of the series' headers and harness.cu
# (about 5 min on one core); OUT/build.txt says how it went.
harness_build() {
  local src=$1 out=$2 t=$SECONDS
  local nvcc
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  mkdir -p "$out"
  $nvcc -O3 -std=c++17 -arch=sm_90a --shared -Xcompiler -fPIC -lineinfo \
    -I"$src" "$src/harness.cu" -o "$out/libattn_harness.so.part" > "$out/build.txt" 2>&1 &&
    mv "$out/libattn_harness.so.part" "$out/libattn_harness.so" &&
    echo "harness built in $((SECONDS - t)) s" >> "$out/build.txt"
}

# One `run.py bench` of a harness library, its JSON in DIR, named after NAME,
# the configurations, head dim, lengths and any extra options (spaces and
# dashes dropped: a name with a space would split the --json argument).
harness_bench() {
  local dir=$1 name=$2 lib=$3 configs=$4 dim=$5 lengths=$6 groups=$7
  shift 7
  local tag
  tag=$(echo "$*" | tr -d ' -')
  go "$name $configs D$dim $lengths $*" &&
    timeout 90 $TP $H/run.py bench --lib "$lib" --dims "$dim" --configs $configs \
      --lengths $lengths --iters 5 --no-torch --q-tile-groups "$groups" "$@" \
      --json "$dir/${name}_${configs// /-}_d${dim}_${lengths// /-}${tag:+_$tag}.json" \
      > /dev/null 2>&1
}
