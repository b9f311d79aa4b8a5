#!/bin/bash
# Device call s13d (issue 19): the half-Q ring with smaller key tiles (cand5: BN 48, 2 slots, 80 KB; cand8: BN 32, 3 slots, 80 KB) against MLX's small (BN 64, 2 slots) and medium, D256; checks.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
for c in cand5 cand8; do timeout 90 $TP $H/run.py check --config $c --dims 256 --sample 60 --seed 51 --q-tile-groups 4 2>&1 | tail -1 | sed "s/^/check $c: /"; done
timeout 150 $TP $H/run.py bench --dims 256 --configs small cand5 cand8 medium --lengths 2048 8192 16384 32768 --iters 5 --no-torch --q-tile-groups 4 --json $OUT/b256.json > /dev/null 2>&1
timeout 100 $TP $H/run.py bench --dims 256 --configs small cand5 cand8 --lengths 2048 8192 32768 --iters 5 --no-torch --one-block-per-sm --q-tile-groups 4 --json $OUT/b256_1blk.json > /dev/null 2>&1
python3 - <<'P'
import json,os
O=os.environ["OUT"]
for f in ("b256","b256_1blk"):
    try: rows=json.load(open(O+"/"+f+".json"))
    except Exception as e: print(f, "missing", e); continue
    for r in rows:
        print(f, r["D"], r["qL"], r["L"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if k.startswith("ours_") and not k.endswith("_ms")))
P
