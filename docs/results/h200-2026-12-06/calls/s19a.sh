#!/bin/bash
# Device call s19a (issue 25): harness build s19a = the landed 0020 plus the
# lazy rescale for the wgmma tiles at 192 / 256 (kLazyRescale). Slots:
# 192: hopper = MLX's (BN 112, four-product P V), cand13 = WidePvTraits<192,
# 112> (one m64n192k16), cand12 = LazyWidePvTraits<192, 112>;
# 256: hopper = MLX's (WidePvTraits<256, 80>), cand13 = LazyWidePvTraits<256,
# 80>, cand12 = the four-product tiles before; 512: hopper = MLX's.
# Built with run.py build --mlx-src <tree> --arch 90a --out .carry/s19a/libattn_harness.so
# Steps run in order of need; a step that would start past $BUDGET seconds
# (default 540, inside the call's 600 s) is skipped and says so.
export PYTHONUNBUFFERED=1
BUDGET=${BUDGET:-540}
T0=$SECONDS
go() { [ $((SECONDS - T0)) -lt $BUDGET ] || { echo "skipped (past ${BUDGET} s): $*"; return 1; }; }
TP=/opt/torch/.venv/bin/python
H=scripts/attn_harness
L=/tmp/s19a/libattn_harness.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
# s19c builds it on a warm machine; otherwise it is carried.
[ -f $L ] || { mkdir -p /tmp/s19a && cp .carry/s19a/libattn_harness.so $L; } || exit 6
for c in "cand13 192" "cand12 192" "cand13 256" "hopper 256"; do
  set -- $c
  timeout 60 $TP $H/run.py check --lib $L --config $1 --dims $2 --seed 19$2 2>&1 | tail -1 | sed "s/^/check $1 D$2 (all): /"
done
ab() {
  NT=$([ $1 = 1 ] || echo --no-torch)
  go "A/B run $1 D256" && timeout 80 $TP $H/run.py bench --lib $L --dims 256 --configs hopper cand13 cand12 --lengths 2048 4096 8192 16384 32768 --iters 5 $NT --json $OUT/hb_d256_$1.json > /dev/null 2>&1
  go "A/B run $1 D192" && timeout 80 $TP $H/run.py bench --lib $L --dims 192 --configs hopper cand13 cand12 --lengths 2048 4096 8192 16384 32768 --iters 5 $NT --json $OUT/hb_d192_$1.json > /dev/null 2>&1
}
ab 1
for g in 1 2 4 8; do
  go "D512 groups $g" && timeout 60 $TP $H/run.py bench --lib $L --dims 512 --configs hopper --lengths 8192 16384 32768 --iters 5 --no-torch --q-tile-groups $g --json $OUT/hb_d512_g$g.json > /dev/null 2>&1
done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for c in "cand13 256" "cand12 192"; do
  set -- $c
  for t in memcheck synccheck racecheck; do
    go "$t $1 D$2" && timeout 40 $CS --tool $t $TP $H/run.py check --lib $L --config $1 --dims $2 --quick --sample 3 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t $1 D$2: |"; echo
  done
done
ab 2
ab 3
go "D256 groups 4" && timeout 60 $TP $H/run.py bench --lib $L --dims 256 --configs hopper cand13 --lengths 16384 32768 --iters 5 --no-torch --q-tile-groups 4 --json $OUT/hb_d256_g4.json > /dev/null 2>&1
python3 scripts/device_summary.py harness $OUT/hb_*.json | tee $OUT/harness.txt
