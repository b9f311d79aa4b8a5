#!/bin/bash
# Planned device call s22c (issue 25), not run yet: on the machine s22b left
# warm, our SDPA suite without its decode cases on session 21's wheel.
. scripts/device_call.sh
[ -x "$P" ] || { echo "no venv from s22b"; exit 5; }
S=mlx_builder/suites/sdpa
timeout -s INT ${LIMIT:-540} $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_sdpa_large_head.py -k "not decode" 2>&1 | tail -3 | sed "s/^/suite (not decode): /" | tee $OUT/tests.txt
