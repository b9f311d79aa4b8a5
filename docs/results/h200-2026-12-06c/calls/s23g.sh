#!/bin/bash
# Device call s23g (issue 25): is the head-dim-256 kernel slower through MLX
# than alone because the GPU lowers its clock under sustained load? SM clock
# and power sampled every 20 ms (nvidia-smi) while 8 queued calls run 12
# times: MLX at 256 (ours) and 128 (cuDNN through MLX), then torch cuDNN at
# 256 in its own process; 8k, causal bf16, 32 / 16 heads.
. scripts/device_call.sh
budget_start 120
mlx_venv .carry/whl23 || exit $?
cat > /tmp/load_mlx.py <<'PY'
import sys, time
import mlx.core as mx
D = int(sys.argv[1]); L = 8192
q = mx.random.normal((1, 32, L, D)).astype(mx.bfloat16)
k = mx.random.normal((1, 16, L, D)).astype(mx.bfloat16)
v = mx.random.normal((1, 16, L, D)).astype(mx.bfloat16)
mx.eval(q, k, v)
f = lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=D ** -0.5, mask="causal")
mx.eval(f()); time.sleep(0.5)
print("start", time.time(), flush=True)
t = time.perf_counter()
for _ in range(12):
    mx.eval(*[f() for _ in range(8)])
print("end", time.time(), f"{(time.perf_counter() - t) / 96 * 1e3:.3f} ms/call", flush=True)
PY
cat > /tmp/load_torch.py <<'PY'
import time, torch
from torch.nn.attention import SDPBackend, sdpa_kernel
q = torch.randn(1, 32, 8192, 256, device="cuda", dtype=torch.bfloat16)
k = torch.randn(1, 32, 8192, 256, device="cuda", dtype=torch.bfloat16)
v = torch.randn(1, 32, 8192, 256, device="cuda", dtype=torch.bfloat16)
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    f = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    f(); torch.cuda.synchronize(); time.sleep(0.5)
    print("start", time.time(), flush=True)
    t = time.perf_counter()
    for _ in range(12):
        [f() for _ in range(8)]; torch.cuda.synchronize()
    print("end", time.time(), f"{(time.perf_counter() - t) / 96 * 1e3:.3f} ms/call", flush=True)
PY
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 20 > /tmp/smi.csv &
SMI=$!
sleep 1
{ echo "mlx D256"; $P /tmp/load_mlx.py 256; echo "mlx D128"; $P /tmp/load_mlx.py 128; echo "torch cudnn D256"; $TP /tmp/load_torch.py; } 2>&1 | grep -v Warning | tee /tmp/phases.txt
sleep 0.5; kill $SMI
cp /tmp/smi.csv $OUT/smi.csv; cp /tmp/phases.txt $OUT/phases.txt
python3 - <<'PY'
import csv, datetime, statistics
rows = []
for r in csv.reader(open("/tmp/smi.csv")):
    try:
        ts = datetime.datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
        rows.append((ts, float(r[1].split()[0]), float(r[2].split()[0]), r[3].strip()))
    except (ValueError, IndexError):
        pass
name, start = None, None
for line in open("/tmp/phases.txt"):
    p = line.split()
    if not p: continue
    if p[0] == "start": start = float(p[1])
    elif p[0] == "end":
        sel = [r for r in rows if start <= r[0] <= float(p[1])]
        if sel:
            print(f"{name}: {p[2]} ms/call; SM clock median {statistics.median(r[1] for r in sel):.0f} MHz "
                  f"(min {min(r[1] for r in sel):.0f}), power median {statistics.median(r[2] for r in sel):.0f} W, "
                  f"{len(sel)} samples")
        else:
            print(f"{name}: no samples")
    else: name = line.strip()
PY
echo "done in $((SECONDS - T0)) s"
