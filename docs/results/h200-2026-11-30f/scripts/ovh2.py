# Where MLX's per-call time goes for D512 L=2048 causal: lazy build, host submission, GPU, wait.
import json, os, statistics, sys, time
import mlx.core as mx
D, L = 512, 2048
q = mx.random.normal((1, 32, L, D)).astype(mx.bfloat16)
k = mx.random.normal((1, 16, L, D)).astype(mx.bfloat16)
v = mx.random.normal((1, 16, L, D)).astype(mx.bfloat16)
mx.eval(q, k, v)
f = lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=D ** -0.5, mask="causal")
for _ in range(5):
    mx.eval(f())
med = lambda xs: round(statistics.median(xs) * 1e3, 4)
sync, build, submit, wait = [], [], [], []
for _ in range(30):
    mx.synchronize()
    t0 = time.perf_counter(); out = f(); t1 = time.perf_counter()
    mx.async_eval(out); t2 = time.perf_counter()
    mx.eval(out); t3 = time.perf_counter()
    build.append(t1 - t0); submit.append(t2 - t1); wait.append(t3 - t2); sync.append(t3 - t0)
    del out
queued = []
for _ in range(5):
    mx.synchronize(); t0 = time.perf_counter()
    outs = [f() for _ in range(20)]; mx.eval(outs); mx.synchronize()
    queued.append((time.perf_counter() - t0) / 20); del outs
a = mx.ones((4,)); mx.eval(a)
tiny = []
for _ in range(30):
    t0 = time.perf_counter(); mx.eval(a + 1); tiny.append(time.perf_counter() - t0)
big = mx.zeros((32, L, D), dtype=mx.bfloat16); mx.eval(big)
copy = []
for _ in range(30):
    t0 = time.perf_counter(); mx.eval(big + 1); copy.append(time.perf_counter() - t0)
print(json.dumps(dict(label=os.environ.get("LABEL"), sync_ms=med(sync), build_ms=med(build), submit_ms=med(submit),
                      wait_ms=med(wait), queued_ms=round(min(queued) * 1e3, 4), tiny_eval_ms=med(tiny),
                      add_64MiB_ms=med(copy))), flush=True)
