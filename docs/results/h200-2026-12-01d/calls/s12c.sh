#!/bin/bash
# Device call s12c (issue 19): the ring with Q kept in shared memory (99 KB and sm_80 sizes) against the ring with Q in registers (small), large staged and torch FA2.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
for c in "cand7 256" "cand8 256" "cand6 192" "cand8 192" "cand7 512" "cand8 512"; do set -- $c
  timeout 60 $TP $H/run.py check --config $1 --dims $2 --quick --sample 30 --seed 7 2>&1 | tail -1 | sed "s/^/$1 D$2: /"; done
timeout 150 $TP $H/run.py bench --dims 256 --configs small large cand7 cand8 --lengths 2048 8192 16384 32768 --iters 5 --json $OUT/b256.json > $OUT/b256.txt 2>&1
timeout 120 $TP $H/run.py bench --dims 192 512 --configs small large cand6 cand7 cand8 --lengths 2048 8192 32768 --iters 5 --no-torch --json $OUT/b.json > $OUT/b.txt 2>&1
timeout 60 $TP $H/run.py bench --dims 256 512 --configs small cand7 cand8 --hkv 4 --q-len 2048 --lengths 32768 --iters 5 --no-torch --json $OUT/bchunk.json > $OUT/bchunk.txt 2>&1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
timeout 80 $NCU --clock-control none -k regex:kernel_sdpa_tiled --launch-skip 2 --launch-count 1 --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed,lts__t_bytes.sum.per_second,sm__warps_active.avg.per_cycle_active $TP $H/run.py bench --dims 256 --configs cand7 --lengths 8192 --iters 1 --no-torch 2>&1 | grep -E "stalled|hmma|shared|warps_active|lts__" | awk '$NF+0 > 0.05' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' > $OUT/ncu_cand7.txt
python3 - <<'P'
import json,os
O=os.environ["OUT"]
for f in ("b256","b","bchunk"):
    for r in json.load(open(O+"/"+f+".json")):
        print(f, {k:(round(v,1) if isinstance(v,float) else v) for k,v in r.items() if not k.endswith('_ms') and k!='one_block_per_sm'})
print(open(O+"/ncu_cand7.txt").read())
P
