#!/bin/bash
# Device call s23b (issue 25; planned as s22b): session 21's wheel
# (mlx-0.32.2+mlxb.846d176227a0.590dee87.cu90a: patch 0020 with
# gmma_advance_low in the warp-specialized block, and the launchers' device
# attributes and shared memory limits set once per device; built on the CPU
# machine into .carry/whl21) through MLX. Upstream's test_fast_sdpa
# (.carry/up) and the memory bounds first; then prefill at 192 / 256 / 512
# (512 also with 4 KV heads) and mlx-lm's chunked step, waited and 8 queued
# per wait, beside torch (its own process) and upstream's fallback on the
# same wheel. Carries .carry/whl21, .carry/wh2, .carry/up. Last, where nsys
# is installed, the kernels one D256 8k call launches and their times.
. scripts/device_call.sh
budget_start 480
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
mlx_venv .carry/whl21 || exit $?
(cd .carry/up && timeout -s INT 60 $P -m pytest -q -p no:cacheprovider test_fast_sdpa.py 2>&1 | tail -1) | sed "s/^/upstream test_fast_sdpa: /" | tee $OUT/tests.txt
S=mlx_builder/suites/sdpa
timeout -s INT 40 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_memory.py 2>&1 | tail -1 | sed "s/^/memory: /" | tee -a $OUT/tests.txt
M=/tmp/s22b.jsonl
go "waited" && timeout 100 $P scripts/mlx_sdpa_cases.py --label default --iters 3 --kinds prefill chunked --out $M > /dev/null 2>&1
go "queued" && timeout 60 $P scripts/mlx_sdpa_cases.py --label default-queued8 --iters 3 --queued 8 --kinds prefill --out $M > /dev/null 2>&1
go "torch" && timeout 70 $TP scripts/torch_sdpa_cases.py --iters 3 --backends flash cudnn efficient --out $M > /dev/null 2>&1
go "fallback" && MLX_CUDA_SDPA_TILED=0 MLX_CUDA_SDPA_DECODE=0 MLX_CUDA_USE_CUDNN_SDPA=0 MLX_SDPA_FALLBACK_CHUNK_BYTES=0 timeout 60 $P scripts/mlx_sdpa_cases.py --label fallback --iters 2 --dims 256 512 --kinds prefill chunked --out $M > /dev/null 2>&1
go "queued, second round" && timeout 60 $P scripts/mlx_sdpa_cases.py --label default-queued8-r2 --iters 3 --queued 8 --kinds prefill --out $M > /dev/null 2>&1
cp $M $OUT/cases.jsonl
python3 scripts/device_summary.py cases $M | tee $OUT/mlx.txt
cat > /tmp/one.py <<'PY'
import mlx.core as mx
q = mx.random.normal((1, 32, 8192, 256)).astype(mx.bfloat16)
k = mx.random.normal((1, 16, 8192, 256)).astype(mx.bfloat16)
v = mx.random.normal((1, 16, 8192, 256)).astype(mx.bfloat16)
mx.eval(q, k, v)
for _ in range(6):
    mx.eval(mx.fast.scaled_dot_product_attention(q, k, v, scale=256 ** -0.5, mask="causal"))
PY
if go "ncu"; then
  # Every kernel of the six calls, its name and time, clocks as
  # they run (not locked to base).
  timeout 90 ncu --clock-control none --metrics gpu__time_duration.sum --csv $P /tmp/one.py 2>/dev/null | grep gpu__time_duration | awk -F'","' '{print $5 " | " $NF}' | cut -c1-200 | tee $OUT/ncu.txt
fi
# The same kernel launched by the harness (library C, left by s23a), timed
# the same way.
if [ -f .carry/libC/libattn_harness.so ] && go "ncu harness"; then
  timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum --csv -k regex:sdpa $TP $H/run.py bench --lib .carry/libC/libattn_harness.so --dims 256 --configs hopper --lengths 8192 --iters 5 --no-torch 2>/dev/null | grep gpu__time_duration | awk -F'","' '{print $5 " | " $NF}' | cut -c1-200 | tee $OUT/ncu_harness.txt
fi
echo "done in $((SECONDS - T0)) s"
