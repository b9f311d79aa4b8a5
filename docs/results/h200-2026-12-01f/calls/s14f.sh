#!/bin/bash
# Device call s14f (issue 19 / 25): the landed kernels (small at 192 / 256 refill K's slot early, kTmaEarlyRefill): harness check of small at 192 / 256; the cuda-sm90 wheel of the landed series through MLX: small (99 KB), GB10's one-block proxy, upstream's fallback, torch FA2 (separate processes, one call); upstream test_fast_sdpa, our suite and memory bounds on small; racecheck on small; early refill against refill after the softmax at 192 (cand7).
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
G="--q-tile-groups 4"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 30 $TP $H/run.py check --config small --dims 192 256 --sample 160 --seed 51 $G 2>&1 | tail -1 | sed "s/^/check small 192 256, 160 sampled: /"
SP=$($TP -c "import site;print(site.getsitepackages()[0])")
$TP -m venv /tmp/tv || exit 3
VS=/tmp/tv/lib/python3.12/site-packages
/tmp/tv/bin/pip install -q --no-index --no-deps .carry/whl/mlx-*.whl .carry/wh2/{pytest,pluggy,iniconfig,packaging,pygments}-*.whl || exit 4
for d in nvidia numpy numpy.libs; do [ -e $SP/$d ] && ln -s $SP/$d $VS/$d; done
P=/tmp/tv/bin/python
$P -c "import mlx.core as mx; print(mx.__version__, mx.default_device())" 2>&1
M=$OUT/cases.jsonl
K="--kinds prefill chunked --iters 3"
MLX_CUDA_SDPA_TILED_SMALL=1 timeout 60 $P scripts/mlx_sdpa_cases.py --label small $K --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED=0 MLX_CUDA_SDPA_DECODE=0 MLX_CUDA_USE_CUDNN_SDPA=0 MLX_SDPA_FALLBACK_CHUNK_BYTES=0 timeout 55 $P scripts/mlx_sdpa_cases.py --label fallback $K --dims 256 512 --out $M > /dev/null 2>&1
timeout 40 $TP scripts/torch_sdpa_cases.py --iters 3 --backends flash --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED_SMALL=1 MLX_CUDA_SDPA_TILED_ONE_BLOCK_PER_SM=1 timeout 30 $P scripts/mlx_sdpa_cases.py --label small-one-block $K --dims 256 512 --out $M > /dev/null 2>&1
python3 - <<'P'
import json,os
for l in open(os.environ["OUT"]+"/cases.jsonl"):
    r=json.loads(l); print(r['label'], r['kind'], r['D'], r['qL'], r['kL'], f"{r['ms']:.3f} ms {r['TFLOPs']:.0f} TF/s" if 'ms' in r else r.get('error','')[:60], f"peak+{r['peak_extra_gib']:.2f}" if 'peak_extra_gib' in r else "")
P
(cd .carry/up && MLX_CUDA_SDPA_TILED_SMALL=1 timeout -s INT 40 $P -m pytest -q -p no:cacheprovider test_fast_sdpa.py 2>&1 | tail -1) | sed "s/^/upstream small: /" | tee $OUT/tests.txt
S=mlx_builder/suites/sdpa
MLX_CUDA_SDPA_TILED_SMALL=1 timeout -s INT 50 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_sdpa_large_head.py -k "not decode" 2>&1 | tail -1 | sed "s/^/suite small: /" | tee -a $OUT/tests.txt
MLX_CUDA_SDPA_TILED_SMALL=1 timeout -s INT 40 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_memory.py 2>&1 | tail -1 | sed "s/^/memory small: /" | tee -a $OUT/tests.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 25 $CS --tool racecheck $TP $H/run.py check --config small --dims 192 256 --quick --sample 2 --seed 5 --q-tile-groups 3 > /tmp/san.txt 2>&1; echo "racecheck small 192 256 rc=$? $(grep -E 'SUMMARY' /tmp/san.txt | tail -1) $(grep -E 'passed' /tmp/san.txt | tail -1)" | tee -a $OUT/tests.txt
timeout 30 $TP $H/run.py bench --dims 192 --configs small cand7 --lengths 2048 8192 32768 --iters 5 --no-torch $G --json $OUT/ab192.json 2>&1 | tail -0
python3 -c "
import json,os
for x in json.load(open(os.environ['OUT']+'/ab192.json')): print('ab192', x['D'], x['L'], ' '.join(f'{k[5:]} {v:.1f}' for k,v in x.items() if k.startswith('ours_') and not k.endswith('_ms')))
"
