#!/bin/bash
# Device call s19c (issue 25): the wheel s19b installed on the warm machine:
# our SDPA suite without its decode cases (the decode kernel did not change).
export PYTHONUNBUFFERED=1
P=/tmp/tv/bin/python
[ -x $P ] || { echo "no venv from s19b"; exit 5; }
S=mlx_builder/suites/sdpa
timeout -s INT 420 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_sdpa_large_head.py -k "not decode" 2>&1 | tail -3 | sed "s/^/suite (not decode): /" | tee $OUT/tests.txt
