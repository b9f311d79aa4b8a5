#!/bin/bash
# Device call s25c (issue 25): the persistent 512 block (harness cand15 of
# library P = MLX's block, Persistent<KCopiesByPv<WarpSpecializedTraits<
# 512, 48, 2, 2>>>: one block per multiprocessor, tile after tile). Checks
# against float64 (every mask kind, odd sizes) and the sanitizers first (a
# hang shows as a timeout), then A/B against MLX's block as landed (library
# V, hopper) and as built in library P (hopper: its copy cursors moved to
# shared memory), alternating. s25d.sh runs it again on library P2 (NAME,
# LIB, RACE_REPORTS, TOOLS).
# Needs ../harness/persistent_harness.diff applied (run.py's cand15 and
# --persistent-blocks); main's run.py has neither.
. scripts/device_call.sh
budget_start 330
NAME=${NAME:-s25c}
J=/tmp/$NAME; mkdir -p $J
P_=${LIB:-.carry/libP/libattn_harness.so}
V_=.carry/libV/libattn_harness.so
go "check cand15" && timeout 150 $TP $H/run.py check --lib $P_ --config cand15 --dims 512 --seed 251 2>&1 | tail -1 | sed "s/^/check cand15 D512: /"
go "check cand15 3 blocks" && timeout 90 $TP $H/run.py check --lib $P_ --config cand15 --dims 512 --seed 253 --sample 40 --persistent-blocks 3 2>&1 | tail -1 | sed "s/^/check cand15 D512, 3 persistent blocks: /"
go "check hopper P" && timeout 60 $TP $H/run.py check --lib $P_ --config hopper --dims 512 --seed 252 --sample 30 2>&1 | tail -1 | sed "s/^/check hopper (P) D512 (30 sampled): /"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
if [ -n "$RACE_REPORTS" ]; then
  go "racecheck cand15 reports" && timeout 60 $CS --tool racecheck --print-limit 4 $TP $H/run.py check --lib $P_ --config cand15 --dims 512 --quick --sample 2 --seed 9 --persistent-blocks 2 2>&1 | grep -vE "^=+ +at |^=+ *$" | head -40
  go "racecheck hopper" && timeout 60 $CS --tool racecheck $TP $H/run.py check --lib $P_ --config hopper --dims 512 --quick --sample 4 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|racecheck hopper (P2) D512: |"; echo
  go "racecheck hopper V" && timeout 60 $CS --tool racecheck $TP $H/run.py check --lib $V_ --config hopper --dims 512 --quick --sample 4 --seed 9 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|racecheck hopper (V) D512: |"; echo
fi
for t in ${TOOLS:-memcheck racecheck synccheck}; do
  go "$t cand15" && timeout 60 $CS --tool $t $TP $H/run.py check --lib $P_ --config cand15 --dims 512 --quick --sample 4 --seed 9 --persistent-blocks 2 2>&1 | grep -E "SUMMARY|passed|failed" | tail -2 | tr '\n' ' ' | sed "s|^|$t cand15 D512: |"; echo
done
for R in 1 2 3; do
  harness_bench $J V_r$R $V_ "hopper" 512 "2048" 4
  harness_bench $J P_r$R $P_ "hopper cand15" 512 "2048" 4
  harness_bench $J V_r$R $V_ "hopper" 512 "8192 16384 32768" 1
  harness_bench $J P_r$R $P_ "hopper cand15" 512 "8192 16384 32768" 1
  harness_bench $J V_r$R $V_ "hopper" 512 "2048 8192 32768" 1 --hkv 4
  harness_bench $J P_r$R $P_ "hopper cand15" 512 "2048 8192 32768" 1 --hkv 4
  harness_bench $J V_r$R $V_ "hopper" 512 "32768" 4 --hkv 4 --q-len 2048
  harness_bench $J P_r$R $P_ "hopper cand15" 512 "32768" 4 --hkv 4 --q-len 2048
done
python3 scripts/device_summary.py harness $J/*.json | tee $OUT/harness.txt
tar -C /tmp -czf $OUT/$NAME.tgz $NAME
echo "done in $((SECONDS - T0)) s"
