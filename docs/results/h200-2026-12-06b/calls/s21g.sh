#!/bin/bash
# Device call s21g (issue 25), run inline on a fresh H100 with 310 s of
# device time left: this session's wheel (.carry/whl21,
# mlx-0.32.2+mlxb.846d176227a0.590dee87.cu90a: gmma_advance_low and the
# launchers' attribute caches) under upstream's test_fast_sdpa, the memory
# bounds, and prefill, mlx-lm's chunked step and decode at 256 / 512, each
# call waited for. Carries .carry/whl21, .carry/wh2, .carry/up.
. scripts/device_call.sh; budget_start 170
nvidia-smi --query-gpu=name --format=csv,noheader
mlx_venv .carry/whl21 || exit $?
(cd .carry/up && timeout -s INT 60 $P -m pytest -q -p no:cacheprovider test_fast_sdpa.py 2>&1 | tail -1) | sed "s/^/upstream test_fast_sdpa: /"
S=mlx_builder/suites/sdpa
go memory && timeout -s INT 30 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_memory.py 2>&1 | tail -1 | sed "s/^/memory: /"
go bench && timeout 60 $P scripts/mlx_sdpa_cases.py --label whl21 --iters 3 --dims 256 512 --kinds prefill chunked decode --out /tmp/c.jsonl > /dev/null 2>&1
cp /tmp/c.jsonl $OUT/ 2>/dev/null; python3 scripts/device_summary.py cases /tmp/c.jsonl; echo "done in $((SECONDS-T0)) s"
