#!/bin/bash
# Device call s15e (issues 25 and 19): where a waited-for call's time goes at small sizes. The landed wheel, one SDPA call waited for at tiny shapes (B 1, 32 / 16 heads, qL = kL = 128, causal bf16) where the kernel takes microseconds: the tiled kernel (wgmma and 99 KB tiles), upstream's paths at head dim 128 (cuDNN off: its vector / unfused kernels), and the fallback at 256; MLX's one-element add beside them. Median of 50 after 10.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
SP=$($TP -c "import site;print(site.getsitepackages()[0])")
$TP -m venv /tmp/tv || exit 3
VS=/tmp/tv/lib/python3.12/site-packages
/tmp/tv/bin/pip install -q --no-index --no-deps .carry/whl/mlx-*.whl || exit 4
for d in nvidia numpy numpy.libs; do [ -e $SP/$d ] && ln -s $SP/$d $VS/$d; done
P=/tmp/tv/bin/python
cat > /tmp/tiny.py <<'PY'
import sys, time, json
import mlx.core as mx
label = sys.argv[1]
def med(fn, n=50, w=10):
    ts = []
    for i in range(n + w):
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    ts = sorted(ts[w:]); return ts[len(ts) // 2] * 1e6
x = mx.zeros((1,)); mx.eval(x)
rows = {"label": label, "floor_us": med(lambda: mx.eval(x + 1))}
for D in (128, 256, 512):
    for L in (128, 2048):
        q = mx.random.normal((1, 32, L, D)).astype(mx.bfloat16)
        k = mx.random.normal((1, 16, L, D)).astype(mx.bfloat16)
        v = mx.random.normal((1, 16, L, D)).astype(mx.bfloat16)
        mx.eval(q, k, v)
        f = lambda: mx.eval(mx.fast.scaled_dot_product_attention(q, k, v, scale=D ** -0.5, mask="causal"))
        rows[f"D{D}_L{L}_us"] = med(f)
        def queued():
            outs = [mx.fast.scaled_dot_product_attention(q, k, v, scale=D ** -0.5, mask="causal") for _ in range(8)]
            mx.eval(*outs)
        rows[f"D{D}_L{L}_queued8_us_per_call"] = med(queued, 20, 5) / 8
print(json.dumps(rows))
PY
timeout 60 $P /tmp/tiny.py default | tee -a $OUT/tiny.jsonl
MLX_CUDA_SDPA_TILED_SMALL=1 timeout 60 $P /tmp/tiny.py small | tee -a $OUT/tiny.jsonl
MLX_CUDA_SDPA_TILED=0 MLX_CUDA_SDPA_DECODE=0 MLX_CUDA_USE_CUDNN_SDPA=0 timeout 60 $P /tmp/tiny.py fallback | tee -a $OUT/tiny.jsonl
nsys --version 2>/dev/null | head -1
