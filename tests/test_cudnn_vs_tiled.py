"""scripts/attn_harness/cudnn_vs_tiled.py: the pairs it counts, the path it
reads from MLX's trace, and the kCudnnWins entries it derives."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "attn_harness" / "cudnn_vs_tiled.py"


@pytest.fixture
def script(monkeypatch):
    spec = importlib.util.spec_from_file_location("cudnn_vs_tiled", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_visible_pairs(script):
    causal = script.Shape("c", 4, 4, "causal")
    assert causal.pairs() == 4 + 3 + 2 + 1
    # Bottom-right aligned: the 2 queries see 3 and 4 of the 4 keys.
    assert script.Shape("chunk", 2, 4, "causal").pairs() == 3 + 4
    window = script.Shape("w", 2048, 2048, "window")
    assert window.pairs() == sum(min(i + 1, script.WINDOW) for i in range(2048))


def test_the_last_trace_line_of_a_case_names_its_path(script):
    stderr = "\n".join([
        "[mlx-sdpa-route] path=fallback arch=sm_90 dtype=bfloat16 D=192",
        "[mlx-sdpa-route] path=tiled arch=sm_90 dtype=bfloat16 D=192",
        "@@end 192 causal 2k",
        "@@end 192 causal 8k",
        "[mlx-sdpa-route] path=cudnn arch=sm_90 dtype=bfloat16 D=256",
        "@@end 256 window 32k",
    ])
    assert script.routed_paths(stderr) == {
        (192, "causal 2k"): "tiled", (192, "causal 8k"): "?",
        (256, "window 32k"): "cudnn"}


def results(script, ms):
    """ms: {(path, head dim, shape): ms} for every shape of the script."""
    return [script.Result(path, d, s, t, None, path)
            for (path, d, s), t in ms.items()]


def test_cudnn_wins_a_kind_of_call_only_on_every_shape(script):
    causal = [s.name for s in script.SHAPES if not s.array_mask]
    window = [s.name for s in script.SHAPES if s.array_mask]
    ms = {}
    for d in (192, 256):
        for s in causal:
            ms[("tiled", d, s)] = 10.0
            ms[("cudnn", d, s)] = 9.0
        for s in window:
            ms[("tiled", d, s)] = 11.0
            ms[("cudnn", d, s)] = 174.0
    assert script.cudnn_wins(results(script, ms)) == {False: 256}
    # Losing one shape at 256 keeps cuDNN to 192 for that kind of call.
    ms[("cudnn", 256, causal[0])] = 12.0
    assert script.cudnn_wins(results(script, ms)) == {False: 192}
    # A path that did not take the call (no time) is no win.
    ms[("cudnn", 192, causal[-1])] = None
    assert script.cudnn_wins(results(script, ms)) == {}
