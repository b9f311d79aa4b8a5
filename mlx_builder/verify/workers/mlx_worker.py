"""Benchmark MLX's scaled_dot_product_attention (one MLX build per process).

Run with the Python of a venv holding the wheel: ``python mlx_worker.py JOB``
(protocol in _common). Prefill uses mask="causal", decode no mask; peak
memory is mx.get_peak_memory() above the inputs. Linear-layer cases time
``mx.quantized_matmul`` (qmm) and ``x @ w.T`` (matmul) on one weight matrix;
mixture-of-experts cases ``mx.gather_qmm`` and ``mx.gather_mm`` over the
experts' weights in the layout mlx-lm's SwitchGLU passes them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from _common import EXPERT_MODES, LINEAR_MODES, emit, load_job, per_call_ms, run_cases

# mlx-lm's SwitchGLU sorts a call's rows by expert from this many on.
SORT_FROM_ROWS = 64


def main(argv: list[str]) -> None:
    job = load_job(argv)
    import mlx.core as mx

    try:
        info = mx.device_info()
    except Exception:
        info = {}
    emit({"type": "meta", "framework": "mlx", "label": job["label"],
          "version": mx.__version__, "device": str(info.get("device_name", "?")),
          "cuda": bool(mx.cuda.is_available()),
          "metal": bool(mx.metal.is_available())})
    dtype = getattr(mx, job["dtype"])
    B, H, Hkv = job["batch"], job["heads"], job["kv_heads"]

    def measure(call: Callable[[], Any]) -> tuple[float, int]:
        """Milliseconds per call of ``call`` (queued as the job says) and the
        peak memory one call alone adds."""
        pending: list = []

        def issue() -> None:
            pending.append(call())

        def wait() -> None:
            mx.eval(pending)
            pending.clear()

        mx.synchronize()
        mx.clear_cache()
        base = mx.get_active_memory()
        mx.reset_peak_memory()
        issue()
        wait()  # one call alone: its peak memory
        peak = mx.get_peak_memory() - base
        return per_call_ms(issue, wait, job), peak

    def bench_linear(mode: str, K: int, M: int, N: int) -> dict:
        mx.random.seed(0)
        w = (mx.random.normal((N, K)) * 0.05).astype(dtype)
        x = mx.random.normal((M, K)).astype(dtype)
        bits, group = job["qmm_bits"], job["qmm_group"]
        if mode == "qmm":
            qw = mx.quantize(w, group_size=group, bits=bits)
            mx.eval(x, w, qw)
            ms, peak = measure(lambda: mx.quantized_matmul(
                x, *qw, transpose=True, group_size=group, bits=bits))
        else:
            mx.eval(x, w)
            ms, peak = measure(lambda: x @ w.T)
        return {"ms": ms, "peak_bytes": peak, "kv_heads_read": 0}

    def bench_experts(mode: str, K: int, T: int, N: int) -> dict:
        E, k = job["moe_experts"], job["moe_top_k"]
        bits, group = job["qmm_bits"], job["qmm_group"]
        mx.random.seed(0)
        w = (mx.random.normal((E, N, K)) * 0.05).astype(dtype)
        # An even router: token t takes experts t*k ... t*k + k - 1 (mod E).
        picks = [(t * k + j) % E for t in range(T) for j in range(k)]
        rows = T * k
        is_sorted = rows >= SORT_FROM_ROWS
        if is_sorted:
            # mlx-lm's prefill: one row per (token, expert), sorted by expert.
            x = mx.random.normal((rows, 1, K)).astype(dtype)
            idx = mx.array(sorted(picks), dtype=mx.uint32)
        else:
            # Its decode: each token's row against its k experts.
            x = mx.random.normal((T, 1, 1, K)).astype(dtype)
            idx = mx.array(picks, dtype=mx.uint32).reshape(T, k)
        if mode == "gather_qmm":
            qw = mx.quantize(w, group_size=group, bits=bits)
            del w
            mx.eval(x, idx, qw)
            ms, peak = measure(lambda: mx.gather_qmm(
                x, *qw, rhs_indices=idx, transpose=True, group_size=group,
                bits=bits, sorted_indices=is_sorted))
        else:
            wt = w.swapaxes(-1, -2)
            mx.eval(x, idx, wt)
            ms, peak = measure(lambda: mx.gather_mm(
                x, wt, rhs_indices=idx, sorted_indices=is_sorted))
        return {"ms": ms, "peak_bytes": peak, "kv_heads_read": 0}

    def bench(backend: str, mode: str, D: int, qL: int, kL: int) -> dict:
        if mode in LINEAR_MODES:
            return bench_linear(mode, D, qL, kL)
        if mode in EXPERT_MODES:
            return bench_experts(mode, D, qL, kL)
        mx.random.seed(0)
        q = mx.random.normal((B, H, qL, D)).astype(dtype)
        k = mx.random.normal((B, Hkv, kL, D)).astype(dtype)
        v = mx.random.normal((B, Hkv, kL, D)).astype(dtype)
        mx.eval(q, k, v)
        mask = "causal" if mode == "prefill" else None
        ms, peak = measure(lambda: mx.fast.scaled_dot_product_attention(
            q, k, v, scale=D ** -0.5, mask=mask))
        return {"ms": ms, "peak_bytes": peak, "kv_heads_read": Hkv}

    run_cases(job, ["mlx"], bench)


if __name__ == "__main__":
    main(sys.argv)
