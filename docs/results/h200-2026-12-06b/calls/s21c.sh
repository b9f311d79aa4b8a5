#!/bin/bash
# Device call s21c (issue 25): the wheel s21a installed on the warm machine:
# our SDPA suite without its decode cases (the decode kernel did not change),
# the long cases first.
export PYTHONUNBUFFERED=1
P=/tmp/tv/bin/python
S=mlx_builder/suites/sdpa
[ -x $P ] || { echo "no venv from s21a"; exit 5; }
timeout -s INT ${LIMIT:-540} $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_sdpa_large_head.py -k "not decode" 2>&1 | tail -3 | sed "s/^/suite (not decode): /" | tee $OUT/tests.txt
