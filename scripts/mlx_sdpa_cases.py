#!/usr/bin/env python3
"""Time MLX's fast SDPA on the shapes users run, in this process's MLX.

    python scripts/mlx_sdpa_cases.py --label NAME [--out FILE.jsonl]

Run it once per environment (MLX reads its MLX_CUDA_SDPA_* variables once),
e.g. the patched default, MLX_CUDA_SDPA_TILED_CONFIG=small (the 99 KB
configuration), small-1sm (the same at GB10's occupancy), large (mma.sync
on sm_90) and MLX_CUDA_SDPA_TILED=0 (upstream's unfused fallback). Cases: causal prefill
qL = kL, mlx-lm's chunked prefill (2048 queries against a long cache,
bottom-right causal) and decode (one query); bf16, 32 query heads. Each call
is waited for (latency); the median of --iters calls after --warmup. With
--queued N, N calls are queued and waited for together instead (the time
per call: MLX's per-call cost overlaps the GPU's work), and a "floor" line
gives the waited-for time of a one-element add (MLX's cost per call with
no work). TFLOP/s
count the visible (query, key) pairs: 4 * H * pairs * D. Decode reports
TB/s of K and V read. One JSON line per case.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

# (kind, D, kv heads, qL, kL): prefill at gemma-4's two head dims (512 also
# with its global layers' 4 KV heads) and at 192, the chunked-prefill step,
# and decode at both layer shapes.
CASES = (
    [("prefill", 256, 16, L, L) for L in (2048, 8192, 16384, 32768)]
    + [("prefill", 512, 16, L, L) for L in (2048, 8192, 16384, 32768)]
    + [("prefill", 512, 4, L, L) for L in (2048, 8192, 16384, 32768)]
    + [("prefill", 192, 16, L, L) for L in (2048, 8192, 16384, 32768)]
    + [("chunked", 256, 16, 2048, 32768), ("chunked", 512, 4, 2048, 32768)]
    + [("decode", 256, 16, 1, 131072), ("decode", 512, 4, 1, 131072),
       ("decode", 512, 4, 1, 32768)]
)
HEADS = 32


def causal_pairs(qL: int, kL: int) -> int:
    return qL * (kL - qL) + qL * (qL + 1) // 2


def tflops(D: int, qL: int, kL: int, ms: float) -> float:
    """TFLOP/s of one causal call over the visible pairs, 4 * H * pairs * D."""
    return 4 * HEADS * causal_pairs(qL, kL) * D / (ms * 1e-3) / 1e12


def add_run_options(ap: argparse.ArgumentParser) -> None:
    """The options this script shares with torch_sdpa_cases.py."""
    ap.add_argument("--out", help="append JSON lines here too")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--dims", nargs="+", type=int, default=[192, 256, 512],
                    help="head dims to run (default: all)")


def emit(row: dict, out: str | None) -> None:
    """Prints one case's JSON line and appends it to `out`, if given."""
    line = json.dumps(row)
    print(line, flush=True)
    if out:
        with open(out, "a") as f:
            f.write(line + "\n")


def median_ms(fn, iters, per_call=1):
    """Median over `iters` runs of fn, in ms per call (fn makes per_call)."""
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) / per_call)
    times.sort()
    return times[len(times) // 2] * 1e3


def time_floor(mx, warmup, iters):
    """The waited-for time of a one-element add: MLX's cost per call."""
    x = mx.zeros((1,))
    mx.eval(x)
    def add():
        mx.eval(x + 1)

    for _ in range(warmup):
        add()
    return {"kind": "floor", "ms": median_ms(add, iters)}


def time_case(mx, kind, D, hkv, qL, kL, warmup, iters, queued=0):
    q = mx.random.normal((1, HEADS, qL, D)).astype(mx.bfloat16)
    k = mx.random.normal((1, hkv, kL, D)).astype(mx.bfloat16)
    v = mx.random.normal((1, hkv, kL, D)).astype(mx.bfloat16)
    mx.eval(q, k, v)
    mask = None if kind == "decode" else "causal"
    scale = D ** -0.5

    def call():
        out = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)
        mx.eval(out)

    def queue():
        outs = [mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)
                for _ in range(queued)]
        mx.eval(*outs)

    mx.reset_peak_memory()
    base = mx.get_active_memory()
    call()
    peak = mx.get_peak_memory() - base
    for _ in range(warmup):
        call()
    ms = median_ms(queue, iters, queued) if queued else median_ms(call, iters)
    row = {"kind": kind, "D": D, "kv_heads": hkv, "qL": qL, "kL": kL,
           "ms": ms, "peak_extra_gib": peak / 2**30}
    if queued:
        row["queued"] = queued
    if kind == "decode":
        row["TB_s"] = 2 * k.nbytes / (ms * 1e-3) / 1e12
    else:
        row["TFLOPs"] = tflops(D, qL, kL, ms)
    mx.clear_cache()
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--label", required=True)
    add_run_options(ap)
    ap.add_argument("--kinds", nargs="+", default=["prefill", "chunked", "decode"])
    ap.add_argument("--queued", type=int, default=0,
                    help="queue N calls per timing and wait for them together")
    args = ap.parse_args()
    if args.queued < 0:
        ap.error("--queued must be 0 (each call waited for) or more")
    import mlx.core as mx
    env = {k: v for k, v in os.environ.items() if k.startswith("MLX_")}
    if args.queued:
        row = time_floor(mx, args.warmup, args.iters)
        row.update(label=args.label, env=env, mlx=mx.__version__)
        emit(row, args.out)
    for case in CASES:
        if case[0] not in args.kinds or case[1] not in args.dims:
            continue
        try:
            row = time_case(mx, *case, args.warmup, args.iters, args.queued)
        except (RuntimeError, ValueError) as exc:  # out of memory, no kernel
            row = {"kind": case[0], "D": case[1], "kv_heads": case[2],
                   "qL": case[3], "kL": case[4], "error": str(exc)[:200]}
        row.update(label=args.label, env=env, mlx=mx.__version__)
        emit(row, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
