#!/bin/bash
# Device call s23f (issue 25): call 5 (s23e) found an SDPA call at head dim
# 256 through MLX 0.19 ms longer than its kernel, queued or not, while
# MLX's cuDNN path at 128 hides its cost when calls are queued. Here, with
# CUDA graphs (MLX's default) and without (MLX_USE_CUDA_GRAPHS=0), at 128 /
# 256 / 512, 8k: waited, 8 queued per wait, and the CPU time to enqueue 8
# calls (mx.async_eval returning) against the time until they are done.
. scripts/device_call.sh
budget_start 150
nvidia-smi --query-gpu=name --format=csv,noheader
mlx_venv .carry/whl23 || exit $?
cat > /tmp/enq.py <<'PY'
import os, time, statistics
import mlx.core as mx
def med(fn, n, per=1):
    t = []
    for _ in range(n):
        a = time.perf_counter(); fn(); t.append((time.perf_counter() - a) / per)
    return statistics.median(t) * 1e3
tag = "graphs" if os.environ.get("MLX_USE_CUDA_GRAPHS", "1") != "0" else "no-graphs"
for D in (128, 256, 512):
    L = 8192
    q = mx.random.normal((1, 32, L, D)).astype(mx.bfloat16)
    k = mx.random.normal((1, 16, L, D)).astype(mx.bfloat16)
    v = mx.random.normal((1, 16, L, D)).astype(mx.bfloat16)
    mx.eval(q, k, v)
    f = lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=D ** -0.5, mask="causal")
    for _ in range(3): mx.eval(f())
    w = med(lambda: mx.eval(f()), 7)
    qd = med(lambda: mx.eval(*[f() for _ in range(8)]), 5, 8)
    enq, done = [], []
    for _ in range(5):
        a = time.perf_counter()
        outs = [f() for _ in range(8)]
        mx.async_eval(*outs)
        b = time.perf_counter()
        mx.eval(*outs)
        c = time.perf_counter()
        enq.append((b - a) / 8 * 1e3); done.append((c - a) / 8 * 1e3)
    print(f"{tag} D{D} 8k: waited {w:.3f} ms, queued8 {qd:.3f} ms/call, "
          f"enqueue {statistics.median(enq):.3f} ms/call, done {statistics.median(done):.3f} ms/call")
PY
go "graphs" && timeout 60 $P /tmp/enq.py 2>&1 | tee $OUT/enqueue.txt
go "no graphs" && MLX_USE_CUDA_GRAPHS=0 timeout 60 $P /tmp/enq.py 2>&1 | tee -a $OUT/enqueue.txt
echo "done in $((SECONDS - T0)) s"
