#!/bin/bash
# Device call 6 of session 24 (issue 25): our SDPA suite on this session's
# wheel (.carry/whl24), prefill cases first, then decode, while the budget
# lasts. Carries .carry/whl24, .carry/wh2.
. scripts/device_call.sh
budget_start 540
mlx_venv .carry/whl24 || exit $?
S=mlx_builder/suites/sdpa
left=$((BUDGET - (SECONDS - T0)))
go "suite" && timeout -s INT $left $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_sdpa_large_head.py -k "not decode" 2>&1 | tail -3 | sed "s/^/suite (not decode): /" | tee $OUT/tests.txt
left=$((BUDGET - (SECONDS - T0)))
go "suite decode" && timeout -s INT $left $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_sdpa_large_head.py -k decode 2>&1 | tail -3 | sed "s/^/suite (decode): /" | tee -a $OUT/tests.txt
echo "done in $((SECONDS - T0)) s"
