"""Benchmark MLX's scaled_dot_product_attention (one MLX build per process).

Run with the Python of a venv holding the wheel: ``python mlx_worker.py JOB``
(protocol in _common). Prefill uses mask="causal", decode no mask; peak
memory is mx.get_peak_memory() above the inputs. Linear-layer cases time
``mx.quantized_matmul`` (qmm) and ``x @ w.T`` (matmul) on one weight matrix.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from _common import LINEAR_MODES, emit, load_job, per_call_ms, run_cases


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

    def bench(backend: str, mode: str, D: int, qL: int, kL: int) -> dict:
        if mode in LINEAR_MODES:
            return bench_linear(mode, D, qL, kL)
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
