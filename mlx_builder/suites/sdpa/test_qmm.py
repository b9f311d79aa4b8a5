"""Affine quantized matmul (patches 0060 to 0066) against a float64
reference.

`mx.quantized_matmul(x, w, scales, biases, transpose=True)` with 4- and
8-bit weights, group sizes 32/64/128, fp16 and bf16 activations, odd and
batched shapes. The reference unpacks the weights on the CPU, applies
scales and biases in float64 and multiplies in float64. Row counts are
chosen so that the default routing takes each path on CUDA (the GEMV up to
8 rows, upstream's kernels in between, dequantize + cuBLAS from 256 rows,
or on an sm_90a build on a Hopper qmm_sm90 up to 2048);
each path is also forced in its own process (MLX reads MLX_CUDA_QMM_PATH
once), and MLX_CUDA_QMM_TRACE=1 must name the path and its reason.

`mx.gather_qmm(..., rhs_indices=..., transpose=True)` (0061, 0065, 0066)
gets the same bits, groups and dtypes on experts' weights [E, N, K]: mlx-lm's
decode and sorted layouts, repeated and out-of-order indices, odd N, M up to
8 (the GEMV: one product per block up to 64 products, tiles of rows across
products past them, for 4-bit weights staged tiles of 64 rows from 64 rows
per expert) and past it (upstream's kernels).
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
    manifest_has_patch,
    no_gpu_reason,
    rel_error,
    run_json,
    to_host,
    wheel_manifest,
)

if gpu_backend(mx) is None:
    pytest.skip(no_gpu_reason(mx), allow_module_level=True)

pytestmark = pytest.mark.gpu

# bf16 and fp16 products accumulated in fp32 land near 3e-3.
TOL = 1e-2
DTYPES = ("bfloat16", "float16")
# (x shape, N): 1 and 5 rows (GEMV), a batch of 2 x 3, 13, 40 and 130 rows
# (upstream), 257 and 300 rows (dequantize, or qmm_sm90 on a Hopper); N and
# K odd multiples where MLX allows. K = 128 with group size 128 is the call
# upstream sends to qmm_sm90 on sm_90 (one group per row);
# forced qmm_sm90 (K a multiple of 64, N of 8) also takes the batch, 130
# rows (its 256-row tile) and gemma-4's K = 5376; 8 rows, the most one
# GEMV block takes, with an odd N.
SHAPES = [((1, 640), 4099), ((5, 4096 + 128), 33), ((2, 3, 640), 520),
          ((13, 1024), 257), ((40, 128), 256), ((130, 768), 96),
          ((257, 5376), 264), ((300, 512), 200), ((1, 21504), 130),
          ((8, 768), 37)]


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
    f64 = [to_host(mx, a.astype(mx.float32)).astype(np.float64)
           for a in (scales, biases, x, y)]
    s64, b64, x64, y64 = f64
    q = unpack(to_host(mx, wq), bits).reshape(n, k // group, group)
    deq = (q * s64[..., None] + b64[..., None]).reshape(n, k)
    return rel_error(y64, x64 @ deq.T)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bits", (4, 8))
@pytest.mark.parametrize("group", (32, 64, 128))
@pytest.mark.parametrize("xshape,n", SHAPES)
def test_quantized_matmul_matches_float64(xshape, n, bits, group, dtype):
    err = case_error(xshape, n, bits, group, dtype, time.time_ns() % 2 ** 32)
    assert err < TOL, f"relative error {err:.2e}"


# gather_qmm: (experts E, x shape [..., M, K], N, lhs_indices or None (x's
# batches in order), rhs_indices, sorted_indices). mlx-lm's decode layouts (x
# [T, 1, 1, K] or [T, k, 1, K], indices [T, k]) and its sorted one (x
# [T * k, 1, K], ascending experts); M 1 to 8 (the GEMV), 13 (upstream's
# kernels under the default routing); from 65 products the GEMV's row tiles,
# which hold rows of several experts and, for M > 1, of several products,
# and from 64 rows per expert the staged tiles (M7-B80 unsorted,
# sorted-E3-B203 sorted, ending inside a tile; sorted-E3-K352 with a last
# staged chunk of K that is partly past the end, group size 32 only); sorted
# indices from 16 rows per expert on tiles of one expert each
# (sorted-E24-B400: about 17 rows per expert, sorted-M2-B90: 2 rows per
# product; MLX_CUDA_QMM_PATH=tiles runs every sorted case there, experts
# without rows included).
GATHER_CASES = [
    (16, (1, 1, 1, 512), 200, None, [[3, 11, 0, 7, 15, 2, 9, 4]], False),
    (8, (1, 8, 1, 384), 4099, None, [[5, 1, 7, 0, 2, 6, 3, 4]], False),
    (4, (3, 5, 640), 257, [2, 0, 2, 1, 0, 1, 2], [3, 3, 0, 1, 3, 2, 0], False),
    (3, (9, 8, 256), 33, list(range(8, -1, -1)), [2, 2, 1, 0, 0, 1, 2, 1, 0], False),
    (2, (1, 3, 2048), 130, [0], [1], False),
    (5, (2, 13, 1024), 257, [1, 0, 1], [4, 0, 4], False),
    (32, (12, 1, 1, 768), 130, None, "topk", False),
    (16, (64, 1, 512), 96, None, "sorted", True),
    (16, (203, 1, 512), 72, None, "sorted", True),
    (3, (203, 1, 384), 72, None, "sorted", True),
    (3, (203, 1, 352), 72, None, "sorted", True),
    (24, (400, 1, 256), 40, None, "sorted", True),
    (5, (90, 2, 384), 130, None, "sorted", True),
    (6, (70, 3, 256), 40, None, "random", False),
    (5, (3, 7, 384), 33, "random", "random", False),
]
GATHER_IDS = ["decode-gate", "decode-down", "M5-B7", "M8-B9", "B1", "M13",
              "B96", "sorted-B64", "sorted-B203", "sorted-E3-B203", "sorted-E3-K352",
              "sorted-E24-B400", "sorted-M2-B90", "M3-B70", "M7-B80"]


def gather_indices(case, rng: np.random.Generator):
    """The case's lhs (or None) and rhs as uint32 arrays ('topk': 8 distinct
    experts per token, 'sorted': one expert per row of x, ascending,
    'random': one per batch of x, or 80 batches of x drawn at random for lhs
    and experts for rhs)."""
    E, xshape, _, lhs, rhs, _ = case
    if rhs == "topk":
        rhs = [rng.permutation(E)[:8].tolist() for _ in range(xshape[0])]
    elif rhs == "sorted":
        rhs = sorted(rng.integers(0, E, xshape[0]).tolist())
    elif rhs == "random":
        rhs = rng.integers(0, E, 80 if lhs == "random" else xshape[0]).tolist()
    if lhs == "random":
        lhs = rng.integers(0, xshape[0], 80).tolist()
    return (None if lhs is None else np.array(lhs, dtype=np.uint32),
            np.array(rhs, dtype=np.uint32))


def gather_case_error(case, bits: int, group: int, dtype: str, seed: int) -> float:
    rng = np.random.default_rng(seed)
    dt = getattr(mx, dtype)
    E, xshape, n, _, _, sorted_indices = case
    lhs, rhs = gather_indices(case, rng)
    k = xshape[-1]
    w = mx.array(rng.standard_normal((E, n, k)).astype(np.float32) * 0.05).astype(dt)
    wq, scales, biases = mx.quantize(w, group_size=group, bits=bits)
    x = mx.array(rng.standard_normal(xshape).astype(np.float32)).astype(dt)
    y = mx.gather_qmm(x, wq, scales, biases,
                      lhs_indices=None if lhs is None else mx.array(lhs),
                      rhs_indices=mx.array(rhs), transpose=True, group_size=group,
                      bits=bits, sorted_indices=sorted_indices)
    mx.eval(y)
    s64, b64, x64, y64 = [to_host(mx, a.astype(mx.float32)).astype(np.float64)
                          for a in (scales, biases, x, y)]
    q = unpack(to_host(mx, wq), bits).reshape(E, n, k // group, group)
    deq = (q * s64[..., None] + b64[..., None]).reshape(E, n, k)
    # gather_qmm's rule: lhs defaults to x's batches in order; both broadcast.
    batch = xshape[:-2]
    if lhs is None:
        lhs = np.arange(int(np.prod(batch))).reshape(batch)
    lhs_b, rhs_b = np.broadcast_arrays(lhs, rhs)
    xf = x64.reshape(-1, *xshape[-2:])
    ref = np.einsum("bmk,bnk->bmn", xf[lhs_b.reshape(-1).astype(np.int64)],
                    deq[rhs_b.reshape(-1).astype(np.int64)])
    ref = ref.reshape(*lhs_b.shape, *ref.shape[-2:])
    assert y64.shape == ref.shape, (y64.shape, ref.shape)
    return rel_error(y64, ref)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bits", (4, 8))
@pytest.mark.parametrize("group", (32, 64, 128))
@pytest.mark.parametrize("case", GATHER_CASES, ids=GATHER_IDS)
def test_gather_qmm_matches_float64(case, bits, group, dtype):
    if case[1][-1] % group:
        pytest.skip(f"K = {case[1][-1]} is not a multiple of group size {group}")
    err = gather_case_error(case, bits, group, dtype, time.time_ns() % 2 ** 32)
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
            for case in t.GATHER_CASES:
                if case[1][-1] % group:
                    continue
                e = t.gather_case_error(case, bits, group, dtype, time.time_ns() % 2**32)
                worst = max(worst, e)
                if not e < t.TOL:
                    fails.append(["gather", dtype, bits, group, list(case[1]), case[2], e])
print(json.dumps({"worst": worst, "fails": fails}))
"""


def patch_skip_reason(patch: str, path: str) -> str | None:
    """Why MLX_CUDA_QMM_PATH=path cannot be asked of this MLX (an
    mlx-builder wheel without the patch that adds it), or None."""
    manifest = wheel_manifest()
    if manifest is not None and not manifest_has_patch(manifest, patch):
        return f"this mlx-builder wheel predates the {path} path (patch {patch})"
    return None


def sm90_skip_reason() -> str | None:
    return patch_skip_reason("0064", "sm90")


def sm90_compiled_here() -> bool:
    """Whether qmm_sm90 runs compiled with the library here: a Hopper, and
    an mlx-builder wheel with patch 0064 and sm_90a code."""
    manifest = wheel_manifest()
    if manifest is None or not manifest_has_patch(manifest, "0064"):
        return False
    return (mx.device_info().get("compute_capability_major") == 9
            and any(str(a).startswith("90a") for a in manifest.get("archs", [])))


def gemv_rows_skip_reason() -> str | None:
    return patch_skip_reason("0065", "gemv_rows")


def tiles_skip_reason() -> str | None:
    return patch_skip_reason("0066", "tiles")


def forced_skip_reason(path: str) -> str | None:
    """Why this MLX cannot take MLX_CUDA_QMM_PATH=path, or None."""
    if path == "sm90":
        return sm90_skip_reason()
    if path == "gemv_rows":
        return gemv_rows_skip_reason()
    if path == "tiles":
        return tiles_skip_reason()
    return None


@pytest.mark.parametrize("path", ("gemv", "gemv_rows", "tiles", "dequant", "upstream", "sm80",
                                  "sm90"))
def test_forced_path_matches_float64(path):
    if gpu_backend(mx) != "cuda":
        pytest.skip("MLX_CUDA_QMM_PATH is CUDA's")
    if why := forced_skip_reason(path):
        pytest.skip(why)
    here = str(Path(__file__).resolve().parent)
    got = run_json(_FORCED, [here], env={"MLX_CUDA_QMM_PATH": path})
    assert not got["fails"], got["fails"][:5]


def trace_lines(script: str, path: str | None = None) -> list[str]:
    """The routing trace lines a fresh interpreter prints running ``script``
    with MLX_CUDA_QMM_TRACE=1 and MLX_CUDA_QMM_PATH=path (unset for None:
    the default routing)."""
    env = dict(os.environ, MLX_CUDA_QMM_TRACE="1")
    env.pop("MLX_CUDA_QMM_PATH", None)
    if path is not None:
        env["MLX_CUDA_QMM_PATH"] = path
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [ln for ln in proc.stderr.splitlines() if ln.startswith(QMM_TRACE_PREFIX)]


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
    lines = trace_lines(_TRACE)
    paths = [ln.split()[1] for ln in lines]
    big = "path=sm90" if sm90_compiled_here() else "path=dequant"
    assert paths == ["path=gemv", "path=upstream", big,
                     "path=upstream", "path=upstream", "path=upstream"], lines
    assert all('reason="' in ln for ln in lines)
    assert 'reason="3-bit weights"' in lines[-1]


_SM90_TRACE = """
import mlx.core as mx
w = mx.random.normal((256, 512)).astype(mx.bfloat16)
for bits in (4, 3):
    q = mx.quantize(w, group_size=64, bits=bits)
    x = mx.random.normal((300, 512)).astype(mx.bfloat16)
    mx.eval(mx.quantized_matmul(x, *q, transpose=True, group_size=64, bits=bits))
"""


@pytest.mark.parametrize("path", ("gemv_rows", "tiles"))
def test_trace_keeps_dense_calls_off_gather_paths(path):
    """gemv_rows and tiles are gather_qmm paths: a dense call forced there
    keeps upstream's choice and says why."""
    if gpu_backend(mx) != "cuda":
        pytest.skip("MLX_CUDA_QMM_TRACE is CUDA's")
    if why := forced_skip_reason(path):
        pytest.skip(why)
    lines = trace_lines(_TRACE, path)
    assert len(lines) == 6, lines
    assert all(ln.split()[1] == "path=upstream" for ln in lines), lines
    assert all(f'reason="{path} forced but not a quantized_matmul path"' in ln
               for ln in lines), lines


def test_trace_names_forced_sm90():
    """qmm_sm90 takes a forced call where the wheel has sm_90a code and the
    GPU is a Hopper; elsewhere the trace says why upstream's choice stays."""
    if gpu_backend(mx) != "cuda":
        pytest.skip("MLX_CUDA_QMM_TRACE is CUDA's")
    manifest = wheel_manifest()
    if manifest is None:
        pytest.skip("not an mlx-builder wheel: its CUDA architectures are unknown")
    if why := sm90_skip_reason():
        pytest.skip(why)
    hopper = mx.device_info().get("compute_capability_major") == 9
    compiled = sm90_compiled_here()
    lines = trace_lines(_SM90_TRACE, "sm90")
    assert len(lines) == 2, lines
    if compiled:
        assert lines[0].split()[1] == "path=sm90" and 'reason="forced"' in lines[0], lines
    else:
        why = "compute capability not 9.x" if not hopper else "qmm_sm90 not compiled for these types"
        assert lines[0].split()[1] == "path=upstream", lines
        assert f'reason="sm90 forced but {why}"' in lines[0], lines
    assert lines[1].split()[1] == "path=upstream", lines
    assert 'reason="sm90 forced but 3-bit weights"' in lines[1], lines


# Calls at the edges of qmm_sm90's route (bits, N, rows).
_SM90_ROUTE = """
import mlx.core as mx
for bits, n, rows in ((4, 5376, 32), (4, 5376, 64), (4, 4096, 64), (4, 4096, 2048),
                      (4, 4096, 4096), (8, 5376, 64), (8, 4096, 300), (8, 4096, 2048),
                      (8, 4096, 2049)):
    w = mx.random.normal((n, 512)).astype(mx.bfloat16)
    q = mx.quantize(w, group_size=64, bits=bits)
    x = mx.random.normal((rows, 512)).astype(mx.bfloat16)
    mx.eval(mx.quantized_matmul(x, *q, transpose=True, group_size=64, bits=bits))
"""


def test_trace_routes_4_and_8_bit_calls_to_sm90_where_compiled():
    """From 256 to 2048 rows, and for 4-bit weights from 64 where N >= 5376,
    on a Hopper with the kernel compiled; every other GPU keeps the rest."""
    if gpu_backend(mx) != "cuda":
        pytest.skip("MLX_CUDA_QMM_TRACE is CUDA's")
    if why := sm90_skip_reason() or patch_skip_reason("0070", "8-bit sm90 route"):
        pytest.skip(why)
    lines = trace_lines(_SM90_ROUTE)
    paths = [ln.split()[1].removeprefix("path=") for ln in lines]
    if sm90_compiled_here():
        assert paths == ["upstream", "sm90", "upstream", "sm90", "dequant",
                         "upstream", "sm90", "sm90", "dequant"], lines
        assert 'reason="4-bit, M*B = 64 >= 64, N = 5376 >= 5376"' in lines[1], lines
        assert 'reason="4-bit, M*B = 2048 in [256, 2048]"' in lines[3], lines
        assert 'reason="8-bit, M*B = 300 in [256, 2048]"' in lines[6], lines
    else:
        assert paths == ["upstream", "upstream", "upstream", "dequant", "dequant",
                         "upstream", "dequant", "dequant", "dequant"], lines


# gather_qmm at M = 1 with 8 products (the GEMV), 96 and 1280 products (6
# and 80 rows per expert), 13 rows per product, with 4-bit, 8-bit and 3-bit
# weights.
_GATHER_TRACE = """
import mlx.core as mx
w = mx.random.normal((16, 256, 512)).astype(mx.bfloat16)
idx = mx.array([[3, 1, 4, 1, 5, 9, 2, 6]], dtype=mx.uint32)
for bits in (4, 8, 3):
    q = mx.quantize(w, group_size=64, bits=bits)
    for tokens, m in ((1, 1), (12, 1), (160, 1), (1, 13)):
        x = mx.random.normal((tokens, 1, m, 512)).astype(mx.bfloat16)
        i = mx.broadcast_to(idx, (tokens, 8))
        mx.eval(mx.gather_qmm(x, *q, rhs_indices=i, transpose=True,
                              group_size=64, bits=bits))
"""
_GATHER_TRACE_SHAPES = (" M=1 B=8 ", " M=1 B=96 ", " M=1 B=1280 ", " M=13 B=8 ")


def gather_trace_auto(bits: int) -> tuple[list[str], list[str]]:
    """The default route's paths and reasons for _GATHER_TRACE's four calls
    with 4- or 8-bit weights, as this MLX's patches route them."""
    if gemv_rows_skip_reason():
        # Before patch 0065, 96 and 1280 products kept upstream's kernels.
        return (["gemv", "upstream", "upstream", "upstream"],
                ["M = 1 <= 8, B = 8 <= 64", "B = 96 > 64", "B = 1280 > 64", "M = 13 > 8"])
    if tiles_skip_reason() or (bits == 8 and patch_skip_reason("0067", "tiles")):
        # Before patch 0066 (0067 for 8-bit weights), 1280 products took the
        # GEMV's row tiles.
        tiles, reason = "gemv_rows", "M = 1 <= 8, B = 1280 > 64"
    else:
        tiles, reason = "tiles", f"{bits}-bit, M = 1 <= 8, B = 1280 > 64, 1280 rows over 16 experts"
    return (["gemv", "gemv_rows", tiles, "upstream"],
            ["M = 1 <= 8, B = 8 <= 64", "M = 1 <= 8, B = 96 > 64", reason, "M = 13 > 8"])


# MLX_CUDA_QMM_PATH: (each 4- or 8-bit call's path, its reason, the 3-bit
# calls' reason); "auto" is gather_trace_auto's.
_GATHER_TRACE_EXPECT = {
    "auto": None,
    "gemv": ("gemv", "forced", "gemv forced but 3-bit weights"),
    "gemv_rows": ("gemv_rows", "forced", "gemv_rows forced but 3-bit weights"),
    "tiles": ("tiles", "forced", "tiles forced but 3-bit weights"),
    "upstream": ("upstream", "forced", "forced"),
    "sm80": ("upstream", "sm80 forced but not a gather_qmm path",
             "sm80 forced but not a gather_qmm path"),
    "dequant": ("upstream", "dequant forced but not a gather_qmm path",
                "dequant forced but not a gather_qmm path"),
    "sm90": ("upstream", "sm90 forced but not a gather_qmm path",
             "sm90 forced but not a gather_qmm path"),
}


@pytest.mark.parametrize("path", sorted(_GATHER_TRACE_EXPECT))
def test_gather_trace_names_each_path(path):
    if gpu_backend(mx) != "cuda":
        pytest.skip("MLX_CUDA_QMM_TRACE is CUDA's")
    if why := forced_skip_reason(path):
        pytest.skip(why)
    lines = trace_lines(_GATHER_TRACE, path)
    assert len(lines) == 12, lines
    assert all(ln.split()[1] == "op=gather_qmm" for ln in lines), lines
    assert all(shape in ln for ln, shape in zip(lines, _GATHER_TRACE_SHAPES * 3)), lines
    if path == "auto":
        paths, reasons = [], []
        for bits in (4, 8):
            p, r = gather_trace_auto(bits)
            paths, reasons = paths + p, reasons + r
        paths, reasons = paths + ["upstream"] * 4, reasons + ["3-bit weights"] * 4
    else:
        p, r, three_bit = _GATHER_TRACE_EXPECT[path]
        paths, reasons = [p] * 8 + ["upstream"] * 4, [r] * 8 + [three_bit] * 4
    assert [ln.split()[2] for ln in lines] == [f"path={p}" for p in paths], lines
    for ln, reason in zip(lines, reasons):
        assert f'reason="{reason}"' in ln, ln


# mlx-lm's sorted layout at 20 and 40 rows per expert (320 and 640 one-row
# products over 16 experts), once said sorted and once not, 4- and 8-bit.
_SORTED_TRACE = """
import mlx.core as mx
w = mx.random.normal((16, 256, 512)).astype(mx.bfloat16)
for bits in (4, 8):
    q = mx.quantize(w, group_size=64, bits=bits)
    for rows in (320, 640):
        idx = mx.sort(mx.random.randint(0, 16, (rows,)).astype(mx.uint32))
        x = mx.random.normal((rows, 1, 512)).astype(mx.bfloat16)
        for sorted_indices in (True, False):
            mx.eval(mx.gather_qmm(x, *q, rhs_indices=idx, transpose=True, group_size=64,
                                  bits=bits, sorted_indices=sorted_indices))
"""


def test_gather_trace_routes_sorted_indices_to_tiles():
    """Sorted indices take the staged tiles (of one expert each) from 16
    rows per expert with 4-bit weights and from 32 with 8-bit; the same
    calls unsorted keep the row tiles below 64."""
    if gpu_backend(mx) != "cuda":
        pytest.skip("MLX_CUDA_QMM_TRACE is CUDA's")
    if why := patch_skip_reason("0068", "sorted tiles"):
        pytest.skip(why)
    lines = trace_lines(_SORTED_TRACE)
    # (bits, rows over the 16 experts, sorted): 20 and 40 rows per expert.
    calls = [(bits, rows, srt) for bits in (4, 8) for rows in (320, 640)
             for srt in (True, False)]
    assert len(lines) == len(calls), lines
    for ln, (bits, rows, srt) in zip(lines, calls):
        if srt and rows >= (16 if bits == 4 else 32) * 16:
            assert ln.split()[2] == "path=tiles", ln
            assert (f'reason="{bits}-bit, M = 1 <= 8, B = {rows} > 64, {rows} rows over 16 '
                    'experts, sorted"') in ln, ln
        else:
            assert ln.split()[2] == "path=gemv_rows", ln
            assert f'reason="M = 1 <= 8, B = {rows} > 64"' in ln, ln


# mlx-lm's sorted decode of 8 tokens with top-8 (64 one-row products over 16
# experts) at K = 1024 and 1088, 4- and 8-bit.
_SIXTY_FOUR_TRACE = """
import mlx.core as mx
for k in (1024, 1088):
    w = mx.random.normal((16, 256, k)).astype(mx.bfloat16)
    idx = mx.sort(mx.random.randint(0, 16, (64,)).astype(mx.uint32))
    x = mx.random.normal((64, 1, k)).astype(mx.bfloat16)
    for bits in (4, 8):
        q = mx.quantize(w, group_size=64, bits=bits)
        mx.eval(mx.gather_qmm(x, *q, rhs_indices=idx, transpose=True, group_size=64,
                              bits=bits, sorted_indices=True))
"""


def test_gather_trace_keeps_upstream_for_8_bit_64_products_of_small_k():
    """64 one-row products keep upstream's kernel with 8-bit weights up to
    K = 1024; 4-bit weights, and 8-bit past it, take the GEMV."""
    if gpu_backend(mx) != "cuda":
        pytest.skip("MLX_CUDA_QMM_TRACE is CUDA's")
    if why := patch_skip_reason("0069", "8-bit upstream bound"):
        pytest.skip(why)
    lines = trace_lines(_SIXTY_FOUR_TRACE)
    calls = [(k, bits) for k in (1024, 1088) for bits in (4, 8)]
    assert len(lines) == len(calls), lines
    for ln, (k, bits) in zip(lines, calls):
        assert " M=1 B=64 " in ln, ln
        if bits == 8 and k <= 1024:
            assert ln.split()[2] == "path=upstream", ln
            assert f'reason="8-bit, B = 64 >= 64, K = {k} <= 1024"' in ln, ln
        else:
            assert ln.split()[2] == "path=gemv", ln
            assert 'reason="M = 1 <= 8, B = 64 <= 64"' in ln, ln
