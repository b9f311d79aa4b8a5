#!/bin/bash
# Device call s12b (issue 19): split-head-dim ring tiles at D192/256 against the 8-warp ring; stall reasons.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
for c in "cand7 256" "cand8 256" "cand6 192"; do set -- $c
  timeout 60 $TP $H/run.py check --config $1 --dims $2 --quick --sample 30 --seed 6 2>&1 | tail -1 | sed "s/^/$1 D$2: /"; done
timeout 150 $TP $H/run.py bench --dims 256 192 --configs small cand6 cand7 cand8 --lengths 2048 8192 32768 --iters 5 --no-torch --json $OUT/b.json > $OUT/b.txt 2>&1
timeout 60 $TP $H/run.py bench --dims 256 --configs small cand7 cand8 --hkv 4 --q-len 2048 --lengths 32768 --iters 5 --no-torch --json $OUT/bchunk.json > $OUT/bchunk.txt 2>&1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
for c in "small 256" "cand7 256" "small 512"; do set -- $c
timeout 80 $NCU --clock-control none -k regex:kernel_sdpa_tiled --launch-skip 2 --launch-count 1 --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,lts__t_bytes.sum.per_second $TP $H/run.py bench --dims $2 --configs $1 --lengths 8192 --iters 1 --no-torch 2>&1 | grep -E "stalled|hmma|shared|inst_exec|lts__" | awk '$NF+0 > 0.05' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' > $OUT/ncu_$1_$2.txt; done
python3 - <<'P'
import json,os
O=os.environ["OUT"]
for f in ("b","bchunk"):
    for r in json.load(open(O+"/"+f+".json")):
        print(f, {k:(round(v,1) if isinstance(v,float) else v) for k,v in r.items() if not k.endswith('_ms')})
for f in sorted(os.listdir(O)):
    if f.startswith("ncu"): print("==",f); print(open(O+"/"+f).read())
P
