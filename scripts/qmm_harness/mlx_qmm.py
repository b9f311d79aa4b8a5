"""Check and time mx.quantized_matmul (transpose=True, affine) in one MLX build.

The path comes from MLX_CUDA_QMM_PATH, which MLX reads once per process, so
run one process per path:

    MLX_CUDA_QMM_PATH=gemv python mlx_qmm.py check --json gemv-check.json
    MLX_CUDA_QMM_PATH=upstream python mlx_qmm.py bench --ms 1 8 2048 --json up.json
    python mlx_qmm.py summary *.json

check compares against a float64 reference (the packed weights unpacked on
the CPU, times scales plus biases, then the product) on fresh random inputs,
every bits/group/dtype combination and odd or batched shapes. bench times
queued calls (mean per call after a warm-up), rotating weight sets so that
the weights come from memory, at gemma-4 31B's linear shapes; with --bf16 it
also times MLX's bf16 `x @ w.T` at the same shapes.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
from shapes import SHAPES


def unpack(wq, bits):
    w = np.asarray(wq).astype(np.uint64)
    per = 32 // bits
    shifts = (np.arange(per, dtype=np.uint64) * bits)
    q = (w[..., None] >> shifts) & np.uint64(2**bits - 1)
    return q.reshape(*w.shape[:-1], w.shape[-1] * per).astype(np.float64)


def check(args):
    import mlx.core as mx

    rng = np.random.default_rng(int(time.time()))
    cases = [((1, 640), 4099), ((5, 4096 + 128), 33), ((8, 384), 1000),
             ((13, 1024), 257), ((2, 3, 640), 520), ((130, 768), 96),
             ((300, 512), 200), ((1, 21504), 130)]
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
                    q = unpack(wq, bits).reshape(N, K // group, group)
                    s64 = np.asarray(s.astype(mx.float32)).astype(np.float64)
                    b64 = np.asarray(b.astype(mx.float32)).astype(np.float64)
                    deq = (q * s64[..., None] + b64[..., None]).reshape(N, K)
                    x64 = np.asarray(x.astype(mx.float32)).astype(np.float64)
                    ref = x64 @ deq.T
                    got = np.asarray(y.astype(mx.float32)).astype(np.float64)
                    e = (np.linalg.norm(got - ref) / np.linalg.norm(ref)
                         if np.isfinite(got).all() and got.shape == ref.shape
                         else float("inf"))
                    n += 1
                    worst = max(worst, e)
                    if not e < 1e-2:
                        fails.append([str(dt), bits, group, list(xshape), N, e])
    path = os.environ.get("MLX_CUDA_QMM_PATH", "auto")
    print(f"check path={path}: {n} cases, worst relative error {worst:.2e}, "
          f"{len(fails)} failures")
    for f in fails[:10]:
        print("  FAIL", f)
    return {"check": {"path": path, "cases": n, "worst": worst,
                      "failures": fails}}, not fails


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
    for name, K, N in SHAPES:
        if args.shapes and name not in args.shapes:
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


def summary(files):
    table = {}
    for f in files:
        try:
            data = json.load(open(f))
        except (OSError, ValueError):
            continue
        for r in data.get("bench", []):
            key = (r["shape"], r["M"], r["bits"])
            d = table.setdefault(key, {})
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("step", choices=["check", "bench", "summary"])
    p.add_argument("files", nargs="*")
    p.add_argument("--ms", type=int, nargs="+",
                   default=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 2048])
    p.add_argument("--shapes", nargs="*")
    p.add_argument("--bits", type=int, default=4)
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--json")
    a = p.parse_args()
    if a.step == "summary":
        summary(a.files)
        return
    out, ok = check(a) if a.step == "check" else bench(a)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
