#!/bin/bash
# Device call s12h (issue 19): the cuda-sm90 wheel of this session's series through MLX: medium / small / large / wgmma / fallback, block order, upstream test_fast_sdpa, our SDPA suite on the medium and small configurations, memory bounds.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
SP=$($TP -c "import site;print(site.getsitepackages()[0])")
$TP -m venv /tmp/tv || exit 3
VS=/tmp/tv/lib/python3.12/site-packages
/tmp/tv/bin/pip install -q --no-index --no-deps .carry/whl/mlx-*.whl .carry/wheelhouse/{pytest,pluggy,iniconfig,packaging,pygments}-*.whl || exit 4
for d in nvidia numpy numpy.libs; do [ -e $SP/$d ] && ln -s $SP/$d $VS/$d; done
P=/tmp/tv/bin/python
$P -c "import mlx.core as mx; print(mx.__version__, mx.default_device())" 2>&1 | tee $OUT/probe.txt
M=$OUT/cases.jsonl
K="--kinds prefill chunked"
$P scripts/mlx_sdpa_cases.py --label default $K --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED_Q_TILE_GROUPS=1073741824 $P scripts/mlx_sdpa_cases.py --label default-order-before $K --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED_MEDIUM=1 $P scripts/mlx_sdpa_cases.py --label medium $K --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED_SMALL=1 $P scripts/mlx_sdpa_cases.py --label small $K --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED_WGMMA=0 $P scripts/mlx_sdpa_cases.py --label mma-large $K --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED=0 MLX_CUDA_SDPA_DECODE=0 MLX_CUDA_USE_CUDNN_SDPA=0 MLX_SDPA_FALLBACK_CHUNK_BYTES=0 $P scripts/mlx_sdpa_cases.py --label fallback $K --out $M > /dev/null 2>&1
cut -c1-200 $M
(cd .carry/up && timeout -s INT 50 $P -m pytest -q -p no:cacheprovider test_fast_sdpa.py 2>&1 | tail -1) | sed "s/^/upstream default: /" | tee $OUT/upstream.txt
(cd .carry/up && MLX_CUDA_SDPA_TILED_MEDIUM=1 timeout -s INT 50 $P -m pytest -q -p no:cacheprovider test_fast_sdpa.py 2>&1 | tail -1) | sed "s/^/upstream medium: /" | tee -a $OUT/upstream.txt
MLX_CUDA_SDPA_TILED_MEDIUM=1 timeout -s INT 100 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=tests/sdpa tests/sdpa/test_sdpa_large_head.py -k "not decode" 2>&1 | tail -1 | sed "s/^/suite medium: /" | tee $OUT/suite.txt
MLX_CUDA_SDPA_TILED_SMALL=1 timeout -s INT 60 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=tests/sdpa tests/sdpa/test_sdpa_large_head.py -k "not decode" 2>&1 | tail -1 | sed "s/^/suite small: /" | tee -a $OUT/suite.txt
timeout -s INT 90 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=tests/sdpa tests/sdpa/test_memory.py 2>&1 | tail -1 | sed "s/^/memory default: /" | tee -a $OUT/suite.txt
MLX_CUDA_SDPA_TILED_MEDIUM=1 timeout -s INT 60 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=tests/sdpa tests/sdpa/test_memory.py 2>&1 | tail -1 | sed "s/^/memory medium: /" | tee -a $OUT/suite.txt
