#!/bin/bash
# Device call s25e (issue 25): session 22's wheel (.carry/whl23,
# mlx-0.32.2+mlxb.846d176227a0.58c0c33e.cu90a; the landed series differs
# from it by a comment and the same SASS) on what session 22 left unrun:
# decode (timing at both layer shapes against upstream's path on the same
# wheel, then our suite's decode cases), head dim 192 against the fallback,
# and the 99 KB tiles (GB10's, forced, one block per multiprocessor)
# beside torch FA2.
# Carries .carry/whl23, .carry/wh2 (with the library too, the call passes
# 64 MiB: s25f has it).
. scripts/device_call.sh
budget_start 470
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
mlx_venv .carry/whl23 || exit $?
M=/tmp/s25e.jsonl
go "decode" && timeout 60 $P scripts/mlx_sdpa_cases.py --label default --iters 5 --kinds decode --out $M > /dev/null 2>&1
go "decode, upstream's path" && MLX_CUDA_SDPA_TILED=0 MLX_CUDA_SDPA_DECODE=0 timeout 60 $P scripts/mlx_sdpa_cases.py --label fallback --iters 5 --kinds decode --out $M > /dev/null 2>&1
go "D192" && timeout 60 $P scripts/mlx_sdpa_cases.py --label default --iters 3 --dims 192 --kinds prefill chunked --out $M > /dev/null 2>&1
go "D192 fallback" && MLX_CUDA_SDPA_TILED=0 MLX_CUDA_SDPA_DECODE=0 MLX_CUDA_USE_CUDNN_SDPA=0 MLX_SDPA_FALLBACK_CHUNK_BYTES=0 timeout 60 $P scripts/mlx_sdpa_cases.py --label fallback --iters 2 --dims 192 --kinds prefill chunked --out $M > /dev/null 2>&1
go "99 KB" && MLX_CUDA_SDPA_TILED_SMALL=1 MLX_CUDA_SDPA_TILED_ONE_BLOCK_PER_SM=1 timeout 80 $P scripts/mlx_sdpa_cases.py --label small-1blk --iters 3 --dims 256 512 --kinds prefill chunked --out $M > /dev/null 2>&1
go "torch" && timeout 70 $TP scripts/torch_sdpa_cases.py --iters 3 --dims 192 256 512 --backends flash efficient --out $M > /dev/null 2>&1
cp $M $OUT/cases.jsonl
python3 scripts/device_summary.py cases $M | tee $OUT/mlx.txt
S=mlx_builder/suites/sdpa
left=$((BUDGET - (SECONDS - T0)))
go "suite decode" && timeout -s INT $left $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_sdpa_large_head.py -k decode 2>&1 | tail -3 | sed "s/^/suite (decode): /" | tee $OUT/tests.txt
echo "done in $((SECONDS - T0)) s"
