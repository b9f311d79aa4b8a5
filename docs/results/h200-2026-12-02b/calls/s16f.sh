#!/bin/bash
# Device call s16f (issue 25): the same wheel as s16e, prefill timed again with
# more calls per point (10 waited after 3 warm-up; 8 queued per wait), D256 (the
# unchanged wgmma tiles, byte-identical SASS) and D512, to see past s16e's
# three-call medians; torch cuDNN / FA2 at D256 in its own process.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
SP=$($TP -c "import site;print(site.getsitepackages()[0])")
$TP -m venv /tmp/tv || exit 3
VS=/tmp/tv/lib/python3.12/site-packages
/tmp/tv/bin/pip install -q --no-index --no-deps .carry/whl/mlx-*.whl || exit 4
for d in nvidia numpy numpy.libs; do [ -e $SP/$d ] && ln -s $SP/$d $VS/$d; done
P=/tmp/tv/bin/python
M=$OUT/cases.jsonl
K="--kinds prefill --iters 10 --warmup 3"
timeout 80 $P scripts/mlx_sdpa_cases.py --label default $K --dims 256 512 --out $M > /dev/null 2>&1
timeout 60 $P scripts/mlx_sdpa_cases.py --label default-queued8 $K --queued 8 --dims 256 512 --out $M > /dev/null 2>&1
timeout 60 $TP scripts/torch_sdpa_cases.py --kinds prefill --iters 10 --warmup 3 --dims 256 --backends flash cudnn --out $M > /dev/null 2>&1
python3 - <<'P' | tee $OUT/mlx.txt
import json,os
for l in open(os.environ["OUT"]+"/cases.jsonl"):
    r=json.loads(l)
    if r['kind']=='floor': print(r['label'], 'floor', f"{r['ms']*1e3:.1f} us"); continue
    print(r['label'], r['kind'], r['D'], r.get('kv_heads',''), r['qL'], f"{r['ms']:.3f} ms {r['TFLOPs']:.0f} TF/s" if 'TFLOPs' in r else r.get('error','')[:50])
P
