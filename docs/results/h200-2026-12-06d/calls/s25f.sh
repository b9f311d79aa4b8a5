#!/bin/bash
# Device call s25f (issue 25): the persistent 512 candidate (harness
# cand15) after its sums barriers took one arrival per thread (library P3):
# checks with 3 persistent blocks and racecheck (s25d reported hazards on
# the sums with one arrival per warp). Carries .carry/libP3.
# Needs ../harness/persistent_harness.diff applied (run.py's cand15 and
# --persistent-blocks); main's run.py has neither.
. scripts/device_call.sh
budget_start 150
L=.carry/libP3/libattn_harness.so
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
go "check cand15 P3" && timeout 60 $TP scripts/attn_harness/run.py check --lib $L --config cand15 --dims 512 --seed 254 --sample 40 --persistent-blocks 3 2>&1 | tail -1 | sed "s/^/check cand15 (P3) D512, 3 persistent blocks: /"
go "racecheck cand15 P3" && timeout 60 $CS --tool racecheck $TP scripts/attn_harness/run.py check --lib $L --config cand15 --dims 512 --quick --sample 4 --seed 9 --persistent-blocks 2 2>&1 | grep -E "SUMMARY|passed|failed|Race" | head -4 | tr '\n' ' ' | sed "s|^|racecheck cand15 (P3) D512: |"; echo
echo "done in $((SECONDS - T0)) s"
