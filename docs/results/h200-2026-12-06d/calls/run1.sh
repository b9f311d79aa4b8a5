#!/bin/bash
# Call 1 of session 23: session 22's two planned 512 candidates, its
# scripts as written with their names (and so their /tmp folders and tar
# files) changed from s24a / s24b to s25a / s25b.
N=docs/results/h200-2026-12-06c/next
sed 's/s24a/s25a/g' $N/s24a.sh | BUDGET=110 bash
sed 's/s24b/s25b/g' $N/s24b.sh | BUDGET=300 bash
