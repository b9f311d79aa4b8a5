#!/bin/bash
# Device call s15f (issues 25 and 19): do queued calls overlap? The landed wheel at qL = kL = 2048 and 8192, causal bf16, 32 / 16 heads: each call waited for; 8 independent calls queued per wait; 8 chained calls queued per wait (each call's queries are the previous output, so no two can run at once). Median of 30 after 5, default (wgmma) and small (99 KB).
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
SP=$($TP -c "import site;print(site.getsitepackages()[0])")
$TP -m venv /tmp/tv || exit 3
VS=/tmp/tv/lib/python3.12/site-packages
/tmp/tv/bin/pip install -q --no-index --no-deps .carry/whl/mlx-*.whl || exit 4
for d in nvidia numpy numpy.libs; do [ -e $SP/$d ] && ln -s $SP/$d $VS/$d; done
P=/tmp/tv/bin/python
cat > /tmp/chain.py <<'PY'
import sys, time, json
import mlx.core as mx
label = sys.argv[1]
def med(fn, n=30, w=5):
    ts = []
    for i in range(n + w):
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    ts = sorted(ts[w:]); return ts[len(ts) // 2] * 1e6
for D in (256, 512, 192):
    for L in (2048, 8192):
        q = mx.random.normal((1, 32, L, D)).astype(mx.bfloat16)
        k = mx.random.normal((1, 16, L, D)).astype(mx.bfloat16)
        v = mx.random.normal((1, 16, L, D)).astype(mx.bfloat16)
        mx.eval(q, k, v)
        s = D ** -0.5
        sdpa = lambda x: mx.fast.scaled_dot_product_attention(x, k, v, scale=s, mask="causal")
        def chained():
            x = q
            for _ in range(8):
                x = sdpa(x)
            mx.eval(x)
        row = {"label": label, "D": D, "L": L,
               "waited_us": med(lambda: mx.eval(sdpa(q))),
               "independent8_us_per_call": med(lambda: mx.eval(*[sdpa(q) for _ in range(8)])) / 8,
               "chained8_us_per_call": med(chained) / 8}
        flops = 4 * 32 * (L * (L + 1) // 2) * D
        row.update({k.replace("_us", "_tflops"): flops / (v * 1e-6) / 1e12 for k, v in list(row.items()) if k.endswith("_us") or k.endswith("_per_call")})
        print(json.dumps(row))
PY
timeout 100 $P /tmp/chain.py default | tee -a $OUT/chain.jsonl
MLX_CUDA_SDPA_TILED_SMALL=1 timeout 100 $P /tmp/chain.py small | tee -a $OUT/chain.jsonl
