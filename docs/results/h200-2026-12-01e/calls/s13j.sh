#!/bin/bash
# Device call s13j (issue 19): part of Q kept in shared memory at head dim 512 (small: a quarter, 96 KB; medium / large: half, 112 KB) in the landed series: harness check of every D512 configuration, sanitizers on the new D512 tiles; the cuda-sm90 wheel through MLX (D512 mma.sync variants), upstream test_fast_sdpa, the 99 KB tiles at 192 / 256 / 512 re-timed (kernel alone).
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
timeout 70 $TP $H/run.py check --config all --sample 500 --seed 91 --q-tile-groups 4 --json $OUT/check_all500.json 2>&1 | tail -1 | sed "s/^/check all, 500 sampled: /"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tc in "memcheck small" "racecheck small" "synccheck small" "memcheck medium"; do set -- $tc; timeout 25 $CS --tool $1 $TP $H/run.py check --config $2 --dims 512 --quick --sample 1 --seed 9 --q-tile-groups 3 > /tmp/san.txt 2>&1; echo "$1 $2 D512 rc=$? $(grep -E 'SUMMARY' /tmp/san.txt | tail -1) $(grep -E 'passed' /tmp/san.txt | tail -1)"; done | tee $OUT/sanitizers.txt
timeout 40 $TP $H/run.py bench --dims 192 256 512 --configs small --lengths 8192 32768 --iters 3 --no-torch --q-tile-groups 4 --json $OUT/bench_small.json 2>&1 | python3 -c "
import sys,json
for l in sys.stdin:
    if l.startswith('{'): r=json.loads(l); print('harness small', r['D'], r['L'], round(r['ours_small'],1))
" 
SP=$($TP -c "import site;print(site.getsitepackages()[0])")
$TP -m venv /tmp/tv || exit 3
VS=/tmp/tv/lib/python3.12/site-packages
/tmp/tv/bin/pip install -q --no-index --no-deps .carry/whl/mlx-*.whl .carry/wh2/{pytest,pluggy,iniconfig,packaging,pygments}-*.whl || exit 4
for d in nvidia numpy numpy.libs; do [ -e $SP/$d ] && ln -s $SP/$d $VS/$d; done
P=/tmp/tv/bin/python
$P -c "import mlx.core as mx; print(mx.__version__)" 2>&1 | tee $OUT/probe.txt
M=$OUT/cases.jsonl
K="--kinds prefill chunked --dims 512 --iters 3"
MLX_CUDA_SDPA_TILED_SMALL=1 $P scripts/mlx_sdpa_cases.py --label small $K --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED_MEDIUM=1 $P scripts/mlx_sdpa_cases.py --label medium $K --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED_SMALL=1 MLX_CUDA_SDPA_TILED_ONE_BLOCK_PER_SM=1 $P scripts/mlx_sdpa_cases.py --label small-one-block $K --out $M > /dev/null 2>&1
python3 - <<'P'
import json,os
for l in open(os.environ["OUT"]+"/cases.jsonl"):
    r=json.loads(l); print(r['label'], r['kind'], r['D'], r['qL'], r['kL'], f"{r['ms']:.3f} ms {r['TFLOPs']:.0f} TF/s" if 'ms' in r else r.get('error','')[:60], f"peak+{r['peak_extra_gib']:.2f}" if 'peak_extra_gib' in r else "")
P
(cd .carry/up && MLX_CUDA_SDPA_TILED_SMALL=1 timeout -s INT 45 $P -m pytest -q -p no:cacheprovider test_fast_sdpa.py 2>&1 | tail -1) | sed "s/^/upstream small: /" | tee $OUT/tests.txt
