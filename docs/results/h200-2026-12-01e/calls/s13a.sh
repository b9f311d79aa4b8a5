#!/bin/bash
# Device call s13a (issue 19): half of Q in registers, half in shared memory (cand6: 2 slots, 96 KB; cand7: 3 slots, 128 KB) against the 99 KB ring, medium, large and torch FA2, D256; checks and sanitizers on cand6.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
for c in cand6 cand7; do timeout 90 $TP $H/run.py check --config $c --dims 256 --sample 80 --seed 31 --q-tile-groups 4 2>&1 | tail -1 | sed "s/^/check $c: /"; done
timeout 150 $TP $H/run.py bench --dims 256 --configs small cand6 cand7 cand8 medium large --lengths 2048 8192 16384 32768 --iters 5 --q-tile-groups 4 --json $OUT/b256.json > /dev/null 2>&1
timeout 100 $TP $H/run.py bench --dims 256 --configs small cand6 medium --lengths 2048 8192 32768 --iters 5 --no-torch --one-block-per-sm --q-tile-groups 4 --json $OUT/b256_1blk.json > /dev/null 2>&1
timeout 60 $TP $H/run.py bench --dims 256 --configs small cand6 medium large --hkv 16 --q-len 2048 --lengths 32768 --iters 5 --no-torch --q-tile-groups 4 --json $OUT/bchunk.json > /dev/null 2>&1
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for t in memcheck racecheck synccheck; do timeout 100 $CS --tool $t $TP $H/run.py check --config cand6 --dims 256 --sample 3 --seed 5 --q-tile-groups 3 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s/^/$t: /"; echo; done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
for c in small cand6; do
timeout 80 $NCU --clock-control none -k regex:kernel_sdpa_tiled --launch-skip 2 --launch-count 1 --section WarpStateStats --section SchedulerStats --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed $TP $H/run.py bench --dims 256 --configs $c --lengths 8192 --iters 1 --no-torch --q-tile-groups 4 > $OUT/ncu_$c.txt 2>&1; done
python3 - <<'P'
import json,os
O=os.environ["OUT"]
for f in ("b256","b256_1blk","bchunk"):
    try: rows=json.load(open(O+"/"+f+".json"))
    except Exception as e: print(f, "missing", e); continue
    for r in rows:
        print(f, r["D"], r["qL"], r["L"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if (k.startswith("ours_") or k.startswith("torch_")) and not k.endswith("_ms")))
P
