#!/bin/bash
# Device call s25d (issue 25): s25c again on library P2, whose copy
# cursors step within a tile by an increment (P worked out the tile's
# scope at every copy and lost 15 % in its own non-persistent block), with
# racecheck's hazard reports printed (of cand15, and the count of MLX's
# block in P2 and V) before memcheck and synccheck.
NAME=s25d LIB=.carry/libP2/libattn_harness.so RACE_REPORTS=1 \
  TOOLS="memcheck synccheck" BUDGET=${BUDGET:-330} \
  bash docs/results/h200-2026-12-06d/calls/s25c.sh
