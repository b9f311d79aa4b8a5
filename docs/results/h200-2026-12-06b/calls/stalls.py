"""Where the warp-specialized D512 block's warps stall, from ncu's source
page (`ncu -i REPORT --page source --csv --print-source sass`): the share
of stall samples of each warpgroup role (the P V code runs from the first
setmaxnreg dealloc to the score warpgroup's setmaxnreg alloc), the
reasons in each, and the SASS lines that take the most.

    python3 stalls.py sass.csv[.gz]
"""
import csv
import gzip
import sys
from collections import Counter


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def main(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    head = next(i for i, r in enumerate(rows) if "Source" in r)
    cols = rows[head]
    data = [r for r in rows[head + 1:] if len(r) == len(cols)]
    src, samples = cols.index("Source"), cols.index("Warp Stall Sampling (All Samples)")
    reasons = [i for i, c in enumerate(cols)
               if c.startswith("stall_") and "Not Issued" not in c]
    total = sum(number(r[samples]) for r in data) or 1.0
    dealloc = next(i for i, r in enumerate(data) if "SETMAXREG.DEALLOC" in r[src])
    alloc = next(i for i, r in enumerate(data) if "SETMAXREG.TRY_ALLOC" in r[src])
    regions = {"P V warpgroups": range(dealloc, alloc),
               "score warpgroup": range(alloc, len(data))}
    print(f"{len(data)} SASS lines, {total:.0f} stall samples")
    for name, lines in regions.items():
        share = sum(number(data[i][samples]) for i in lines)
        why = Counter()
        for i in lines:
            for c in reasons:
                why[cols[c][len("stall_"):]] += number(data[i][c])
        n = sum(why.values()) or 1.0
        top = ", ".join(f"{k} {100 * v / n:.0f}%" for k, v in why.most_common(5))
        print(f"\n{name}: {100 * share / total:.1f}% of samples ({top})")
        for i in sorted(lines, key=lambda i: -number(data[i][samples]))[:8]:
            print(f"  {100 * number(data[i][samples]) / share:5.1f}%  line {i:5d}  {data[i][src].strip()[:80]}")


if __name__ == "__main__":
    main(sys.argv[1])
