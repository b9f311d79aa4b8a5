#!/usr/bin/env python3
"""Drive the split-K decode attention kernel outside MLX.

    python scripts/attn_harness/decode.py check [--kernel simt|mma] [--quick] [--seed N] [--json OUT]
    python scripts/attn_harness/decode.py bench [--kernels simt mma] [--dims ...] [--lengths ...]

Uses the library `run.py build` makes (harness.cu compiles the decode header
of the patched tree too). `check` compares against the float64 reference of
run.py on fresh random inputs: qL 1-3, kL 1 to 131072, head dims 192/256/512,
GQA 1/2/8, causal or not, sinks, one split / the launcher's split count / an
odd split count. `bench` reports time and the bandwidth of reading K and V.
Two pass-1 kernels: "simt" (scalar multiply-adds, kernel_sdpa_decode_split)
and "mma" (tensor cores, query rows of a KV head as the n side,
kernel_sdpa_decode_mma).
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import math
import random
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import DEFAULT_LIB, TOLERANCE, _time, reference

# Mirrors the split choice of scaled_dot_product_attention_decode.cu.
CTAS_PER_SM = {"simt": 4, "mma": 1}
MIN_KEYS_PER_SPLIT = 256
MAX_SPLITS = 1024
KERNELS = {"simt": 0, "mma": 1}  # harness.cu's kDecodeSimt / kDecodeMma


@dataclass
class DecodeCase:
    D: int
    dtype: str
    qL: int
    kL: int
    gqa: int
    causal: bool
    splits: str  # "one", "auto" or "odd"
    B: int = 2
    Hkv: int = 2
    sinks: bool = False


class DecodeKernel:
    def __init__(self, lib_path: Path, kind: str = "simt") -> None:
        self.name = kind
        self.kind = KERNELS[kind]
        self.lib = ctypes.CDLL(str(lib_path))
        f = self.lib.harness_sdpa_decode
        f.restype = ctypes.c_int
        ll_p = ctypes.POINTER(ctypes.c_longlong)
        f.argtypes = ([ctypes.c_int] * 4 + [ctypes.c_void_p] * 7 +
                      [ctypes.c_int] * 6 + [ctypes.c_float] + [ll_p] * 4 +
                      [ctypes.c_void_p])
        self.lib.harness_decode_max_rows.restype = ctypes.c_int
        self.lib.harness_decode_max_rows.argtypes = [ctypes.c_int, ctypes.c_int]
        self.lib.harness_decode_effective_splits.restype = ctypes.c_int
        self.scratch = None

    def auto_splits(self, B, Hkv, qL, gqa, D, kL) -> int:
        import torch
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        rows = gqa * qL
        per_cta = min(rows, self.lib.harness_decode_max_rows(self.kind, D))
        groups = -(-rows // per_cta)
        splits = -(-sms * CTAS_PER_SM[self.name] // (B * Hkv * groups))
        splits = min(splits, -(-kL // MIN_KEYS_PER_SPLIT))
        return max(1, min(splits, MAX_SPLITS))

    def __call__(self, q, k, v, o, *, scale, causal, splits, sinks=None):
        import torch
        B, H, qL, D = q.shape
        kL = k.shape[2]
        splits = self.lib.harness_decode_effective_splits(kL, splits)
        need = B * H * qL * splits * (D + 2)
        if self.scratch is None or self.scratch.numel() < need:
            self.scratch = torch.empty(need, device="cuda", dtype=torch.float32)
        po = self.scratch
        ps = self.scratch[B * H * qL * splits * D:]

        def strides(t):
            return (ctypes.c_longlong * 3)(*t.stride()[:3])
        dtype = {torch.float16: 0, torch.bfloat16: 1}[q.dtype]
        rc = self.lib.harness_sdpa_decode(
            self.kind, D, dtype, int(causal), q.data_ptr(), k.data_ptr(), v.data_ptr(),
            sinks.data_ptr() if sinks is not None else None, o.data_ptr(),
            po.data_ptr(), ps.data_ptr(), B, H, qL, kL, H // k.shape[1],
            splits, scale, strides(q), strides(k), strides(v), strides(o),
            ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        if rc != 0:
            raise RuntimeError(f"harness_sdpa_decode returned {rc}")


def run_case(kernel: DecodeKernel, case: DecodeCase, seed: int) -> dict:
    import torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    dt = getattr(torch, case.dtype)
    H = case.Hkv * case.gqa
    q = torch.randn(case.B, H, case.qL, case.D, generator=g, device="cuda", dtype=dt)
    k = torch.randn(case.B, case.Hkv, case.kL, case.D, generator=g, device="cuda", dtype=dt)
    v = torch.randn(case.B, case.Hkv, case.kL, case.D, generator=g, device="cuda", dtype=dt)
    sinks = (torch.randn(H, generator=g, device="cuda", dtype=dt)
             if case.sinks else None)
    o = torch.full((case.B, H, case.qL, case.D), float("nan"), device="cuda", dtype=dt)
    scale = 1.0 / math.sqrt(case.D)
    splits = {"one": 1, "odd": 7,
              "auto": kernel.auto_splits(case.B, case.Hkv, case.qL, case.gqa,
                                         case.D, case.kL)}[case.splits]
    kernel(q, k, v, o, scale=scale, causal=case.causal, splits=splits, sinks=sinks)
    torch.cuda.synchronize()
    ref = reference(q, k, v, scale, 1 if case.causal else 0, None, sinks)
    out = o.double()
    has_nan = bool(torch.isnan(out).any())
    rel = ((out - ref).norm() / ref.norm()).item()
    if not math.isfinite(rel):
        rel = float("inf")
    ok = not has_nan and rel <= TOLERANCE[case.dtype]
    return {**asdict(case), "splits_used": splits, "rel_err": rel,
            "nan": has_nan, "ok": ok}


def check_cases(quick: bool) -> list[DecodeCase]:
    lengths = (1, 255, 4097) if quick else (1, 255, 4097, 131072)
    split_modes = itertools.cycle(["auto", "one", "odd"])
    cases = []
    for D, dtype, qL, kL, gqa, causal in itertools.product(
            (192, 256, 512), ("bfloat16", "float16"), (1, 2, 3), lengths,
            (1, 2, 8), (False, True)):
        if causal and qL > kL:
            continue
        big = kL > 10000
        cases.append(DecodeCase(D, dtype, qL, kL, gqa, causal, next(split_modes),
                                B=1 if big else 2, Hkv=1 if big else 2))
    for D in (192, 256, 512):
        cases.append(DecodeCase(D, "bfloat16", 1, 3000, 4, False, "auto", sinks=True))
        cases.append(DecodeCase(D, "float16", 2, 300, 2, True, "one", sinks=True))
    return cases


def check(args: argparse.Namespace) -> int:
    import torch
    kernel = DecodeKernel(Path(args.lib), args.kernel)
    cases = check_cases(args.quick)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    if args.sample:
        cases = random.Random(seed).sample(cases, min(args.sample, len(cases)))
    print(f"{len(cases)} decode cases ({args.kernel}), seed {seed}, "
          f"device {torch.cuda.get_device_name()}")
    results, failed = [], 0
    for i, case in enumerate(cases):
        r = run_case(kernel, case, seed + i)
        results.append(r)
        if not r["ok"]:
            failed += 1
            print(f"FAIL {case} rel={r['rel_err']:.3e} nan={r['nan']}")
    worst: dict = {}
    for r in results:
        key = (r["D"], r["dtype"])
        worst[key] = max(worst.get(key, 0.0), r["rel_err"])
    for key, value in sorted(worst.items()):
        print(f"D={key[0]} {key[1]:8s} worst rel err {value:.2e}")
    print(f"decode check ({args.kernel}): {len(results) - failed} passed, {failed} failed")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 1 if failed else 0


def bench(args: argparse.Namespace) -> int:
    import torch
    kernels = {kind: DecodeKernel(Path(args.lib), kind) for kind in args.kernels}
    rows = []
    H, Hkv = args.heads, args.kv_heads
    for D in args.dims:
        for kL in args.lengths:
            dt = torch.bfloat16
            q = torch.randn(1, H, args.q_len, D, device="cuda", dtype=dt)
            k = torch.randn(1, Hkv, kL, D, device="cuda", dtype=dt)
            v = torch.randn(1, Hkv, kL, D, device="cuda", dtype=dt)
            o = torch.empty_like(q)
            scale = 1 / math.sqrt(D)
            for kind, kernel in kernels.items():
                auto = kernel.auto_splits(1, Hkv, args.q_len, H // Hkv, D, kL)
                # --splits: the launcher's count ("auto") and/or fixed
                # counts, to see where more splits would pay.
                for choice in args.splits:
                    splits = auto if choice == "auto" else int(choice)
                    ms = _time(lambda: kernel(q, k, v, o, scale=scale,
                                              causal=False, splits=splits),
                               warmup=3, iters=20)
                    kv_bytes = 2 * k.numel() * k.element_size()
                    row = {"kernel": kind, "D": D, "kL": kL, "heads": H,
                           "kv_heads": Hkv, "qL": args.q_len, "splits": splits,
                           "auto": choice == "auto", "ms": ms,
                           "TB_s": kv_bytes / ms / 1e9}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            del q, k, v, o
            torch.cuda.empty_cache()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("--lib", default=str(DEFAULT_LIB))
    c.add_argument("--kernel", choices=sorted(KERNELS), default="simt")
    c.add_argument("--quick", action="store_true")
    c.add_argument("--seed", type=int)
    c.add_argument("--sample", type=int)
    c.add_argument("--json")
    b = sub.add_parser("bench")
    b.add_argument("--lib", default=str(DEFAULT_LIB))
    b.add_argument("--dims", type=int, nargs="+", default=[192, 256, 512])
    b.add_argument("--lengths", type=int, nargs="+",
                   default=[4096, 16384, 65536, 131072])
    b.add_argument("--kernels", nargs="+", choices=sorted(KERNELS),
                   default=["simt", "mma"])
    b.add_argument("--heads", type=int, default=32)
    b.add_argument("--q-len", type=int, default=1, help="queries per head (1-3)")
    b.add_argument("--kv-heads", type=int, default=16)
    b.add_argument("--splits", nargs="+", default=["auto"],
                   help="split counts to time: 'auto' (the launcher's) or N")
    b.add_argument("--json")
    args = ap.parse_args()
    return check(args) if args.cmd == "check" else bench(args)


if __name__ == "__main__":
    sys.exit(main())
