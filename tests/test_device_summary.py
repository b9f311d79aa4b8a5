"""scripts/device_summary.py: the printed lines of a device call's JSON
output, checked against a recorded call (session 18's s18a, whose
harness.txt was printed on the H200 from the same JSON files)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "device_summary.py"
S18A = ROOT / "docs" / "results" / "h200-2026-12-05" / "harness" / "s18a"


@pytest.fixture(scope="module")
def ds():
    spec = importlib.util.spec_from_file_location("device_summary", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_harness_matches_the_recorded_call():
    files = [str(p) for p in S18A.glob("hb_*.json")]
    assert files
    out = subprocess.run([sys.executable, str(SCRIPT), "harness", *files],
                         capture_output=True, text=True, check=True).stdout
    assert out == (S18A / "harness.txt").read_text()


def test_harness_line_keeps_figures_and_drops_case_keys(ds, tmp_path):
    path = tmp_path / "hb_d256_1.json"
    path.write_text(json.dumps([{"D": 256, "Hkv": 16, "L": 8192, "qL": 8192,
                                 "q_tile_groups": 4, "ours_hopper": 612.34,
                                 "ours_hopper_ms": 3.1, "torch_cudnn": 660.0}]))
    assert ds.harness_lines(str(path)) == [
        "d256_1 256 16 8192 hopper 612.3 torch_cudnn 660.0"]


def test_harness_tag_keeps_names_without_the_prefix(ds, tmp_path):
    path = tmp_path / "G_r2_hopper_d512_8192.json"
    path.write_text(json.dumps([{"D": 512, "Hkv": 4, "L": 8192,
                                 "ours_hopper": 480.0}]))
    assert ds.harness_lines(str(path)) == [
        "G_r2_hopper_d512_8192 512 4 8192 hopper 480.0"]


def test_case_lines_cover_each_kind_of_record(ds):
    base = {"label": "default", "kind": "prefill", "D": 256, "kv_heads": 16,
            "qL": 8192, "kL": 8192}
    assert ds.case_line({**base, "ms": 4.0, "TFLOPs": 563.4,
                         "peak_extra_gib": 0.5}) == (
        "default  prefill 256 16 8192 8192 4.000 ms 563 TF/s peak+0.50")
    assert ds.case_line({**base, "kind": "decode", "qL": 1, "ms": 0.42,
                         "TB_s": 2.5, "backend": "x"}) == (
        "default x decode 256 16 1 8192 0.420 ms 2.50 TB/s ")
    assert ds.case_line({**base, "error": "out of memory " * 10}).endswith(
        "out of memory out of memory out of memory out of memory out  ")
    assert ds.case_line({"label": "q8", "kind": "floor", "ms": 0.032}) == (
        "q8 floor 32.0 us")


def test_cases_reads_json_lines_and_skips_blank_ones(ds, tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps({"label": "f", "kind": "floor", "ms": 0.01})
                    + "\n\n")
    assert ds.case_lines(str(path)) == ["f floor 10.0 us"]
