#!/bin/bash
# Device call s12i (issue 19): the block order through MLX on the wgmma path, A/B repeated (4 groups vs the order before), prefill and chunked.
export PYTHONUNBUFFERED=1
TP=/opt/torch/.venv/bin/python
SP=$($TP -c "import site;print(site.getsitepackages()[0])")
$TP -m venv /tmp/tv || exit 3
VS=/tmp/tv/lib/python3.12/site-packages
/tmp/tv/bin/pip install -q --no-index --no-deps .carry/whl/mlx-*.whl || exit 4
for d in nvidia numpy numpy.libs; do [ -e $SP/$d ] && ln -s $SP/$d $VS/$d; done
P=/tmp/tv/bin/python
M=$OUT/ab.jsonl
for i in 1 2 3; do
$P scripts/mlx_sdpa_cases.py --label groups4-$i --kinds prefill chunked --out $M > /dev/null 2>&1
MLX_CUDA_SDPA_TILED_Q_TILE_GROUPS=1073741824 $P scripts/mlx_sdpa_cases.py --label before-$i --kinds prefill chunked --out $M > /dev/null 2>&1
done
python3 - <<'P'
import json,os,statistics as st
from collections import defaultdict
t=defaultdict(lambda: defaultdict(list))
for l in open(os.environ["OUT"]+"/ab.jsonl"):
    r=json.loads(l); t[(r['kind'],r['D'],r['qL'],r['kL'])][r['label'].split('-')[0]].append(r['ms'])
for k,v in t.items():
    a,b=v['groups4'],v['before']
    print(k, 'groups4', [round(x,3) for x in a], 'before', [round(x,3) for x in b], 'median ratio before/groups4 %.3f' % (st.median(b)/st.median(a)))
P
