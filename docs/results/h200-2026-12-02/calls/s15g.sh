#!/bin/bash
# Device call s15g (issues 25 and 19): the shapes users run most, against upstream's path in the same run. The landed wheel through MLX: mlx-lm's chunked prefill step (2048 queries against 32768 keys; D256 16 KV heads, D512 4 KV heads) and decode (D256 16 KV / kL 131072, gemma-4's D512 4 KV / kL 131072 and 32768), on the default (wgmma on the H200), the 99 KB tiles forced, and the unfused fallback (MLX_CUDA_SDPA_TILED=0, decode kernel off, no query chunking). Harness (call 2's hpp build, carried xz-compressed): the chunked step on the new wgmma tiles (cand10 there) against the old (hopper there), alternately twice.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/hx && xz -dc .carry/hx/libattn_harness.so.xz > /tmp/hx/libattn_harness.so
for r in 1 2; do for c in cand10 hopper; do
timeout 30 $TP $H/run.py bench --lib /tmp/hx/libattn_harness.so --dims 256 192 --configs $c --hkv 16 --q-len 2048 --lengths 32768 --iters 5 --no-torch --json $OUT/chunk_${c}_$r.json > /dev/null 2>&1
done; done
python3 - <<'P'
import json,os,glob
O=os.environ["OUT"]
for f in sorted(glob.glob(O+"/chunk_*.json")):
    for r in json.load(open(f)):
        print(os.path.basename(f)[:-5], r["D"], r["qL"], r["L"], " ".join(f"{k.replace('ours_','')} {v:.3f}" for k,v in r.items() if k.startswith("ours_") and isinstance(v,(int,float))))
P
SP=$($TP -c "import site;print(site.getsitepackages()[0])")
$TP -m venv /tmp/tv || exit 3
VS=/tmp/tv/lib/python3.12/site-packages
/tmp/tv/bin/pip install -q --no-index --no-deps .carry/whl/mlx-*.whl || exit 4
for d in nvidia numpy numpy.libs; do [ -e $SP/$d ] && ln -s $SP/$d $VS/$d; done
P=/tmp/tv/bin/python
M=$OUT/users.jsonl
K="--kinds chunked decode --iters 10 --warmup 3"
timeout 60 $P scripts/mlx_sdpa_cases.py --label default $K --dims 256 512 --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED_SMALL=1 timeout 60 $P scripts/mlx_sdpa_cases.py --label small $K --dims 256 512 --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED=0 MLX_CUDA_SDPA_DECODE=0 MLX_CUDA_USE_CUDNN_SDPA=0 MLX_SDPA_FALLBACK_CHUNK_BYTES=0 timeout 90 $P scripts/mlx_sdpa_cases.py --label fallback $K --dims 256 512 --out $M > /dev/null 2>&1
python3 - <<'P'
import json,os
for l in open(os.environ["OUT"]+"/users.jsonl"):
    r=json.loads(l)
    print(r['label'], r['kind'], r['D'], r['kv_heads'], r['qL'], r['kL'], f"{r['ms']:.3f} ms" if 'ms' in r else r.get('error','')[:60], f"{r['TFLOPs']:.0f} TF/s" if 'TFLOPs' in r else (f"{r['TB_s']:.2f} TB/s" if 'TB_s' in r else ""), f"peak+{r['peak_extra_gib']:.2f}" if 'peak_extra_gib' in r else "")
P
