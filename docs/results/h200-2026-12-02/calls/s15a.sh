#!/bin/bash
# Device call s15a (issues 25 and 19), kernel alone (harness), three builds carried as .carry/h90 (sm_90a), .carry/hpp (sm_90a with -DMLX_ATTN_WG_PINGPONG=1) and .carry/h80 (-gencode arch=compute_80,code=sm_90: sm_80's code path, cp.async and no TMA, compiled ahead for the H200).
# cand10 = the wgmma tiles at 192 / 256 with Q, K and V by TMA into full / empty mbarrier slots (kTmaStages), no block barrier per step; in hpp also the two warpgroups taking turns issuing their products. hopper = MLX's wgmma tiles (every thread's cp.async, a block barrier per step).
# h80: small / medium / large in sm_80's code against the kThreads candidates (cand5 / cand6 / cand7 / cand3): the same code since the TMA rings copy with cp.async in SmemTile's layout there.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
G="--q-tile-groups 4"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
for b in h90 hpp h80; do mkdir -p /tmp/$b && cp .carry/$b/libattn_harness.so /tmp/$b/; done
L90="--lib /tmp/h90/libattn_harness.so"; LPP="--lib /tmp/hpp/libattn_harness.so"; L80="--lib /tmp/h80/libattn_harness.so"
timeout 70 $TP $H/run.py check $L90 --config cand10 --dims 192 256 --seed 11 --json $OUT/check_cand10.json 2>&1 | tail -1 | sed "s/^/check cand10 (h90): /"
timeout 40 $TP $H/run.py check $LPP --config cand10 --dims 192 256 --sample 60 --seed 12 2>&1 | tail -1 | sed "s/^/check cand10 (hpp): /"
timeout 40 $TP $H/run.py check $L90 --config small --dims 192 256 512 --sample 80 --seed 13 $G 2>&1 | tail -1 | sed "s/^/check small (h90): /"
timeout 40 $TP $H/run.py check $L80 --config all --dims 192 256 512 --sample 90 --seed 14 $G 2>&1 | tail -1 | sed "s/^/check all (h80): /"
timeout 120 $TP $H/run.py bench $L90 --dims 256 192 --configs hopper cand10 small --lengths 2048 8192 16384 32768 --iters 5 --json $OUT/b90.json > /dev/null 2>&1
timeout 60 $TP $H/run.py bench $LPP --dims 256 192 --configs hopper cand10 --lengths 2048 8192 16384 32768 --iters 5 --no-torch --json $OUT/bpp.json > /dev/null 2>&1
timeout 60 $TP $H/run.py bench $L80 --dims 256 192 512 --configs small cand5 cand6 cand7 medium cand3 --lengths 8192 32768 --iters 3 --no-torch $G --json $OUT/b80.json > /dev/null 2>&1
python3 - <<'P'
import json,os
O=os.environ["OUT"]
for f in ("b90","bpp","b80"):
    try: rows=json.load(open(O+"/"+f+".json"))
    except Exception as e: print(f, "missing", e); continue
    for r in rows:
        print(f, r["D"], r["qL"], r["L"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if (k.startswith("ours_") or k.startswith("torch_")) and not k.endswith("_ms") and isinstance(v,(int,float))))
P
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for lib in "$L90" "$LPP"; do for t in memcheck racecheck synccheck; do timeout 45 $CS --tool $t $TP $H/run.py check $lib --config cand10 --dims 192 256 --sample 3 --seed 5 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t cand10 ${lib##*/tmp/}: |"; echo; done; done
