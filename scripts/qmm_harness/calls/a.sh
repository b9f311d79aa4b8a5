# Device call A: start the MLX build (own process session), run the kernel
# harness meanwhile, wait for the wheel, then check it. Run from the
# checkout's root with the carry folder C holding the bundle, the
# mlx-builder wheelhouse and the harness sources.
C=${C:-.carry-qmm}
export PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
TP=/opt/torch/.venv/bin/python
ROOT=$PWD
T0=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
$TP -m pip install -q --no-index --no-deps --target /tmp/mb $C/wheelhouse/*.whl || exit 3
if [ ! -e /tmp/dist/done ]; then
  (cd /tmp && PYTHONPATH=/tmp/mb CC=/usr/bin/gcc CXX=/usr/bin/g++ setsid nohup sh -c \
    "$TP -m mlx_builder --offline build --from-bundle $ROOT/$C/mlx-*.tar.gz --target cuda-sm90 --toolchain system --python $TP --out /tmp/dist && touch /tmp/dist/done" \
    > /tmp/build.log 2>&1 &)
fi
nice -n 5 $TP $C/run.py build check bench-gemv bench-prefill --lib /tmp/qmm_harness.so --json $OUT/harness.json > $OUT/harness.log 2>&1
echo "harness rc=$? at $((SECONDS - T0)) s"
grep -E "check:|FAIL" $OUT/harness.log | head -5
while [ ! -e /tmp/dist/done ] && [ $((SECONDS - T0)) -lt ${WAIT:-555} ]; do
  if ! pgrep -f mlx_builder > /dev/null; then echo "build stopped"; break; fi
  sleep 5
done
echo "build wait ended at $((SECONDS - T0)) s"
tail -c 3000 /tmp/build.log > $OUT/build-tail.log
ls /tmp/dist
tail -n 62 $OUT/harness.log
