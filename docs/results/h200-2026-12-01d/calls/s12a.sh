#!/bin/bash
# Device call s12a (issue 19): 4-warp ring tiles that fit two blocks on a 100 KB SM, against the 8-warp ring (small), large staged and torch FA2; ncu stall reasons of the small kernels.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
for c in "cand7 256" "cand8 256" "cand6 192" "cand7 192" "cand7 512" "cand8 512"; do set -- $c
  timeout 60 $TP $H/run.py check --config $1 --dims $2 --quick --sample 30 --seed 5 2>&1 | tail -1 | sed "s/^/$1 D$2: /" | tee -a $OUT/check.txt; done
timeout 150 $TP $H/run.py bench --dims 256 --configs small large cand7 cand8 --lengths 2048 8192 16384 32768 --iters 5 --json $OUT/b256.json > $OUT/b256.txt 2>&1
timeout 100 $TP $H/run.py bench --dims 512 192 --configs small cand6 cand7 cand8 --lengths 2048 8192 32768 --iters 5 --no-torch --json $OUT/b512.json > $OUT/b512.txt 2>&1
timeout 60 $TP $H/run.py bench --dims 512 256 --configs small cand7 cand8 --hkv 4 --q-len 2048 --lengths 32768 --iters 5 --no-torch --json $OUT/bchunk.json > $OUT/bchunk.txt 2>&1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for c in "small 256" "cand7 256" "small 512"; do set -- $c
timeout 90 $NCU --clock-control none -k regex:kernel_sdpa_tiled --launch-skip 2 --launch-count 1 --section WarpStateStats --section SchedulerStats --section Occupancy --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section LaunchStats $TP $H/run.py bench --dims $2 --configs $1 --lengths 8192 --iters 1 --no-torch > $OUT/ncu_$1_$2.txt 2>&1; done
python3 - <<'P'
import json,os
for f in ("b256","b512","bchunk"):
    try: rows=json.load(open(os.environ["OUT"]+"/"+f+".json"))
    except Exception as e: print(f,e); continue
    for r in rows:
        print(f, {k:(round(v,1) if isinstance(v,float) else v) for k,v in r.items() if not k.endswith('_ms')})
P
