"""Shared helpers for the SDPA suites (mlx_builder/suites/sdpa/).

Pure Python + NumPy: importing this module never imports MLX, so the
project's CI (no MLX installed) can collect and unit-test it. The suites run
inside a venv that holds only the wheel under test, pytest and NumPy, so
nothing here imports ``mlx_builder`` either.

How the suites tell the paths apart (see docs/testing.md, "Testing and benchmarking a
wheel"):

* ``force_fused=True`` -- MLX main's Python API (python/src/fast.cpp at
  846d176) exposes it; v0.32.1 does not. Where it exists, passing it makes a
  call that would take the unfused fallback raise instead.
* peak memory -- on every version: the unfused fallback materialises the
  [B, H, qL, kL] score matrix, a fused/tiled path does not. This proof works
  on v0.32 builds too.
* ``MLX_CUDA_SDPA_TILED=0`` -- our CUDA patch's switch that disables the tiled
  prefill path; the suites set it (with MLX_CUDA_USE_CUDNN_SDPA=0 and
  MLX_SDPA_FALLBACK_CHUNK_BYTES=0, which turns off patch 0010's query
  chunking) in a *separate process* to get upstream's fallback for A/B
  comparisons. ``MLX_BUILDER_FALLBACK_ENV="A=0,B=1"`` replaces that set.
"""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

MLX_MISSING = ("MLX is not installed here: these suites test a built MLX wheel "
               "(`mlx-builder test WHEEL` installs one in a fresh venv)")
LONG = os.environ.get("MLX_BUILDER_LONG", "") == "1"
LONG_REASON = "long case: set MLX_BUILDER_LONG=1 to run it"
# Upstream's unfused fallback, unchunked: no tiled kernel (patch 0020), no
# cuDNN, no query chunking (patch 0010's budget).
DEFAULT_FALLBACK_ENV = {"MLX_CUDA_SDPA_TILED": "0",
                        "MLX_CUDA_USE_CUDNN_SDPA": "0",
                        "MLX_SDPA_FALLBACK_CHUNK_BYTES": "0"}
TOLERANCE = {"float16": 5e-3, "bfloat16": 1e-2, "float32": 1e-4}
MIB = 1 << 20
GIB = 1 << 30


def fallback_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables that force upstream's unfused fallback."""
    environ = os.environ if environ is None else environ
    spec = environ.get("MLX_BUILDER_FALLBACK_ENV", "").strip()
    if not spec:
        return dict(DEFAULT_FALLBACK_ENV)
    out = {}
    for item in spec.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep or not key:
            raise ValueError(
                f"MLX_BUILDER_FALLBACK_ENV item {item!r} is not NAME=VALUE")
        out[key] = value
    return out


# --------------------------------------------------------------------------
# GPU detection (takes the imported mlx.core module)
# --------------------------------------------------------------------------

def gpu_backend(mx: Any) -> str | None:
    """'cuda', 'metal' or None for the MLX build ``mx``."""
    cuda = getattr(mx, "cuda", None)
    if cuda is not None and cuda.is_available():
        return "cuda"
    metal = getattr(mx, "metal", None)
    if metal is not None and metal.is_available():
        return "metal"
    return None


def no_gpu_reason(mx: Any) -> str:
    return (f"needs a GPU: this MLX {getattr(mx, '__version__', '?')} build has "
            "neither CUDA (mx.cuda.is_available() is False) nor Metal "
            "(mx.metal.is_available() is False)")


def supports_force_fused(mx: Any) -> bool:
    """Whether mx.fast.scaled_dot_product_attention takes ``force_fused``."""
    doc = getattr(mx.fast.scaled_dot_product_attention, "__doc__", "") or ""
    return "force_fused" in doc


def device_memory_bytes(mx: Any) -> int:
    try:
        info = mx.device_info()
    except Exception:  # pragma: no cover - very old MLX
        return 0
    for key in ("total_memory", "memory_size"):
        if key in info:
            return int(info[key])
    return 0


# --------------------------------------------------------------------------
# Inputs, masks and the float64 reference
# --------------------------------------------------------------------------

def make_mask(kind: str, B: int, H: int, qL: int, kL: int,
              rng: np.random.Generator, window: int = 64) -> Any:
    """A NumPy mask (or the string 'causal', or None) of the given kind.

    Kinds: none, causal, additive (full [B,H,qL,kL] float), additive_2d
    ([qL,kL], broadcast), bool ([B,1,qL,kL]), window (the causal sliding
    window mlx-lm builds for gemma: [qL,kL] bool, bottom-right aligned).
    Every row keeps at least one visible key (a window needs qL <= kL):
    fully masked rows are a separate test.
    """
    if kind == "none":
        return None
    if kind == "causal":
        return "causal"
    if kind in ("additive", "additive_2d"):
        shape = (B, H, qL, kL) if kind == "additive" else (qL, kL)
        return rng.uniform(-2.0, 1.0, size=shape).astype(np.float32)
    if kind == "bool":
        mask = rng.uniform(size=(B, 1, qL, kL)) < 0.5
        cols = rng.integers(0, kL, size=(B, 1, qL))
        np.put_along_axis(mask, cols[..., None], True, axis=-1)
        return mask
    if kind == "window":
        if qL > kL:
            raise ValueError("a window mask with qL > kL masks whole rows")
        offset = kL - qL
        qi = np.arange(qL)[:, None] + offset
        ki = np.arange(kL)[None, :]
        return (qi >= ki) & (qi < ki + window)
    raise ValueError(f"unknown mask kind {kind!r}")


def causal_mask(qL: int, kL: int) -> np.ndarray:
    """MLX's causal mask: bottom-right aligned (last query sees last key)."""
    offset = kL - qL
    return (np.arange(qL)[:, None] + offset) >= np.arange(kL)[None, :]


def sample_rows(qL: int, limit: int = 96, seed: int = 0) -> np.ndarray | None:
    """Query rows to check against the reference when qL is large (first,
    last and random ones), or None for all rows."""
    if qL <= limit:
        return None
    rng = np.random.default_rng(seed)
    picked = rng.choice(np.arange(1, qL - 1), size=limit - 2, replace=False)
    return np.unique(np.concatenate([[0, qL - 1], picked]))


def reference_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray,
                        scale: float, mask: Any = None,
                        rows: np.ndarray | None = None) -> np.ndarray:
    """softmax(scale·QKᵀ + mask)·V in float64, GQA by head groups.

    q: [B, Hq, qL, D]; k, v: [B, Hkv, kL, D(v)]. Bool masks exclude keys
    (-inf); a row with no visible key comes out NaN, so callers keep such
    rows out of reference comparisons. ``rows`` restricts the result to
    those query rows (output [B, Hq, len(rows), Dv]).
    """
    q = np.asarray(q, np.float64)
    k = np.asarray(k, np.float64)
    v = np.asarray(v, np.float64)
    B, Hq, qL, _ = q.shape
    Hkv, kL = k.shape[1], k.shape[2]
    rep = Hq // Hkv
    if isinstance(mask, str):
        if mask != "causal":
            raise ValueError(f"unknown mask mode {mask!r}")
        mask = causal_mask(qL, kL)
    if mask is not None:
        mask = np.asarray(mask)
        mask = np.broadcast_to(mask.reshape((1,) * (4 - mask.ndim) + mask.shape),
                               (B, Hq, qL, kL))
    rows = np.arange(qL) if rows is None else np.asarray(rows)
    out = np.empty((B, Hq, len(rows), v.shape[-1]), np.float64)
    for b in range(B):
        for h in range(Hq):
            s = (q[b, h, rows] @ k[b, h // rep].T) * scale
            if mask is not None:
                m = mask[b, h, rows]
                s = np.where(m, s, -np.inf) if m.dtype == bool else s + m
            mx_ = s.max(axis=-1, keepdims=True)
            with np.errstate(invalid="ignore"):
                p = np.exp(s - mx_)
                p /= p.sum(axis=-1, keepdims=True)
            out[b, h] = p @ v[b, h // rep]
    return out


def rel_error(out: np.ndarray, ref: np.ndarray) -> float:
    """‖out − ref‖ / ‖ref‖ in float64; any NaN or inf in ``out`` gives inf."""
    out = np.asarray(out, np.float64)
    ref = np.asarray(ref, np.float64)
    if out.shape != ref.shape:
        raise AssertionError(f"shape {out.shape} != reference {ref.shape}")
    if not np.all(np.isfinite(out)):
        return math.inf
    denom = np.linalg.norm(ref)
    num = np.linalg.norm(out - ref)
    return float(num / denom) if denom > 0 else float(num)


def same_as_fallback(out: np.ndarray, fallback: np.ndarray, tol: float) -> str:
    """'' when ``out`` behaves as the fallback's output, else why not.

    NaN and ±inf must sit in the same places; the finite values must agree
    to ``tol`` (relative, as rel_error).
    """
    out = np.asarray(out, np.float64)
    fallback = np.asarray(fallback, np.float64)
    if out.shape != fallback.shape:
        return f"shape {out.shape} != fallback {fallback.shape}"
    for name, fn in (("NaN", np.isnan), ("inf", np.isinf)):
        a, b = fn(out), fn(fallback)
        if not np.array_equal(a, b):
            return (f"{name} pattern differs: {int(a.sum())} {name} here, "
                    f"{int(b.sum())} in the fallback")
    finite = np.isfinite(fallback)
    if finite.any():
        err = rel_error(out[finite], fallback[finite])
        if err > tol:
            return f"finite values differ: relative error {err:.3g} > {tol}"
    return ""


# --------------------------------------------------------------------------
# Memory exponent
# --------------------------------------------------------------------------

def fit_exponent(lengths: Sequence[float], values: Sequence[float]) -> float:
    """Least-squares slope of log(values) against log(lengths): values ~ L^e."""
    if len(lengths) != len(values) or len(lengths) < 2:
        raise ValueError("need at least two (L, value) pairs")
    if min(values) <= 0 or min(lengths) <= 0:
        raise ValueError("lengths and values must be positive to fit L^e")
    x = np.log(np.asarray(lengths, np.float64))
    y = np.log(np.asarray(values, np.float64))
    slope, _ = np.polyfit(x, y, 1)
    return float(slope)


def fit_quadratic_coefficient(lengths: Sequence[float],
                              values: Sequence[float]) -> float:
    """c in the least-squares fit values ≈ a + b·L + c·L² (bytes per L²)."""
    L = np.asarray(lengths, np.float64)
    y = np.asarray(values, np.float64)
    A = np.stack([np.ones_like(L), L, L * L], axis=1)
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    return float(coef[2])


# --------------------------------------------------------------------------
# Running MLX in a separate process (another env: the fallback)
# --------------------------------------------------------------------------

def run_json(script: str, args: Sequence[str] = (), *,
             env: Mapping[str, str] | None = None, timeout: float = 900,
             cwd: Path | None = None) -> Any:
    """Run ``script`` (Python source) in a fresh interpreter; return the JSON
    object its last stdout line holds. Raises RuntimeError with stderr's tail
    when it fails or prints no JSON."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    here = str(Path(__file__).resolve().parent)
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (here, full_env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
        capture_output=True, text=True, env=full_env, timeout=timeout, cwd=cwd)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode != 0 or not lines:
        tail = "\n".join(proc.stderr.splitlines()[-25:])
        raise RuntimeError(
            f"subprocess exited with {proc.returncode} "
            f"(env {dict(env or {})}):\n{tail}")
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise RuntimeError(f"subprocess printed no JSON: {lines[-1]!r}") from exc


# One 4-bit quantized_matmul of one row: patch 0060 routes it (to its GEMV)
# and, with MLX_CUDA_QMM_TRACE=1, says so on stderr; a build without the
# patch ignores the variable and prints nothing.
_QMM_TRACE_PROBE = """
import mlx.core as mx
w = mx.random.normal((256, 512)).astype(mx.bfloat16)
q = mx.quantize(w, group_size=64, bits=4)
x = mx.random.normal((1, 512)).astype(mx.bfloat16)
mx.eval(mx.quantized_matmul(x, *q, transpose=True, group_size=64, bits=4))
"""
QMM_TRACE_PREFIX = "[mlx-qmm-route] "


@functools.cache
def _qmm_trace_seen() -> bool:
    """Whether a fresh interpreter's quantized_matmul prints a routing trace
    line (asked once per process: MLX reads the variables once)."""
    env = dict(os.environ, MLX_CUDA_QMM_TRACE="1")
    proc = subprocess.run([sys.executable, "-c", _QMM_TRACE_PROBE],
                          capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-25:])
        raise RuntimeError(f"the quantized_matmul probe exited with "
                           f"{proc.returncode}:\n{tail}")
    return any(ln.startswith(QMM_TRACE_PREFIX) for ln in proc.stderr.splitlines())


def wheel_manifest() -> dict | None:
    """The installed mlx package's mlx-builder manifest
    (``mlx/_mlx_builder_manifest.json``: its patches, CUDA architectures...),
    or None for an MLX that mlx-builder did not build. Found without
    importing MLX."""
    import importlib.util
    spec = importlib.util.find_spec("mlx")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "_mlx_builder_manifest.json"
        if path.is_file():
            return json.loads(path.read_text())
    return None


def manifest_has_patch(manifest: Mapping[str, Any], number: str) -> bool:
    """Whether the manifest lists a patch whose file name starts with
    ``number`` followed by a dash ("0064")."""
    return any(Path(p.get("file", "")).name.startswith(f"{number}-")
               for p in manifest.get("patches", []))


def qmm_routing_skip_reason(mx: Any) -> str | None:
    """Why this process cannot compare patch 0060's quantized-matmul routing
    (a decode GEMV, dequantize + cuBLAS) with upstream's kernels
    (MLX_CUDA_QMM_PATH=upstream in another process), or None when it can."""
    if gpu_backend(mx) != "cuda":
        return "MLX_CUDA_QMM_PATH is CUDA's"
    forced = os.environ.get("MLX_CUDA_QMM_PATH", "")
    if forced not in ("", "auto"):
        return (f"MLX_CUDA_QMM_PATH={forced} is set: this process does not "
                "take the default routing the comparison is about")
    if _qmm_trace_seen():
        return None
    return (f"this MLX {getattr(mx, '__version__', '?')} build has no patch "
            f"0060 (MLX_CUDA_QMM_TRACE=1 printed no {QMM_TRACE_PREFIX.strip()} "
            "line): MLX_CUDA_QMM_PATH=upstream would change nothing")


# --------------------------------------------------------------------------
# MLX-side helpers (each takes the imported mlx.core module)
# --------------------------------------------------------------------------

def to_mx(mx: Any, array: Any, dtype: str) -> Any:
    """A NumPy array as an MLX array of ``dtype`` ('bool' keeps booleans)."""
    if array is None or isinstance(array, str):
        return array
    if array.dtype == bool:
        return mx.array(array)
    return mx.array(np.asarray(array, np.float32)).astype(getattr(mx, dtype))


def to_host(mx: Any, array: Any) -> np.ndarray:
    """An MLX array as NumPy, evaluated first. MLX's buffer protocol cannot
    raise: an error while NumPy's conversion evaluates the graph (out of
    memory, a path that refuses the call) ends the process, where mx.eval
    raises it as a Python exception."""
    mx.eval(array)
    return np.array(array)


def to_np(mx: Any, array: Any) -> np.ndarray:
    """An MLX array as float32 NumPy (exact for fp16/bf16)."""
    if array.dtype == mx.bool_:
        return to_host(mx, array)
    return to_host(mx, array.astype(mx.float32))


def sdpa(mx: Any, q: Any, k: Any, v: Any, scale: float, mask: Any = None,
         force_fused: bool = False) -> Any:
    kwargs = {"scale": scale, "mask": mask}
    if force_fused:
        kwargs["force_fused"] = True
    return mx.fast.scaled_dot_product_attention(q, k, v, **kwargs)


def is_oom(exc: BaseException) -> bool:
    text = str(exc).lower()
    # "[malloc] Unable to allocate N bytes." is MLX's CUDA allocator's
    return any(s in text for s in ("out of memory", "cudamalloc",
                                   "insufficient memory", "outofmemory",
                                   "attempting to allocate",
                                   "unable to allocate"))


def measure_prefill_peak(mx: Any, L: int, D: int, *, B: int = 1,
                         Hq: int = 32, Hkv: int = 16, dtype: str = "bfloat16",
                         mask: Any = "causal", qL: int | None = None,
                         force_fused: bool = False) -> dict:
    """Peak memory above the inputs of one SDPA call (the output included).

    Returns {"L", "D", "status": ok|oom, "peak_extra", "out_bytes"}.
    """
    qL = L if qL is None else qL
    dt = getattr(mx, dtype)
    result = {"L": L, "D": D, "qL": qL, "status": "ok"}
    try:
        mx.random.seed(0)
        q = mx.random.normal((B, Hq, qL, D)).astype(dt)
        k = mx.random.normal((B, Hkv, L, D)).astype(dt)
        v = mx.random.normal((B, Hkv, L, D)).astype(dt)
        mx.eval(q, k, v)
        mx.synchronize()
        mx.clear_cache()
        base = mx.get_active_memory()
        mx.reset_peak_memory()
        out = sdpa(mx, q, k, v, D ** -0.5, mask, force_fused)
        mx.eval(out)
        mx.synchronize()
        result["peak_extra"] = int(mx.get_peak_memory() - base)
        result["out_bytes"] = int(out.nbytes)
        del out, q, k, v
    except (RuntimeError, ValueError, MemoryError) as exc:
        if not is_oom(exc):
            raise
        result["status"] = "oom"
        result["error"] = str(exc).splitlines()[0][:200]
    mx.clear_cache()
    return result


def score_bytes(B: int, Hq: int, qL: int, kL: int, itemsize: int = 2) -> int:
    """Bytes of the [B, Hq, qL, kL] score matrix the unfused fallback builds."""
    return B * Hq * qL * kL * itemsize


def fallback_lengths(lengths: Sequence[int], total_memory: int,
                     Hq: int) -> list[int]:
    """The lengths at which upstream's fallback fits: its bf16 [Hq, L, L]
    scores (≈ 2.2 × that in flight) within 45% of the device memory. With
    the memory unknown, up to 8k."""
    if total_memory <= 0:
        return [L for L in lengths if L <= 8192]
    return [L for L in lengths
            if 2.2 * score_bytes(1, Hq, L, L) <= 0.45 * total_memory]
