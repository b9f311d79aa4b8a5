#!/bin/bash
# Device call s17h (issues 25, 19): decode on the landed series' cuda-sm90 wheel
# beside upstream's fallback in the same run (the decode kernel, common/0030, did
# not change; its SASS neither: no copy in it uses TMA).
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
SP=$($TP -c "import site;print(site.getsitepackages()[0])")
$TP -m venv /tmp/tv || exit 3
VS=/tmp/tv/lib/python3.12/site-packages
/tmp/tv/bin/pip install -q --no-index --no-deps .carry/whl/mlx-*.whl || exit 4
for d in nvidia numpy numpy.libs; do [ -e $SP/$d ] && ln -s $SP/$d $VS/$d; done
P=/tmp/tv/bin/python
M=$OUT/cases_decode.jsonl
timeout 60 $P scripts/mlx_sdpa_cases.py --label default --iters 5 --kinds decode --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED=0 MLX_CUDA_SDPA_DECODE=0 MLX_CUDA_USE_CUDNN_SDPA=0 MLX_SDPA_FALLBACK_CHUNK_BYTES=0 timeout 60 $P scripts/mlx_sdpa_cases.py --label fallback --iters 5 --kinds decode --out $M > /dev/null 2>&1
python3 - <<'P' | tee $OUT/decode.txt
import json,os
for l in open(os.environ["OUT"]+"/cases_decode.jsonl"):
    r=json.loads(l)
    print(r['label'], r['kind'], r['D'], r.get('kv_heads',''), r['qL'], r['kL'], f"{r['ms']:.3f} ms {r.get('TB_s',0):.2f} TB/s" if 'ms' in r else r.get('error','')[:60])
P
