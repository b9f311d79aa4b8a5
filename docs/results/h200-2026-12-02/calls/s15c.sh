#!/bin/bash
# Device call s15c (issue 25), harness: P V as one wgmma over a warpgroup's whole output slice (m64n256k16 at 256 and 512, m64n192k16 at 192; build hw) against 64 columns per wgmma (build hpp, call 2's), both with the TMA tiles and warpgroup turns at 192 / 256; the wgmma tiles of hw checked at 192, 256 and 512 against float64, memcheck / racecheck / synccheck on small cases.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
for b in hw hpp; do mkdir -p /tmp/$b && cp .carry/$b/libattn_harness.so /tmp/$b/; done
timeout 100 $TP $H/run.py check --lib /tmp/hw/libattn_harness.so --config hopper --dims 192 256 512 --seed 41 --json $OUT/check_hw.json 2>&1 | tail -4 | sed "s/^/check hopper (hw): /"
# hw's hopper tiles at 192 / 256 are the landed TMA ones; hpp's are the cp.async ones (cand10 there is the landed code less the wide P V).
for r in 1 2; do
timeout 50 $TP $H/run.py bench --lib /tmp/hw/libattn_harness.so --dims 256 192 512 --configs hopper --lengths 2048 8192 32768 --iters 5 --no-torch --json $OUT/ab_hw_$r.json > /dev/null 2>&1
timeout 50 $TP $H/run.py bench --lib /tmp/hpp/libattn_harness.so --dims 256 192 --configs cand10 --lengths 2048 8192 32768 --iters 5 --no-torch --json $OUT/ab_hpp_$r.json > /dev/null 2>&1
timeout 30 $TP $H/run.py bench --lib /tmp/hpp/libattn_harness.so --dims 512 --configs hopper --lengths 2048 8192 32768 --iters 5 --no-torch --json $OUT/ab_hpp512_$r.json > /dev/null 2>&1
done
python3 - <<'P'
import json,os,glob
O=os.environ["OUT"]
for f in sorted(glob.glob(O+"/ab_*.json")):
    for r in json.load(open(f)):
        print(os.path.basename(f)[:-5], r["D"], r["L"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if k.startswith("ours_") and not k.endswith("_ms") and isinstance(v,(int,float))))
P
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for t in memcheck racecheck synccheck; do timeout 80 $CS --tool $t $TP $H/run.py check --lib /tmp/hw/libattn_harness.so --config hopper --dims 192 256 512 --quick --sample 3 --seed 7 2>&1 | grep -E "RACECHECK SUMMARY|ERROR SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t hopper hw: |"; echo; done
