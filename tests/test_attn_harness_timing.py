"""scripts/attn_harness/run.py's interleaved timing: every configuration
timed once per round, the order rotated each round, configurations a head
dim lacks left out. torch's CUDA events are replaced by a clock that
advances by what each run says it took, so the medians can be checked."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "attn_harness" / "run.py"


class Clock:
    """torch.cuda's Event and synchronize over a clock in ms."""

    def __init__(self):
        self.now = 0.0
        clock = self

        class Event:
            def __init__(self, enable_timing=False):
                self.at = None

            def record(self):
                self.at = clock.now

            def elapsed_time(self, end):
                return end.at - self.at

        self.cuda = types.SimpleNamespace(Event=Event, synchronize=lambda: None)


@pytest.fixture
def harness(monkeypatch):
    clock = Clock()
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=clock.cuda))
    spec = importlib.util.spec_from_file_location("attn_harness_run", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    # Its dataclasses look their module up by name.
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module, clock


def test_each_configuration_once_per_round_in_rotated_order(harness):
    run, clock = harness
    order = []

    def config(name, ms):
        def fn():
            order.append(name)
            clock.now += ms
        return fn

    medians = run._time_interleaved(
        {"a": config("a", 1.0), "b": config("b", 2.0), "c": config("c", 3.0)},
        warmup=1, iters=3)
    assert medians == {"a": 1.0, "b": 2.0, "c": 3.0}
    # One warmup run each, then rounds starting at a, b, c in turn.
    assert order == ["a", "b", "c",
                     "a", "b", "c", "b", "c", "a", "c", "a", "b"]


def test_median_of_the_rounds(harness):
    run, clock = harness
    taken = iter([9.0, 5.0, 1.0, 7.0, 3.0])

    def fn():
        clock.now += next(taken)

    assert run._time_interleaved({"x": fn}, warmup=0, iters=5) == {"x": 5.0}


def test_a_configuration_the_head_dim_lacks_is_left_out(harness):
    run, clock = harness
    calls = []

    def missing():
        raise LookupError("no tiling")

    def present():
        calls.append(1)
        clock.now += 4.0

    medians = run._time_interleaved(
        {"missing": missing, "present": present}, warmup=2, iters=3)
    assert medians == {"present": 4.0}
    assert len(calls) == 5
    # A head dim with none of the configurations asked for gets no figures.
    assert run._time_interleaved({"missing": missing}, warmup=2, iters=3) == {}


def test_calls_queued_per_event_get_their_share(harness):
    run, clock = harness
    calls = []

    def fn():
        calls.append(1)
        clock.now += 2.0

    assert run._time_interleaved({"x": fn}, warmup=1, iters=3, per_event=4) == {"x": 2.0}
    assert len(calls) == 1 + 3 * 4
