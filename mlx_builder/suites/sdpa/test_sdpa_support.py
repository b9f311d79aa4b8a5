"""The SDPA suites' own harness (sdpa_support), checked without MLX: the
float64 reference, error measures, masks, the L^e fit and the subprocess
JSON runner. Runs in the project's CI and in every `mlx-builder test`."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest
from sdpa_support import (
    causal_mask,
    fallback_env,
    fallback_lengths,
    fit_exponent,
    fit_quadratic_coefficient,
    make_mask,
    manifest_has_patch,
    reference_attention,
    rel_error,
    run_json,
    same_as_fallback,
    sample_rows,
    to_host,
    wheel_manifest,
)


@pytest.mark.parametrize("e", [1.0, 1.5, 2.0])
def test_fit_exponent_recovers_synthetic_power_laws(e):
    rng = np.random.default_rng(0)
    L = np.array([4096, 8192, 16384, 32768], float)
    y = 3e5 * L ** e * (1 + 0.01 * rng.standard_normal(4))
    assert fit_exponent(L, y) == pytest.approx(e, abs=0.02)


def test_fit_exponent_sees_a_linear_term_plus_a_quadratic_one():
    L = np.array([4096, 8192, 16384, 32768], float)
    linear = 2e5 * L
    assert fit_exponent(L, linear) <= 1.01
    assert fit_exponent(L, linear + 64 * L * L) > 1.6  # per-head scores
    with pytest.raises(ValueError):
        fit_exponent([1], [1])
    with pytest.raises(ValueError):
        fit_exponent([1, 2], [0, 5])


def test_fit_quadratic_coefficient():
    L = np.array([4096, 8192, 16384, 32768], float)
    y = 5e7 + 3e4 * L + 3.0 * L * L
    assert fit_quadratic_coefficient(L, y) == pytest.approx(3.0, rel=1e-6)


def _naive(q, k, v, scale, allowed):
    """One row at a time, the definition itself."""
    B, Hq, qL, _ = q.shape
    rep = Hq // k.shape[1]
    out = np.zeros((B, Hq, qL, v.shape[-1]))
    for b in range(B):
        for h in range(Hq):
            for i in range(qL):
                s = np.array([q[b, h, i] @ k[b, h // rep, j] * scale
                              for j in range(k.shape[2])])
                s = np.where(allowed[i], s, -np.inf)
                p = np.exp(s - s.max())
                out[b, h, i] = (p / p.sum()) @ v[b, h // rep]
    return out


def test_reference_gqa_and_bottom_right_causal():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, 4, 3, 8))
    k = rng.standard_normal((2, 2, 5, 8))
    v = rng.standard_normal((2, 2, 5, 6))
    allowed = causal_mask(3, 5)
    assert allowed.tolist()[0] == [True, True, True, False, False]
    ref = reference_attention(q, k, v, 0.3, "causal")
    assert np.allclose(ref, _naive(q, k, v, 0.3, allowed))
    rows = np.array([0, 2])
    part = reference_attention(q, k, v, 0.3, "causal", rows=rows)
    assert np.allclose(part, ref[:, :, rows])


def test_reference_masks_and_fully_masked_rows():
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((1, 2, 4, 8)) for _ in range(3))
    additive = rng.uniform(-2, 1, (4, 4))
    allowed = np.ones((4, 4), bool)
    masked = reference_attention(q, k, v, 0.5, additive)
    plain = reference_attention(q, k, v, 0.5, None)
    assert rel_error(masked, plain) > 1e-2
    dead = allowed.copy()
    dead[1] = False
    out = reference_attention(q, k, v, 0.5, dead)
    assert np.isnan(out[:, :, 1]).all() and np.isfinite(out[:, :, [0, 2, 3]]).all()


def test_rel_error_and_nan():
    ref = np.ones((2, 3))
    assert rel_error(ref * 1.01, ref) == pytest.approx(0.01)
    assert math.isinf(rel_error(np.full_like(ref, np.nan), ref))
    with pytest.raises(AssertionError):
        rel_error(np.ones(3), ref)


def test_same_as_fallback():
    fb = np.array([[1.0, np.nan], [2.0, 3.0]])
    assert same_as_fallback(fb.copy(), fb, 1e-3) == ""
    assert "NaN pattern" in same_as_fallback(np.array([[1.0, 0.0], [2.0, 3.0]]), fb, 1e-3)
    assert "finite values" in same_as_fallback(np.array([[1.5, np.nan], [2.0, 3.0]]),
                                               fb, 1e-3)
    assert "inf pattern" in same_as_fallback(np.array([[np.inf, np.nan], [2, 3]]), fb, 1)


@pytest.mark.parametrize("kind", ["bool", "window"])
def test_bool_masks_keep_a_key_in_every_row(kind):
    rng = np.random.default_rng(5)
    for qL, kL in ((1, 1), (7, 63), (63, 7), (65, 300)):
        if kind == "window" and qL > kL:
            with pytest.raises(ValueError):
                make_mask(kind, 2, 8, qL, kL, rng, window=16)
            continue
        mask = make_mask(kind, 2, 8, qL, kL, rng, window=16)
        assert mask.dtype == bool and mask.any(axis=-1).all()


def test_window_mask_is_bottom_right_and_bounded():
    mask = make_mask("window", 1, 1, 3, 6, np.random.default_rng(0), window=2)
    assert mask.astype(int).tolist() == [[0, 0, 1, 1, 0, 0],
                                         [0, 0, 0, 1, 1, 0],
                                         [0, 0, 0, 0, 1, 1]]
    assert make_mask("causal", 1, 1, 2, 2, None) == "causal"
    assert make_mask("none", 1, 1, 2, 2, None) is None
    with pytest.raises(ValueError):
        make_mask("odd", 1, 1, 2, 2, None)


def test_sample_rows():
    assert sample_rows(50) is None
    rows = sample_rows(4097, limit=40)
    assert rows[0] == 0 and rows[-1] == 4096 and len(set(rows)) == len(rows) == 40


def test_fallback_env_override():
    assert fallback_env({})["MLX_CUDA_SDPA_TILED"] == "0"
    assert fallback_env({"MLX_BUILDER_FALLBACK_ENV": "A=0, B=x"}) == {"A": "0", "B": "x"}
    with pytest.raises(ValueError):
        fallback_env({"MLX_BUILDER_FALLBACK_ENV": "A"})


def test_fallback_lengths_cap_by_memory():
    Ls = (4096, 8192, 16384, 32768)
    h200 = 143_771_000_000
    assert fallback_lengths(Ls, h200, 32) == [4096, 8192, 16384]
    assert fallback_lengths(Ls, 0, 32) == [4096, 8192]


def test_run_json_passes_env_and_reports_failures():
    got = run_json("import json, os, sys; print('noise'); "
                   "print(json.dumps([os.environ['X_T'], sys.argv[1]]))", ["a"],
                   env={"X_T": "1"})
    assert got == ["1", "a"]
    with pytest.raises(RuntimeError, match="boom"):
        run_json("raise SystemExit('boom')")
    with pytest.raises(RuntimeError, match="no JSON"):
        run_json("print('plain text')")


class _Lazy:
    """An array whose values exist only once mx.eval has run on it."""

    def __init__(self) -> None:
        self.evaluated = False

    def __array__(self, dtype=None, copy=None):
        assert self.evaluated, "converted before evaluation"
        return np.arange(3.0)


class _FakeMx:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    def eval(self, *arrays) -> None:
        if self.error is not None:
            raise self.error
        for a in arrays:
            a.evaluated = True


def test_to_host_evaluates_before_numpy_reads():
    assert to_host(_FakeMx(), _Lazy()).tolist() == [0.0, 1.0, 2.0]


def test_to_host_raises_what_evaluation_raises():
    with pytest.raises(ValueError, match="refused"):
        to_host(_FakeMx(ValueError("refused")), _Lazy())


def test_wheel_manifest_is_found_without_importing_mlx(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.delitem(sys.modules, "mlx", raising=False)
    pkg = tmp_path / "mlx"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise ImportError('must not be imported')\n")
    assert wheel_manifest() is None
    manifest = {"archs": ["90a"], "patches": [
        {"file": "common/0064-cuda-compile-qmm-sm90.patch"},
        {"file": "common/0063-cuda-keep-qmm-sm90-off.patch"}]}
    (pkg / "_mlx_builder_manifest.json").write_text(json.dumps(manifest))
    assert wheel_manifest() == manifest
    assert manifest_has_patch(manifest, "0064")
    assert not manifest_has_patch(manifest, "0065")
    assert not manifest_has_patch(manifest, "006")
    assert not manifest_has_patch({}, "0064")
