#!/bin/bash
# Device call s15b (issue 25), harness: the wgmma tiles at 192 / 256 with TMA (cand10) with and without the two warpgroups taking turns (hpp / h90 builds, as in s15a), timed alternately three times to see past run-to-run spread; the same with four query-tile groups; racecheck on small sizes (s15a's 45 s limit cut it); the sm_80-path build checked on its own configurations (s15a asked it for the wgmma one, which it does not have).
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
for b in h90 hpp h80; do mkdir -p /tmp/$b && cp .carry/$b/libattn_harness.so /tmp/$b/; done
for r in 1 2 3; do for b in h90 hpp; do
timeout 50 $TP $H/run.py bench --lib /tmp/$b/libattn_harness.so --dims 256 192 --configs cand10 hopper --lengths 2048 8192 32768 --iters 5 --no-torch --json $OUT/ab_${b}_$r.json > /dev/null 2>&1
done; done
for b in h90 hpp; do timeout 40 $TP $H/run.py bench --lib /tmp/$b/libattn_harness.so --dims 256 192 --configs cand10 --lengths 2048 8192 32768 --iters 5 --no-torch --q-tile-groups 4 --json $OUT/g4_${b}.json > /dev/null 2>&1; done
python3 - <<'P'
import json,os,glob
O=os.environ["OUT"]
for f in sorted(glob.glob(O+"/ab_*.json"))+sorted(glob.glob(O+"/g4_*.json")):
    for r in json.load(open(f)):
        print(os.path.basename(f)[:-5], r["D"], r["L"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if k.startswith("ours_") and not k.endswith("_ms") and isinstance(v,(int,float))))
P
timeout 60 $TP $H/run.py check --lib /tmp/h80/libattn_harness.so --config both --dims 192 256 512 --sample 80 --seed 21 --q-tile-groups 4 2>&1 | tail -1 | sed "s/^/check small+large (h80): /"
timeout 40 $TP $H/run.py check --lib /tmp/h80/libattn_harness.so --config medium --dims 192 256 512 --sample 40 --seed 22 --q-tile-groups 4 2>&1 | tail -1 | sed "s/^/check medium (h80): /"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for b in h90 hpp; do timeout 100 $CS --tool racecheck $TP $H/run.py check --lib /tmp/$b/libattn_harness.so --config cand10 --dims 192 256 --quick --sample 2 --seed 5 2>&1 | grep -E "RACECHECK SUMMARY|ERROR SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|racecheck cand10 $b: |"; echo; done
