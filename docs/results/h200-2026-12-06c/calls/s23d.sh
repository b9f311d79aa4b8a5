#!/bin/bash
# Device call s23d (issue 25): this session's wheel (patch 0020 with the
# tree softmax and, at 512, the K tiles copied by a P V warpgroup; built on
# the CPU machine into .carry/whl23) through MLX: upstream's test_fast_sdpa
# (.carry/up) and the memory bounds; prefill at 192 / 256 / 512 (512 also
# with 4 KV heads) and mlx-lm's chunked step, waited and 8 queued per wait,
# beside torch (its own process) and upstream's fallback on the same wheel;
# then our SDPA suite without its decode cases (unchanged kernels) while the
# budget lasts. Carries .carry/whl23, .carry/wh2, .carry/up.
. scripts/device_call.sh
budget_start 560
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
mlx_venv .carry/whl23 || exit $?
(cd .carry/up && timeout -s INT 60 $P -m pytest -q -p no:cacheprovider test_fast_sdpa.py 2>&1 | tail -1) | sed "s/^/upstream test_fast_sdpa: /" | tee $OUT/tests.txt
S=mlx_builder/suites/sdpa
timeout -s INT 40 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_memory.py 2>&1 | tail -1 | sed "s/^/memory: /" | tee -a $OUT/tests.txt
M=/tmp/s23d.jsonl
go "waited" && timeout 100 $P scripts/mlx_sdpa_cases.py --label default --iters 3 --kinds prefill chunked --out $M > /dev/null 2>&1
go "queued" && timeout 60 $P scripts/mlx_sdpa_cases.py --label default-queued8 --iters 3 --queued 8 --kinds prefill --out $M > /dev/null 2>&1
go "torch" && timeout 70 $TP scripts/torch_sdpa_cases.py --iters 3 --backends flash cudnn efficient --out $M > /dev/null 2>&1
go "fallback" && MLX_CUDA_SDPA_TILED=0 MLX_CUDA_SDPA_DECODE=0 MLX_CUDA_USE_CUDNN_SDPA=0 MLX_SDPA_FALLBACK_CHUNK_BYTES=0 timeout 60 $P scripts/mlx_sdpa_cases.py --label fallback --iters 2 --dims 256 512 --kinds prefill chunked --out $M > /dev/null 2>&1
go "waited, second round" && timeout 100 $P scripts/mlx_sdpa_cases.py --label default-r2 --iters 3 --kinds prefill chunked --out $M > /dev/null 2>&1
cp $M $OUT/cases.jsonl
python3 scripts/device_summary.py cases $M > $OUT/mlx.txt
grep -E "^(default|torch-cudnn|torch-efficient|fallback) " $OUT/mlx.txt
# Where a call's time goes beyond its kernel: the GPU trace of 8 queued
# D256 8k calls (start and duration of every kernel), where nsys exists.
if command -v nsys > /dev/null && go "nsys"; then
  cat > /tmp/q8.py <<'PY'
import mlx.core as mx
q = mx.random.normal((1, 32, 8192, 256)).astype(mx.bfloat16)
k = mx.random.normal((1, 16, 8192, 256)).astype(mx.bfloat16)
v = mx.random.normal((1, 16, 8192, 256)).astype(mx.bfloat16)
mx.eval(q, k, v)
for _ in range(3):
    mx.eval(*[mx.fast.scaled_dot_product_attention(q, k, v, scale=256 ** -0.5, mask="causal") for _ in range(8)])
PY
  timeout 90 nsys profile -t cuda -o /tmp/q8 --force-overwrite true $P /tmp/q8.py > /dev/null 2>&1
  timeout 60 nsys stats -q --report cuda_gpu_trace --format csv /tmp/q8.nsys-rep 2>/dev/null | cut -c1-160 | tail -40 > $OUT/nsys_q8.txt
  tail -12 $OUT/nsys_q8.txt
else
  echo "no nsys"
fi
# ncu's time of each SDPA kernel in six waited D256 8k calls (s23b cut
# its MLX lines before the time).
cat > /tmp/one.py <<'PY'
import mlx.core as mx
q = mx.random.normal((1, 32, 8192, 256)).astype(mx.bfloat16)
k = mx.random.normal((1, 16, 8192, 256)).astype(mx.bfloat16)
v = mx.random.normal((1, 16, 8192, 256)).astype(mx.bfloat16)
mx.eval(q, k, v)
for _ in range(6):
    mx.eval(mx.fast.scaled_dot_product_attention(q, k, v, scale=256 ** -0.5, mask="causal"))
PY
go "ncu" && timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum --csv -k regex:sdpa $P /tmp/one.py 2>/dev/null | grep gpu__time_duration | awk -F'","' '{print $NF " ns | " substr($5, 1, 90)}' | tee $OUT/ncu.txt
left=$((BUDGET - (SECONDS - T0)))
go "suite" && timeout -s INT $left $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_sdpa_large_head.py -k "not decode" 2>&1 | tail -3 | sed "s/^/suite (not decode): /" | tee -a $OUT/tests.txt
echo "done in $((SECONDS - T0)) s"
