"""Where one decode step of gemma-4 31B goes, in an MLX build (CUDA).

Builds mlx-lm's gemma4_text at the real configuration with random 4-bit
weights (the fullscale test part's model, 16.1 GiB; 8-bit with --bits 8),
prefills L tokens in mlx-lm's 2048-token steps, then measures, in ms per
step:

  step           decode pipelined as mlx-lm's generate_step runs it
                 (async_eval of step n+1 before step n's token is read),
                 split into the Python graph build, async_eval and the
                 wait for the previous token
  sync           one step at a time: graph build, then eval + synchronize
  qmm_only       the step's quantized matmuls alone (every QuantizedLinear
                 and the tied-embedding head at M = 1, in the model's
                 order, one eval), with the GB/s of their weight bytes
  no_qmm         the pipelined step with every QuantizedLinear replaced by
                 a zeros fill: everything but the quantized matmuls (the
                 tied-embedding head, one call, still runs)
  host_per_op    MLX's cost per op: as many tiny quantized matmuls as the
                 step has, and 2000 tiny adds, evaluated together, split
                 into the graph build, async_eval (encode and launch) and
                 the whole with the GPU's run

The JSON also lists the step's quantized-matmul shapes (qmm_shapes) for
`run.py bench-list --shapes step.json`, which times the same calls through
the harness's GEMV alone.

    python decode_step.py --length 32768 --json step.json

--profile-range wraps 16 pipelined steps in cudaProfilerStart/Stop for
`nsys profile --capture-range=cudaProfilerApi --cuda-graph-trace=node`.
Run it with this repository's root as the working directory or anywhere:
it imports the suite's model helpers by path.
"""

import argparse
import ctypes
import glob
import json
import os
import sys
import time

SUITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                     "mlx_builder", "suites", "sdpa")


def pipelined(mx, step, y, n):
    """(ms per step, build ms, async_eval ms, wait ms, last token)."""
    tb = te = tw = 0.0
    mx.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        t0 = time.perf_counter()
        nxt = step(y)
        t1 = time.perf_counter()
        mx.async_eval(nxt)
        t2 = time.perf_counter()
        y.item()
        t3 = time.perf_counter()
        tb, te, tw = tb + t1 - t0, te + t2 - t1, tw + t3 - t2
        y = nxt
    y.item()
    mx.synchronize()
    total = (time.perf_counter() - t) / n * 1e3
    return total, tb / n * 1e3, te / n * 1e3, tw / n * 1e3, y


def timed_evals(mx, fn, reps):
    mx.eval(fn())
    mx.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        mx.eval(fn())
    mx.synchronize()
    return (time.perf_counter() - t) / reps * 1e3


def host_split(mx, fn, reps):
    """(graph build, async_eval, whole) ms per call of fn: the Python and
    C++ op construction, MLX's encode and launch without waiting for the
    GPU, and both with the GPU's run to the end."""
    mx.eval(fn())
    mx.synchronize()
    tb = te = 0.0
    t = time.perf_counter()
    for _ in range(reps):
        t0 = time.perf_counter()
        outs = fn()
        t1 = time.perf_counter()
        mx.async_eval(outs)
        t2 = time.perf_counter()
        mx.synchronize()
        tb, te = tb + t1 - t0, te + t2 - t1
    total = time.perf_counter() - t
    return tb / reps * 1e3, te / reps * 1e3, total / reps * 1e3


def cudart():
    import mlx.core as mx

    here = os.path.dirname(mx.__file__)
    names = glob.glob(os.path.join(here, "..", "nvidia", "cu*", "lib",
                                   "libcudart.so*"))
    for name in [*names, "libcudart.so.13", "libcudart.so.12", "libcudart.so"]:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    sys.exit("decode_step: no libcudart to call cudaProfilerStart with")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--length", type=int, default=32768,
                   help="context length before the measured steps")
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--bits", type=int, choices=(4, 8), default=4,
                   help="quantize the model's weights to this many bits")
    p.add_argument("--json", help="write the figures here too")
    p.add_argument("--profile-range", action="store_true",
                   help="16 more steps between cudaProfilerStart/Stop")
    a = p.parse_args()

    sys.path.insert(0, SUITE)
    import fullscale_support as fs
    import mlx.core as mx
    import mlx.nn as nn
    from e2e_support import mlx_lm_modules

    mods = mlx_lm_modules()
    model = fs.build_gemma4_31b(mx, mods, bits=a.bits)
    tokens = fs.prompt_tokens(mx, a.length,
                              vocab=fs.GEMMA4_31B["vocab_size"])
    cache = fs.fresh_cache(mx, mods, model)
    logits = fs.prefill_logits(mx, model, tokens, cache, fs.PREFILL_STEP)
    y = mx.argmax(logits, axis=-1)
    mx.eval(y)

    def step(y):
        return mx.argmax(model(y[None], cache=cache)[:, -1, :], axis=-1)

    for _ in range(16):
        y = step(y)
        mx.eval(y)
    out = {"mlx": mx.__version__, "length": a.length, "steps": a.steps,
           "bits": a.bits,
           "env": {k: v for k, v in os.environ.items()
                   if k.startswith("MLX_")}}

    ms, build, enc, wait, y = pipelined(mx, step, y, a.steps)
    out.update(step_ms=ms, tok_s=1e3 / ms, step_build_ms=build,
               step_async_eval_ms=enc, step_wait_ms=wait)

    build = run = 0.0
    for _ in range(a.steps):
        t0 = time.perf_counter()
        nxt = step(y)
        t1 = time.perf_counter()
        mx.eval(nxt)
        mx.synchronize()
        build, run = build + t1 - t0, run + time.perf_counter() - t1
        y = nxt
    out.update(sync_build_ms=build / a.steps * 1e3,
               sync_eval_ms=run / a.steps * 1e3)

    qls = [m for _, m in model.named_modules()
           if isinstance(m, nn.QuantizedLinear)]
    head = model.model.embed_tokens
    weighted = [*qls, head]  # every quantized matmul of a step, in order
    xs = {}

    def in_features(m):
        return m.weight.shape[1] * 32 // m.bits

    def x_for(m):
        k = in_features(m)
        if k not in xs:
            xs[k] = mx.random.normal((1, 1, k)).astype(mx.bfloat16)
        return xs[k]

    def qcalls():
        return [q(x_for(q)) for q in qls] + [head.as_linear(x_for(head))]

    wbytes = sum(m.weight.nbytes + m.scales.nbytes
                 + (m.biases.nbytes if m.biases is not None else 0)
                 for m in weighted)
    qms = timed_evals(mx, qcalls, 16)
    out.update(qmm_calls=len(weighted), qmm_weight_gib=wbytes / 2**30,
               qmm_only_ms=qms, qmm_only_gb_s=wbytes / qms / 1e6)
    # (N, K, bits, group) per call, for run.py bench-list (the kernels alone)
    out["qmm_shapes"] = [[m.weight.shape[0], in_features(m), m.bits, m.group_size]
                         for m in weighted]

    original = nn.QuantizedLinear.__call__
    nn.QuantizedLinear.__call__ = lambda self, x: mx.zeros(
        (*x.shape[:-1], self.weight.shape[0]), x.dtype)
    try:
        ms, build, enc, _, y = pipelined(mx, step, y, a.steps)
    finally:
        nn.QuantizedLinear.__call__ = original
    out.update(no_qmm_ms=ms, no_qmm_build_ms=build, no_qmm_async_eval_ms=enc)

    w = mx.random.normal((64, 512)).astype(mx.bfloat16)
    wq, s, b = mx.quantize(w, group_size=64, bits=4)
    tiny = [mx.random.normal((1, 1, 512)).astype(mx.bfloat16)
            for _ in range(4)]
    mx.eval(wq, s, b, *tiny)
    n_q = len(weighted)

    def tiny_qmm():
        return [mx.quantized_matmul(tiny[i % 4], wq, s, b, transpose=True,
                                    group_size=64, bits=4)
                for i in range(n_q)]

    def tiny_add():
        acc = tiny[0]
        for i in range(2000):
            acc = acc + tiny[i % 4]
        return [acc]

    for name, fn, n in (("qmm", tiny_qmm, n_q), ("add", tiny_add, 2000)):
        build, encode, whole = host_split(mx, fn, 10)
        out[f"host_us_per_{name}"] = whole / n * 1e3
        out[f"host_us_per_{name}_build"] = build / n * 1e3
        out[f"host_us_per_{name}_async_eval"] = encode / n * 1e3

    if a.profile_range:
        rt = cudart()
        mx.synchronize()
        rt.cudaProfilerStart()
        *_, y = pipelined(mx, step, y, 16)
        rt.cudaProfilerStop()

    print(json.dumps({k: v for k, v in out.items() if k != "qmm_shapes"},
                     indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
