"""Kernels of gemma-4's prefill path just past 2³¹ elements.

At a 128k-token single pass, gemma-4 31B's MLP works on [131072, 21504]
tensors (2.82·10⁹ elements), its global layers' queries are exactly 2³¹
elements and the sliding layers' window mask is [L, L]. Each test runs one
kernel on such a size and checks a few slices of the result, chosen where
an int32 index would wrap (the rows around element 2³¹, and 2³² where the
kernel switches index type there) plus the first and the last rows, against
a reference computed on the slice alone (numpy, or a small MLX call that
takes the ordinary path).

* quantized matmul (patch 0050): gate/up (131072 × 5376 → 21504), down
  (131072 × 21504 → 5376) and the global q_proj (→ 16384, 2³¹ outputs), 4-bit,
  group 64, against dequantize + matmul of the slice's rows; and qmv past
  65535 rows (patch 0051: group 32, K = 544, which only qmv serves);
* the window mask as mlx-lm builds it (broadcast compare, and), exact, up
  to [131071, 131071] (patch 0053: a grid past 65535 in y);
* the geglu that gemma compiles (shapeless mx.compile), a transposing copy
  (attention output to o_proj's rows), rms_norm, rope and softmax on
  2.4·10⁹ elements, and an embedding gather with 2.15·10⁹ outputs.

Every test states the GPU memory it needs and skips below it (or when the
allocation still fails with an out-of-memory error). Nothing is timed.
"""

from __future__ import annotations

import math

import pytest
from sdpa_support import MLX_MISSING

mx = pytest.importorskip("mlx.core", reason=MLX_MISSING)

import numpy as np  # noqa: E402
from sdpa_support import (  # noqa: E402
    GIB,
    device_memory_bytes,
    gpu_backend,
    is_oom,
    no_gpu_reason,
    rel_error,
    to_host,
)

if gpu_backend(mx) is None:
    pytest.skip(no_gpu_reason(mx), allow_module_level=True)

# Each test plans for up to USABLE of the device: with --jobs they run
# alone, after the shards.
pytestmark = [pytest.mark.gpu, pytest.mark.solo]

I32 = 2 ** 31
U32 = 2 ** 32
# Of the device's memory, the share a test may plan to use (the rest: MLX's
# cache, the context, other processes).
USABLE = 0.8
SLICE = 32  # rows per checked slice
BF16 = 2


def require(need: int) -> None:
    """Skip unless the device has ``need`` bytes to spare."""
    total = device_memory_bytes(mx)
    if total == 0:
        pytest.skip("the device reports no memory size (mx.device_info)")
    if need > USABLE * total:
        pytest.skip(f"needs {need / GIB:.1f} GiB of GPU memory, "
                    f"{USABLE:.0%} of this device's {total / GIB:.1f} GiB is "
                    f"{USABLE * total / GIB:.1f}")


@pytest.fixture(autouse=True)
def _free():
    mx.synchronize()
    mx.clear_cache()
    yield
    mx.synchronize()
    mx.clear_cache()


def run(fn):
    """fn(); an out-of-memory error skips (the memory was accounted for, but
    others may hold part of the device)."""
    try:
        return fn()
    except (RuntimeError, ValueError, MemoryError) as exc:
        if is_oom(exc):
            pytest.skip(f"out of memory despite the accounting: {str(exc)[:160]}")
        raise


def boundary_rows(rows: int, row_elems: int, limits=(I32,)) -> list[int]:
    """Start rows of the checked slices: first, around each limit's crossing
    (the row holding element ``limit``), last."""
    starts = [0, rows - SLICE]
    for limit in limits:
        r = limit // row_elems
        if 0 < r < rows:
            starts.append(min(max(r - SLICE // 2, 0), rows - SLICE))
    return sorted(set(starts))


def to_f32(a) -> np.ndarray:
    return to_host(mx, a.astype(mx.float32))


def normal(shape, scale=1.0, key=0):
    return mx.random.normal(shape, dtype=mx.bfloat16, scale=scale,
                            key=mx.random.key(key))


# gemma-4 31B at a 128k-token prefill: (rows, K, N)
QMM_SHAPES = {
    "gate_up_131072x5376x21504": (131072, 5376, 21504),
    "down_131072x21504x5376": (131072, 21504, 5376),
    "global_q_131072x5376x16384": (131072, 5376, 16384),
}


# bf16 output rounding is ~3e-3; a wrong row or column offset is O(1).
QMM_TOLERANCE = 2e-2


@pytest.mark.parametrize("M,K,N", list(QMM_SHAPES.values()), ids=list(QMM_SHAPES))
def test_quantized_matmul_past_2_31(M, K, N, record_property):
    group, bits = 64, 4
    # x (bf16, its fp32 draw), w (fp32 draw, bf16, 4-bit), out; slices are small.
    need = M * K * (BF16 + 4) + N * K * (4 + BF16) + M * N * BF16 + GIB
    require(need)

    def body():
        x = normal((1, M, K), key=1)
        w = normal((N, K), scale=K ** -0.5, key=2)
        wq, scales, biases = mx.quantize(w, group_size=group, bits=bits)
        del w
        w_deq = mx.dequantize(wq, scales, biases, group_size=group, bits=bits)
        mx.eval(x, wq, scales, biases, w_deq)
        out = mx.quantized_matmul(x, wq, scales, biases, transpose=True,
                                  group_size=group, bits=bits)
        mx.eval(out)
        assert out.shape == (1, M, N)
        worst = 0.0
        starts = boundary_rows(M, max(N, K))
        starts += boundary_rows(M, min(N, K))
        for r in sorted(set(starts)):
            got = to_f32(out[0, r:r + SLICE])
            ref = to_f32(x[0, r:r + SLICE].astype(mx.float32)
                         @ w_deq.astype(mx.float32).T)
            assert np.isfinite(got).all(), f"rows {r}..{r + SLICE}: non-finite"
            err = rel_error(got, ref)
            worst = max(worst, err)
            assert err <= QMM_TOLERANCE, (
                f"rows {r}..{r + SLICE} of {M} (element {r * N} of {M * N}): "
                f"relative error {err:.3g} against dequantize + matmul")
        return worst

    worst = run(body)
    record_property(f"qmm_rel_error_{M}x{K}x{N}", round(worst, 5))


def test_qmv_past_65535_rows(record_property):
    """Patch 0051: group 32 with K = 544 (a multiple of 32, not of 64) is
    served by qmv alone, whose grid had M in y (<= 65535). 70000 rows,
    float32 (rel. error ~1e-6 when right)."""
    M, K, N, group, bits = 70000, 544, 256, 32, 4
    require(M * (K + N) * 4 * 2 + GIB)

    def body():
        # float32: qmv accumulates in the input type below 8 bits, and the
        # check is about rows, not rounding
        x = mx.random.normal((1, M, K), key=mx.random.key(12))
        w = mx.random.normal((N, K), scale=K ** -0.5, key=mx.random.key(13))
        wq, scales, biases = mx.quantize(w, group_size=group, bits=bits)
        w_deq = mx.dequantize(wq, scales, biases, group_size=group, bits=bits)
        out = mx.quantized_matmul(x, wq, scales, biases, transpose=True,
                                  group_size=group, bits=bits)
        mx.eval(out, w_deq)
        worst = 0.0
        for r in sorted({0, 65535 - SLICE // 2, M - SLICE}):
            got = to_f32(out[0, r:r + SLICE])
            ref = to_f32(x[0, r:r + SLICE].astype(mx.float32)
                         @ w_deq.astype(mx.float32).T)
            err = rel_error(got, ref)
            worst = max(worst, err)
            assert err <= 1e-3, (
                f"rows {r}..{r + SLICE} of {M}: relative error {err:.3g}")
        return worst

    record_property("qmv_rel_error_70000x544x256", round(run(body), 5))


# Shapes of the other tests (gemma-4 31B at 128k where it has them; 36
# heads instead of 32 put the [H, L, 512] tensors past 2³¹, not at it).
# N²: 2.4·10⁹ and 4.8·10⁹; and the first model call of a 128k single pass
# (131071 tokens, the last one is the logits' call): an odd N whose shape
# factors into a grid y of 131071, past CUDA's 65535 (patch 0053).
MASK_LENGTHS = (49152, 69632, 131071)
GEGLU_SHAPE = (131072, 21504)  # M, N
HEADS_SHAPE = (36, 131072, 512)  # H, L, D
SOFTMAX_SHAPE = (36864, 65536)  # rows, keys
GATHER_SHAPE = (262144, 5376, 400000)  # vocab, hidden, tokens


@pytest.mark.parametrize("N", MASK_LENGTHS, ids=["2.4e9", "4.8e9", "1.7e10-odd"])
def test_window_mask_past_2_31(N):
    """mlx-lm's create_causal_mask(N, window_size=1024): a broadcast compare
    ([N, 1] vs [1, N]) and an elementwise and, past 2³¹ and 2³²."""
    window = 1024
    require(4 * N * N + GIB)  # two compares, the and, one temporary

    def body():
        rinds = mx.arange(N)
        linds = rinds[:, None]
        rinds = rinds[None]
        mask = (linds >= rinds) & (linds < rinds + window)
        mx.eval(mask)
        j = np.arange(N)
        for r in boundary_rows(N, N, (I32, U32)):
            got = to_host(mx, mask[r:r + SLICE])
            i = np.arange(r, r + SLICE)[:, None]
            ref = (i >= j) & (i < j + window)
            bad = np.argwhere(got != ref)
            assert bad.size == 0, (
                f"mask rows {r}..{r + SLICE} of {N}: {len(bad)} wrong entries, "
                f"first at {(bad[0][0] + r, bad[0][1])}")

    run(body)


def _gelu_approx(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def test_compiled_geglu_past_2_31():
    """gemma's geglu, mx.compile(shapeless=True), on the 128k MLP tensors."""
    import mlx.nn as nn

    M, N = GEGLU_SHAPE
    require(3 * M * N * BF16 + M * N * 4 + GIB)

    @mx.compile
    def geglu(gate, x):
        return nn.gelu_approx(gate) * x

    def body():
        gate = normal((1, M, N), key=3)
        up = normal((1, M, N), key=4)
        mx.eval(gate, up)
        out = geglu(gate, up)
        mx.eval(out)
        for r in boundary_rows(M, N, (I32, U32)):
            g = to_f32(gate[0, r:r + SLICE]).astype(np.float64)
            u = to_f32(up[0, r:r + SLICE]).astype(np.float64)
            err = rel_error(to_f32(out[0, r:r + SLICE]), _gelu_approx(g) * u)
            assert err <= 1e-2, f"rows {r}..{r + SLICE}: relative error {err:.3g}"

    run(body)


def test_transposing_copy_past_2_31():
    """Attention output [1, H, L, D] to o_proj's rows [1, L, H·D]: the
    general copy, 36 heads of 512 at L = 131072 (2.4·10⁹ elements)."""
    H, L, D = HEADS_SHAPE
    require(2 * H * L * D * BF16 + H * L * D * 4 + GIB)

    def body():
        a = normal((1, H, L, D), key=5)
        mx.eval(a)
        rows = mx.contiguous(a.transpose(0, 2, 1, 3).reshape(1, L, H * D))
        mx.eval(rows)
        for t in boundary_rows(L, H * D, (I32, U32)):
            got = to_f32(rows[0, t:t + SLICE])
            ref = to_f32(a[0, :, t:t + SLICE]).transpose(1, 0, 2).reshape(SLICE, H * D)
            assert np.array_equal(got, ref), f"rows {t}..{t + SLICE}: copy differs"

    run(body)


def test_rms_norm_past_2_31():
    """gemma's q_norm: rms_norm over D = 512 of [1, L, H, D], 2.4·10⁹ elements."""
    H, L, D = HEADS_SHAPE
    require(2 * L * H * D * BF16 + L * H * D * 4 + GIB)

    def body():
        x = normal((1, L, H, D), key=6)
        w = (1 + 0.1 * mx.random.normal((D,), key=mx.random.key(7))).astype(mx.bfloat16)
        mx.eval(x, w)
        out = mx.fast.rms_norm(x, w, 1e-6)
        mx.eval(out)
        wf = to_f32(w).astype(np.float64)
        for t in boundary_rows(L, H * D, (I32, U32)):
            xs = to_f32(x[0, t:t + SLICE]).astype(np.float64)
            ref = xs / np.sqrt((xs ** 2).mean(-1, keepdims=True) + 1e-6) * wf
            err = rel_error(to_f32(out[0, t:t + SLICE]), ref)
            assert err <= 1e-2, f"rows {t}..{t + SLICE}: relative error {err:.3g}"

    run(body)


def test_rope_past_2_31():
    """rope (non-traditional, all 512 dims, base 1e6) on [1, 36, 131072, 512]."""
    H, L, D = HEADS_SHAPE
    base = 1e6
    require(2 * H * L * D * BF16 + H * L * D * 4 + GIB)

    def body():
        x = normal((1, H, L, D), key=8)
        mx.eval(x)
        out = mx.fast.rope(x, D, traditional=False, base=base, scale=1.0, offset=0)
        mx.eval(out)
        half = D // 2
        # the kernel: inv_freq = exp2(-(i / half) * log2(base)), theta in fp32
        inv_freq = np.exp2(-(np.arange(half, dtype=np.float32) / np.float32(half))
                           * np.float32(math.log2(base))).astype(np.float32)
        for h in (0, H - 1):
            for t in [*boundary_rows(L, D, ()), L // 2]:
                xs = to_f32(x[0, h, t:t + SLICE]).astype(np.float64)
                pos = np.arange(t, t + SLICE, dtype=np.float32)[:, None]
                theta = (pos * inv_freq[None]).astype(np.float64)
                x1, x2 = xs[:, :half], xs[:, half:]
                ref = np.concatenate([x1 * np.cos(theta) - x2 * np.sin(theta),
                                      x1 * np.sin(theta) + x2 * np.cos(theta)], -1)
                err = rel_error(to_f32(out[0, h, t:t + SLICE]), ref)
                assert err <= 2e-2, (f"head {h} rows {t}..{t + SLICE}: relative "
                                     f"error {err:.3g}")

    run(body)


def test_softmax_past_2_31():
    """softmax over 65536 keys of 36864 rows (2.4·10⁹ elements)."""
    R, N = SOFTMAX_SHAPE
    require(2 * R * N * BF16 + R * N * 4 + GIB)

    def body():
        x = normal((R, N), scale=3.0, key=9)
        mx.eval(x)
        out = mx.softmax(x, axis=-1, precise=True)
        mx.eval(out)
        for r in boundary_rows(R, N, (I32, U32)):
            xs = to_f32(x[r:r + SLICE]).astype(np.float64)
            e = np.exp(xs - xs.max(-1, keepdims=True))
            ref = e / e.sum(-1, keepdims=True)
            err = rel_error(to_f32(out[r:r + SLICE]), ref)
            assert err <= 1e-2, f"rows {r}..{r + SLICE}: relative error {err:.3g}"

    run(body)


def test_embedding_gather_past_2_31():
    """take of 400000 rows of gemma's [262144, 5376] embedding (2.15·10⁹ outputs)."""
    V, D, T = GATHER_SHAPE
    require(V * D * (BF16 + 4) + T * D * BF16 + GIB)

    def body():
        table = normal((V, D), key=10)
        idx = mx.random.randint(0, V, (T,), key=mx.random.key(11)).astype(mx.uint32)
        mx.eval(table, idx)
        out = mx.take(table, idx, axis=0)
        mx.eval(out)
        idx_np = to_host(mx, idx)
        for r in boundary_rows(T, D, (I32,)):
            got = to_f32(out[r:r + SLICE])
            for i in range(SLICE):
                ref = to_f32(table[int(idx_np[r + i])])
                assert np.array_equal(got[i], ref), (
                    f"output row {r + i} (table row {idx_np[r + i]}) differs")

    run(body)
