"""Benchmark MLX's scaled_dot_product_attention (one MLX build per process).

Run with the Python of a venv holding the wheel: ``python mlx_worker.py JOB``
(protocol in _common). Prefill uses mask="causal", decode no mask; peak
memory is mx.get_peak_memory() above the inputs.
"""

from __future__ import annotations

import sys

from _common import emit, load_job, per_call_ms, run_cases


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

    def bench(backend: str, mode: str, D: int, qL: int, kL: int) -> dict:
        mx.random.seed(0)
        q = mx.random.normal((B, H, qL, D)).astype(dtype)
        k = mx.random.normal((B, Hkv, kL, D)).astype(dtype)
        v = mx.random.normal((B, Hkv, kL, D)).astype(dtype)
        mx.eval(q, k, v)
        mask = "causal" if mode == "prefill" else None
        mx.synchronize()
        mx.clear_cache()
        base = mx.get_active_memory()
        mx.reset_peak_memory()
        pending = []

        def issue() -> None:
            pending.append(mx.fast.scaled_dot_product_attention(
                q, k, v, scale=D ** -0.5, mask=mask))

        def wait() -> None:
            mx.eval(pending)
            pending.clear()

        issue()
        wait()  # one call alone: its peak memory
        peak = mx.get_peak_memory() - base
        ms = per_call_ms(issue, wait, job)
        return {"ms": ms, "peak_bytes": peak, "kv_heads_read": Hkv}

    run_cases(job, ["mlx"], bench)


if __name__ == "__main__":
    main(sys.argv)
