"""Check and time mx.quantized_matmul and mx.gather_qmm (transpose=True,
affine) in one MLX build.

The path comes from MLX_CUDA_QMM_PATH, which MLX reads once per process, so
run one process per path:

    MLX_CUDA_QMM_PATH=gemv python mlx_qmm.py check --json gemv-check.json
    MLX_CUDA_QMM_PATH=upstream python mlx_qmm.py bench --ms 1 8 2048 --json up.json
    MLX_CUDA_QMM_PATH=gemv python mlx_qmm.py check-gather --json gemv-gcheck.json
    MLX_CUDA_QMM_PATH=upstream python mlx_qmm.py bench-gather --json up-g.json
    python mlx_qmm.py summary *.json

check compares against a float64 reference (the packed weights unpacked on
the CPU, times scales plus biases, then the product) on fresh random inputs,
every bits/group/dtype combination and odd or batched shapes. bench times
queued calls (mean per call after a warm-up), rotating weight sets so that
the weights come from memory, at gemma-4 31B's linear shapes; with --bf16 it
also times MLX's bf16 `x @ w.T` at the same shapes.

check-gather does the same for gather_qmm (experts' weights [E, N, K],
repeated and out-of-order indices, mlx-lm's decode and sorted layouts, M up
to 13 and B up to 203). bench-gather times gather_qmm at a Qwen3-30B-A3B-like
mixture-of-experts layer (shapes.MOE_SHAPES) the way mlx-lm's SwitchGLU
calls it for --tokens tokens (top-8 experts each; sorted by expert once B
reaches 64, as mlx-lm does: decode up to 7 tokens, prefill chunks past
that), in GB/s of the distinct experts' weight bytes and TFLOP/s.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
from shapes import MOE_DENSE_SHAPES, MOE_EXPERTS, MOE_SHAPES, MOE_TOP_K, SHAPES


def unpack(wq, bits):
    w = np.asarray(wq).astype(np.uint64)
    per = 32 // bits
    shifts = (np.arange(per, dtype=np.uint64) * bits)
    q = (w[..., None] >> shifts) & np.uint64(2**bits - 1)
    return q.reshape(*w.shape[:-1], w.shape[-1] * per).astype(np.float64)


def to64(mx, a):
    return np.asarray(a.astype(mx.float32)).astype(np.float64)


def dequant64(mx, wq, s, b, bits, group):
    """The float64 weights [..., N, K] of packed weights, scales, biases."""
    q = unpack(wq, bits)
    q = q.reshape(*q.shape[:-1], q.shape[-1] // group, group)
    deq = q * to64(mx, s)[..., None] + to64(mx, b)[..., None]
    return deq.reshape(*deq.shape[:-2], -1)


def rel_error(got, ref):
    """Relative Frobenius error; inf for NaN/inf or a wrong shape."""
    if not (np.isfinite(got).all() and got.shape == ref.shape):
        return float("inf")
    return np.linalg.norm(got - ref) / np.linalg.norm(ref)


def check_report(step, n, worst, fails):
    """Print a check's line and failures; (results, ok) as main expects."""
    path = os.environ.get("MLX_CUDA_QMM_PATH", "auto")
    print(f"{step} path={path}: {n} cases, worst relative error {worst:.2e}, "
          f"{len(fails)} failures")
    for f in fails[:10]:
        print("  FAIL", f)
    key = step.replace("-", "_")
    return {key: {"path": path, "cases": n, "worst": worst,
                  "failures": fails}}, not fails


def check(args):
    import mlx.core as mx

    rng = np.random.default_rng(int(time.time()))
    cases = [((1, 640), 4099), ((5, 4096 + 128), 33), ((8, 384), 1000),
             ((13, 1024), 257), ((2, 3, 640), 520), ((130, 768), 96),
             ((300, 512), 200), ((1, 21504), 130), ((8, 768), 37)]
    fails, worst, n = [], 0.0, 0
    for dt in (mx.bfloat16, mx.float16):
        for bits in (4, 8):
            for group in (32, 64, 128):
                for xshape, N in cases:
                    K = xshape[-1]
                    w = mx.array(rng.standard_normal((N, K)).astype(np.float32)
                                 * 0.05).astype(dt)
                    wq, s, b = mx.quantize(w, group_size=group, bits=bits)
                    x = mx.array(rng.standard_normal(xshape).astype(np.float32)
                                 ).astype(dt)
                    y = mx.quantized_matmul(x, wq, s, b, transpose=True,
                                            group_size=group, bits=bits)
                    mx.eval(y)
                    deq = dequant64(mx, wq, s, b, bits, group)
                    e = rel_error(to64(mx, y), to64(mx, x) @ deq.T)
                    n += 1
                    worst = max(worst, e)
                    if not e < 1e-2:
                        fails.append([str(dt), bits, group, list(xshape), N, e])
    return check_report("check", n, worst, fails)


# (experts E, x shape [..., M, K], N, lhs_indices or None (x's batches in
# order), rhs_indices, sorted_indices): odd N; mlx-lm's decode layouts (x
# [T, 1, 1, K] or [T, k, 1, K] with indices [T, k]) and its sorted one;
# repeated and out-of-order indices; M from 1 to 8 (the GEMV) and 13
# (upstream's kernels under the default routing); B up to 203 (past 64 the
# GEMV's row tiles, across experts and, for M > 1, across products).
GATHER_CASES = [
    (16, (1, 1, 1, 512), 200, None, [[3, 11, 0, 7, 15, 2, 9, 4]], False),
    (8, (1, 8, 1, 384), 4099, None, [[5, 1, 7, 0, 2, 6, 3, 4]], False),
    (4, (3, 5, 640), 257, [2, 0, 2, 1, 0, 1, 2], [3, 3, 0, 1, 3, 2, 0], False),
    (3, (9, 8, 256), 33, list(range(8, -1, -1)), [2, 2, 1, 0, 0, 1, 2, 1, 0],
     False),
    (2, (1, 3, 2048), 130, [0], [1], False),
    (5, (2, 13, 1024), 257, [1, 0, 1], [4, 0, 4], False),
    (32, (12, 1, 1, 768), 130, None, "topk", False),
    (16, (64, 1, 512), 96, None, "sorted", True),
    (16, (203, 1, 512), 72, None, "sorted", True),
    (6, (70, 3, 256), 40, None, "random", False),
    (5, (3, 7, 384), 33, "random", "random", False),
]


def gather_inputs(case, rng):
    """(E, x shape, N, lhs or None, rhs as nested lists, sorted): the index
    arrays for the case ('topk': 8 distinct experts per token, 'sorted': one
    expert per row of x, ascending, 'random': one per batch of x, or 80
    batches of x drawn at random for lhs and experts for rhs)."""
    E, xshape, N, lhs, rhs, sorted_ = case
    if rhs == "topk":
        rhs = [list(rng.permutation(E)[:8]) for _ in range(xshape[0])]
    elif rhs == "sorted":
        rhs = sorted(rng.integers(0, E, xshape[0]).tolist())
    elif rhs == "random":
        rhs = rng.integers(0, E, 80 if lhs == "random" else xshape[0]).tolist()
    if lhs == "random":
        lhs = rng.integers(0, xshape[0], 80).tolist()
    lhs = None if lhs is None else np.array(lhs, dtype=np.uint32)
    return E, xshape, N, lhs, np.array(rhs, dtype=np.uint32), sorted_


def gather_reference(x64, deq, lhs, rhs):
    """out[i] = x[lhs[i]] @ deq[rhs[i]].T over the broadcast indices, lhs
    defaulting to x's batches in order (gather_qmm's rule)."""
    batch = x64.shape[:-2]
    if lhs is None:
        lhs = np.arange(int(np.prod(batch)), dtype=np.int64).reshape(batch)
    lhs, rhs = np.broadcast_arrays(lhs, rhs)
    xf = x64.reshape(-1, *x64.shape[-2:])
    out = np.einsum("bmk,bnk->bmn", xf[lhs.reshape(-1).astype(np.int64)],
                    deq[rhs.reshape(-1).astype(np.int64)])
    return out.reshape(*lhs.shape, *out.shape[-2:])


def check_gather(args):
    import mlx.core as mx

    rng = np.random.default_rng(int(time.time()))
    fails, worst, n = [], 0.0, 0
    for dt in (mx.bfloat16, mx.float16):
        for bits in (4, 8):
            for group in (32, 64, 128):
                for case in GATHER_CASES:
                    E, xshape, N, lhs, rhs, sorted_ = gather_inputs(case, rng)
                    K = xshape[-1]
                    w = mx.array(rng.standard_normal((E, N, K)).astype(
                        np.float32) * 0.05).astype(dt)
                    wq, s, b = mx.quantize(w, group_size=group, bits=bits)
                    x = mx.array(rng.standard_normal(xshape).astype(np.float32)
                                 ).astype(dt)
                    y = mx.gather_qmm(
                        x, wq, s, b,
                        lhs_indices=None if lhs is None else mx.array(lhs),
                        rhs_indices=mx.array(rhs), transpose=True,
                        group_size=group, bits=bits, sorted_indices=sorted_)
                    mx.eval(y)
                    deq = dequant64(mx, wq, s, b, bits, group)
                    ref = gather_reference(to64(mx, x), deq, lhs, rhs)
                    e = rel_error(to64(mx, y), ref)
                    n += 1
                    worst = max(worst, e)
                    if not e < 1e-2:
                        fails.append([str(dt), bits, group, E, list(xshape), N,
                                      rhs.size, e])
    return check_report("check-gather", n, worst, fails)


def timed(fn, sets, reps):
    import mlx.core as mx

    for i in range(2):
        mx.eval(fn(sets[i % len(sets)]))
    mx.synchronize()
    t = time.perf_counter()
    outs = [fn(sets[r % len(sets)]) for r in range(reps)]
    mx.eval(outs)
    mx.synchronize()
    return (time.perf_counter() - t) / reps * 1e3


def bench(args):
    import mlx.core as mx

    path = os.environ.get("MLX_CUDA_QMM_PATH", "auto")
    rows = []
    bits, group = args.bits, 64
    # gemma-4's shapes by default; --shapes may also name MOE_DENSE_SHAPES.
    wanted = args.shapes or [name for name, _, _ in SHAPES]
    for name, K, N in SHAPES + MOE_DENSE_SHAPES:
        if name not in wanted:
            continue
        wbytes = N * K * bits // 8 + 2 * N * (K // group) * 2
        nsets = max(2, min(8, int(4e8 // wbytes)))
        sets = []
        for _ in range(nsets):
            w = (mx.random.normal((N, K)) * 0.05).astype(mx.bfloat16)
            sets.append(mx.quantize(w, group_size=group, bits=bits))
        mx.eval(sets)
        dense = None
        if args.bf16:
            nd = max(2, min(4, int(4e8 // (N * K * 2))))
            dense = [(mx.random.normal((N, K)) * 0.05).astype(mx.bfloat16)
                     for _ in range(nd)]
            mx.eval(dense)
        for M in args.ms:
            x = mx.random.normal((M, K)).astype(mx.bfloat16)
            mx.eval(x)
            fl = 2 * M * N * K
            reps = 50 if M <= 64 else 20 if fl < 1e12 else 5
            ms = timed(lambda st: mx.quantized_matmul(
                x, *st, transpose=True, group_size=group, bits=bits), sets, reps)
            row = {"shape": name, "K": K, "N": N, "M": M, "bits": bits,
                   "path": path, "ms": ms, "tflops": fl / ms / 1e9,
                   "gbs": wbytes / ms / 1e6}
            if dense is not None:
                bms = timed(lambda d: x @ d.T, dense, reps)
                row.update(bf16_ms=bms, bf16_tflops=fl / bms / 1e9,
                           bf16_gbs=N * K * 2 / bms / 1e6)
            rows.append(row)
            print(json.dumps(row), flush=True)
            del x
        del sets, dense
        mx.clear_cache()
    return {"bench": rows}, True


def bench_gather(args):
    """gather_qmm as mlx-lm's SwitchGLU calls it: x [T, 1, 1, K]
    (gate, up) or [T, k, 1, K] (down) with indices [T, k]; from T * k = 64
    on, x and the indices sorted by expert ([T * k, 1, K], sorted_indices).
    The sort itself is not timed."""
    import mlx.core as mx

    path = os.environ.get("MLX_CUDA_QMM_PATH", "auto")
    rows = []
    bits, group, E, k = args.bits, 64, MOE_EXPERTS, MOE_TOP_K
    rng = np.random.default_rng(5)
    for name, K, N in MOE_SHAPES:
        if args.shapes and name not in args.shapes:
            continue
        ebytes = N * K * bits // 8 + 2 * N * (K // group) * 2
        nsets = max(2, min(8, int(1.6e9 // (ebytes * E))))
        wsets = []
        for _ in range(nsets):
            w = (mx.random.normal((E, N, K)) * 0.05).astype(mx.bfloat16)
            wsets.append(mx.quantize(w, group_size=group, bits=bits))
            mx.eval(wsets[-1])
            del w
        for T in args.tokens:
            B = T * k
            sets, distinct = [], []
            for i in range(max(16, nsets)):
                idx = np.stack([rng.permutation(E)[:k] for _ in range(T)])
                distinct.append(len(np.unique(idx)))
                shape = (T, 1, 1, K) if name != "moe_down" else (T, k, 1, K)
                x = mx.random.normal(shape).astype(mx.bfloat16)
                flat = idx.reshape(-1)
                if B >= 64:
                    order = np.argsort(flat, kind="stable")
                    xf = x.reshape(-1, 1, K)
                    if name != "moe_down":
                        xf = xf[mx.array(order // k)]
                    else:
                        xf = xf[mx.array(order)]
                    sets.append((wsets[i % nsets], xf,
                                 mx.array(flat[order].astype(np.uint32)), True))
                else:
                    sets.append((wsets[i % nsets], x,
                                 mx.array(idx.astype(np.uint32)), False))
            mx.eval([s[1:3] for s in sets])
            ms = timed(lambda st: mx.gather_qmm(
                st[1], *st[0], rhs_indices=st[2], transpose=True,
                group_size=group, bits=bits, sorted_indices=st[3]), sets,
                50 if B <= 64 else 20)
            d = float(np.mean(distinct))
            row = {"op": "gather_qmm", "shape": name, "K": K, "N": N,
                   "tokens": T, "B": B, "distinct": d, "bits": bits,
                   "path": path, "ms": ms, "gbs": d * ebytes / ms / 1e6,
                   "tflops": 2 * B * N * K / ms / 1e9}
            if args.bf16 and B >= 64:
                # The same rows through one bf16 [N, K] matrix (MLX's
                # cuBLAS GEMM): the work without the experts.
                dense = [(mx.random.normal((N, K)) * 0.05).astype(mx.bfloat16)
                         for _ in range(2)]
                xs = [st[1].reshape(B, K) for st in sets[:2]]
                mx.eval(dense, xs)
                bms = timed(lambda i: xs[i] @ dense[i].T, [0, 1], 20)
                row.update(bf16_ms=bms, bf16_tflops=2 * B * N * K / bms / 1e9)
            rows.append(row)
            print(json.dumps(row), flush=True)
            del sets
        del wsets
        mx.clear_cache()
    return {"bench_gather": rows}, True


def summary(files):
    table, gather = {}, {}
    for f in files:
        try:
            data = json.load(open(f))
        except (OSError, ValueError):
            continue
        for r in data.get("bench", []):
            key = (r["shape"], r["M"], r["bits"])
            d = table.setdefault(key, {})
            d[r["path"]] = r
        for r in data.get("bench_gather", []):
            d = gather.setdefault((r["shape"], r["tokens"], r["bits"]), {})
            d[r["path"]] = r
    print(f"{'shape':12s} {'bits':>4s} {'M':>6s} | upstream   sm80   auto   gemv "
          "dequant  bf16 | unit")
    for (shape, M, bits), d in sorted(table.items(),
                                      key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        unit = "gbs" if M <= 8 else "tflops"

        def v(p, d=d, unit=unit):
            return f"{d[p][unit]:7.1f}" if p in d else "      -"

        bf = next((r for r in d.values() if "bf16_ms" in r), None)
        bfv = f"{bf['bf16_' + unit]:7.1f}" if bf else "      -"
        print(f"{shape:12s} {bits:4d} {M:6d} | {v('upstream')} {v('sm80')} "
              f"{v('auto')} {v('gemv')} {v('dequant')} {bfv} | "
              f"{'GB/s' if unit == 'gbs' else 'TFLOP/s'}")
    if gather:
        print("\ngather_qmm, GB/s of the distinct experts' weight bytes "
              "below 64 products, TFLOP/s from 64")
        print(f"{'shape':12s} {'bits':>4s} {'tokens':>6s} {'B':>6s} "
              f"{'experts':>7s} | upstream    auto    gemv gemv_rows   tiles    bf16 | unit")
    for (shape, T, bits), d in sorted(gather.items(),
                                      key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        r0 = next(iter(d.values()))
        unit = "gbs" if r0["B"] < 64 else "tflops"
        cells = " ".join(f"{d[p][unit]:7.1f}" if unit in d.get(p, {}) else "      -"
                         for p in ("upstream", "auto", "gemv", "gemv_rows", "tiles"))
        bf = next((r for r in d.values() if "bf16_tflops" in r), None)
        cells += f" {bf['bf16_tflops']:7.1f}" if bf and unit == "tflops" else "       -"
        print(f"{shape:12s} {bits:4d} {T:6d} {r0['B']:6d} "
              f"{r0['distinct']:7.1f} | {cells} | "
              f"{'GB/s' if unit == 'gbs' else 'TFLOP/s'}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("step", choices=["check", "bench", "check-gather",
                                    "bench-gather", "summary"])
    p.add_argument("files", nargs="*")
    p.add_argument("--ms", type=int, nargs="+",
                   default=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 2048])
    p.add_argument("--shapes", nargs="*")
    p.add_argument("--bits", type=int, default=4)
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--tokens", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32],
                   help="bench-gather: tokens (B = tokens * top-k; sorted from 64)")
    p.add_argument("--json")
    a = p.parse_args()
    if a.step == "summary":
        summary(a.files)
        return
    step = {"check": check, "bench": bench, "check-gather": check_gather,
            "bench-gather": bench_gather}[a.step]
    out, ok = step(a)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
