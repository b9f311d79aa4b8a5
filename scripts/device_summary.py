#!/usr/bin/env python3
"""One line per measured case from a device call's JSON output, for the
call's printed log (the files themselves come back beside it).

    python3 scripts/device_summary.py harness OUT/hb_*.json
    python3 scripts/device_summary.py cases OUT/cases.jsonl

`harness`: the JSON lists `attn_harness/run.py bench --json` writes; each
line is the file's tag (its name less `.json` and any `hb_`), D, KV heads, L and every TFLOP/s
figure. `cases`: the JSON lines of mlx_sdpa_cases.py / torch_sdpa_cases.py;
each line is label, backend, kind, D, KV heads, qL, kL and the time with
TFLOP/s or TB/s (or the error), and the peak extra memory where recorded.
Standard library only: it runs in any Python on the device machine.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

# Keys of a harness record that describe the case, not a measured figure.
HARNESS_CASE_KEYS = ("D", "Hkv", "L", "qL", "B", "H", "one_block_per_sm",
                     "q_tile_groups")


def harness_lines(path: str) -> list[str]:
    tag = os.path.basename(path).removesuffix(".json").removeprefix("hb_")
    with open(path) as f:
        records = json.load(f)
    lines = []
    for r in records:
        figures = " ".join(
            f"{k.replace('ours_', '')} {v:.1f}" for k, v in r.items()
            if not k.endswith("_ms") and isinstance(v, (int, float))
            and k not in HARNESS_CASE_KEYS)
        lines.append(f"{tag} {r['D']} {r['Hkv']} {r['L']} {figures}")
    return lines


def case_line(r: dict[str, Any]) -> str:
    if r["kind"] == "floor":
        return f"{r['label']} floor {r['ms'] * 1e3:.1f} us"
    if "TFLOPs" in r:
        figure = f"{r['ms']:.3f} ms {r['TFLOPs']:.0f} TF/s"
    elif "ms" in r:
        figure = f"{r['ms']:.3f} ms {r.get('TB_s', 0):.2f} TB/s"
    else:
        figure = r.get("error", "")[:60]
    peak = f"peak+{r['peak_extra_gib']:.2f}" if "peak_extra_gib" in r else ""
    return " ".join(str(x) for x in (
        r["label"], r.get("backend", ""), r["kind"], r["D"],
        r.get("kv_heads", ""), r["qL"], r["kL"], figure, peak))


def case_lines(path: str) -> list[str]:
    with open(path) as f:
        return [case_line(json.loads(line)) for line in f if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=("harness", "cases"))
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    read = harness_lines if args.kind == "harness" else case_lines
    for path in sorted(args.files) if args.kind == "harness" else args.files:
        for line in read(path):
            print(line)


if __name__ == "__main__":
    main()
