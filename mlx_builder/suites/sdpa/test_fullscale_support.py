"""CPU checks of fullscale_support's pure parts (no MLX, no mlx-lm)."""

from __future__ import annotations

import pytest
from fullscale_support import (
    GEMMA4_31B,
    LONG_LENGTH,
    MIN_DEVICE_BYTES,
    bytes_per_pair,
    device_skip_reason,
    largest_completed,
    layer_types,
    linear_shapes,
    prefill_schedule,
    quantized_bytes,
    record_name,
)
from sdpa_support import GIB


def test_layer_types_are_50_sliding_and_10_global():
    kinds = layer_types(GEMMA4_31B)
    assert len(kinds) == 60
    assert kinds.count("full_attention") == 10
    assert kinds[:6] == ["sliding_attention"] * 5 + ["full_attention"]
    assert kinds[-1] == "full_attention"


def test_linear_shapes_follow_the_attention_shapes():
    shapes = linear_shapes(GEMMA4_31B)
    # sliding layer: q, k, v, o, gate, up, down; global (K = V): no v
    assert shapes[:7] == [(8192, 5376), (4096, 5376), (4096, 5376), (5376, 8192),
                          (21504, 5376), (21504, 5376), (5376, 21504)]
    g = 5 * 7
    assert shapes[g:g + 6] == [(16384, 5376), (2048, 5376), (5376, 16384),
                               (21504, 5376), (21504, 5376), (5376, 21504)]
    assert len(shapes) == 50 * 7 + 10 * 6 + 1
    assert shapes[-1] == (262144, 5376)


def test_quantized_bytes_match_the_measured_16_1_gib():
    # the model's random 4-bit weights measured 16.1 GiB on the GPU
    assert quantized_bytes(GEMMA4_31B) / GIB == pytest.approx(16.1, abs=0.05)


def test_quantized_bytes_count_packing_and_group_scales():
    config = dict(GEMMA4_31B, num_hidden_layers=6)
    shapes = linear_shapes(config)
    params = sum(o * i for o, i in shapes)
    groups = sum(o * i // 64 for o, i in shapes)
    assert quantized_bytes(config) == params // 2 + groups * 4
    assert quantized_bytes(config, bits=8) == params + groups * 4


@pytest.mark.parametrize("L,step,want", [
    (5000, 2048, [2048, 2048, 903, 1]),
    (4097, 2048, [2048, 2048, 1]),
    (LONG_LENGTH, LONG_LENGTH, [LONG_LENGTH - 1, 1]),
    (2, 2048, [1, 1]),
    (1, 2048, [1]),
])
def test_prefill_schedule_is_mlx_lm_generates(L, step, want):
    chunks = prefill_schedule(L, step)
    assert chunks == want
    assert sum(chunks) == L


@pytest.mark.parametrize("L,step", [(0, 2048), (10, 0)])
def test_prefill_schedule_rejects_bad_input(L, step):
    with pytest.raises(ValueError):
        prefill_schedule(L, step)


def _runs(c, b=3000.0, a=2 * GIB, lengths=(16384, 32768, 65536)):
    return [{"L": L, "status": "ok", "peak_extra": a + b * L + c * L * L}
            for L in lengths]


@pytest.mark.parametrize("c", [0.0, 1.0, 4.0])
def test_bytes_per_pair_recovers_the_quadratic_term(c):
    assert bytes_per_pair(_runs(c)) == pytest.approx(c, abs=1e-3)


def test_bytes_per_pair_needs_three_completed_runs():
    runs = _runs(1.0)
    runs[1]["status"] = "oom"
    with pytest.raises(ValueError, match="three completed"):
        bytes_per_pair(runs)


def test_largest_completed_ignores_failed_runs():
    runs = [*_runs(1.0), {"L": LONG_LENGTH, "status": "oom", "peak_extra": 0}]
    assert largest_completed(runs) == 65536
    assert largest_completed([{"L": 8, "status": "oom"}]) is None


def test_device_skip_reason_below_80_gb():
    assert device_skip_reason(MIN_DEVICE_BYTES) is None
    assert device_skip_reason(int(141 * GIB)) is None
    why = device_skip_reason(int(24 * GIB))
    assert why and "80 GB" in why and "25.8 GB" in why


def test_record_names_are_distinct_per_mode_and_length():
    names = {record_name(m, L, "peak_gib") for m in ("single", "chunked2048")
             for L in (16384, 32768, 131072)}
    assert len(names) == 6
    assert record_name("single", 131072, "tok_per_s") == "single_128k_tok_per_s"


@pytest.mark.parametrize("text,oom", [
    ("[malloc] Unable to allocate 17179869184 bytes.", True),
    ("cudaMallocAsync(&data, size, stream) failed: out of memory", True),
    ("cudaGraphAddKernelNode(...) failed: invalid argument", False),
])
def test_out_of_memory_errors_are_told_from_kernel_errors(text, oom):
    from sdpa_support import is_oom

    assert is_oom(RuntimeError(text)) is oom
