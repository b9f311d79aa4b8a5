"""End to end with a real client: mlx-lm's own gemma4_text and qwen3_5 code.

Models (see e2e_support): gemma-4 31B attention shapes (32 query heads;
sliding layers head_dim 256 with their window mask; global layers
head_dim 512) and Qwen3.5's attention layers (32/2 heads, head_dim 256),
few layers, tiny hidden size, fixed random bf16 weights, optionally 4-bit
(mlx's nn.quantize).

* ``test_long_prefill``: single-pass prefill at 4k, 8k, 16k and 32k tokens
  completes with finite logits, and peak memory grows ~O(L). The only L²
  term allowed is one mask's worth: gemma's sliding layers hand SDPA a
  [L, L] boolean window mask that mlx-lm itself builds (1 byte per pair),
  which MLX converts to one additive bf16 mask (2 bytes per pair; patch
  0021 keeps that conversion from being broadcast over heads). The fitted
  quadratic coefficient must stay ≤ 4 bytes per (query, key) pair: one mask
  and its conversion, with slack (upstream's fallback: ≥ 2 bytes × 32 heads
  = 64; a per-head mask conversion: 64 too). Qwen (causal, no mask array)
  must fit L^e with e ≤ 1.2.
* ``test_greedy_identity``: short context, greedy decode gives the same
  tokens on the patched path and on upstream's fallback
  (MLX_CUDA_SDPA_TILED=0, a separate process), in float16 (see
  e2e_support.GREEDY_DTYPE). The prompt is chosen on the fallback so that no
  step is a near-tie (random weights make some).
* ``test_greedy_identity_quantized``: the same with 4-bit weights and
  QMM_GREEDY_TOKENS tokens, patch 0060's quantized-matmul routing against
  upstream's kernels (MLX_CUDA_QMM_PATH=upstream, a separate process; the
  prompt chosen there). The 300-row prompt takes the dequantize path;
  gemma's decode steps (one row on its cache) take the GEMV, qwen's
  (recomputing the sequence) the dequantize path again. Skips on builds
  without the patch.
"""

from __future__ import annotations

import json

import pytest
from sdpa_support import MLX_MISSING

mx = pytest.importorskip("mlx.core", reason=MLX_MISSING)

import numpy as np  # noqa: E402
from e2e_support import (  # noqa: E402
    GREEDY_DTYPE,
    GREEDY_SEEDS,
    GREEDY_TOKENS,
    MARGIN,
    MODELS,
    QMM_GREEDY_SEEDS,
    QMM_GREEDY_TOKENS,
    build_model,
    find_mlx_lm,
    greedy,
    mlx_lm_modules,
    prefill_peak,
    prompt_for,
)
from sdpa_support import (  # noqa: E402
    GIB,
    fallback_env,
    fit_exponent,
    fit_quadratic_coefficient,
    gpu_backend,
    no_gpu_reason,
    qmm_routing_skip_reason,
    rel_error,
    run_json,
)

if gpu_backend(mx) is None:
    pytest.skip(no_gpu_reason(mx), allow_module_level=True)
_why = find_mlx_lm()
if _why:
    pytest.skip(_why, allow_module_level=True)

pytestmark = pytest.mark.gpu

LENGTHS = (4096, 8192, 16384, 32768)
MAX_EXPONENT = 1.2
MAX_QUADRATIC_BYTES = 4.0
GREEDY_WINDOW = 128  # sliding window at short context, so its mask is used


@pytest.mark.parametrize("name,bits", [
    ("gemma4_31b_like", None), ("gemma4_31b_like", 4), ("qwen3_5_like", None)],
    ids=["gemma4_31b_like-bf16", "gemma4_31b_like-q4", "qwen3_5_like-bf16"])
def test_long_prefill(name, bits, record_property):
    version = mlx_lm_modules()["version"]
    record_property("mlx_lm_version", version)
    model = build_model(mx, name, bits=bits)
    prefill_peak(mx, model, 512)  # warm-up: kernels, handles
    results = [prefill_peak(mx, model, L) for L in LENGTHS]
    print(f"{name} bits={bits} mlx-lm {version}: " + json.dumps(results))
    failed = [r for r in results if r["status"] != "ok"]
    assert not failed, f"{name}: prefill did not complete: {failed}"
    assert all(r["finite"] for r in results), f"{name}: non-finite logits"
    Ls = [r["L"] for r in results]
    peaks = [r["peak_extra"] for r in results]
    e = fit_exponent(Ls, peaks)
    c = fit_quadratic_coefficient(Ls, peaks)
    tag = f"{name}_{f'q{bits}' if bits else 'bf16'}"
    record_property(f"exponent_{tag}", round(e, 3))
    record_property(f"quadratic_bytes_per_pair_{tag}", round(c, 3))
    record_property(f"peak_extra_gib_L{Ls[-1]}_{tag}", round(peaks[-1] / GIB, 3))
    print(f"{tag}: e = {e:.3f}, quadratic term {c:.2f} bytes per (q, k) pair, "
          f"peak extra at L={Ls[-1]} {peaks[-1] / GIB:.2f} GiB")
    if "sliding_window" in MODELS[name]:
        assert c <= MAX_QUADRATIC_BYTES, (
            f"{tag}: {c:.1f} bytes per (query, key) pair grow as L²: more "
            f"than the window mask mlx-lm passes and its conversion (≤ "
            f"{MAX_QUADRATIC_BYTES}): scores or per-head masks are being "
            f"materialised (peaks {peaks})")
    else:
        assert e <= MAX_EXPONENT, (
            f"{tag}: peak memory grows as L^{e:.2f} (> L^{MAX_EXPONENT}), "
            f"peaks {peaks}")


# argv: model name, sliding window, bits (0: unquantized), greedy tokens,
# prompt seeds to try
_FALLBACK_GREEDY = r"""
import json, sys
import mlx.core as mx
from e2e_support import GREEDY_DTYPE, build_model, decisive_run
model = build_model(mx, sys.argv[1], sliding_window=int(sys.argv[2]),
                    bits=int(sys.argv[3]) or None, dtype=GREEDY_DTYPE)
print(json.dumps(decisive_run(mx, model, int(sys.argv[4]), int(sys.argv[5]))))
"""


def check_greedy_against(name: str, record_property, *, ref_env: dict, ref_label: str,
                         bits: int, tokens: int, seeds: int, prefix: str = "") -> None:
    """The greedy tokens and prompt logits of this process's path equal those
    of a reference process run with ``ref_env``, on the prompt that process
    found free of near-ties."""
    ref = run_json(_FALLBACK_GREEDY, [name, GREEDY_WINDOW, bits, tokens, seeds],
                   env=ref_env, timeout=900)
    assert not ref.get("no_decisive_seed"), (
        f"no prompt among the seeds gave a greedy run without near-ties "
        f"(best min margin {min(ref['margins']):.3f} < {MARGIN}); the "
        "comparison would be luck")
    model = build_model(mx, name, bits=bits or None, sliding_window=GREEDY_WINDOW,
                        dtype=GREEDY_DTYPE)
    run = greedy(mx, model, prompt_for(mx, ref["seed"]), len(ref["tokens"]))
    logit_err = rel_error(np.array(run["first_logits"]),
                          np.array(ref["first_logits"]))
    tag = f"{name} q{bits}" if bits else name
    record_property(f"{prefix}greedy_tokens_{name}", len(ref["tokens"]))
    record_property(f"{prefix}prompt_logits_rel_error_{name}", round(logit_err, 5))
    print(f"{tag}: seed {ref['seed']}, {ref_label} {ref['tokens']}, "
          f"patched {run['tokens']}, prompt logits rel. error {logit_err:.2e}")
    assert run["tokens"] == ref["tokens"], (
        f"{tag}: greedy tokens differ from {ref_label}'s: "
        f"patched {run['tokens']} vs {ref_label} {ref['tokens']}")
    assert logit_err <= 2e-2, f"{tag}: logits differ by {logit_err:.3g}"


@pytest.mark.parametrize("name", ["gemma4_31b_like", "qwen3_5_like"])
def test_greedy_identity(name, record_property):
    check_greedy_against(name, record_property, ref_env=fallback_env(), ref_label="fallback",
                         bits=0, tokens=GREEDY_TOKENS, seeds=GREEDY_SEEDS)


@pytest.mark.parametrize("name", ["gemma4_31b_like", "qwen3_5_like"])
def test_greedy_identity_quantized(name, record_property):
    why = qmm_routing_skip_reason(mx)
    if why:
        pytest.skip(why)
    check_greedy_against(name, record_property, ref_env={"MLX_CUDA_QMM_PATH": "upstream"},
                         ref_label="upstream qmm", bits=4, tokens=QMM_GREEDY_TOKENS,
                         seeds=QMM_GREEDY_SEEDS, prefix="qmm_")
