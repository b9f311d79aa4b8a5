#!/usr/bin/env python3
"""Time PyTorch's SDPA backends on mlx_sdpa_cases.py's shapes, timed the same way.

    python scripts/torch_sdpa_cases.py [--out FILE.jsonl] [--backends flash cudnn efficient]

The comparison for `mlx_sdpa_cases.py` (run it in another process: torch and
an MLX build abort when imported together). Same cases (causal prefill
qL = kL and mlx-lm's chunked step, 2048 queries against 32768 keys, with
MLX's bottom-right causal alignment: torch's `causal_lower_right`), bf16,
32 query heads, [B, H, L, D] inputs, the same clock: each call is waited for
(torch.cuda.synchronize) and timed on the host, the median of --iters calls
after --warmup. K and V are expanded to the query heads once, before timing
(torch's flash backend takes no GQA here). A backend without a kernel for a
shape (flash and cuDNN past head dim 256) gets an "error" line, not a number.
One JSON line per case and backend; TFLOP/s count the visible pairs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mlx_sdpa_cases import CASES, HEADS, add_run_options, emit, tflops

BACKENDS = ("flash", "cudnn", "efficient")


def time_case(torch, backend, D, hkv, qL, kL, warmup, iters):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.bias import causal_lower_right

    kinds = {"flash": SDPBackend.FLASH_ATTENTION,
             "cudnn": SDPBackend.CUDNN_ATTENTION,
             "efficient": SDPBackend.EFFICIENT_ATTENTION}
    dt = torch.bfloat16
    q = torch.randn(1, HEADS, qL, D, device="cuda", dtype=dt)
    k = torch.randn(1, hkv, kL, D, device="cuda", dtype=dt)
    v = torch.randn(1, hkv, kL, D, device="cuda", dtype=dt)
    k = k.repeat_interleave(HEADS // hkv, 1)
    v = v.repeat_interleave(HEADS // hkv, 1)
    scale = D ** -0.5
    sdpa = torch.nn.functional.scaled_dot_product_attention
    if qL == kL:
        def call():
            sdpa(q, k, v, is_causal=True, scale=scale)
            torch.cuda.synchronize()
    else:
        bias = causal_lower_right(qL, kL)

        def call():
            sdpa(q, k, v, attn_mask=bias, scale=scale)
            torch.cuda.synchronize()

    with sdpa_kernel(kinds[backend]):
        for _ in range(warmup + 1):
            call()
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2] * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(ap)
    ap.add_argument("--kinds", nargs="+", default=["prefill", "chunked"],
                    choices=["prefill", "chunked"])
    ap.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    args = ap.parse_args()
    import torch
    for kind, D, hkv, qL, kL in CASES:
        if kind not in args.kinds or D not in args.dims:
            continue
        for backend in args.backends:
            row = {"kind": kind, "D": D, "kv_heads": hkv, "qL": qL, "kL": kL,
                   "label": f"torch-{backend}", "torch": torch.__version__}
            try:
                ms = time_case(torch, backend, D, hkv, qL, kL, args.warmup, args.iters)
                row["ms"] = ms
                row["TFLOPs"] = tflops(D, qL, kL, ms)
            except RuntimeError as exc:  # no kernel for this shape, out of memory
                row["error"] = str(exc).splitlines()[0][:200]
            torch.cuda.empty_cache()
            emit(row, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
