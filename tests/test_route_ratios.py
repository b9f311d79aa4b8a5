"""scripts/route_ratios.py: the table of measured paths and the labels of
what really ran (the timings themselves need a CUDA GPU)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "route_ratios.py"


@pytest.fixture(scope="module")
def rr():
    spec = importlib.util.spec_from_file_location("route_ratios", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rec(case, preferred, ran, ms):
    return {"case": case, "preferred": preferred, "ran": ran, "ms": ms}


def test_table_ratios_are_against_the_routed_path(rr):
    case = ["prefill", 256, 2048, 2048, "causal"]
    table = rr.table([
        rec(case, "default", "tiled", 2.0),
        rec(case, "cudnn", "cudnn", 1.0),
        rec(case, "tiled", "tiled", 2.2),   # same path as routed: not an "other"
        rec(case, "fallback", "fallback", 8.0),
    ])
    row = table.splitlines()[-1]
    assert "| tiled | 2.000 |" in row
    assert "cudnn 1.000 (0.50×)" in row and "fallback 8.000 (4.00×)" in row
    assert "tiled 2.2" not in row


def test_a_preferred_path_that_falls_through_is_labelled_by_what_ran(rr):
    case = ["prefill", 512, 2048, 2048, "causal"]
    table = rr.table([
        rec(case, "default", "tiled", 3.0),
        rec(case, "cudnn", "tiled", 3.1),   # cuDNN does not take D = 512
    ])
    row = table.splitlines()[-1]
    assert "cudnn" not in row


def test_failed_cases_and_worker_errors_leave_the_table_readable(rr):
    case = ["decode", 192, 1, 4096, "none"]
    table = rr.table([
        {"case": case, "preferred": "default", "ran": "?", "error": "boom"},
        rec(case, "fallback", "fallback", 0.2),
        {"preferred": "tiled", "error": "worker exited 1"},
    ])
    assert "| decode | 192 | 1 | 4096 | none |" in table
    assert "fallback 0.200" in table


def test_runs_are_known_paths_and_unknown_runs_are_refused(rr):
    paths = {"cudnn", "vector", "decode", "tiled", "fallback"}
    for name, env in rr.RUNS.items():
        assert env.get("MLX_CUDA_SDPA_PATH", "tiled") in paths, name
    proc = subprocess.run([sys.executable, str(SCRIPT), "--runs", "bogus"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown run(s) ['bogus']" in proc.stderr
