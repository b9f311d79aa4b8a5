#!/bin/bash
# Device call s14g (issue 19): the early refill against refill after the softmax at head dim 192 (small against cand7) and 256 (small against cand6), kernel alone; s14f's last step, which did not finish within its limit.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
timeout 90 $TP $H/run.py bench --dims 192 256 --configs small cand6 cand7 --lengths 8192 32768 --iters 3 --no-torch --q-tile-groups 4 --json $OUT/ab.json > /dev/null 2>&1
python3 -c "
import json,os
for x in json.load(open(os.environ['OUT']+'/ab.json')): print('ab', x['D'], x['L'], ' '.join(f'{k[5:]} {v:.1f}' for k,v in x.items() if k.startswith('ours_') and not k.endswith('_ms') and isinstance(v,(int,float))))
"
