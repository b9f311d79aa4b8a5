"""What both workers share: the JSON-lines protocol, timing, metrics.

Job (argv[1], JSON)::

    {"label": "patched", "cases": [["prefill", D, qL, kL], ["decode", ...]],
     "heads": 32, "kv_heads": 16, "batch": 1, "dtype": "bfloat16",
     "warmup": 3, "iters": 10, "queue": 1, "backends": ["flash", ...]   # torch only}

"queue": calls issued per timed round. 1 waits for every call (latency);
N > 1 issues N calls back to back, waits once and reports the time per call
(device throughput). Peak memory is taken from single calls either way.

Output, one JSON object per line on stdout:

    {"type": "meta", "framework": ..., "version": ..., "device": ..., ...}
    {"type": "start", "case": [mode, D, qL, kL], "backend": ...}
    {"type": "result", "mode", "D", "qL", "kL", "backend", "status":
     ok|oom|unsupported|skipped|error, "ms", "tflops", "tbps", "peak_gib",
     "error", ...}
    {"type": "done"}

Prefill is causal: FLOPs = 4·B·H·qL·kL·D / 2 (qL = kL). Decode reports the
bandwidth of reading K and V once: 2·B·H_kv·kL·D·itemsize bytes per call.

Linear layers (``"qmm_bits"``/``"qmm_group"`` in the job): ``["qmm", K, M, N]``
times ``quantized_matmul(x[M, K], W[N, K] affine-quantized, transpose=True)``
and ``["matmul", K, M, N]`` the dense ``x @ W.T``; both report 2·M·N·K FLOPs
and the bandwidth of reading the weights once (packed weights, scales and
biases for qmm; N·K·itemsize for matmul).

Mixture-of-experts layers (``"moe_experts"``/``"moe_top_k"`` too):
``["gather_qmm", K, T, N]`` times ``gather_qmm`` over E experts' quantized
[N, K] weights for T tokens of top-k experts each, as mlx-lm's SwitchGLU
calls it, and ``["gather_mm", K, T, N]`` the same with the experts' weights
dense; both report 2·T·k·N·K FLOPs and the bandwidth of reading each
expert's weights that the tokens pick once (min(E, T·k) experts: the
worker's router spreads the tokens evenly).
This module must not import MLX or torch.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

GIB = float(1 << 30)
# Exit status of a worker that stopped after an out-of-memory with cases
# left: an MLX process fails every later allocation once one has failed
# (seen on the H200), so a fresh process runs the rest. The parent passes
# the lengths already out of memory back in job["oom_at"].
RESTART_EXIT = 75
ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4}


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def load_job(argv: list[str]) -> dict:
    if len(argv) < 2:
        raise SystemExit("usage: worker.py JOB_JSON")
    return json.loads(argv[1])


def prefill_flops(batch: int, heads: int, qL: int, kL: int, D: int) -> float:
    """Causal attention work (QKᵀ and PV, half the square)."""
    return 4.0 * batch * heads * qL * kL * D / 2.0


def decode_bytes(batch: int, kv_heads: int, kL: int, D: int, itemsize: int) -> float:
    return 2.0 * batch * kv_heads * kL * D * itemsize


def median_ms(call: Callable[[], Any], warmup: int, iters: int) -> float:
    """``call`` must return only once the work is finished on the device."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(max(1, iters)):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def per_call_ms(issue: Callable[[], Any], wait: Callable[[], Any], job: dict) -> float:
    """Median time per call over rounds of job["queue"] issued calls and one
    ``wait`` for all of them (see the module doc)."""
    queue = max(1, int(job.get("queue", 1)))

    def one_round() -> None:
        for _ in range(queue):
            issue()
        wait()

    return median_ms(one_round, job["warmup"], job["iters"]) / queue


def classify(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".lower()
    if any(s in text for s in ("out of memory", "outofmemory", "cudamalloc",
                               "insufficient memory", "attempting to allocate")):
        return "oom"
    if any(s in text for s in ("no available kernel", "not supported",
                               "no fused kernel", "unsupported")):
        return "unsupported"
    return "error"


LINEAR_MODES = ("qmm", "matmul")
EXPERT_MODES = ("gather_qmm", "gather_mm")


def experts_read(job: dict, tokens: int) -> int:
    """Distinct experts that ``tokens`` tokens pick under the workers'
    even router (token t takes experts t·k … t·k + k - 1, modulo E)."""
    return min(job["moe_experts"], tokens * job["moe_top_k"])


def weight_bytes(job: dict, mode: str, K: int, N: int) -> float:
    """Bytes of one [N, K] W read once: packed values plus a scale and a
    bias per group (qmm, gather_qmm), or the dense matrix."""
    itemsize = ITEMSIZE[job["dtype"]]
    if mode in ("qmm", "gather_qmm"):
        bits, group = job["qmm_bits"], job["qmm_group"]
        return N * K * bits / 8 + 2.0 * N * (K // group) * itemsize
    return float(N * K * itemsize)


def metrics(job: dict, mode: str, D: int, qL: int, kL: int, ms: float,
            kv_heads_read: int) -> dict:
    seconds = ms / 1e3
    if mode in LINEAR_MODES:  # D = K, qL = M, kL = N
        return {"tflops": 2.0 * qL * kL * D / seconds / 1e12,
                "tbps": weight_bytes(job, mode, D, kL) / seconds / 1e12}
    if mode in EXPERT_MODES:  # D = K, qL = tokens, kL = N
        rows = qL * job["moe_top_k"]
        nbytes = experts_read(job, qL) * weight_bytes(job, mode, D, kL)
        return {"tflops": 2.0 * rows * kL * D / seconds / 1e12,
                "tbps": nbytes / seconds / 1e12}
    if mode == "prefill":
        flops = prefill_flops(job["batch"], job["heads"], qL, kL, D)
        return {"tflops": flops / seconds / 1e12, "tbps": None}
    nbytes = decode_bytes(job["batch"], kv_heads_read, kL, D,
                          ITEMSIZE[job["dtype"]])
    return {"tflops": None, "tbps": nbytes / seconds / 1e12}


def run_cases(job: dict, backends: Iterable[str],
              bench: Callable[[str, str, int, int, int], dict]) -> None:
    """Run every case for every backend, emitting start/result lines.

    ``bench(backend, mode, D, qL, kL)`` returns {"ms", "peak_bytes",
    "kv_heads_read"} or raises; after an out-of-memory, longer sequences of
    the same (backend, mode, D) are skipped, and the process exits with
    RESTART_EXIT if other cases remain.
    """
    for backend in backends:
        oom_at: dict[tuple[str, int], int] = {
            (mode, D): kL for mode, D, kL in job.get("oom_at", [])}
        for index, (mode, D, qL, kL) in enumerate(job["cases"]):
            base = {"type": "result", "label": job["label"], "backend": backend,
                    "mode": mode, "D": D, "qL": qL, "kL": kL, "ms": None,
                    "tflops": None, "tbps": None, "peak_gib": None, "error": None}
            limit = oom_at.get((mode, D))
            if limit is not None and kL >= limit:
                emit({**base, "status": "skipped",
                      "error": f"out of memory at kL={limit}"})
                continue
            emit({"type": "start", "case": [mode, D, qL, kL], "backend": backend})
            try:
                got = bench(backend, mode, D, qL, kL)
            except Exception as exc:  # recorded, never a crash of the run
                status = classify(exc)
                emit({**base, "status": status,
                      "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]})
                if status == "oom":
                    oom_at[(mode, D)] = kL
                    if index + 1 < len(job["cases"]):
                        raise SystemExit(RESTART_EXIT) from None
                continue
            emit({**base, "status": "ok", "ms": got["ms"],
                  "peak_gib": got["peak_bytes"] / GIB,
                  "kv_heads_read": got["kv_heads_read"],
                  **metrics(job, mode, D, qL, kL, got["ms"], got["kv_heads_read"])})
    emit({"type": "done"})
