#!/usr/bin/env python3
"""Time every CUDA SDPA path MLX can take for a set of shapes, so the routing
table (patch 0030's route_sdpa) can be checked against measured ratios.

Run it with the Python of a venv holding a patched CUDA wheel:

    python scripts/route_ratios.py --out route_ratios.json

Each path runs in its own process (MLX reads MLX_CUDA_SDPA_PATH once), with
MLX_CUDA_SDPA_TRACE=1 so that every timing is labelled with the path that
really ran: a preferred path that does not support a shape falls through to
the next one. The default process shows which path the routing picks. The
table printed at the end gives, per shape, each path's time and its ratio to
the routed choice (> 1: slower than the choice).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

# One process per entry: a label and its environment. "default" is the
# routing itself; the others prefer one path (MLX_CUDA_SDPA_PATH). cuDNN may
# take head dims up to 256 when preferred, so it can be timed there; "gb10"
# is the tiled kernel's 99 KB configuration (sm_120/sm_121) run on this GPU,
# "mma" its mma.sync configuration where wgmma would run (sm_90).
RUNS = {
    "default": {},
    "cudnn": {"MLX_CUDA_SDPA_PATH": "cudnn", "MLX_CUDA_SDPA_CUDNN_MAX_HEAD_DIM": "256"},
    "tiled": {"MLX_CUDA_SDPA_PATH": "tiled"},
    "gb10": {"MLX_CUDA_SDPA_PATH": "tiled", "MLX_CUDA_SDPA_TILED_CONFIG": "small"},
    "mma": {"MLX_CUDA_SDPA_PATH": "tiled", "MLX_CUDA_SDPA_TILED_CONFIG": "large"},
    "decode": {"MLX_CUDA_SDPA_PATH": "decode"},
    "vector": {"MLX_CUDA_SDPA_PATH": "vector"},
    "fallback": {"MLX_CUDA_SDPA_PATH": "fallback"},
}
TRACE = re.compile(r"\[mlx-sdpa-route\] path=(\w+)")

WORKER = r"""
import json, sys, time
import mlx.core as mx
cases = json.loads(sys.argv[1])
iters = int(sys.argv[2])
H, HKV = 32, 16
for case in cases:
    kind, D, qL, kL, mask_kind = case
    mx.random.seed(0)
    q = mx.random.normal((1, H, qL, D)).astype(mx.bfloat16)
    k = mx.random.normal((1, HKV, kL, D)).astype(mx.bfloat16)
    v = mx.random.normal((1, HKV, kL, D)).astype(mx.bfloat16)
    mask = None
    if mask_kind == "causal":
        mask = "causal"
    elif mask_kind.startswith("window"):
        w = int(mask_kind[6:])
        qi = mx.arange(kL - qL, kL)[:, None]
        ki = mx.arange(kL)[None]
        mask = (qi >= ki) & (qi < ki + w)
    mx.eval(q, k, v, *([mask] if isinstance(mask, mx.array) else []))
    f = lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=D ** -0.5, mask=mask)
    try:
        print(f"@@case {json.dumps(case)}", file=sys.stderr, flush=True)
        mx.eval(f())
        times = []
        for _ in range(iters):
            mx.synchronize()
            t0 = time.perf_counter()
            mx.eval(f())
            mx.synchronize()
            times.append(time.perf_counter() - t0)
        times.sort()
        print(json.dumps({"case": case, "ms": 1e3 * times[len(times) // 2]}), flush=True)
    except Exception as exc:
        print(json.dumps({"case": case, "error": str(exc)[:200]}), flush=True)
    del q, k, v, mask
    mx.clear_cache()
"""


def default_cases() -> list[list]:
    cases = []
    for D in (128, 192, 256, 512):
        for L in (2048, 8192, 32768):
            cases.append(["prefill", D, L, L, "causal"])
    for L in (8192, 32768):
        cases.append(["prefill", 256, L, L, "window1024"])
    for D in (128, 256, 512):
        for kL in (4096, 131072):
            cases.append(["decode", D, 1, kL, "none"])
    return cases


def run_path(path: str, cases: list, iters: int, timeout: int) -> list[dict]:
    env = dict(os.environ, MLX_CUDA_SDPA_TRACE="1", **RUNS[path])
    proc = subprocess.run([sys.executable, "-c", WORKER, json.dumps(cases), str(iters)],
                          env=env, capture_output=True, text=True, timeout=timeout)
    # The trace lines that follow a case marker name the path(s) it ran.
    ran: dict[str, str] = {}
    current = None
    for line in proc.stderr.splitlines():
        if line.startswith("@@case "):
            current = line[7:]
        elif current and (m := TRACE.search(line)):
            ran.setdefault(current, m.group(1))
    out = []
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            rec["preferred"] = path
            ran_path = ran.get(json.dumps(rec["case"]), "?")
            # The 99 KB tiling is the tiled path under another label.
            rec["ran"] = "gb10" if path == "gb10" and ran_path == "tiled" else ran_path
            out.append(rec)
    if proc.returncode != 0:
        out.append({"preferred": path, "error": f"worker exited {proc.returncode}: "
                    + proc.stderr.strip()[-300:]})
    return out


def table(records: list[dict]) -> str:
    by_case: dict[str, dict] = {}
    for r in records:
        if "case" not in r:
            continue
        key = json.dumps(r["case"])
        slot = by_case.setdefault(key, {"case": r["case"], "paths": {}})
        if r["preferred"] == "default":
            slot["choice"] = r.get("ran")
            slot["choice_ms"] = r.get("ms")
        if "ms" in r:
            old = slot["paths"].get(r["ran"])
            if old is None or r["ms"] < old:
                slot["paths"][r["ran"]] = r["ms"]
    lines = ["| kind | D | qL | kL | mask | routed to | ms | other paths (ms, ratio to routed) |",
             "|---|---|---|---|---|---|---|---|"]
    for slot in by_case.values():
        kind, D, qL, kL, mask = slot["case"]
        base = slot.get("choice_ms")
        others = ", ".join(
            f"{p} {ms:.3f} ({ms / base:.2f}×)" if base else f"{p} {ms:.3f}"
            for p, ms in sorted(slot["paths"].items()) if p != slot.get("choice"))
        ms = f"{base:.3f}" if base else "—"
        lines.append(f"| {kind} | {D} | {qL} | {kL} | {mask} | {slot.get('choice', '?')} | "
                     f"{ms} | {others} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="route_ratios.json")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--runs", default=",".join(RUNS), help="comma list of " + ", ".join(RUNS))
    ap.add_argument("--timeout", type=int, default=300, help="seconds per path")
    ap.add_argument("--cases", default=None,
                    help='JSON list of [kind, D, qL, kL, mask] (default: the built-in set)')
    args = ap.parse_args()
    cases = json.loads(args.cases) if args.cases else default_cases()
    records: list[dict] = []
    unknown = [r for r in args.runs.split(",") if r not in RUNS]
    if unknown:
        ap.error(f"unknown run(s) {unknown}; known: {', '.join(RUNS)}")
    for path in args.runs.split(","):
        try:
            got = run_path(path, cases, args.iters, args.timeout)
        except subprocess.TimeoutExpired:
            got = [{"preferred": path, "error": f"timed out after {args.timeout} s"}]
        records += got
        print(f"{path}: {sum('ms' in r for r in got)} timed, "
              f"{sum('error' in r for r in got)} errors", flush=True)
    md = table(records)
    print(md)
    with open(args.out, "w") as f:
        json.dump({"records": records, "table": md}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
