"""The query-chunked SDPA fallback (patch 0010): same outputs, bounded memory.

Runs against the installed MLX (the wheel under test). MLX reads
MLX_SDPA_FALLBACK_CHUNK_BYTES once per process, so every budget runs in a
fresh interpreter (``_worker``) on the CPU stream, where SDPA always takes
the unfused fallback; the comparisons happen here, in NumPy.

Skipped with a reason when ``mlx.core`` does not import, when an
mlx-builder manifest lists the installed wheel's patches without 0010, or,
without a manifest, when the budget has no effect on peak memory (an MLX
without the patch, where chunked-vs-unchunked checks could not fail).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sdpa_support import fallback_env, manifest_has_patch, wheel_manifest

ENV = "MLX_SDPA_FALLBACK_CHUNK_BYTES"
PATCH_NUMBER = "0010"
# Upstream's test_fast_sdpa criterion: max(|a - b| - atol * |b|) <= atol.
ATOL = {"float32": 1e-5, "float16": 3e-4, "bfloat16": 5e-3}
DTYPES = ("float32", "float16", "bfloat16")
MASKS = ("none", "causal", "additive", "additive_2d", "bool", "bool_2d",
         "causal+sinks", "bool+sinks")
HEADS = ((4, 4), (4, 2), (4, 1))           # (query heads, kv heads): MHA, GQA, MQA
SHAPES = ((37, 37), (37, 101), (50, 20))   # (qL, kL): odd, so chunks are ragged
CASES = [c for c in itertools.product(DTYPES, MASKS, HEADS, SHAPES)
         if not (c[1].startswith("causal") and c[3][0] > c[3][1])]
# Budgets in bytes: 0 disables chunking, 1 gives one query row per chunk,
# 20000 a few rows per chunk with a smaller last one.
BUDGETS = {"off": "0", "rows": "1", "ragged": "20000"}

_WORKER = r'''
import json, sys
import numpy as np
import mlx.core as mx

spec = json.loads(sys.argv[1])

def inputs(i, dtype, mask_kind, hq, hkv, ql, kl, B=2, D=32):
    r = np.random.default_rng(i)
    dt = getattr(mx, dtype)
    q, k, v = (mx.array(r.standard_normal(s).astype(np.float32)).astype(dt)
               for s in ((B, hq, ql, D), (B, hkv, kl, D), (B, hkv, kl, D)))
    base = mask_kind.split("+")[0]
    mask = {"none": None, "causal": "causal"}.get(base)
    if base.startswith("additive"):
        shape = (B, hq, ql, kl) if base == "additive" else (ql, kl)
        mask = mx.array(r.uniform(-2, 1, shape).astype(np.float32)).astype(dt)
    elif base.startswith("bool"):
        shape = (B, 1, ql, kl) if base == "bool" else (ql, kl)
        mask = mx.array(r.uniform(size=shape) < 0.6)
    sinks = None
    if mask_kind.endswith("+sinks"):
        sinks = mx.array(r.standard_normal(hq).astype(np.float32)).astype(dt)
    return q, k, v, mask, sinks, D ** -0.5

def sdpa(q, k, v, mask, sinks, scale):
    return mx.fast.scaled_dot_product_attention(
        q, k, v, scale=scale, mask=mask, sinks=sinks, stream=mx.cpu)

def host(a):
    # Evaluated first: an error while NumPy's conversion evaluates would
    # end the process instead of raising.
    mx.eval(a)
    return np.array(a)

def f32(a):
    return host(a.astype(mx.float32))

out = {}
if spec["mode"] == "grid":
    # [index, case] pairs: the index seeds the case's inputs and keys its output.
    for i, (dtype, mask_kind, (hq, hkv), (ql, kl)) in spec["cases"]:
        out[str(i)] = f32(sdpa(*inputs(i, dtype, mask_kind, hq, hkv, ql, kl)))
elif spec["mode"] == "memory":
    res = {}
    for L in spec["lengths"]:
        q, k, v, _, _, scale = inputs(0, "float32", "none", 4, 4, L, L, B=1)
        mx.eval(q, k, v)
        base = mx.get_active_memory()
        mx.reset_peak_memory()
        o = sdpa(q, k, v, "causal", None, scale)
        mx.eval(o)
        res[str(L)] = {"peak_extra": mx.get_peak_memory() - base,
                       "out": o.nbytes, "scores": 4 * L * L * 4}
    print(json.dumps(res))
    sys.exit(0)
elif spec["mode"] == "gpu":
    # A long-context head-dim-512 shape on the GPU stream: the caller forces
    # the fallback.
    if not (getattr(mx, "cuda", None) and mx.cuda.is_available()):
        print(json.dumps({"skip": "no CUDA device"}))
        sys.exit(0)
    B, hq, hkv, L, D = spec["shape"]
    r = np.random.default_rng(9)
    q, k, v = (mx.array(r.standard_normal(sh).astype(np.float32)).astype(mx.bfloat16)
               for sh in ((B, hq, L, D), (B, hkv, L, D), (B, hkv, L, D)))
    o = mx.fast.scaled_dot_product_attention(q, k, v, scale=D ** -0.5, mask="causal")
    # bfloat16 -> float16 is exact for attention outputs (|o| <= max |v|).
    out["o"] = host(o.astype(mx.float16))
elif spec["mode"] == "transforms":
    q, k, v, mask, sinks, scale = inputs(7, "float32", "causal+sinks", 4, 2, 37, 101)
    loss = lambda q, k, v: sdpa(q, k, v, mask, sinks, scale).sum()
    for name, g in zip("qkv", mx.grad(loss, argnums=(0, 1, 2))(q, k, v)):
        out["grad_" + name] = f32(g)
    out["vmap"] = f32(mx.vmap(lambda q, k, v: sdpa(q, k, v, mask, sinks, scale))(
        q[:, None], k[:, None], v[:, None]))
    out["compile"] = f32(mx.compile(lambda q, k, v: sdpa(q, k, v, mask, sinks, scale))(q, k, v))
np.savez(spec["out"], **out)
print(json.dumps({"saved": len(out)}))
'''


def _worker(spec: dict, budget: str | None,
            extra_env: dict[str, str] | None = None) -> dict:
    env = dict(os.environ)
    env.update(extra_env or {})
    env.pop(ENV, None)
    if budget is not None:
        env[ENV] = budget
    proc = subprocess.run([sys.executable, "-c", _WORKER, json.dumps(spec)],
                          capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        raise AssertionError(f"worker ({ENV}={budget}) failed:\n"
                             + "\n".join(proc.stderr.splitlines()[-20:]))
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def patched() -> None:
    probe = subprocess.run([sys.executable, "-c", "import mlx.core"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("needs an installed MLX: `import mlx.core` failed: "
                    + (probe.stderr.strip().splitlines() or ["?"])[-1])
    manifest = wheel_manifest()
    if manifest is not None:
        if not manifest_has_patch(manifest, PATCH_NUMBER):
            pytest.skip("the installed mlx-builder wheel's manifest lists no "
                        f"{PATCH_NUMBER}-* patch (chunked SDPA fallback)")
        return
    mem = _worker({"mode": "memory", "lengths": [512]}, "65536")["512"]
    if mem["peak_extra"] >= mem["scores"]:
        pytest.skip(f"the installed MLX lacks the chunked SDPA fallback: {ENV}"
                    f"=65536 left the peak at {mem['peak_extra']} bytes "
                    f"(scores {mem['scores']})")


def _grid_cases_run_here(session: pytest.Session) -> list[list]:
    """[index, case] for every case a test of this process reads from the
    grid: all of them in one process, a shard's share of them under
    `mlx-builder test --jobs` (the shards would otherwise each run the whole
    grid)."""
    here = Path(__file__)
    wanted = {item.callspec.params["index"] for item in session.items
              if getattr(item, "path", None) == here and hasattr(item, "callspec")
              and "grid" in item.fixturenames}
    return [[i, CASES[i]] for i in sorted(wanted)]


@pytest.fixture(scope="module")
def grid(patched, request, tmp_path_factory) -> dict[str, dict[str, np.ndarray]]:
    folder = tmp_path_factory.mktemp("chunked")
    cases = _grid_cases_run_here(request.session)
    out = {}
    for name, budget in BUDGETS.items():
        path = folder / f"{name}.npz"
        _worker({"mode": "grid", "cases": cases, "out": str(path)}, budget)
        with np.load(path) as data:
            out[name] = {k: data[k] for k in data.files}
    return out


def _close(a: np.ndarray, b: np.ndarray, dtype: str) -> float:
    """How far past upstream's tolerance ``a`` is from ``b`` (<= 0: within)."""
    atol = ATOL[dtype]
    return float(np.max(np.abs(a - b) - atol * np.abs(b)) - atol)


@pytest.mark.parametrize("budget", ["rows", "ragged"])
@pytest.mark.parametrize("index,case", list(enumerate(CASES)),
                         ids=["-".join(map(str, c)).replace(" ", "") for c in CASES])
def test_chunked_matches_unchunked(grid, budget, index, case):
    chunked, full = grid[budget][str(index)], grid["off"][str(index)]
    assert chunked.shape == full.shape
    assert np.isfinite(chunked).all()
    assert _close(chunked, full, case[0]) <= 0, (
        f"max abs diff {np.max(np.abs(chunked - full)):.3g}")


def _reference(index: int, case) -> np.ndarray:
    """float64 attention of the worker's inputs, rebuilt with NumPy."""
    _dtype, mask_kind, (hq, hkv), (ql, kl) = case
    r = np.random.default_rng(index)
    B, D = 2, 32
    q, k, v = (r.standard_normal(s) for s in ((B, hq, ql, D), (B, hkv, kl, D),
                                              (B, hkv, kl, D)))
    k, v = np.repeat(k, hq // hkv, axis=1), np.repeat(v, hq // hkv, axis=1)
    scores = np.einsum("bhqd,bhkd->bhqk", q, k) * D ** -0.5
    base = mask_kind.split("+")[0]
    if base == "causal":
        keep = np.arange(ql)[:, None] + kl - ql >= np.arange(kl)[None, :]
        scores = np.where(keep, scores, -np.inf)
    elif base.startswith("additive"):
        shape = (B, hq, ql, kl) if base == "additive" else (ql, kl)
        scores = scores + r.uniform(-2, 1, shape).astype(np.float32)
    elif base.startswith("bool"):
        shape = (B, 1, ql, kl) if base == "bool" else (ql, kl)
        scores = np.where(r.uniform(size=shape) < 0.6, scores, -np.inf)
    if mask_kind.endswith("+sinks"):
        sinks = np.broadcast_to(r.standard_normal(hq)[None, :, None, None],
                                (B, hq, ql, 1))
        scores = np.concatenate([sinks, scores], axis=-1)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = scores / scores.sum(axis=-1, keepdims=True)
    if mask_kind.endswith("+sinks"):
        probs = probs[..., 1:]
    return np.einsum("bhqk,bhkd->bhqd", probs, v)


@pytest.mark.parametrize("index,case", [(i, c) for i, c in enumerate(CASES)
                                        if c[0] == "float32"])
def test_chunked_matches_float64_reference(grid, index, case):
    ref = _reference(index, case)
    # Rows whose every key is masked out have no defined reference.
    defined = np.isfinite(ref).all(axis=-1, keepdims=True)
    got = np.where(defined, grid["rows"][str(index)], 0.0)
    assert _close(got, np.where(defined, ref, 0.0), "bfloat16") <= 0


def test_peak_memory_is_bounded_by_the_budget(patched):
    budget = 1 << 20
    lengths = [1024, 2048]
    chunked = _worker({"mode": "memory", "lengths": lengths}, str(budget))
    full = _worker({"mode": "memory", "lengths": lengths}, "0")
    for L in map(str, lengths):
        c, f = chunked[L], full[L]
        # Unchunked, the float32 scores are materialized; chunked, one
        # chunk's scores plus the output (and small per-chunk arrays).
        assert f["peak_extra"] >= f["scores"], (L, f)
        assert c["peak_extra"] <= 2 * budget + 2 * c["out"], (L, c, f)


def test_below_the_budget_nothing_changes(patched, tmp_path):
    cases = [[i, c] for i, c in enumerate(CASES) if c[0] == "float16"]
    outs = {}
    for budget in ("0", None, str(1 << 30)):   # off, default, above the scores
        path = tmp_path / f"{budget}.npz"
        _worker({"mode": "grid", "cases": cases, "out": str(path)}, budget)
        with np.load(path) as data:
            outs[budget] = {k: data[k] for k in data.files}
    for key, off in outs["0"].items():
        np.testing.assert_array_equal(outs[None][key], off)
        np.testing.assert_array_equal(outs[str(1 << 30)][key], off)


@pytest.mark.gpu
def test_gpu_chunked_matches_unchunked_at_4096(patched, tmp_path):
    """head_dim 512, 32 query / 16 KV heads, 4096 causal tokens on
    the GPU with the fused kernels off; 64 MiB chunks (a few hundred query
    rows each) against the unchunked fallback."""
    outs = {}
    for budget in ("0", str(64 << 20)):
        path = tmp_path / f"gpu{budget}.npz"
        spec = {"mode": "gpu", "shape": [1, 32, 16, 4096, 512], "out": str(path)}
        # fallback_env() turns the fused kernels off; _worker sets the budget.
        res = _worker(spec, budget, extra_env=fallback_env())
        if "skip" in res:
            pytest.skip(f"needs a CUDA GPU: {res['skip']}")
        with np.load(path) as data:
            outs[budget] = data["o"].astype(np.float32)
    chunked, full = outs[str(64 << 20)], outs["0"]
    assert np.isfinite(chunked).all() and np.isfinite(full).all()
    assert _close(chunked, full, "bfloat16") <= 0


def test_transforms_see_the_unchunked_graph(patched, tmp_path):
    """grad, vmap and compile work with a tiny budget and give the same
    values as with chunking off (the fallback is not chunked while tracing)."""
    outs = {}
    for budget in ("0", "1"):
        path = tmp_path / f"t{budget}.npz"
        _worker({"mode": "transforms", "out": str(path)}, budget)
        with np.load(path) as data:
            outs[budget] = {k: data[k] for k in data.files}
    assert sorted(outs["1"]) == ["compile", "grad_k", "grad_q", "grad_v", "vmap"]
    for key, off in outs["0"].items():
        assert np.isfinite(off).all(), key
        np.testing.assert_array_equal(outs["1"][key], off, err_msg=key)


if __name__ == "__main__":  # pragma: no cover - manual runs
    sys.exit(pytest.main([__file__, "-q", *sys.argv[1:]]))
