#!/bin/bash
# Device call s13c (issue 19): the staged loop with half of Q in registers (cand5: 128x64, 2 stages, 160 KB; cand8: 128x32, 2 stages, 96 KB) against MLX's small / medium (half-Q ring) and large, D256; checks.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
for c in cand5 cand8; do timeout 90 $TP $H/run.py check --config $c --dims 256 --sample 60 --seed 41 --q-tile-groups 4 2>&1 | tail -1 | sed "s/^/check $c: /"; done
timeout 150 $TP $H/run.py bench --dims 256 --configs small medium cand5 cand8 large --lengths 2048 8192 16384 32768 --iters 5 --no-torch --q-tile-groups 4 --json $OUT/b256.json > /dev/null 2>&1
timeout 60 $TP $H/run.py bench --dims 256 --configs small medium cand5 cand8 large --hkv 16 --q-len 2048 --lengths 32768 --iters 5 --no-torch --q-tile-groups 4 --json $OUT/bchunk.json > /dev/null 2>&1
python3 - <<'P'
import json,os
O=os.environ["OUT"]
for f in ("b256","bchunk"):
    try: rows=json.load(open(O+"/"+f+".json"))
    except Exception as e: print(f, "missing", e); continue
    for r in rows:
        print(f, r["D"], r["qL"], r["L"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if (k.startswith("ours_") or k.startswith("torch_")) and not k.endswith("_ms")))
P
