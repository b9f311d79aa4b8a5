"""Affine quantized matmul (patch 0060) against a float64 reference.

`mx.quantized_matmul(x, w, scales, biases, transpose=True)` with 4- and
8-bit weights, group sizes 32/64/128, fp16 and bf16 activations, odd and
batched shapes. The reference unpacks the weights on the CPU, applies
scales and biases in float64 and multiplies in float64. Row counts are
chosen so that the default routing takes each path on CUDA (the GEMV up to
8 rows, upstream's kernels in between, dequantize + cuBLAS from 256 rows);
each path is also forced in its own process (MLX reads MLX_CUDA_QMM_PATH
once), and MLX_CUDA_QMM_TRACE=1 must name the path and its reason.
Inputs are fresh random draws. Nothing is timed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sdpa_support import MLX_MISSING

mx = pytest.importorskip("mlx.core", reason=MLX_MISSING)

import numpy as np  # noqa: E402
from sdpa_support import (  # noqa: E402
    QMM_TRACE_PREFIX,
    gpu_backend,
    no_gpu_reason,
    rel_error,
    run_json,
)

if gpu_backend(mx) is None:
    pytest.skip(no_gpu_reason(mx), allow_module_level=True)

pytestmark = pytest.mark.gpu

# bf16 and fp16 products accumulated in fp32 land near 3e-3.
TOL = 1e-2
DTYPES = ("bfloat16", "float16")
# (x shape, N): 1 and 5 rows (GEMV), a batch of 2 x 3, 13 and 130 rows
# (upstream), 300 rows (dequantize); N and K odd multiples where MLX allows.
SHAPES = [((1, 640), 4099), ((5, 4096 + 128), 33), ((2, 3, 640), 520),
          ((13, 1024), 257), ((130, 768), 96), ((300, 512), 200),
          ((1, 21504), 130)]


def unpack(wq: np.ndarray, bits: int) -> np.ndarray:
    """MLX's packing: value i of a 32-bit word at bits i * bits."""
    w = wq.astype(np.uint64)
    per = 32 // bits
    shifts = np.arange(per, dtype=np.uint64) * np.uint64(bits)
    q = (w[..., None] >> shifts) & np.uint64(2 ** bits - 1)
    return q.reshape(*w.shape[:-1], w.shape[-1] * per).astype(np.float64)


def case_error(xshape: tuple[int, ...], n: int, bits: int, group: int,
               dtype: str, seed: int) -> float:
    rng = np.random.default_rng(seed)
    dt = getattr(mx, dtype)
    k = xshape[-1]
    w = mx.array(rng.standard_normal((n, k)).astype(np.float32) * 0.05).astype(dt)
    wq, scales, biases = mx.quantize(w, group_size=group, bits=bits)
    x = mx.array(rng.standard_normal(xshape).astype(np.float32)).astype(dt)
    y = mx.quantized_matmul(x, wq, scales, biases, transpose=True,
                            group_size=group, bits=bits)
    mx.eval(y)
    f64 = [np.asarray(a.astype(mx.float32)).astype(np.float64)
           for a in (scales, biases, x, y)]
    s64, b64, x64, y64 = f64
    q = unpack(np.asarray(wq), bits).reshape(n, k // group, group)
    deq = (q * s64[..., None] + b64[..., None]).reshape(n, k)
    return rel_error(y64, x64 @ deq.T)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bits", (4, 8))
@pytest.mark.parametrize("group", (32, 64, 128))
@pytest.mark.parametrize("xshape,n", SHAPES)
def test_quantized_matmul_matches_float64(xshape, n, bits, group, dtype):
    err = case_error(xshape, n, bits, group, dtype, time.time_ns() % 2 ** 32)
    assert err < TOL, f"relative error {err:.2e}"


_FORCED = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import test_qmm as t
worst, fails = 0.0, []
for dtype in t.DTYPES:
    for bits in (4, 8):
        for group in (32, 64, 128):
            for xshape, n in t.SHAPES:
                e = t.case_error(xshape, n, bits, group, dtype, time.time_ns() % 2**32)
                worst = max(worst, e)
                if not e < t.TOL:
                    fails.append([dtype, bits, group, list(xshape), n, e])
print(json.dumps({"worst": worst, "fails": fails}))
"""


@pytest.mark.parametrize("path", ("gemv", "dequant", "upstream", "sm80"))
def test_forced_path_matches_float64(path):
    if gpu_backend(mx) != "cuda":
        pytest.skip("MLX_CUDA_QMM_PATH is CUDA's")
    here = str(Path(__file__).resolve().parent)
    got = run_json(_FORCED, [here], env={"MLX_CUDA_QMM_PATH": path})
    assert not got["fails"], got["fails"][:5]


_TRACE = """
import mlx.core as mx
w = mx.random.normal((256, 512)).astype(mx.bfloat16)
for bits in (4, 3):
    q = mx.quantize(w, group_size=64, bits=bits)
    for rows in (1, 40, 300):
        x = mx.random.normal((rows, 512)).astype(mx.bfloat16)
        mx.eval(mx.quantized_matmul(x, *q, transpose=True, group_size=64, bits=bits))
"""


def test_trace_names_each_path():
    if gpu_backend(mx) != "cuda":
        pytest.skip("MLX_CUDA_QMM_TRACE is CUDA's")
    env = dict(os.environ, MLX_CUDA_QMM_TRACE="1")
    env.pop("MLX_CUDA_QMM_PATH", None)
    proc = subprocess.run([sys.executable, "-c", _TRACE], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith(QMM_TRACE_PREFIX)]
    paths = [ln.split()[1] for ln in lines]
    assert paths == ["path=gemv", "path=upstream", "path=dequant",
                     "path=upstream", "path=upstream", "path=upstream"], lines
    assert all('reason="' in ln for ln in lines)
    assert 'reason="3-bit weights"' in lines[-1]
