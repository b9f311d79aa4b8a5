#!/bin/bash
# Device call s21a (issue 25): the series' cuda-sm90 wheel with the block
# order of patch 0020 (one group per head for the wgmma tiles from 128
# query tiles per head; mlx-0.32.2+mlxb.846d176227a0.dbfb4866.cu90a, built
# here from the series' bundle) through MLX. Upstream's test_fast_sdpa (.carry/up:
# the file and its mlx_tests.py at MLX 846d176) and the memory bounds first;
# then prefill at 192 / 256 / 512 (512 also at gemma-4's 4 KV heads) and
# mlx-lm's chunked step, each call waited for and 8 queued per wait;
# upstream's fallback on the same wheel (every patched path off); torch
# flash / cuDNN / mem-efficient in its own process. Meanwhile one CPU core
# builds the harness library from .carry/s21src (the series' headers and
# harness.cu) into /tmp/s21 for s21b. Carries .carry/whl_new, .carry/wh2,
# .carry/up, .carry/s21src.
export PYTHONUNBUFFERED=1
BUDGET=${BUDGET:-500}
T0=$SECONDS
go() { [ $((SECONDS - T0)) -lt $BUDGET ] || { echo "skipped (past ${BUDGET} s): $*"; return 1; }; }
TP=/opt/torch/.venv/bin/python
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/s21
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
(T=$SECONDS; $NVCC -O3 -std=c++17 -arch=sm_90a --shared -Xcompiler -fPIC -lineinfo -I.carry/s21src .carry/s21src/harness.cu -o /tmp/s21/libattn_harness.so.part > /tmp/s21/build.txt 2>&1 && mv /tmp/s21/libattn_harness.so.part /tmp/s21/libattn_harness.so && echo "harness built in $((SECONDS - T)) s" >> /tmp/s21/build.txt) &
SP=$($TP -c "import site;print(site.getsitepackages()[0])")
$TP -m venv /tmp/tv || exit 3
VS=/tmp/tv/lib/python3.12/site-packages
/tmp/tv/bin/pip install -q --no-index --no-deps .carry/whl_new/mlx-*.whl .carry/wh2/*.whl || exit 4
for d in nvidia numpy numpy.libs; do [ -e $SP/$d ] && ln -s $SP/$d $VS/$d; done
P=/tmp/tv/bin/python
$P -c "import mlx.core as mx; print(mx.__version__, mx.default_device())" 2>&1
(cd .carry/up && timeout -s INT 60 $P -m pytest -q -p no:cacheprovider test_fast_sdpa.py 2>&1 | tail -1) | sed "s/^/upstream test_fast_sdpa: /" | tee $OUT/tests.txt
S=mlx_builder/suites/sdpa
timeout -s INT 40 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_memory.py 2>&1 | tail -1 | sed "s/^/memory: /" | tee -a $OUT/tests.txt
M=/tmp/s21/cases.jsonl
go "waited" && timeout 100 $P scripts/mlx_sdpa_cases.py --label default --iters 3 --kinds prefill chunked --out $M > /dev/null 2>&1
go "queued" && timeout 60 $P scripts/mlx_sdpa_cases.py --label default-queued8 --iters 3 --queued 8 --kinds prefill --out $M > /dev/null 2>&1
go "torch" && timeout 70 $TP scripts/torch_sdpa_cases.py --iters 3 --backends flash cudnn efficient --out $M > /dev/null 2>&1
go "fallback" && MLX_CUDA_SDPA_TILED=0 MLX_CUDA_SDPA_DECODE=0 MLX_CUDA_USE_CUDNN_SDPA=0 MLX_SDPA_FALLBACK_CHUNK_BYTES=0 timeout 60 $P scripts/mlx_sdpa_cases.py --label fallback --iters 2 --dims 256 512 --kinds prefill chunked --out $M > /dev/null 2>&1
go "queued, second round" && timeout 60 $P scripts/mlx_sdpa_cases.py --label default-queued8-r2 --iters 3 --queued 8 --kinds prefill --out $M > /dev/null 2>&1
cp $M $OUT/cases.jsonl
python3 scripts/device_summary.py cases $M | tee $OUT/mlx.txt
wait
cat /tmp/s21/build.txt | tail -3
echo "done in $((SECONDS - T0)) s"
