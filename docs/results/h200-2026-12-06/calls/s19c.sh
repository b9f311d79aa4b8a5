#!/bin/bash
# Device call s19c (issue 25): the wheel s19b installed on the warm machine:
# our SDPA suite without its decode cases (the decode kernel did not change).
# Meanwhile, where .carry/s19src is carried (the landed headers with
# lazy_rescale.diff applied, and harness.cu with its harness part), one CPU
# core builds s19a's harness library into /tmp/s19a with the device's nvcc,
# so s19a on the same warm machine needs no 13.9 MiB carry.
export PYTHONUNBUFFERED=1
if [ -d .carry/s19src ]; then
  mkdir -p /tmp/s19a
  NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  (T=$SECONDS; $NVCC -O3 -std=c++17 -arch=sm_90a --shared -Xcompiler -fPIC -lineinfo -I.carry/s19src .carry/s19src/harness.cu -o /tmp/s19a/libattn_harness.so.part > $OUT/harness_build.txt 2>&1 && mv /tmp/s19a/libattn_harness.so.part /tmp/s19a/libattn_harness.so && echo "harness built in $((SECONDS - T)) s" >> $OUT/harness_build.txt) &
fi
P=/tmp/tv/bin/python
S=mlx_builder/suites/sdpa
[ -x $P ] || echo "no venv from s19b"
[ -x $P ] && timeout -s INT 420 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_sdpa_large_head.py -k "not decode" 2>&1 | tail -3 | sed "s/^/suite (not decode): /" | tee $OUT/tests.txt
wait
cat $OUT/harness_build.txt 2>/dev/null | tail -3
