#!/bin/bash
# Device call s13b (issue 19): half of Q in shared memory as MLX's small (99 KB) and medium (163 KB) tiles at head dim 256: harness check over every configuration, sanitizers; the cuda-sm90 wheel through MLX beside torch (same clock), upstream test_fast_sdpa, our suite on small, memory bounds.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
timeout 170 $TP $H/run.py check --config all --q-tile-groups 4 --json $OUT/check_all.json 2>&1 | tail -1 | sed "s/^/check all: /"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for t in memcheck synccheck racecheck; do for c in small medium; do timeout 70 $CS --tool $t $TP $H/run.py check --config $c --dims 256 --quick --sample 2 --seed 7 --q-tile-groups 3 > $OUT/san_${t}_$c.txt 2>&1; echo "$t $c rc=$? $(grep -E 'SUMMARY' $OUT/san_${t}_$c.txt | tail -1) $(grep -E 'passed' $OUT/san_${t}_$c.txt | tail -1)"; done; done
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
MLX_CUDA_SDPA_TILED_SMALL=1 $P scripts/mlx_sdpa_cases.py --label small $K --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED_SMALL=1 MLX_CUDA_SDPA_TILED_ONE_BLOCK_PER_SM=1 $P scripts/mlx_sdpa_cases.py --label small-one-block $K --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED_MEDIUM=1 $P scripts/mlx_sdpa_cases.py --label medium $K --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED_WGMMA=0 $P scripts/mlx_sdpa_cases.py --label mma-large $K --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED=0 MLX_CUDA_SDPA_DECODE=0 MLX_CUDA_USE_CUDNN_SDPA=0 MLX_SDPA_FALLBACK_CHUNK_BYTES=0 $P scripts/mlx_sdpa_cases.py --label fallback $K --out $M > /dev/null 2>&1
$TP scripts/torch_sdpa_cases.py --out $OUT/torch.jsonl > /dev/null 2>&1
python3 - <<'P'
import json,os
O=os.environ["OUT"]
for f in ("cases.jsonl","torch.jsonl"):
    for l in open(O+"/"+f):
        r=json.loads(l); print(r['label'], r['kind'], r['D'], r['qL'], r['kL'], f"{r['ms']:.3f} ms {r['TFLOPs']:.0f} TF/s" if 'ms' in r else r.get('error','')[:60], f"peak+{r['peak_extra_gib']:.2f}" if 'peak_extra_gib' in r else "")
P
(cd .carry/up && timeout -s INT 50 $P -m pytest -q -p no:cacheprovider test_fast_sdpa.py 2>&1 | tail -1) | sed "s/^/upstream default: /" | tee $OUT/upstream.txt
(cd .carry/up && MLX_CUDA_SDPA_TILED_SMALL=1 timeout -s INT 50 $P -m pytest -q -p no:cacheprovider test_fast_sdpa.py 2>&1 | tail -1) | sed "s/^/upstream small: /" | tee -a $OUT/upstream.txt
S=mlx_builder/suites/sdpa
MLX_CUDA_SDPA_TILED_SMALL=1 timeout -s INT 120 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_sdpa_large_head.py -k "not decode" 2>&1 | tail -1 | sed "s/^/suite small: /" | tee $OUT/suite.txt
MLX_CUDA_SDPA_TILED_MEDIUM=1 timeout -s INT 60 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_sdpa_large_head.py -k "not decode and 256" 2>&1 | tail -1 | sed "s/^/suite medium D256: /" | tee -a $OUT/suite.txt
timeout -s INT 80 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_memory.py 2>&1 | tail -1 | sed "s/^/memory default: /" | tee -a $OUT/suite.txt
MLX_CUDA_SDPA_TILED_SMALL=1 timeout -s INT 60 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_memory.py 2>&1 | tail -1 | sed "s/^/memory small: /" | tee -a $OUT/suite.txt
