#!/bin/bash
# Device call s12j (issue 19): the final series' cuda-sm90 wheel: default cases (wgmma D192/256 in the order before, 4 groups elsewhere), the same with 4 groups forced, upstream test_fast_sdpa, memory bounds.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
SP=$($TP -c "import site;print(site.getsitepackages()[0])")
$TP -m venv /tmp/tv || exit 3
VS=/tmp/tv/lib/python3.12/site-packages
/tmp/tv/bin/pip install -q --no-index --no-deps .carry/whl/mlx-*.whl .carry/wheelhouse/{pytest,pluggy,iniconfig,packaging,pygments}-*.whl || exit 4
for d in nvidia numpy numpy.libs; do [ -e $SP/$d ] && ln -s $SP/$d $VS/$d; done
P=/tmp/tv/bin/python
$P -c "import mlx.core as mx; print(mx.__version__, mx.default_device())" 2>&1 | tee $OUT/probe.txt
M=$OUT/final.jsonl
for i in 1 2; do
$P scripts/mlx_sdpa_cases.py --label default-$i --kinds prefill chunked --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED_Q_TILE_GROUPS=4 $P scripts/mlx_sdpa_cases.py --label groups4-$i --kinds prefill chunked --out $M > /dev/null 2>&1
done
MLX_CUDA_SDPA_TILED_MEDIUM=1 $P scripts/mlx_sdpa_cases.py --label medium --kinds prefill chunked --out $M > /dev/null 2>&1
python3 - <<'P'
import json,os
for l in open(os.environ["OUT"]+"/final.jsonl"):
    r=json.loads(l); print(r['label'], r['kind'], r['D'], r['qL'], r['kL'], f"{r['ms']:.3f} ms", f"{r['TFLOPs']:.0f}", f"peak+{r['peak_extra_gib']:.2f} GiB")
P
(cd .carry/up && timeout -s INT 50 $P -m pytest -q -p no:cacheprovider test_fast_sdpa.py 2>&1 | tail -1) | sed "s/^/upstream default: /" | tee $OUT/upstream.txt
timeout -s INT 60 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=tests/sdpa tests/sdpa/test_memory.py 2>&1 | tail -1 | sed "s/^/memory default: /" | tee $OUT/memory.txt
