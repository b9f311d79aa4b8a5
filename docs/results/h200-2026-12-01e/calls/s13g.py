"""Per-call cost through MLX outside the kernel: tiny calls, each waited for."""
import time, json, os
import mlx.core as mx

def med(fn, n=200):
    for _ in range(20): fn()
    t = []
    for _ in range(n):
        t0 = time.perf_counter(); fn(); t.append(time.perf_counter() - t0)
    t.sort(); return t[len(t) // 2] * 1e6

a = mx.ones((16,)); mx.eval(a)
rows = {"tiny add": med(lambda: mx.eval(a + 1))}
for D in (128, 256, 512):
    for L in (128, 2048):
        q = mx.random.normal((1, 32, L, D)).astype(mx.bfloat16)
        k = mx.random.normal((1, 16, L, D)).astype(mx.bfloat16)
        v = mx.random.normal((1, 16, L, D)).astype(mx.bfloat16)
        mx.eval(q, k, v)
        rows[f"sdpa D{D} L{L} causal"] = med(lambda: mx.eval(mx.fast.scaled_dot_product_attention(q, k, v, scale=D ** -0.5, mask="causal")), 100 if L > 128 else 200)
print(json.dumps({"label": os.environ.get("LABEL", ""), "us": rows}))
