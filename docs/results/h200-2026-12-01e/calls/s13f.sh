#!/bin/bash
# Device call s13f (issue 19): the half-Q ring at head dim 192 as MLX's small tiles: harness check over every configuration, sanitizers on D192 small; the cuda-sm90 wheel through MLX (D192/D256 mma.sync variants beside torch, same clock), upstream test_fast_sdpa, our suite on small, memory bounds.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
timeout 170 $TP $H/run.py check --config all --q-tile-groups 4 --json $OUT/check_all.json 2>&1 | tail -1 | sed "s/^/check all: /"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for t in memcheck synccheck racecheck; do timeout 70 $CS --tool $t $TP $H/run.py check --config small --dims 192 --quick --sample 2 --seed 8 --q-tile-groups 3 > /tmp/san_$t.txt 2>&1; echo "$t small D192 rc=$? $(grep -E 'SUMMARY' /tmp/san_$t.txt | tail -1) $(grep -E 'passed' /tmp/san_$t.txt | tail -1)"; done | tee $OUT/sanitizers.txt
SP=$($TP -c "import site;print(site.getsitepackages()[0])")
$TP -m venv /tmp/tv || exit 3
VS=/tmp/tv/lib/python3.12/site-packages
/tmp/tv/bin/pip install -q --no-index --no-deps .carry/whl/mlx-*.whl .carry/wheelhouse/{pytest,pluggy,iniconfig,packaging,pygments}-*.whl || exit 4
for d in nvidia numpy numpy.libs; do [ -e $SP/$d ] && ln -s $SP/$d $VS/$d; done
P=/tmp/tv/bin/python
$P -c "import mlx.core as mx; print(mx.__version__, mx.default_device())" 2>&1 | tee $OUT/probe.txt
M=$OUT/cases.jsonl
K="--kinds prefill chunked --dims 192 256"
MLX_CUDA_SDPA_TILED_SMALL=1 $P scripts/mlx_sdpa_cases.py --label small $K --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED_SMALL=1 MLX_CUDA_SDPA_TILED_ONE_BLOCK_PER_SM=1 $P scripts/mlx_sdpa_cases.py --label small-one-block $K --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED_WGMMA=0 $P scripts/mlx_sdpa_cases.py --label mma-large $K --out $M > /dev/null 2>&1
$P scripts/mlx_sdpa_cases.py --label default --kinds prefill --dims 192 --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED=0 MLX_CUDA_SDPA_DECODE=0 MLX_CUDA_USE_CUDNN_SDPA=0 MLX_SDPA_FALLBACK_CHUNK_BYTES=0 $P scripts/mlx_sdpa_cases.py --label fallback --kinds prefill --dims 192 --out $M > /dev/null 2>&1
$TP scripts/torch_sdpa_cases.py --kinds prefill --dims 192 --backends flash cudnn efficient >> $M 2>/dev/null
python3 - <<'P'
import json,os
for l in open(os.environ["OUT"]+"/cases.jsonl"):
    r=json.loads(l); print(r['label'], r['kind'], r['D'], r['qL'], r['kL'], f"{r['ms']:.3f} ms {r['TFLOPs']:.0f} TF/s" if 'ms' in r else r.get('error','')[:60], f"peak+{r['peak_extra_gib']:.2f}" if 'peak_extra_gib' in r else "")
P
(cd .carry/up && MLX_CUDA_SDPA_TILED_SMALL=1 timeout -s INT 50 $P -m pytest -q -p no:cacheprovider test_fast_sdpa.py 2>&1 | tail -1) | sed "s/^/upstream small: /" | tee $OUT/tests.txt
(cd .carry/up && timeout -s INT 50 $P -m pytest -q -p no:cacheprovider test_fast_sdpa.py 2>&1 | tail -1) | sed "s/^/upstream default: /" | tee -a $OUT/tests.txt
S=mlx_builder/suites/sdpa
MLX_CUDA_SDPA_TILED_SMALL=1 timeout -s INT 130 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_sdpa_large_head.py -k "not decode" 2>&1 | tail -1 | sed "s/^/suite small: /" | tee -a $OUT/tests.txt
MLX_CUDA_SDPA_TILED_SMALL=1 timeout -s INT 60 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_memory.py 2>&1 | tail -1 | sed "s/^/memory small: /" | tee -a $OUT/tests.txt
