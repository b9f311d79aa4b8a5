"""Check and time the affine quantized matmul kernels of qmm_affine.cuh.

Builds harness.cu with nvcc into a shared library, drives it with torch
tensors through ctypes, checks every bits/group/dtype combination on odd sizes
against a float64 reference (dequantize, then matmul), dense and gathered
(gather_qmm: one product per expert index, or tiles of rows across
products), and times the decode GEMV (GB/s of weight bytes), the gathered
GEMV at mixture-of-experts shapes (GB/s of the distinct experts' bytes), its
row tiles over mlx-lm's sorted prefill layout (TFLOP/s) and the dequantize +
cuBLAS prefill step (TFLOP/s) beside torch's bf16 GEMM, in one process.

    python run.py build check bench-gemv bench-gather bench-gather-rows bench-prefill --json out.json
"""

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys

import torch
from shapes import MOE_EXPERTS, MOE_SHAPES, MOE_TOP_K, SHAPES

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = None
ACTIVE = []  # the GEMV variants check and bench-gemv run (--variants)

VARIANTS = {0: "w4u2", 1: "w4u4", 2: "w8u2", 3: "w2u4", 4: "w8u1",
            5: "dq-w4u2"}
# qmm_mma_kernel's tile shapes (harness.cu's mma_variant): weight rows x
# rows of x per block, warps.
MMA_VARIANTS = {0: "256x128w8", 1: "256x128w8n2", 2: "128x256w8s2",
                3: "128x128w4", 4: "256x128w8s3", 5: "128x128w4s2",
                6: "128x128w8s2"}


def build(arch, out):
    cmd = ["nvcc", "-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC",
           f"-gencode=arch=compute_{arch},code=sm_{arch}",
           os.path.join(HERE, "harness.cu"), "-o", out]
    subprocess.run(cmd, check=True)


def load(path):
    global LIB
    LIB = ctypes.CDLL(path)
    LIB.qmm_gemv.argtypes = [ctypes.c_int] * 4 + [ctypes.c_void_p] * 5 + [
        ctypes.c_int] * 3 + [ctypes.c_void_p]
    LIB.qmm_gather_gemv.argtypes = [ctypes.c_int] * 4 + [
        ctypes.c_void_p] * 7 + [ctypes.c_int] * 4 + [ctypes.c_void_p]
    LIB.qmm_gather_rows.argtypes = LIB.qmm_gather_gemv.argtypes
    LIB.qmm_gather_tiles.argtypes = [ctypes.c_int] * 4 + [
        ctypes.c_void_p] * 7 + [ctypes.c_int] * 5 + [ctypes.c_void_p] * 2
    LIB.qmm_mma.argtypes = LIB.qmm_gemv.argtypes
    LIB.qmm_dequant.argtypes = [ctypes.c_int] * 3 + [ctypes.c_void_p] * 4 + [
        ctypes.c_int64, ctypes.c_int, ctypes.c_void_p]


def dcode(dtype):
    return 0 if dtype == torch.bfloat16 else 1


def make_weights(N, K, bits, group, dtype, gen):
    """Random affine-quantized weights in MLX's packing (value i of a word at
    bits i*bits, lowest first), with the float64 dequantized matrix."""
    q = torch.randint(0, 2**bits, (N, K), generator=gen, dtype=torch.int64)
    per = 32 // bits
    qw = q.view(N, K // per, per)
    shifts = (torch.arange(per, dtype=torch.int64) * bits)
    packed = (qw << shifts).sum(-1)
    packed = packed.to(torch.int64).where(packed < 2**31, packed - 2**32)
    w = packed.to(torch.int32)
    scales = (torch.rand(N, K // group, generator=gen) * 0.02 + 0.001).to(dtype)
    biases = (torch.randn(N, K // group, generator=gen) * 0.05).to(dtype)
    deq = (q.view(N, K // group, group).double() * scales.double()[..., None]
           + biases.double()[..., None]).view(N, K)
    return w.cuda(), scales.cuda(), biases.cuda(), deq


def dense_call(entry, x, w, s, b, bits, group, variant, out=None):
    """out = x @ dequant(w).T through a dense C entry point (qmm_gemv,
    qmm_mma), which all take the same arguments."""
    M, K = x.shape
    N = w.shape[0]
    if out is None:
        out = torch.empty(M, N, dtype=x.dtype, device="cuda")
    rc = entry(dcode(x.dtype), bits, group, variant, x.data_ptr(),
               w.data_ptr(), s.data_ptr(), b.data_ptr(), out.data_ptr(),
               M, N, K, torch.cuda.current_stream().cuda_stream)
    assert rc == 0, rc
    return out


def gemv(x, w, s, b, bits, group, variant, out=None):
    return dense_call(LIB.qmm_gemv, x, w, s, b, bits, group, variant, out)


def mma(x, w, s, b, bits, group, variant, out=None):
    return dense_call(LIB.qmm_mma, x, w, s, b, bits, group, variant, out)


def gather_gemv(x, w, s, b, lhs, rhs, bits, group, variant, out=None,
                entry="qmm_gather_gemv"):
    """gather_qmm's GEMV: out[i] = x[lhs[i]] @ W[rhs[i]].T, x [X, M, K], w
    [E, N, K * bits / 32] (or [E * N, ...]), lhs / rhs int32 (read as
    uint32) on the GPU, out [B, M, N]. entry qmm_gather_rows runs the row
    tiles across products, variant then giving their groups of 8 rows."""
    M, K = x.shape[-2:]
    B = lhs.numel()
    N = out.shape[-1] if out is not None else w.shape[-2]
    if out is None:
        out = torch.empty(B, M, N, dtype=x.dtype, device="cuda")
    assert lhs.dtype == rhs.dtype == torch.int32 and rhs.numel() == B
    rc = getattr(LIB, entry)(dcode(x.dtype), bits, group, variant,
                             x.data_ptr(), w.data_ptr(), s.data_ptr(),
                             b.data_ptr(), lhs.data_ptr(), rhs.data_ptr(),
                             out.data_ptr(), M, N, K, B,
                             torch.cuda.current_stream().cuda_stream)
    assert rc == 0, rc
    return out


# Row groups of 8 per tile of gather_qgemv_rows_kernel that check and
# bench-gather-rows run; MLX's launcher takes 2.
ROW_GROUPS = (1, 2)


def gather_rows(x, w, s, b, lhs, rhs, bits, group, groups, out):
    """gather_qmm over tiles of 8 * groups rows across products: the same
    product as gather_gemv, out [B, M, N]."""
    return gather_gemv(x, w, s, b, lhs, rhs, bits, group, groups, out,
                       entry="qmm_gather_rows")


# gather_qmm_tiles_kernel's tile shapes (harness.cu's tiles_variant): rows
# per tile and weight rows per warp; MLX's launcher takes the first. 3 and 4
# run qmm_mma_kernel over one-expert tiles (sorted indices only).
TILE_VARIANTS = {0: "t64n32", 1: "t64n16", 2: "t32n16", 3: "mma64s4",
                 4: "mma64s2"}
TILE_ROWS = {0: 64, 1: 64, 2: 32, 3: 64, 4: 64}
SORTED_ONLY = {3, 4}


def gather_tiles(x, w, s, b, lhs, rhs, bits, group, variant, out,
                 sorted_rhs=False):
    """gather_qmm over tiles of rows staged in shared memory: the same
    product as gather_gemv, out [B, M, N]. sorted_rhs (rhs ascending): tiles
    that each hold one expert's rows, from gather_expert_tiles_kernel's
    table, as MLX runs sorted indices."""
    M, K = x.shape[-2:]
    B, N = lhs.numel(), out.shape[-1]
    E = w.numel() * 32 // (N * K * bits)
    tiles = None
    if sorted_rhs:
        count = -(-B * M // TILE_ROWS[variant]) + E
        tiles = torch.empty(2 * count, dtype=torch.int64, device="cuda")
    rc = LIB.qmm_gather_tiles(dcode(x.dtype), bits, group, variant,
                              x.data_ptr(), w.data_ptr(), s.data_ptr(),
                              b.data_ptr(), lhs.data_ptr(), rhs.data_ptr(),
                              out.data_ptr(), M, N, K, B, E,
                              None if tiles is None else tiles.data_ptr(),
                              torch.cuda.current_stream().cuda_stream)
    assert rc == 0, rc
    return out


def gather_indices(E, B, X, gen):
    """rhs: B random expert indices out of E, lhs: B random batches of x out
    of X; from B = 3 on, both repeat an index and rhs is out of order."""
    rhs = torch.randint(0, E, (B,), generator=gen, dtype=torch.int64)
    lhs = torch.randint(0, X, (B,), generator=gen, dtype=torch.int64)
    if B > 2:
        # rhs[1] one below rhs[0] (mod E), rhs[-1] = rhs[0]: out of order
        # and repeated.
        rhs[1] = (rhs[0] + E - 1) % E
        rhs[-1] = rhs[0]
        lhs[-1] = lhs[0]
    return lhs, rhs


def dequant(w, s, b, bits, group, K, dtype, out=None):
    N = w.shape[0]
    if out is None:
        out = torch.empty(N, K, dtype=dtype, device="cuda")
    rc = LIB.qmm_dequant(dcode(dtype), bits, group, w.data_ptr(), s.data_ptr(),
                         b.data_ptr(), out.data_ptr(), N, K,
                         torch.cuda.current_stream().cuda_stream)
    assert rc == 0, rc
    return out


def rel(a, ref):
    a = a.double().cpu()
    if not torch.isfinite(a).all():
        return float("inf")
    return ((a - ref).norm() / ref.norm()).item()


def report(results, step, worst, fails):
    """Print a check step's worst error and first failures, record them
    under the step's name (dashes as underscores); True if none failed."""
    print(f"{step}: worst relative error {worst:.2e}, {len(fails)} failures")
    for f in fails[:20]:
        print("  FAIL", f)
    results[step.replace("-", "_")] = {"worst": worst,
                                       "failures": [str(f) for f in fails]}
    return not fails


def check(results):
    gen = torch.Generator().manual_seed(1)
    cases = [(1, 16, 32), (1, 997, 384), (3, 4099, 640), (8, 16, 128),
             (13, 257, 1024), (5, 33, 4096 + 128), (2, 520, 21504),
             (8, 37, 768)]
    worst = 0.0
    fails = []
    for dtype in (torch.bfloat16, torch.float16):
        for bits in (4, 8):
            for group in (32, 64, 128):
                for M, N, K in cases:
                    if K % group:
                        K = (K // group + 1) * group
                    w, s, b, deq = make_weights(N, K, bits, group, dtype, gen)
                    x = torch.randn(M, K, generator=gen).to(dtype)
                    ref = x.double() @ deq.T
                    for v in ACTIVE:
                        out = torch.full((M, N), float("nan"), dtype=dtype,
                                         device="cuda")
                        gemv(x.cuda(), w, s, b, bits, group, v, out)
                        torch.cuda.synchronize()
                        e = rel(out, ref)
                        worst = max(worst, e)
                        if not e < 1e-2:
                            fails.append(("gemv", dtype, bits, group, M, N, K,
                                          VARIANTS[v], e))
                    d = torch.full((N, K), float("nan"), dtype=dtype,
                                   device="cuda")
                    dequant(w, s, b, bits, group, K, dtype, d)
                    torch.cuda.synchronize()
                    e = rel(d, deq)
                    worst = max(worst, e)
                    if not e < 1e-2:
                        fails.append(("dequant", dtype, bits, group, N, K, e))
    gworst, gfails = check_gather(gen)
    worst = max(worst, gworst)
    fails += gfails
    return report(results, "check", worst, fails)


# Gathered cases (experts E, rows per product M, N, K, products B, batches of
# x X): odd N, M from 1 to 8 (and 13: two blocks along y), B from 1 to 9,
# and 70 to 203 products for the row tiles (sorted: mlx-lm's prefill layout,
# rhs ascending, also run on tiles of one expert each: experts of 0 to 68
# rows, M = 3, K % 128 != 0, more experts than the tile table's 1024
# threads; the others cross experts in any order).
GATHER_CASES = [(5, 1, 33, 256, 1, 1), (7, 3, 997, 384, 9, 4),
                (4, 8, 257, 640, 5, 5), (3, 5, 16, 128, 2, 3),
                (9, 2, 4099, 1024, 8, 8), (2, 1, 520, 2048, 7, 7),
                (6, 7, 65, 512, 4, 2), (3, 13, 65, 512, 3, 2),
                (16, 1, 72, 512, 203, 203, "sorted"), (6, 3, 40, 256, 70, 70),
                (5, 7, 33, 320, 80, 3), (3, 1, 72, 320, 203, 203, "sorted"),
                (20, 3, 40, 256, 30, 30, "sorted"),
                (1100, 1, 40, 128, 300, 300, "sorted")]


def check_gather(gen):
    worst, fails = 0.0, []
    for dtype in (torch.bfloat16, torch.float16):
        for bits in (4, 8):
            for group in (32, 64, 128):
                for E, M, N, K, B, X, *order in GATHER_CASES:
                    if K % group:
                        K = (K // group + 1) * group
                    w, s, b, deq = make_weights(E * N, K, bits, group, dtype,
                                                gen)
                    deq = deq.view(E, N, K)
                    x = torch.randn(X, M, K, generator=gen).to(dtype)
                    lhs, rhs = gather_indices(E, B, X, gen)
                    if order:
                        rhs = rhs.sort().values
                    ref = torch.stack([x[int(i)].double() @ deq[int(e)].T
                                       for i, e in zip(lhs, rhs)])
                    xd = x.cuda()
                    li = lhs.to(torch.int32).cuda()
                    ri = rhs.to(torch.int32).cuda()
                    runs = [(VARIANTS[v], lambda out, v=v: gather_gemv(
                        xd, w, s, b, li, ri, bits, group, v, out))
                        for v in ACTIVE]
                    runs += [(f"rows{8 * r}", lambda out, r=r: gather_rows(
                        xd, w, s, b, li, ri, bits, group, r, out))
                        for r in ROW_GROUPS]
                    runs += [(name, lambda out, v=v: gather_tiles(
                        xd, w, s, b, li, ri, bits, group, v, out))
                        for v, name in TILE_VARIANTS.items()
                        if v not in SORTED_ONLY]
                    if order:
                        runs += [(f"{name}-sorted", lambda out, v=v: gather_tiles(
                            xd, w, s, b, li, ri, bits, group, v, out, True))
                            for v, name in TILE_VARIANTS.items()]
                    for label, run in runs:
                        out = torch.full((B, M, N), float("nan"), dtype=dtype,
                                         device="cuda")
                        run(out)
                        torch.cuda.synchronize()
                        e = rel(out, ref)
                        worst = max(worst, e)
                        if not e < 1e-2:
                            fails.append(("gather", dtype, bits, group, E, M,
                                          N, K, B, label, e))
    return worst, fails


def random_packed(lead, N, K, bits, group, gen=None):
    """Random packed weights [*lead, N, K * bits / 32] with bf16 scales and
    biases [*lead, N, K / group] on the GPU, for timing (values are noise)."""
    w = torch.randint(-2**31, 2**31 - 1, (*lead, N, K * bits // 32),
                      dtype=torch.int32, device="cuda", generator=gen)
    s = (torch.rand(*lead, N, K // group, device="cuda", generator=gen)
         * 0.01).to(torch.bfloat16)
    b = (torch.randn(*lead, N, K // group, device="cuda", generator=gen)
         * 0.01).to(torch.bfloat16)
    return w, s, b


def time_fn(fn, sets, reps=50, per_event=1, graph=False):
    """Median milliseconds per call of fn(set), rotating input sets. With
    per_event > 1 the calls between two events are queued back to back, so
    that a kernel shorter than the host's launch path is timed, not the
    host; with graph, those calls are captured once in a CUDA graph (as MLX
    launches them) and the graph is replayed, so that no host work sits
    between two kernels."""
    for i in range(5):
        fn(sets[i % len(sets)])
    torch.cuda.synchronize()
    if graph:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(per_event):
                fn(sets[i % len(sets)])
        g.replay()
        torch.cuda.synchronize()

        def run(_):
            g.replay()
    else:
        def run(r):
            for i in range(per_event):
                fn(sets[(r * per_event + i) % len(sets)])
    times = []
    for r in range(reps):
        st, en = torch.cuda.Event(True), torch.cuda.Event(True)
        st.record()
        run(r)
        en.record()
        en.synchronize()
        times.append(st.elapsed_time(en) / per_event)
    return statistics.median(times)


def bench_gemv(results, bits_list=(4, 8), group=64, graph=False):
    rows = []
    for bits in bits_list:
        for name, K, N in SHAPES:
            wbytes = N * K * bits // 8 + 2 * N * (K // group) * 2
            nsets = max(2, min(8, int(2.5e8 // wbytes)))
            sets = []
            gen = torch.Generator(device="cuda").manual_seed(2)
            for _ in range(nsets):
                sets.append(random_packed((), N, K, bits, group, gen))
            for M in (1, 4, 8):
                x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
                out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
                row = {"bits": bits, "shape": name, "K": K, "N": N, "M": M}
                for v in ACTIVE:
                    vn = VARIANTS[v]
                    ms = time_fn(lambda st, v=v: gemv(x, *st, bits, group, v,
                                                       out), sets, 20, 32,
                                 graph)
                    row[vn] = wbytes / ms / 1e6
                rows.append(row)
            del sets
            # torch bf16 GEMV over the dense weight, same shape.
            if bits == 4:
                nb = max(2, min(8, int(2.5e8 // (N * K * 2))))
                dense = [torch.randn(N, K, device="cuda",
                                     dtype=torch.bfloat16) for _ in range(nb)]
                x = torch.randn(1, K, device="cuda", dtype=torch.bfloat16)
                ms = time_fn(lambda d: x @ d.T, dense, 20, 32, graph)
                rows.append({"bits": 16, "shape": name, "K": K, "N": N, "M": 1,
                             "torch": N * K * 2 / ms / 1e6})
                del dense
    print("\ndecode GEMV, GB/s of weight bytes (group 64, bf16)")
    for r in rows:
        vals = " ".join(f"{k}={v:7.1f}" for k, v in r.items()
                        if k in [*VARIANTS.values(), "torch"])
        print(f"  {r['shape']:12s} bits={r['bits']:2d} M={r['M']} {vals}")
    results["gemv"] = rows


def moe_indices(tokens, gen):
    """One decode step's expert choices: MOE_TOP_K distinct experts per
    token, in the router's (unsorted) order."""
    return torch.cat([torch.randperm(MOE_EXPERTS, generator=gen)[:MOE_TOP_K]
                      for _ in range(tokens)])


def bench_gather(results, bits_list=(4, 8), group=64, tokens_list=(1, 4, 8)):
    """The gathered GEMV at MOE_SHAPES, B = tokens * MOE_TOP_K products of one
    row. GB/s counts the weight bytes (packed weights, scales, biases) of
    the distinct experts a call reads. Several weight sets of all experts
    and fresh expert choices rotate so that most experts come from memory,
    not from L2. 'dense' is the same GEMV over one [distinct * N, K] matrix
    (the same bytes in one product) with MLX's variant, its ceiling."""
    rows = []
    gen = torch.Generator().manual_seed(3)
    for bits in bits_list:
        for name, K, N in MOE_SHAPES:
            ebytes = N * K * bits // 8 + 2 * N * (K // group) * 2
            nsets = max(2, min(8, int(1.6e9 // (ebytes * MOE_EXPERTS))))
            wsets = []
            for _ in range(nsets):
                wsets.append(random_packed((MOE_EXPERTS,), N, K, bits, group))
            for tokens in tokens_list:
                B = tokens * MOE_TOP_K
                # gate / up: every token's row for its experts; down: one
                # row per product (the activation of that expert).
                X = tokens if name != "moe_down" else B
                x = torch.randn(X, 1, K, device="cuda", dtype=torch.bfloat16)
                out = torch.empty(B, 1, N, device="cuda", dtype=torch.bfloat16)
                lhs = (torch.arange(tokens).repeat_interleave(MOE_TOP_K)
                       if X == tokens else torch.arange(B))
                lhs = lhs.to(torch.int32).cuda()
                sets, distinct = [], []
                for i in range(max(16, nsets)):
                    rhs = moe_indices(tokens, gen)
                    distinct.append(len(torch.unique(rhs)))
                    sets.append((*wsets[i % nsets], rhs.to(torch.int32).cuda()))
                read = statistics.mean(distinct) * ebytes
                row = {"bits": bits, "shape": name, "K": K, "N": N,
                       "tokens": tokens, "B": B,
                       "distinct": statistics.mean(distinct)}
                for v in ACTIVE:
                    ms = time_fn(lambda st, v=v: gather_gemv(
                        x, st[0], st[1], st[2], lhs, st[3], bits, group, v,
                        out), sets, 20, 32)
                    row[VARIANTS[v]] = read / ms / 1e6
                rows_d = round(statistics.mean(distinct)) * N
                dense = [(w.view(-1, w.shape[-1])[:rows_d],
                          s.view(-1, s.shape[-1])[:rows_d],
                          b.view(-1, b.shape[-1])[:rows_d]) for w, s, b in wsets]
                xd = torch.randn(1, K, device="cuda", dtype=torch.bfloat16)
                od = torch.empty(1, rows_d, device="cuda", dtype=torch.bfloat16)
                ms = time_fn(lambda st: gemv(xd, *st, bits, group, 0, od),
                             dense, 20, 32)
                row["dense"] = rows_d // N * ebytes / ms / 1e6
                rows.append(row)
            del wsets, sets
            torch.cuda.empty_cache()
    print(f"\ngathered GEMV (M = 1, {MOE_EXPERTS} experts, top-{MOE_TOP_K}), "
          "GB/s of the distinct experts' bytes (group 64, bf16)")
    for r in rows:
        vals = " ".join(f"{k}={v:7.1f}" for k, v in r.items()
                        if k in [*VARIANTS.values(), "dense"])
        print(f"  {r['shape']:12s} bits={r['bits']} tokens={r['tokens']} "
              f"B={r['B']:3d} distinct={r['distinct']:5.1f} {vals}")
    results["gather"] = rows


def bench_gather_rows(results, bits_list=(4, 8), group=64,
                      tokens_list=(64, 256, 512, 1024, 2048, 8192)):
    """gather_qgemv_rows_kernel (each of ROW_GROUPS) and
    gather_qmm_tiles_kernel (each of TILE_VARIANTS, over tiles of
    consecutive rows and, suffix s, of one expert each) over mlx-lm's sorted
    prefill layout at MOE_SHAPES: tokens * MOE_TOP_K rows of one row per
    product, ascending experts (MOE_TOP_K distinct ones per token), in
    TFLOP/s of 2 * B * N * K, beside torch's bf16 GEMM of the same rows
    with one [N, K] matrix (the work without the experts)."""
    rows = []
    gen = torch.Generator().manual_seed(4)
    for bits, (name, K, N) in [(b, s) for b in bits_list for s in MOE_SHAPES]:
        ebytes = N * K * bits // 8 + 2 * N * (K // group) * 2
        nsets = max(2, min(8, int(1.6e9 // (ebytes * MOE_EXPERTS))))
        wsets = [random_packed((MOE_EXPERTS,), N, K, bits, group)
                 for _ in range(nsets)]
        for tokens in tokens_list:
            B = tokens * MOE_TOP_K
            x = torch.randn(B, 1, K, device="cuda", dtype=torch.bfloat16)
            out = torch.empty(B, 1, N, device="cuda", dtype=torch.bfloat16)
            lhs = torch.arange(B, dtype=torch.int32, device="cuda")
            sets = [(*wsets[i % nsets],
                     moe_indices(tokens, gen).sort().values.to(torch.int32).cuda())
                    for i in range(nsets)]
            fl = 2 * B * N * K
            row = {"shape": name, "bits": bits, "K": K, "N": N,
                   "tokens": tokens, "B": B}
            for r in ROW_GROUPS:
                ms = time_fn(lambda st, r=r: gather_rows(
                    x, st[0], st[1], st[2], lhs, st[3], bits, group, r, out),
                    sets, 20)
                row[f"rows{8 * r}"] = fl / ms / 1e9
            for v, vname in TILE_VARIANTS.items():
                for srt in (False, True)[v in SORTED_ONLY:]:
                    ms = time_fn(lambda st, v=v, srt=srt: gather_tiles(
                        x, st[0], st[1], st[2], lhs, st[3], bits, group, v,
                        out, srt), sets, 20)
                    row[vname + ("s" if srt else "")] = fl / ms / 1e9
            wd = [torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
                  for _ in range(2)]
            xf = x.view(B, K)
            ms = time_fn(lambda d: xf @ d.T, wd, 20)
            row["torch"] = fl / ms / 1e9
            rows.append(row)
        del wsets
        torch.cuda.empty_cache()
    print(f"\ngather_qmm row tiles, sorted prefill layout ({MOE_EXPERTS} "
          f"experts, top-{MOE_TOP_K}, group {group}, bf16), TFLOP/s")
    for r in rows:
        vals = " ".join(f"{k}={v:6.1f}" for k, v in r.items()
                        if k.startswith("rows") or k == "torch"
                        or k.rstrip("s") in TILE_VARIANTS.values())
        print(f"  {r['shape']:12s} {r['bits']}-bit tokens={r['tokens']:5d} "
              f"B={r['B']:6d} {vals}")
    results["gather_rows"] = rows


def bench_prefill(results, Ms=(2048, 32768), bits=4, group=64):
    rows = []
    for name, K, N in SHAPES:
        w, s, b = random_packed((), N, K, bits, group)
        scratch = torch.empty(N, K, device="cuda", dtype=torch.bfloat16)
        dense = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        t_dq = time_fn(lambda _: dequant(w, s, b, bits, group, K,
                                          torch.bfloat16, scratch), [0], 20)
        for M in Ms:
            x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
            reps = 10 if M > 4096 else 30
            t_mm = time_fn(lambda _: torch.mm(x, dense.T), [0], reps)

            def step(_):
                dequant(w, s, b, bits, group, K, torch.bfloat16, scratch)
                return torch.mm(x, scratch.T)

            t_q = time_fn(step, [0], reps)
            fl = 2 * M * N * K
            rows.append({"shape": name, "K": K, "N": N, "M": M,
                         "torch_tflops": fl / t_mm / 1e9,
                         "dq_mm_tflops": fl / t_q / 1e9,
                         "dequant_ms": t_dq,
                         "dequant_gbs": (N * K * 2 + N * K * bits / 8) / t_dq / 1e6,
                         "ratio": t_mm / t_q})
            del x
        del w, s, b, scratch, dense
        torch.cuda.empty_cache()
    print("\nprefill, dequantize + torch.mm vs torch bf16 mm (TFLOP/s)")
    for r in rows:
        print(f"  {r['shape']:12s} M={r['M']:6d} torch={r['torch_tflops']:6.1f} "
              f"dq+mm={r['dq_mm_tflops']:6.1f} ratio={r['ratio']:.3f} "
              f"dequant={r['dequant_ms']:.3f} ms ({r['dequant_gbs']:.0f} GB/s)")
    results["prefill"] = rows


def check_mma(results, variants):
    """qmm_mma_kernel against the float64 reference: every bits/group/dtype,
    M, N and K off the tile sizes (K rounded up to the group: a last chunk
    of 32, 64 or 96 of 4-bit's 128 columns and of 32 of 8-bit's 64 where the
    group allows, K below one chunk), more than one tile along each, and at
    K = 21504 row tiles of x in several bands (half of a 50 MB L2 holds 4
    of 128 rows)."""
    gen = torch.Generator().manual_seed(3)
    cases = [(1, 16, 128), (7, 33, 352), (130, 257, 672), (300, 520, 4160),
             (2049, 300, 1024), (1100, 72, 21504), (5, 40, 96)]
    worst, fails = 0.0, []
    for dtype in (torch.bfloat16, torch.float16):
        for bits in (4, 8):
            for group in (32, 64, 128):
                for M, N, K in cases:
                    K = -(-K // group) * group
                    w, s, b, deq = make_weights(N, K, bits, group, dtype, gen)
                    x = torch.randn(M, K, generator=gen).to(dtype)
                    ref = x.double() @ deq.T
                    xc = x.cuda()
                    for v in variants:
                        out = torch.full((M, N), float("nan"), dtype=dtype,
                                         device="cuda")
                        mma(xc, w, s, b, bits, group, v, out)
                        torch.cuda.synchronize()
                        e = rel(out, ref)
                        worst = max(worst, e)
                        if not e < 1e-2:
                            fails.append((MMA_VARIANTS[v], dtype, bits, group,
                                          M, N, K, e))
    return report(results, "check-mma", worst, fails)


def bench_mma(results, variants, Ms=(256, 2048, 8192), bits_list=(4, 8),
              group=64):
    """qmm_mma_kernel's TFLOP/s at gemma-4 31B's shapes beside torch's bf16
    GEMM of the same product (the card's bf16 GEMM) in this process."""
    rows = []
    for name, K, N in SHAPES:
        dense = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        for M in Ms:
            x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
            out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
            reps = 10 if M > 4096 else 30
            fl = 2 * M * N * K
            row = {"shape": name, "K": K, "N": N, "M": M, "torch_tflops":
                   fl / time_fn(lambda _: torch.mm(x, dense.T), [0], reps)
                   / 1e9}
            for bits in bits_list:
                w, s, b = random_packed((), N, K, bits, group)
                for v in variants:
                    t = time_fn(lambda _: mma(x, w, s, b, bits, group, v, out),
                                [0], reps)
                    row[f"{bits}b_{MMA_VARIANTS[v]}"] = fl / t / 1e9
                del w, s, b
            rows.append(row)
            del x, out
        del dense
        torch.cuda.empty_cache()
    print("\nqmm_mma_kernel vs torch bf16 mm (TFLOP/s)")
    for r in rows:
        vals = " ".join(f"{k}={v:6.1f}" for k, v in r.items()
                        if k[0].isdigit())
        print(f"  {r['shape']:12s} M={r['M']:6d} "
              f"torch={r['torch_tflops']:6.1f} {vals}")
    results["mma"] = rows


def bench_list(results, path):
    """GPU time of a list of calls at M = 1 (a decode step's quantized
    matmuls: decode_step.py's qmm_shapes), each variant queued back to back
    between two events, every weight its own buffer as in the model."""
    with open(path) as f:
        data = json.load(f)
    shapes = data["qmm_shapes"] if isinstance(data, dict) else data
    gen = torch.Generator(device="cuda").manual_seed(5)
    calls, wbytes = [], 0
    for N, K, bits, group in shapes:
        w, s, b = random_packed((), N, K, bits, group, gen)
        x = torch.randn(1, K, device="cuda", dtype=torch.bfloat16)
        o = torch.empty(1, N, device="cuda", dtype=torch.bfloat16)
        calls.append((x, w, s, b, bits, group, o))
        wbytes += w.nbytes + s.nbytes + b.nbytes
    row = {"calls": len(calls), "weight_gib": wbytes / 2**30}
    for v in ACTIVE:
        def once(_, v=v):
            for x, w, s, b, bits, group, o in calls:
                gemv(x, w, s, b, bits, group, v, o)
        ms = time_fn(once, [None], reps=10)
        row[VARIANTS[v]] = {"ms": ms, "gb_s": wbytes / ms / 1e6}
    print(f"\n{len(calls)} calls at M = 1, {row['weight_gib']:.2f} GiB of "
          "weights, queued back to back:")
    for v in ACTIVE:
        r = row[VARIANTS[v]]
        print(f"  {VARIANTS[v]}: {r['ms']:.2f} ms ({r['gb_s']:.0f} GB/s)")
    results["list"] = row


def main():
    p = argparse.ArgumentParser()
    p.add_argument("steps", nargs="+")
    p.add_argument("--lib", default="/tmp/qmm_harness.so")
    p.add_argument("--arch", default="90a")
    p.add_argument("--json")
    p.add_argument("--variants", type=int, nargs="+", default=sorted(VARIANTS),
                   help="GEMV variants to check and time (default: all)")
    p.add_argument("--mma-variants", type=int, nargs="+",
                   default=sorted(MMA_VARIANTS),
                   help="check-mma, bench-mma: qmm_mma_kernel's tile shapes")
    p.add_argument("--ms", type=int, nargs="+", default=[256, 2048, 8192],
                   help="bench-mma: rows of x")
    p.add_argument("--graph", action="store_true",
                   help="bench-gemv: time a CUDA graph of the queued calls")
    p.add_argument("--shapes", help="bench-list: decode_step.py's JSON, or "
                   "a list of [N, K, bits, group]")
    a = p.parse_args()
    known = {"build", "check", "bench-gemv", "bench-gather",
             "bench-gather-rows", "bench-prefill", "bench-list",
             "check-mma", "bench-mma"}
    if "bench-list" in a.steps and not a.shapes:
        p.error("bench-list needs --shapes FILE")
    if set(a.steps) - known:
        p.error(f"unknown steps {sorted(set(a.steps) - known)}; "
                f"known: {sorted(known)}")
    ACTIVE[:] = a.variants
    results = {"device": torch.cuda.get_device_name()}
    ok = True
    for step in a.steps:
        if step == "build":
            build(a.arch, a.lib)
            continue
        if LIB is None:
            load(a.lib)
        if step == "check":
            ok &= check(results)
        elif step == "bench-gemv":
            bench_gemv(results, graph=a.graph)
        elif step == "bench-gather":
            bench_gather(results)
        elif step == "bench-gather-rows":
            bench_gather_rows(results)
        elif step == "bench-prefill":
            bench_prefill(results)
        elif step == "check-mma":
            ok &= check_mma(results, a.mma_variants)
        elif step == "bench-mma":
            bench_mma(results, a.mma_variants, Ms=a.ms)
        elif step == "bench-list":
            bench_list(results, a.shapes)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(results, f, indent=1, default=str)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
