#!/bin/bash
# Device call s13g (issue 19): what a call through MLX costs outside the kernel (tiny add; SDPA at L 128 and 2048 on cuDNN D128, tiled D256/D512), each call waited for; and the tiled kernel's host path traced.
TP=/opt/torch/.venv/bin/python
SP=$($TP -c "import site;print(site.getsitepackages()[0])")
$TP -m venv /tmp/tv || exit 3
VS=/tmp/tv/lib/python3.12/site-packages
/tmp/tv/bin/pip install -q --no-index --no-deps .carry/whl/mlx-*.whl || exit 4
for d in nvidia numpy numpy.libs; do [ -e $SP/$d ] && ln -s $SP/$d $VS/$d; done
P=/tmp/tv/bin/python
LABEL=default $P .carry/s13g.py | tee $OUT/overhead.jsonl
LABEL=small MLX_CUDA_SDPA_TILED_SMALL=1 $P .carry/s13g.py | tee -a $OUT/overhead.jsonl
MLX_CUDA_SDPA_TRACE=1 $P -c "
import mlx.core as mx
for D in (128,256,512):
    q=mx.ones((1,32,128,D),dtype=mx.bfloat16); k=mx.ones((1,16,128,D),dtype=mx.bfloat16)
    mx.eval(mx.fast.scaled_dot_product_attention(q,k,k,scale=1.0,mask='causal'))
" 2>&1 | grep mlx-sdpa-route | tee $OUT/routes.txt
