#!/bin/bash
# Device call s14h (issue 19): what RTX 30/40, L4/L40 and A100 run. The harness built with nvcc -arch=sm_80 (carried as .carry/h80), so the TMA ring configurations compile to their cp.async fallback in the new tile layout (GmmaTile); against the kThreads candidates (the layout before, SmemTile). Kernel alone. It gave no result: the H200 cannot run sm_80 SASS, so the driver JIT-compiled the embedded compute_80 PTX and the check step ran out of its 30 s. Next time: -gencode arch=compute_80,code=sm_90 (sm_80's code path, compiled ahead for the H200).
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
L=/tmp/h80/libattn_harness.so
mkdir -p /tmp/h80 && cp .carry/h80/libattn_harness.so $L
timeout 30 $TP $H/run.py check --lib $L --config small --dims 192 256 512 --sample 60 --seed 61 --q-tile-groups 4 2>&1 | tail -1 | sed "s/^/check small (sm_80 build): /"
timeout 60 $TP $H/run.py bench --lib $L --dims 192 256 512 --configs small medium cand5 cand6 cand7 cand3 --lengths 8192 32768 --iters 3 --no-torch --q-tile-groups 4 --json $OUT/sm80.json > /dev/null 2>&1
python3 -c "
import json,os
for x in json.load(open(os.environ['OUT']+'/sm80.json')): print('sm80', x['D'], x['L'], ' '.join(f'{k[5:]} {v:.1f}' for k,v in x.items() if k.startswith('ours_') and not k.endswith('_ms') and isinstance(v,(int,float))))
"
