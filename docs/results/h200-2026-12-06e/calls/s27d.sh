#!/bin/bash
# Device call 5 of session 24 (issue 25): this session's wheel (the 512
# block with K block waits and O staged; built on the CPU machine into
# .carry/whl24) through MLX: upstream's test_fast_sdpa (.carry/up) and the
# memory bounds; prefill at 256 / 512 (512 also with 4 KV heads) and
# mlx-lm's chunked step, waited, and 8 queued per wait at 512, beside torch
# (its own process) and upstream's path on the same wheel, then the waited
# round again. Carries .carry/whl24, .carry/wh2, .carry/up.
. scripts/device_call.sh
budget_start 330
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
mlx_venv .carry/whl24 || exit $?
(cd .carry/up && timeout -s INT 60 $P -m pytest -q -p no:cacheprovider test_fast_sdpa.py 2>&1 | tail -1) | sed "s/^/upstream test_fast_sdpa: /" | tee $OUT/tests.txt
S=mlx_builder/suites/sdpa
timeout -s INT 40 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_memory.py 2>&1 | tail -1 | sed "s/^/memory: /" | tee -a $OUT/tests.txt
M=/tmp/s27d.jsonl
go "waited" && timeout 90 $P scripts/mlx_sdpa_cases.py --label default --iters 3 --dims 256 512 --kinds prefill chunked --out $M > /dev/null 2>&1
go "queued" && timeout 50 $P scripts/mlx_sdpa_cases.py --label default-queued8 --iters 3 --queued 8 --dims 512 --kinds prefill --out $M > /dev/null 2>&1
go "torch" && timeout 70 $TP scripts/torch_sdpa_cases.py --iters 3 --dims 256 512 --backends flash cudnn efficient --out $M > /dev/null 2>&1
go "upstream's path" && MLX_CUDA_SDPA_TILED=0 MLX_CUDA_SDPA_DECODE=0 MLX_CUDA_USE_CUDNN_SDPA=0 MLX_SDPA_FALLBACK_CHUNK_BYTES=0 timeout 60 $P scripts/mlx_sdpa_cases.py --label fallback --iters 2 --dims 512 --kinds prefill chunked --out $M > /dev/null 2>&1
go "waited, second round" && timeout 90 $P scripts/mlx_sdpa_cases.py --label default-r2 --iters 3 --dims 256 512 --kinds prefill chunked --out $M > /dev/null 2>&1
cp $M $OUT/cases.jsonl
python3 scripts/device_summary.py cases $M > $OUT/mlx.txt
cat $OUT/mlx.txt
echo "done in $((SECONDS - T0)) s"
