#!/bin/bash
# Device call s23h (issue 25): is the head-dim-256 kernel slower when calls
# follow each other, outside MLX too? The harness library of the series as
# landed (.carry/libV: run.py build on the exported series), D256 8k causal
# bf16 32 / 16 heads, MLX's configuration, one tile per group: each call
# timed by events (as run.py bench), each call waited for (perf_counter),
# and 8 queued calls per wait, into one output and into 8; torch cuDNN the
# same way, in the same process.
. scripts/device_call.sh
budget_start 100
cat > /tmp/seq.py <<'PY'
import math, statistics, sys, time
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
sys.path.insert(0, "scripts/attn_harness")
from run import Kernel, MASK_KIND
from pathlib import Path
kern = Kernel(Path(".carry/libV/libattn_harness.so"), q_tile_groups=1 << 30)
D, L = 256, 8192
q = torch.randn(1, 32, L, D, device="cuda", dtype=torch.bfloat16)
k = torch.randn(1, 16, L, D, device="cuda", dtype=torch.bfloat16)
v = torch.randn(1, 16, L, D, device="cuda", dtype=torch.bfloat16)
outs = [torch.empty_like(q) for _ in range(8)]
ours = lambda o: kern(q, k, v, o, scale=1 / math.sqrt(D), mask_kind=MASK_KIND["causal"], config="hopper")
kf, vf = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
def cudnn(o):
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        torch.nn.functional.scaled_dot_product_attention(q, kf, vf, is_causal=True)
def med(fn, n=9):
    t = []
    for _ in range(n):
        a = time.perf_counter(); fn(); torch.cuda.synchronize(); t.append(time.perf_counter() - a)
    return statistics.median(t) * 1e3
def events(fn, n=9):
    t = []
    for _ in range(n):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize(); t.append(a.elapsed_time(b))
    return statistics.median(t)
for name, f in (("ours", ours), ("cudnn", cudnn)):
    for _ in range(3): f(outs[0])
    torch.cuda.synchronize()
    print(f"{name} D256 8k: events {events(lambda: f(outs[0])):.3f} ms, "
          f"waited {med(lambda: f(outs[0])):.3f} ms, "
          f"8 queued into one output {med(lambda: [f(outs[0]) for _ in range(8)], 5) / 8:.3f} ms/call, "
          f"into 8 outputs {med(lambda: [f(o) for o in outs], 5) / 8:.3f} ms/call", flush=True)
PY
go "seq" && timeout 80 $TP /tmp/seq.py 2>&1 | grep -v Warn | tee $OUT/seq.txt
echo "done in $((SECONDS - T0)) s"
