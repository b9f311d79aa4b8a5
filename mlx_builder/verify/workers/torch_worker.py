"""Benchmark PyTorch's SDPA backends (flash, cuDNN, efficient, math).

Run with a Python that has torch: ``python torch_worker.py JOB`` (protocol in
_common). Each backend is forced with torch.nn.attention.sdpa_kernel. GQA
goes through enable_gqa where the backend takes it; otherwise K/V are
expanded to all query heads and the record says so (kv_heads_read).
"""

from __future__ import annotations

import sys
from typing import Any

from _common import EXPERT_MODES, LINEAR_MODES, emit, load_job, per_call_ms, run_cases


def main(argv: list[str]) -> None:
    job = load_job(argv)
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = {"flash": SDPBackend.FLASH_ATTENTION,
                "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION,
                "math": SDPBackend.MATH}
    if not torch.cuda.is_available():
        raise SystemExit("torch sees no CUDA device")
    emit({"type": "meta", "framework": "torch", "label": job["label"],
          "version": torch.__version__, "cuda": torch.version.cuda,
          "cudnn": torch.backends.cudnn.version(),
          "device": torch.cuda.get_device_name()})
    dtype = getattr(torch, job["dtype"])
    B, H, Hkv = job["batch"], job["heads"], job["kv_heads"]
    dev = torch.device("cuda")

    def bench(backend: str, mode: str, D: int, qL: int, kL: int) -> dict:
        if mode in LINEAR_MODES or mode in EXPERT_MODES:
            raise NotImplementedError("linear layers are not supported by this worker")
        gen = torch.Generator(device=dev).manual_seed(0)
        q = torch.randn(B, H, qL, D, device=dev, dtype=dtype, generator=gen)
        k = torch.randn(B, Hkv, kL, D, device=dev, dtype=dtype, generator=gen)
        v = torch.randn(B, Hkv, kL, D, device=dev, dtype=dtype, generator=gen)
        causal = mode == "prefill"

        def attempt(kk: Any, vv: Any, gqa: bool) -> tuple[float, int]:
            def issue() -> None:
                with sdpa_kernel(backends[backend]):
                    F.scaled_dot_product_attention(q, kk, vv, is_causal=causal,
                                                   scale=D ** -0.5, enable_gqa=gqa)
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            ms = per_call_ms(issue, torch.cuda.synchronize, job)
            return ms, torch.cuda.max_memory_allocated() - base

        if Hkv == H:
            ms, peak = attempt(k, v, False)
            return {"ms": ms, "peak_bytes": peak, "kv_heads_read": H}
        try:
            ms, peak = attempt(k, v, True)
            return {"ms": ms, "peak_bytes": peak, "kv_heads_read": Hkv}
        except RuntimeError as exc:
            if "no available kernel" not in str(exc).lower():
                raise
        rep = H // Hkv  # this backend takes no GQA: read K/V for every head
        ms, peak = attempt(k.repeat_interleave(rep, dim=1),
                           v.repeat_interleave(rep, dim=1), False)
        return {"ms": ms, "peak_bytes": peak, "kv_heads_read": H}

    run_cases(job, job.get("backends") or list(backends), bench)


if __name__ == "__main__":
    main(sys.argv)
