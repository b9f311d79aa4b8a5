#!/bin/bash
# Device call s17f (issues 25, 19): the same wheel (installed by s17e on the warm
# machine): upstream's test_fast_sdpa, our SDPA suite and the memory bounds.
export PYTHONUNBUFFERED=1
P=/tmp/tv/bin/python
[ -x $P ] || { echo "no venv from s17e"; exit 5; }
(cd .carry/up && timeout -s INT 60 $P -m pytest -q -p no:cacheprovider test_fast_sdpa.py 2>&1 | tail -1) | sed "s/^/upstream test_fast_sdpa: /" | tee $OUT/tests.txt
S=mlx_builder/suites/sdpa
timeout -s INT 150 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_sdpa_large_head.py 2>&1 | tail -1 | sed "s/^/suite: /" | tee -a $OUT/tests.txt
timeout -s INT 60 $P -m pytest -q -p no:cacheprovider -m "" --confcutdir=$S $S/test_memory.py 2>&1 | tail -1 | sed "s/^/memory: /" | tee -a $OUT/tests.txt
