#!/bin/bash
# Device call s17e (issues 25, 19): the landed series' cuda-sm90 wheel through MLX:
# head dims 192 / 256 on MLX's default (wgmma) tiles, waited and 8 queued; the
# 99 KB tiles forced (192 / 256 / 512) and with GB10's occupancy (one block per
# SM); the wgmma tiles with two query-tile groups per head
# (MLX_CUDA_SDPA_TILED_Q_TILE_GROUPS=2); upstream's fallback; torch flash / cuDNN / mem-efficient in its own process.
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
M=$OUT/cases.jsonl
timeout 80 $P scripts/mlx_sdpa_cases.py --label default --iters 3 --dims 192 256 --kinds prefill chunked --out $M > /dev/null 2>&1
timeout 40 $P scripts/mlx_sdpa_cases.py --label default-queued8 --iters 3 --queued 8 --kinds prefill --dims 192 256 --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED_Q_TILE_GROUPS=2 timeout 50 $P scripts/mlx_sdpa_cases.py --label default-g2 --iters 3 --dims 192 256 --kinds prefill --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED_SMALL=1 timeout 90 $P scripts/mlx_sdpa_cases.py --label small --iters 3 --dims 192 256 512 --kinds prefill chunked --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED_SMALL=1 MLX_CUDA_SDPA_TILED_ONE_BLOCK_PER_SM=1 timeout 70 $P scripts/mlx_sdpa_cases.py --label small-proxy --iters 3 --dims 256 512 --kinds prefill chunked --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED=0 MLX_CUDA_SDPA_DECODE=0 MLX_CUDA_USE_CUDNN_SDPA=0 MLX_SDPA_FALLBACK_CHUNK_BYTES=0 timeout 90 $P scripts/mlx_sdpa_cases.py --label fallback --iters 3 --dims 192 256 512 --kinds prefill chunked --out $M > /dev/null 2>&1
timeout 70 $TP scripts/torch_sdpa_cases.py --iters 3 --dims 192 256 512 --backends flash cudnn efficient --out $M > /dev/null 2>&1
python3 - <<'P' | tee $OUT/mlx.txt
import json,os
for l in open(os.environ["OUT"]+"/cases.jsonl"):
    r=json.loads(l)
    if r['kind']=='floor': print(r['label'], 'floor', f"{r['ms']*1e3:.1f} us"); continue
    print(r['label'], r.get('backend',''), r['kind'], r['D'], r.get('kv_heads',''), r['qL'], r['kL'], f"{r['ms']:.3f} ms {r['TFLOPs']:.0f} TF/s" if 'TFLOPs' in r else (f"{r['ms']:.3f} ms {r.get('TB_s',0):.2f} TB/s" if 'ms' in r else r.get('error','')[:60]), f"peak+{r['peak_extra_gib']:.2f}" if 'peak_extra_gib' in r else "")
P
