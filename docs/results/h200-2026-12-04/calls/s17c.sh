#!/bin/bash
# Device call s17c (issue 25): harness build s17c = the landed series (MLX's
# hopper tiles: BN 112 at 192, 80 at 256; cand11 = BN 64 at both, cand12 = BN 96
# at 192). Checks of the hopper tiles; the block order (query tiles per group,
# MLX_CUDA_SDPA_TILED_Q_TILE_GROUPS) at 8k-32k; the tiles against BN 64 in MLX's
# own order beside torch.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
L=/tmp/s17c/libattn_harness.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/s17c && cp .carry/s17c/libattn_harness.so $L
timeout 60 $TP $H/run.py check --lib $L --config hopper --dims 192 256 --seed 1721 --json $OUT/check_hopper.json 2>&1 | tail -1 | sed "s/^/check hopper D192+256 (all): /"
timeout 40 $TP $H/run.py check --lib $L --config all --dims 192 256 512 --sample 80 --seed 1722 2>&1 | tail -1 | sed "s/^/check all sample 80: /"
for g in 1 2 4 8 16; do
  timeout 60 $TP $H/run.py bench --lib $L --dims 192 256 --configs hopper --lengths 8192 16384 32768 --iters 5 --no-torch --q-tile-groups $g --json $OUT/hq_g$g.json > /dev/null 2>&1
done
timeout 60 $TP $H/run.py bench --lib $L --dims 192 256 --configs hopper --lengths 8192 16384 32768 --iters 5 --no-torch --json $OUT/hq_gdefault.json > /dev/null 2>&1
for r in 1 2; do
  timeout 80 $TP $H/run.py bench --lib $L --dims 192 256 --configs hopper cand11 --lengths 2048 8192 16384 32768 --iters 5 $([ $r = 1 ] || echo --no-torch) --json $OUT/hb_$r.json > /dev/null 2>&1
done
python3 - <<'P' | tee $OUT/harness.txt
import json,os,glob
O=os.environ["OUT"]
for f in sorted(glob.glob(O+"/h[bq]_*.json")):
    for r in json.load(open(f)):
        print(os.path.basename(f)[:-5], r["D"], r["L"], " ".join(f"{k.replace('ours_','')} {v:.1f}" for k,v in r.items() if not k.endswith("_ms") and isinstance(v,(int,float)) and k not in ("D","Hkv","L","qL","B","H","one_block_per_sm")))
P
