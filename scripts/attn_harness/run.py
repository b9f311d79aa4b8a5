#!/usr/bin/env python3
"""Drive the tiled attention kernel outside MLX: correctness and speed.

    python scripts/attn_harness/run.py build --mlx-src TREE [--arch 90a]
    python scripts/attn_harness/run.py check [--quick] [--config all|both|small|large|hopper]
    python scripts/attn_harness/run.py bench [--json OUT]

`build` compiles harness.cu against the kernel headers of a patched MLX tree
(the files the patch adds, not copies). `check` runs the kernel on fresh random
inputs and compares with a float64 reference (relative Frobenius error, NaN
never passes). `bench` times causal prefill against PyTorch's flash, cuDNN and
memory-efficient SDPA backends in the same process (no MLX is imported here).
Needs PyTorch with CUDA.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import itertools
import json
import math
import os
import random
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_LIB = HERE / "build" / "libattn_harness.so"

MASKS = ("none", "causal", "additive", "bool")
# "bool" passes a torch.bool mask, read by the kernel as it is (MaskKind::kBool).
MASK_KIND = {"none": 0, "causal": 1, "additive": 2, "bool": 3}
# small / medium / large / hopper: the configurations MLX uses, with the
# traits MLX takes for the mask kind (hopper: wgmma, sm_90a only).
CONFIGS = {"small": 0, "large": 1, "hopper": 4, "medium": 9}
NO_CONFIG = 12  # harness return code: no such configuration
TOLERANCE = {"bfloat16": 1e-2, "float16": 5e-3}


def build(args: argparse.Namespace) -> None:
    out = Path(args.out or DEFAULT_LIB)
    out.parent.mkdir(parents=True, exist_ok=True)
    # --code compiles the --arch code path ahead for another GPU: with
    # --arch 80 --code 90 an H200 runs sm_80's code (cp.async, no TMA) as
    # SASS, instead of JIT-compiling its PTX at the first launch.
    arch = (f"-gencode=arch=compute_{args.arch},code=sm_{args.code}"
            if args.code else f"-arch=sm_{args.arch}")
    cmd = ["nvcc", "-O3", "-std=c++17", arch, "--shared",
           "-Xcompiler", "-fPIC", "-lineinfo", f"-I{args.mlx_src}",
           str(HERE / "harness.cu"), "-o", str(out)]
    if args.verbose:
        cmd += ["-Xptxas", "-v"]
    start = time.monotonic()
    subprocess.run(cmd, check=True)
    print(f"built {out} in {time.monotonic() - start:.1f} s")


@dataclass
class Case:
    D: int
    dtype: str
    mask: str
    qL: int
    kL: int
    gqa: int
    B: int = 2
    Hkv: int = 2
    layout: str = "bhld"  # or "blhd": MLX's transposed projections
    sinks: bool = False
    config: str = "large"
    # "broadcast": one [qL, kL] mask for every batch and head (stride 0, as
    # MLX passes mlx-lm's masks); "per_head": a different mask per (b, h).
    mask_slices: str = "broadcast"
    negative_scale: bool = False  # scores scaled before the max is taken


class Kernel:
    def __init__(self, lib_path: Path, one_block_per_sm: bool = False,
                 q_tile_groups: int = 1 << 30) -> None:
        self.lib = ctypes.CDLL(str(lib_path))
        # The GB10 proxy: a block reserves shared memory so that no second
        # block fits on a multiprocessor (one_block_smem_bytes).
        self.lib.harness_set_one_block_per_sm(int(one_block_per_sm))
        # The block order: groups of each head's query tiles (attn::block_tile).
        self.lib.harness_set_q_tile_groups(q_tile_groups)
        f = self.lib.harness_sdpa_tiled
        f.restype = ctypes.c_int
        ll_p = ctypes.POINTER(ctypes.c_longlong)
        f.argtypes = [ctypes.c_int] * 4 + [ctypes.c_void_p] * 6 + \
            [ctypes.c_int] * 5 + [ctypes.c_float] + [ll_p] * 5 + [ctypes.c_void_p]

    def __call__(self, q, k, v, o, *, scale, mask_kind, mask=None, sinks=None,
                 config="large", stream=None):
        import torch
        B, H, qL, D = q.shape
        kL = k.shape[2]

        def strides(t):
            if t is None:
                return None
            return (ctypes.c_longlong * 3)(*t.stride()[:3])
        dtype = {torch.float16: 0, torch.bfloat16: 1}[q.dtype]
        rc = self.lib.harness_sdpa_tiled(
            D, CONFIGS[config], dtype, mask_kind,
            q.data_ptr(), k.data_ptr(), v.data_ptr(),
            mask.data_ptr() if mask is not None else None,
            sinks.data_ptr() if sinks is not None else None,
            o.data_ptr(), B, H, qL, kL, H // k.shape[1], scale,
            strides(q), strides(k), strides(v), strides(o), strides(mask),
            ctypes.c_void_p(stream or torch.cuda.current_stream().cuda_stream))
        if rc == NO_CONFIG:
            raise LookupError(f"no tiling {config!r} for head dim {D}")
        if rc != 0:
            raise RuntimeError(f"harness_sdpa_tiled returned {rc}")


def make_inputs(case: Case, seed: int):
    import torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    dt = getattr(torch, case.dtype)
    H = case.Hkv * case.gqa

    def rnd(b, h, L, d):
        if case.layout == "blhd":
            t = torch.randn(b, L, h, d, generator=g, device="cuda", dtype=dt)
            return t.transpose(1, 2)
        return torch.randn(b, h, L, d, generator=g, device="cuda", dtype=dt)
    q = rnd(case.B, H, case.qL, case.D)
    k = rnd(case.B, case.Hkv, case.kL, case.D)
    v = rnd(case.B, case.Hkv, case.kL, case.D)
    mask = None
    if case.mask in ("additive", "bool"):
        # A sliding window plus random holes, broadcast over batch and heads.
        qi = torch.arange(case.qL, device="cuda")[:, None] + (case.kL - case.qL)
        ki = torch.arange(case.kL, device="cuda")[None, :]
        window = max(1, case.kL // 3)
        keep = (ki <= qi) & (ki > qi - window)
        shape = (case.qL, case.kL)
        if case.mask_slices == "per_head":
            # Slice i hides every key from rows [128 i, 128 (i + 1)): a whole
            # query tile is dead in one slice and live in the others, so a
            # liveness map read for the wrong slice skips live tiles.
            shape = (case.B, H, case.qL, case.kL)
            rows = torch.arange(case.qL, device="cuda")[:, None]
            slot = torch.arange(case.B * H, device="cuda").view(case.B, H, 1, 1)
            keep = keep & (rows // 128 != slot)
        else:
            keep = keep | (torch.rand(shape, generator=g, device="cuda") < 0.1)
        if case.mask == "bool":
            add = keep.expand(shape).contiguous()
        else:
            add = torch.where(keep, torch.randn(shape, generator=g,
                                                device="cuda"), float("-inf"))
            add = add.to(dt)
        if case.mask_slices == "per_head":
            mask = add
        else:
            mask = add[None, None].expand(case.B, H, case.qL, case.kL)
    sinks = None
    if case.sinks:
        sinks = torch.randn(H, generator=g, device="cuda", dtype=dt)
    return q, k, v, mask, sinks


def reference(q, k, v, scale, mask_kind, mask, sinks, chunk=1024):
    """float64 SDPA with MLX semantics (bottom-right causal, GQA, sinks)."""
    import torch
    B, H, qL, _D = q.shape
    Hkv, kL = k.shape[1], k.shape[2]
    rep = H // Hkv
    kk = k.double().repeat_interleave(rep, dim=1)
    vv = v.double().repeat_interleave(rep, dim=1)
    out = torch.empty(B, H, qL, v.shape[-1], dtype=torch.float64, device=q.device)
    for s0 in range(0, qL, chunk):
        s1 = min(qL, s0 + chunk)
        sc = (q[:, :, s0:s1].double() * scale) @ kk.transpose(-1, -2)
        if mask_kind == 1:
            qi = torch.arange(s0, s1, device=q.device)[:, None] + (kL - qL)
            ki = torch.arange(kL, device=q.device)[None, :]
            sc = sc.masked_fill(ki > qi, float("-inf"))
        elif mask_kind == 2:
            sc = sc + mask[:, :, s0:s1].double()
        elif mask_kind == 3:
            sc = sc.masked_fill(~mask[:, :, s0:s1], float("-inf"))
        if sinks is not None:
            sk = sinks.double()[None, :, None, None].expand(B, H, s1 - s0, 1)
            sc = torch.cat([sk, sc], dim=-1)
        p = torch.softmax(sc, dim=-1)
        if sinks is not None:
            p = p[..., 1:]
        out[:, :, s0:s1] = p @ vv
    return out


def run_case(kernel: Kernel, case: Case, seed: int) -> dict:
    import torch
    q, k, v, mask, sinks = make_inputs(case, seed)
    scale = (-1.0 if case.negative_scale else 1.0) / math.sqrt(case.D)
    o = torch.empty(case.B, q.shape[1], case.qL, case.D, device="cuda",
                    dtype=q.dtype)
    o.fill_(float("nan"))
    kernel(q, k, v, o, scale=scale, mask_kind=MASK_KIND[case.mask], mask=mask,
           sinks=sinks, config=case.config)
    torch.cuda.synchronize()
    ref = reference(q, k, v, scale, MASK_KIND[case.mask], mask, sinks)
    # Rows the reference leaves NaN (every key masked) must be NaN in ours too.
    ref_nan = torch.isnan(ref).any(dim=-1)
    out = o.double()
    out_nan = torch.isnan(out).any(dim=-1)
    nan_rows_match = bool((ref_nan == out_nan).all())
    valid = ~ref_nan
    diff = (out - ref)[valid]
    denom = ref[valid].norm().item()
    rel = diff.norm().item() / denom if denom > 0 else diff.norm().item()
    if not math.isfinite(rel):
        rel = float("inf")
    ok = nan_rows_match and rel <= TOLERANCE[case.dtype]
    return {**asdict(case), "rel_err": rel, "nan_rows_match": nan_rows_match,
            "fully_masked_rows": int(ref_nan.sum()), "ok": ok}


SIZES = [(1, 1), (7, 7), (1, 63), (63, 65), (65, 127), (127, 1000),
         (1000, 1000), (7, 4097), (4097, 4097)]
LONG_SIZES = [(16384, 16384), (1000, 16384)]


def check_cases(quick: bool, configs: list[str]) -> list[Case]:
    cases = []
    gqas = itertools.cycle([1, 2, 4, 8])
    layouts = itertools.cycle(["bhld", "blhd"])
    sizes = SIZES[:6] if quick else SIZES
    for config, D, dtype, mask in itertools.product(
            configs, (192, 256, 512), ("bfloat16", "float16"), MASKS):
        for qL, kL in sizes:
            if mask == "causal" and qL > kL:
                continue
            cases.append(Case(D, dtype, mask, qL, kL, next(gqas),
                              layout=next(layouts), config=config))
        cases.append(Case(D, dtype, mask, 65, 300, 2, sinks=True, config=config))
        cases.append(Case(D, dtype, mask, 127, 300, 2, negative_scale=True,
                          config=config))
        if mask in ("additive", "bool"):
            cases.append(Case(D, dtype, mask, 300, 1000, 2,
                              mask_slices="per_head", config=config))
    if not quick:
        for config, D, mask in itertools.product(configs, (192, 256, 512),
                                                 ("causal", "bool")):
            for qL, kL in LONG_SIZES:
                cases.append(Case(D, "bfloat16", mask, qL, kL, 8, B=1, Hkv=1,
                                  config=config))
    return cases


def check(args: argparse.Namespace) -> int:
    import torch
    kernel = Kernel(Path(args.lib), q_tile_groups=args.q_tile_groups)
    # both: MLX's two mma.sync configurations; all: also the wgmma one
    # (hopper), which needs an sm_90 GPU and a harness built for 90a.
    configs = {"both": ["small", "large"],
               "all": ["small", "medium", "large", "hopper"]}.get(args.config, [args.config])
    cases = [c for c in check_cases(args.quick, configs)
             if args.dims is None or c.D in args.dims]
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    if args.sample:
        # A reproducible subset, e.g. for compute-sanitizer runs.
        cases = random.Random(seed).sample(cases, min(args.sample, len(cases)))
    print(f"{len(cases)} cases, seed {seed}, device {torch.cuda.get_device_name()}")
    results, failed = [], 0
    for i, case in enumerate(cases):
        try:
            r = run_case(kernel, case, seed + i)
        except LookupError:  # a configuration the library does not have
            continue
        results.append(r)
        if not r["ok"]:
            failed += 1
            print(f"FAIL {case} rel={r['rel_err']:.3e} nan_rows_match={r['nan_rows_match']}")
    worst = {}
    for r in results:
        key = (r["D"], r["dtype"], r["config"])
        worst[key] = max(worst.get(key, 0.0), r["rel_err"])
    for key, value in sorted(worst.items()):
        print(f"D={key[0]} {key[1]:8s} {key[2]:5s} worst rel err {value:.2e}")
    print(f"check: {len(results) - failed} passed, {failed} failed")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 1 if failed else 0


def _time_interleaved(fns, warmup=2, iters=5, per_event=1):
    """Median ms of each of `fns` (name -> callable), timed one run of each
    in turn, the order rotated every round: run back to back, whichever ran
    first gained at long lengths (the card warms and slows as it goes).
    A callable that raises LookupError (no such configuration) is left out.
    A run is `per_event` calls queued between the same two events, each
    given its share: with one, the time includes what the host takes to
    launch the call, which is a few percent of a 2k kernel.
    """
    import torch
    live = {}
    for name, fn in fns.items():
        try:
            for _ in range(warmup):
                fn()
        except LookupError:
            continue
        live[name] = fn
    if not live:
        return {}
    torch.cuda.synchronize()
    names = list(live)
    times = {name: [] for name in names}
    for i in range(iters):
        for name in names[i % len(names):] + names[:i % len(names)]:
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(per_event):
                live[name]()
            b.record()
            torch.cuda.synchronize()
            times[name].append(a.elapsed_time(b) / per_event)
    return {name: sorted(t)[len(t) // 2] for name, t in times.items()}


def causal_pairs(qL: int, kL: int) -> int:
    """(query, key) pairs MLX's bottom-right causal mask leaves visible."""
    return qL * (kL - qL) + qL * (qL + 1) // 2


def bench(args: argparse.Namespace) -> int:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    kernel = Kernel(Path(args.lib), args.one_block_per_sm, args.q_tile_groups)
    rows = []
    H, Hkv = 32, args.hkv
    for D in args.dims:
        for L in args.lengths:
            qL = args.q_len or L
            flops = 4 * H * causal_pairs(qL, L) * D
            dt = torch.bfloat16
            q = torch.randn(1, H, qL, D, device="cuda", dtype=dt)
            k = torch.randn(1, Hkv, L, D, device="cuda", dtype=dt)
            v = torch.randn(1, Hkv, L, D, device="cuda", dtype=dt)
            o = torch.empty_like(q)
            scale = 1 / math.sqrt(D)
            row = {"D": D, "L": L, "qL": qL, "Hkv": Hkv,
                   "one_block_per_sm": args.one_block_per_sm,
                   "q_tile_groups": args.q_tile_groups}
            if args.per_event > 1:
                row["per_event"] = args.per_event
            mask_kind, mask = MASK_KIND["causal"], None
            if args.window:
                # gemma's sliding-window layers: an additive [L, L] mask
                # broadcast over heads; FLOPs count the visible pairs.
                W = args.window
                pos = torch.arange(L, device="cuda")
                keep = (pos[None] <= pos[:, None]) & (pos[None] > pos[:, None] - W)
                if args.bool_mask:
                    mask, mask_kind = keep, MASK_KIND["bool"]   # one byte per pair
                else:
                    mask = torch.where(keep, 0.0, float("-inf")).to(dt)
                    mask_kind = MASK_KIND["additive"]
                mask = mask[None, None].expand(1, H, L, L)
                flops = 4 * H * D * int(keep.sum().item())
                row["window"] = W
                del keep
            runs = {config: functools.partial(
                        kernel, q, k, v, o, scale=scale, mask_kind=mask_kind,
                        mask=mask, config=config)
                    for config in args.configs}
            for config, ms in _time_interleaved(runs, iters=args.iters,
                                                per_event=args.per_event).items():
                row[f"ours_{config}"] = flops / ms / 1e9
                row[f"ours_{config}_ms"] = ms
            # torch's is_causal is top-left aligned: compare only qL = kL.
            if args.no_torch or args.window or qL != L:
                rows.append(row)
                print(json.dumps(row), flush=True)
                continue
            kf = k.repeat_interleave(H // Hkv, 1)
            vf = v.repeat_interleave(H // Hkv, 1)
            for name, backend in (("flash", SDPBackend.FLASH_ATTENTION),
                                  ("cudnn", SDPBackend.CUDNN_ATTENTION),
                                  ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
                try:
                    with sdpa_kernel(backend):
                        sdpa = functools.partial(
                            torch.nn.functional.scaled_dot_product_attention,
                            q, kf, vf, is_causal=True)
                        ms = _time_interleaved({name: sdpa},
                                               per_event=args.per_event)[name]
                    row[f"torch_{name}"] = flops / ms / 1e9
                except RuntimeError as exc:
                    row[f"torch_{name}"] = None
                    row[f"torch_{name}_error"] = str(exc).splitlines()[0][:120]
            del kf, vf
            rows.append(row)
            print(json.dumps(row), flush=True)
            torch.cuda.empty_cache()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--mlx-src", required=True, help="patched MLX source tree")
    b.add_argument("--arch", default="90a")
    b.add_argument("--code", help="SASS for this GPU from --arch's code path")
    b.add_argument("--out")
    b.add_argument("--verbose", action="store_true")
    c = sub.add_parser("check")
    c.add_argument("--lib", default=str(DEFAULT_LIB))
    c.add_argument("--quick", action="store_true")
    c.add_argument("--config", choices=["both", "all", *sorted(CONFIGS)], default="both")
    c.add_argument("--seed", type=int)
    c.add_argument("--sample", type=int, help="run N randomly chosen cases")
    c.add_argument("--dims", type=int, nargs="+",
                   help="only these head dims (default: 192 256 512)")
    c.add_argument("--q-tile-groups", type=int, default=1 << 30,
                   help="groups each head's query tiles are split into")
    c.add_argument("--json")
    r = sub.add_parser("bench")
    r.add_argument("--lib", default=str(DEFAULT_LIB))
    r.add_argument("--dims", type=int, nargs="+", default=[256, 512])
    r.add_argument("--lengths", type=int, nargs="+",
                   default=[2048, 8192, 16384, 32768])
    r.add_argument("--configs", nargs="+", default=["large", "small"],
                   choices=sorted(CONFIGS))
    r.add_argument("--no-torch", action="store_true",
                   help="time only the harness kernels")
    r.add_argument("--iters", type=int, default=5,
                   help="timed calls per point (the median is reported)")
    r.add_argument("--window", type=int,
                   help="time a sliding-window array mask of this width "
                        "instead of the causal mask (harness kernels only)")
    r.add_argument("--bool-mask", action="store_true",
                   help="with --window: pass the window as a boolean mask "
                        "(one byte per pair) instead of an additive one")
    r.add_argument("--hkv", type=int, default=16,
                   help="KV heads (32 query heads; gemma-4's global layers: 4)")
    r.add_argument("--q-len", type=int,
                   help="queries per call against each length's keys "
                        "(mlx-lm's chunked prefill: 2048; default: qL = kL)")
    r.add_argument("--q-tile-groups", type=int, default=1 << 30,
                   help="groups each head's query tiles are split into for the "
                        "block order (MLX: 1 for the wgmma tiles from 128 query "
                        "tiles per head; below that one tile per group for them "
                        "at 192 / 256 and 4 otherwise; the default, one tile "
                        "per group, is the order before)")
    r.add_argument("--one-block-per-sm", action="store_true",
                   help="reserve shared memory so one block runs per "
                        "multiprocessor (the GB10 proxy)")
    r.add_argument("--per-event", type=int, default=1,
                   help="calls queued between each pair of timing events, "
                        "ours and torch's (1: each call timed alone, with "
                        "its launch)")
    r.add_argument("--json")
    args = ap.parse_args()
    if args.cmd == "build":
        build(args)
        return 0
    return check(args) if args.cmd == "check" else bench(args)


if __name__ == "__main__":
    sys.exit(main())
