#!/bin/bash
# Device call s13e (issue 19): the half-Q ring at head dim 192 (64 of 192 head dims kept in shared memory; cand3: 2 slots, 64 KB; cand5: 3 slots, 88 KB) against MLX's small (all of Q in registers) and large; checks.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
for c in cand3 cand5; do timeout 90 $TP $H/run.py check --config $c --dims 192 --sample 60 --seed 61 --q-tile-groups 4 2>&1 | tail -1 | sed "s/^/check $c: /"; done
timeout 150 $TP $H/run.py bench --dims 192 --configs small cand3 cand5 large --lengths 2048 8192 16384 32768 --iters 5 --q-tile-groups 4 --json $OUT/b192.json > /dev/null 2>&1
timeout 100 $TP $H/run.py bench --dims 192 --configs small cand3 cand5 --lengths 2048 8192 32768 --iters 5 --no-torch --one-block-per-sm --q-tile-groups 4 --json $OUT/b192_1blk.json > /dev/null 2>&1
python3 - <<'P'
import json,os
O=os.environ["OUT"]
for f in ("b192","b192_1blk"):
    try: rows=json.load(open(O+"/"+f+".json"))
    except Exception as e: print(f, "missing", e); continue
    for r in rows:
        print(f, r["D"], r["qL"], r["L"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if (k.startswith("ours_") or k.startswith("torch_")) and not k.endswith("_ms") and v))
P
