#!/bin/bash
# Device call s19b (issue 25): the landed series' cuda-sm90 wheel (built here
# from the series' bundle) through MLX: prefill at 192 / 256 / 512 (512 also
# at gemma-4's 4 KV heads) and mlx-lm's chunked step, each call
# waited for and 8 queued per wait; upstream's fallback (256 / 512) on the same wheel
# (every patched path off); torch flash / cuDNN / mem-efficient in its own
# process. First upstream's test_fast_sdpa (.carry/up: the file and its
# mlx_tests.py at MLX 846d176) and the memory bounds. Carries .carry/whl (the
# wheel), .carry/wh2 (pytest and its needs) and .carry/up. With MIN=1 only
# the tests and prefill at 256 / 512 beside torch (for little device time).
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
SP=$($TP -c "import site;print(site.getsitepackages()[0])")
$TP -m venv /tmp/tv || exit 3
VS=/tmp/tv/lib/python3.12/site-packages
/tmp/tv/bin/pip install -q --no-index --no-deps .carry/whl/mlx-*.whl .carry/wh2/*.whl || exit 4
for d in nvidia numpy numpy.libs; do [ -e $SP/$d ] && ln -s $SP/$d $VS/$d; done
P=/tmp/tv/bin/python
$P -c "import mlx.core as mx; print(mx.__version__, mx.default_device())" 2>&1
(cd .carry/up && timeout -s INT 60 $P -m pytest -q -p no:cacheprovider test_fast_sdpa.py 2>&1 | tail -1) | sed "s/^/upstream test_fast_sdpa: /" | tee $OUT/tests.txt
S=mlx_builder/suites/sdpa
timeout -s INT 30 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_memory.py 2>&1 | tail -1 | sed "s/^/memory: /" | tee -a $OUT/tests.txt
M=$OUT/cases.jsonl
if [ "$MIN" = 1 ]; then
  timeout 45 $P scripts/mlx_sdpa_cases.py --label default --iters 3 --dims 256 512 --kinds prefill --out $M > /dev/null 2>&1
  timeout 45 $TP scripts/torch_sdpa_cases.py --iters 3 --dims 256 512 --kinds prefill --backends flash cudnn efficient --out $M > /dev/null 2>&1
else
  timeout 90 $P scripts/mlx_sdpa_cases.py --label default --iters 3 --kinds prefill chunked --out $M > /dev/null 2>&1
  timeout 45 $P scripts/mlx_sdpa_cases.py --label default-queued8 --iters 3 --queued 8 --kinds prefill --out $M > /dev/null 2>&1
  MLX_CUDA_SDPA_TILED=0 MLX_CUDA_SDPA_DECODE=0 MLX_CUDA_USE_CUDNN_SDPA=0 MLX_SDPA_FALLBACK_CHUNK_BYTES=0 timeout 60 $P scripts/mlx_sdpa_cases.py --label fallback --iters 2 --dims 256 512 --kinds prefill chunked --out $M > /dev/null 2>&1
  timeout 60 $TP scripts/torch_sdpa_cases.py --iters 3 --backends flash cudnn efficient --out $M > /dev/null 2>&1
fi
python3 scripts/device_summary.py cases $M | tee $OUT/mlx.txt
