"""SDPA correctness for large head dims (192, 256, 512; 64/128 as controls).

Every case is compared with a float64 NumPy reference on fresh random inputs:
relative error ‖out − ref‖/‖ref‖ ≤ 1e-2 (bf16) / 5e-3 (fp16); NaN or inf
never passes. Shapes: qL/kL 1 … 4097 (16384 and
131072 with MLX_BUILDER_LONG=1), qL < kL and qL = kL, causal (bottom-right
aligned), additive and boolean masks, gemma's sliding window, GQA 1/2/4/8,
B = 2, decode (qL ≤ 3).

Proving the fused path ran (see sdpa_support's docstring):
* on CUDA, for D in 129..512 (multiples of 8) and fp16/bf16, every call
  passes ``force_fused=True`` when the Python API has it (MLX main); a call
  that would fall back raises instead;
* on every version, ``test_fused_path_ran`` checks peak memory stays far
  below the [B, H, qL, kL] score matrix the fallback must build.

Fully masked rows are compared with upstream's fallback forced in a
separate process (MLX_CUDA_SDPA_TILED=0).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from sdpa_support import MLX_MISSING

mx = pytest.importorskip("mlx.core", reason=MLX_MISSING)

from sdpa_support import (  # noqa: E402
    LONG,
    LONG_REASON,
    TOLERANCE,
    fallback_env,
    gpu_backend,
    make_mask,
    measure_prefill_peak,
    no_gpu_reason,
    reference_attention,
    rel_error,
    run_json,
    same_as_fallback,
    sample_rows,
    score_bytes,
    sdpa,
    supports_force_fused,
    to_mx,
    to_np,
)

BACKEND = gpu_backend(mx)
FORCE_FUSED_API = supports_force_fused(mx)
needs_gpu = pytest.mark.skipif(BACKEND is None, reason=no_gpu_reason(mx))
needs_cuda = pytest.mark.skipif(
    BACKEND != "cuda", reason="CUDA path only: this build/device has "
    f"backend {BACKEND!r} (mx.cuda.is_available() is False)")
long_only = pytest.mark.skipif(not LONG, reason=LONG_REASON)

DTYPES = ("float16", "bfloat16")
HEAD_DIMS = (64, 128, 192, 256, 512)
B, HQ = 2, 8


def tiled_head_dim(D: int) -> bool:
    return 129 <= D <= 512 and D % 8 == 0


def force_for(D: int, dtype: str) -> bool:
    """Whether this call must take a fused kernel (and may say so)."""
    return (BACKEND == "cuda" and FORCE_FUSED_API and tiled_head_dim(D)
            and dtype in DTYPES)


def run_case(D: int, dtype: str, mask_kind: str, gqa: int, qL: int, kL: int,
             seed: int = 0, layout: str = "contiguous") -> None:
    rng = np.random.default_rng(seed)
    hkv = HQ // gqa
    scale = D ** -0.5
    q_np = rng.standard_normal((B, HQ, qL, D), np.float32)
    k_np = rng.standard_normal((B, hkv, kL, D), np.float32)
    v_np = rng.standard_normal((B, hkv, kL, D), np.float32)
    mask_np = make_mask(mask_kind, B, HQ, qL, kL, rng)

    q, k, v = (to_mx(mx, a, dtype) for a in (q_np, k_np, v_np))
    if layout == "transposed":
        # mlx-lm's layout: projections are [B, L, H, D], transposed views
        q, k, v = (mx.contiguous(a.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
                   for a in (q, k, v))
    elif layout == "kv_sliced":
        # K/V sliced out of a longer preallocated cache with loud stale rows
        pad = 64
        stale = mx.array(1e3 * rng.standard_normal((B, hkv, pad, D), np.float32))
        k = mx.concatenate([k, stale.astype(k.dtype)], axis=2)[:, :, :kL, :]
        v = mx.concatenate([v, stale.astype(v.dtype)], axis=2)[:, :, :kL, :]
    elif layout == "kv_broadcast":
        # one K/V for the whole batch, broadcast with a zero batch stride
        # (the TMA path of head dim 512 must copy it first)
        k, v = (mx.broadcast_to(a[:1], a.shape) for a in (k, v))
    mask = to_mx(mx, mask_np, dtype)

    out = sdpa(mx, q, k, v, scale, mask, force_fused=force_for(D, dtype))
    out_np = to_np(mx, out)

    # The reference sees exactly the rounded inputs the kernel saw.
    rows = sample_rows(qL)
    ref_mask = mask_np if mask is None or isinstance(mask, str) or \
        mask.dtype == mx.bool_ else to_np(mx, mask)
    ref = reference_attention(to_np(mx, q), to_np(mx, k), to_np(mx, v),
                              scale, ref_mask, rows=rows)
    got = out_np if rows is None else out_np[:, :, rows]
    assert out.shape == (B, HQ, qL, D)
    err = rel_error(got, ref)
    tol = TOLERANCE[dtype]
    assert err <= tol, (
        f"relative error {err:.3g} > {tol} (D={D} {dtype} mask={mask_kind} "
        f"gqa={gqa} qL={qL} kL={kL} layout={layout}"
        f"{' force_fused' if force_for(D, dtype) else ''})")


def _id(**kw) -> str:
    return "-".join(f"{k}{v}" for k, v in kw.items())


# ---------------------------------------------------------------------------
# 1. Every head dim × dtype × mask × GQA factor, two ragged shapes
# ---------------------------------------------------------------------------

MASKS = ("none", "causal", "additive", "additive_2d", "bool", "window")
MATRIX = [
    pytest.param(D, dt, m, g, qL, kL, id=f"D{D}-{dt}-{m}-gqa{g}-q{qL}k{kL}")
    for D, dt, m, g, (qL, kL) in itertools.product(
        HEAD_DIMS, DTYPES, MASKS, (1, 2, 4, 8), ((63, 65), (127, 127)))
]


@pytest.mark.parametrize("D,dtype,mask,gqa,qL,kL", MATRIX)
def test_matrix(D, dtype, mask, gqa, qL, kL):
    run_case(D, dtype, mask, gqa, qL, kL)


# ---------------------------------------------------------------------------
# 2. Sequence lengths: qL = kL and qL < kL, 1 … 4097 (16384 long)
# ---------------------------------------------------------------------------

SMALL_LENGTHS = ((1, 1), (1, 7), (7, 7), (7, 63), (63, 63), (65, 65),
                 (65, 127), (127, 1000))
GPU_LENGTHS = ((1000, 1000), (1000, 4097), (4097, 4097))
LONG_LENGTHS = ((1000, 16384), (16384, 16384))
LENGTH_MASKS = ("none", "causal", "additive_2d", "bool", "window")


def _length_params():
    for (qL, kL), D, dt, m in itertools.product(
            SMALL_LENGTHS + GPU_LENGTHS, HEAD_DIMS, DTYPES, LENGTH_MASKS):
        marks = [pytest.mark.gpu, needs_gpu] if (qL, kL) in GPU_LENGTHS else []
        yield pytest.param(D, dt, m, qL, kL, marks=marks,
                           id=f"D{D}-{dt}-{m}-q{qL}k{kL}")
    for (qL, kL), D, m in itertools.product(
            LONG_LENGTHS, (192, 256, 512), ("causal", "window")):
        yield pytest.param(D, "bfloat16", m, qL, kL,
                           marks=[pytest.mark.gpu, pytest.mark.long,
                                  needs_gpu, long_only],
                           id=f"D{D}-bfloat16-{m}-q{qL}k{kL}")


@pytest.mark.parametrize("D,dtype,mask,qL,kL", list(_length_params()))
def test_lengths(D, dtype, mask, qL, kL):
    run_case(D, dtype, mask, 2, qL, kL, seed=qL * 7 + kL)


# ---------------------------------------------------------------------------
# 3. Decode: qL ∈ {1, 2, 3}, kL ∈ {1, 255, 4097, 131072 (long)}
# ---------------------------------------------------------------------------

def _decode_params():
    for D, dt, qL, kL, g, m in itertools.product(
            HEAD_DIMS, DTYPES, (1, 2, 3), (1, 255, 4097, 131072), (1, 2, 8),
            ("none", "causal")):
        if m == "causal" and qL > kL:
            continue  # fully masked rows: test_fully_masked_rows
        marks = []
        if kL == 131072:
            if D not in (192, 256, 512) or g == 1:
                continue
            marks = [pytest.mark.gpu, pytest.mark.long, needs_gpu, long_only]
        elif kL == 4097:
            marks = [pytest.mark.gpu, needs_gpu]
        yield pytest.param(D, dt, m, g, qL, kL, marks=marks,
                           id=f"D{D}-{dt}-{m}-gqa{g}-q{qL}k{kL}")


@pytest.mark.parametrize("D,dtype,mask,gqa,qL,kL", list(_decode_params()))
def test_decode(D, dtype, mask, gqa, qL, kL):
    run_case(D, dtype, mask, gqa, qL, kL, seed=D + qL)


# ---------------------------------------------------------------------------
# 4. Input layouts: what mlx-lm produces, and strides a kernel must copy
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("D,layout,mask,qL,kL", [
    pytest.param(D, lay, m, qL, kL, id=f"D{D}-{lay}-{m}-q{qL}k{kL}")
    for D, lay, m, (qL, kL) in itertools.product(
        (192, 256, 512), ("transposed", "kv_sliced", "kv_broadcast"),
        ("none", "causal"),
        ((65, 300), (1, 300), (300, 300)))
])
def test_layouts(D, layout, mask, qL, kL):
    run_case(D, "bfloat16", mask, 2, qL, kL, layout=layout)


# ---------------------------------------------------------------------------
# 5. The fused path ran: every tiled head dim, by force_fused and by memory
# ---------------------------------------------------------------------------

REQUIRED_TILED = (192, 256, 512)
OPTIONAL_TILED = pytest.mark.xfail(
    strict=False, reason="head dims other than 192/256/512 are compiled only "
    "where they come cheap; reported, not required")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("D", [
    pytest.param(D, id=f"D{D}",
                 marks=() if D in REQUIRED_TILED else (OPTIONAL_TILED,))
    for D in range(136, 513, 8)])
def test_fused_path_ran(D, record_property):
    """Every multiple of 8 in 129..512 (192/256/512 required, the others
    xfail when the patch does not compile them): the result is right, and
    at qL = kL = 2048, 8 heads, causal, bf16 the peak extra memory stays
    below half the score matrix the fallback materialises (64 MiB). With
    MLX main's API the calls also pass force_fused=True."""
    L, H = 2048, 8
    run_case(D, "bfloat16", "causal", 2, 255, 2048, seed=D)
    res = measure_prefill_peak(mx, L, D, B=1, Hq=H, Hkv=H // 2,
                               force_fused=force_for(D, "bfloat16"))
    scores = score_bytes(1, H, L, L)
    record_property("peak_extra_mib", round(res["peak_extra"] / 2**20, 2))
    assert res["status"] == "ok", res
    assert res["peak_extra"] < scores / 2, (
        f"D={D}: peak extra {res['peak_extra'] / 2**20:.1f} MiB is not below "
        f"half the fallback's score matrix ({scores / 2**20:.0f} MiB): the "
        "tiled path did not run")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.skipif(not FORCE_FUSED_API, reason="this MLX's Python API has no "
                    "force_fused (added after v0.32.1); memory proves the path")
@pytest.mark.parametrize("D,qL,mask", [
    pytest.param(D, qL, m, id=f"D{D}-q{qL}-{m}")
    for D, qL, m in itertools.product((192, 256, 512), (1, 3, 64, 1024),
                                      ("none", "causal", "bool"))
])
def test_force_fused_accepts(D, qL, mask):
    """force_fused=True does not raise for the shapes routed to a
    fused kernel (prefill and decode, with and without masks)."""
    run_case(D, "bfloat16", mask, 2, qL, 1024, seed=qL)


# ---------------------------------------------------------------------------
# 6. Fully masked rows behave as upstream's fallback does
# ---------------------------------------------------------------------------

FULLY_MASKED = [
    (D, kind, qL, kL)
    for D in (192, 256, 512)
    for kind, qL, kL in (("bool_rows", 70, 96), ("additive_ninf_rows", 70, 96),
                         ("causal_q_gt_k", 70, 64), ("bool_rows", 1, 96),
                         ("bool_rows", 3, 300))
]

_FALLBACK_SCRIPT = r"""
import json, sys
import numpy as np
import mlx.core as mx
from sdpa_support import (measure_prefill_peak, score_bytes, sdpa, to_mx,
                          to_np)
data = np.load(sys.argv[1])
outs = {}
for name in sorted({k.rsplit("__", 1)[0] for k in data.files}):
    q, k, v = (to_mx(mx, data[name + "__" + t], "bfloat16") for t in "qkv")
    m = data[name + "__mask"]
    mask = "causal" if m.dtype.kind == "U" else (
        mx.array(m) if m.dtype == bool else to_mx(mx, m, "bfloat16"))
    outs[name] = to_np(mx, sdpa(mx, q, k, v, q.shape[-1] ** -0.5, mask))
np.savez(sys.argv[2], **outs)
probe = measure_prefill_peak(mx, 2048, 256, Hq=8, Hkv=4)
print(json.dumps({"probe_extra": probe["peak_extra"],
                  "scores": score_bytes(1, 8, 2048, 2048)}))
"""


def _fully_masked_inputs(D, kind, qL, kL):
    rng = np.random.default_rng(D + qL)
    hkv = HQ // 4
    q = rng.standard_normal((B, HQ, qL, D), np.float32)
    k = rng.standard_normal((B, hkv, kL, D), np.float32)
    v = rng.standard_normal((B, hkv, kL, D), np.float32)
    dead = [0, qL - 1] if qL > 1 else [0]
    if kind == "bool_rows":
        mask = rng.uniform(size=(B, 1, qL, kL)) < 0.7
        mask[..., dead, :] = False
    elif kind == "additive_ninf_rows":
        mask = rng.uniform(-1, 0, size=(qL, kL)).astype(np.float32)
        mask[dead, :] = -np.inf
    else:
        mask = np.array("causal")
    # bf16-round so both processes see identical inputs
    q, k, v = (to_np(mx, to_mx(mx, a, "bfloat16")) for a in (q, k, v))
    return q, k, v, mask


@pytest.fixture(scope="module")
def fallback_outputs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fully_masked")
    arrays = {}
    for D, kind, qL, kL in FULLY_MASKED:
        name = f"D{D}_{kind}_q{qL}_k{kL}"
        for t, a in zip(("q", "k", "v", "mask"),
                        _fully_masked_inputs(D, kind, qL, kL)):
            arrays[f"{name}__{t}"] = a
    np.savez(tmp / "in.npz", **arrays)
    env = fallback_env()
    probe = run_json(_FALLBACK_SCRIPT, [tmp / "in.npz", tmp / "out.npz"],
                     env=env, timeout=600)
    assert probe["probe_extra"] >= 0.9 * probe["scores"], (
        f"{env} did not switch to upstream's fallback: a D=256 L=2048 probe "
        f"used {probe['probe_extra'] / 2**20:.1f} MiB, below the "
        f"{probe['scores'] / 2**20:.0f} MiB score matrix the fallback builds. "
        "The patch must honour MLX_CUDA_SDPA_TILED=0 (or set "
        "MLX_BUILDER_FALLBACK_ENV)")
    return dict(np.load(tmp / "out.npz"))


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("D,kind,qL,kL", [
    pytest.param(*c, id=f"D{c[0]}-{c[1]}-q{c[2]}k{c[3]}") for c in FULLY_MASKED])
def test_fully_masked_rows(D, kind, qL, kL, fallback_outputs):
    q, k, v, mask_np = _fully_masked_inputs(D, kind, qL, kL)
    mask = "causal" if mask_np.dtype.kind == "U" else (
        mx.array(mask_np) if mask_np.dtype == bool
        else to_mx(mx, mask_np, "bfloat16"))
    qm, km, vm = (to_mx(mx, a, "bfloat16") for a in (q, k, v))
    out = to_np(mx, sdpa(mx, qm, km, vm, D ** -0.5, mask))
    expected = fallback_outputs[f"D{D}_{kind}_q{qL}_k{kL}"]
    why = same_as_fallback(out, expected, TOLERANCE["bfloat16"])
    assert not why, f"fully masked rows ({kind}): {why}"


def test_reference_is_not_trivial():
    """Guards the harness: the reference tells a wrong answer from a right
    one (a kernel that drops the mask, or swaps K and V, would fail)."""
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 2, 9, 16))
    k = rng.standard_normal((1, 1, 9, 16))
    v = rng.standard_normal((1, 1, 9, 16))
    causal = reference_attention(q, k, v, 0.25, "causal")
    unmasked = reference_attention(q, k, v, 0.25, None)
    assert rel_error(unmasked, causal) > 1e-1
    assert math.isinf(rel_error(np.full_like(causal, np.nan), causal))
