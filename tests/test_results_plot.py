"""scripts/results_plot.py: the through-MLX TFLOP/s figure of a results
folder, read from a device call's cases JSONL."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "results_plot.py"
RECORDED = ROOT / "docs" / "results" / "h200-2026-12-06b" / "mlx" / "call1-cases.jsonl"


@pytest.fixture(scope="module")
def rp():
    spec = importlib.util.spec_from_file_location("results_plot", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_cases(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def case(label, D, qL, kL, tflops, kind="prefill", kv=16):
    return {"label": label, "kind": kind, "D": D, "kv_heads": kv, "qL": qL,
            "kL": kL, "TFLOPs": tflops}


def test_prefill_by_length_in_order_with_gaps(rp, tmp_path):
    cases = write_cases(tmp_path / "c.jsonl", [
        case("default", 256, 16384, 16384, 640.0),
        case("default", 256, 2048, 2048, 275.0),
        case("default", 256, 8192, 8192, 575.0, kv=4),        # other KV heads
        case("default", 256, 2048, 32768, 594.0, kind="chunked"),
        case("default", 512, 32768, 32768, 465.0),           # other head dim
        case("torch-cudnn", 256, 32768, 32768, 639.0),       # other label
        {"label": "default", "kind": "prefill", "D": 256, "kv_heads": 16,
         "qL": 32768, "kL": 32768, "error": "out of memory"},  # no figure
    ])
    assert rp.prefill_tflops(cases, "default", 256) == [275.0, None, 640.0, None]
    assert rp.prefill_tflops(cases, "default", 256, kv_heads=4) == [None, 575.0, None, None]
    assert rp.prefill_tflops(cases, "torch-cudnn", 256) == [None, None, None, 639.0]


def test_recorded_call_gives_every_length_for_ours_and_cudnn(rp):
    ours = rp.prefill_tflops(RECORDED, "default", 256)
    cudnn = rp.prefill_tflops(RECORDED, "torch-cudnn", 256)
    assert all(v is not None and v > 0 for v in ours + cudnn)
    # head dim 512 has no torch cuDNN kernel: the call recorded none
    assert rp.prefill_tflops(RECORDED, "torch-cudnn", 512) == [None] * 4


def test_plot_writes_a_png(rp, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "f.png"
    rp.plot_mlx_tflops(RECORDED, out, "title")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_draws_a_folders_own_curves(rp, tmp_path):
    pytest.importorskip("matplotlib")
    cases = write_cases(tmp_path / "c.jsonl", [
        case("default", 256, 8192, 8192, 640.0),
        case("small-1blk", 256, 8192, 8192, 291.0),
        case("small-1blk", 512, 8192, 8192, 228.0),
    ])
    plain = rp.plot_mlx_tflops(cases, tmp_path / "a.png", "t")
    assert plain == [(256, "ours through MLX, waited")]
    extra = (*rp.CURVES, ("99 KB tiles", "small-1blk", "s--", "C6"))
    mine = rp.plot_mlx_tflops(cases, tmp_path / "b.png", "t", curves=extra)
    assert mine == [(256, "ours through MLX, waited"), (256, "99 KB tiles"),
                    (512, "99 KB tiles")]


def test_harness_readings_by_library_and_configuration(rp, tmp_path):
    (tmp_path / "CL_r1_hopper-cand15_d512_2048.json").write_text(json.dumps([
        {"D": 512, "Hkv": 16, "L": 2048, "qL": 2048, "ours_hopper": 369.0,
         "ours_hopper_ms": 0.4, "ours_cand15": None}]))
    (tmp_path / "CL_r2_hopper-cand15_d512_2048.json").write_text(json.dumps([
        {"D": 512, "Hkv": 16, "L": 2048, "qL": 2048, "ours_hopper": 359.0,
         "ours_cand15": 345.0}]))
    (tmp_path / "V_r1_hopper_d512_32768.json").write_text(json.dumps([
        {"D": 512, "Hkv": 4, "L": 32768, "qL": 2048, "ours_hopper": 540.0}]))
    assert rp.harness_readings(tmp_path) == {
        (512, 16, 2048, 2048, "CL.hopper"): [369.0, 359.0],
        (512, 16, 2048, 2048, "CL.cand15"): [345.0],
        (512, 4, 32768, 2048, "V.hopper"): [540.0],
    }


def harness_call(folder: Path) -> Path:
    """Two rounds of a call: 16 KV heads at 8k and 2k, 4 KV heads on the
    chunked step and at 32k; cand15 missing at 32k."""
    folder.mkdir()
    for r, scale in ((1, 1.0), (2, 1.1)):
        (folder / f"X_r{r}_hopper-cand15_d512_8192.json").write_text(json.dumps([
            {"D": 512, "Hkv": 16, "L": 8192, "qL": 8192,
             "ours_hopper": 500.0 * scale, "ours_cand15": 550.0 * scale},
            {"D": 512, "Hkv": 16, "L": 2048, "qL": 2048,
             "ours_hopper": 400.0 * scale, "ours_cand15": 360.0 * scale}]))
        (folder / f"X_r{r}_hopper-cand15_d512_32768_hkv4.json").write_text(json.dumps([
            {"D": 512, "Hkv": 4, "L": 32768, "qL": 2048,
             "ours_hopper": 520.0, "ours_cand15": 520.0},
            {"D": 512, "Hkv": 4, "L": 32768, "qL": 32768, "ours_hopper": 510.0}]))
    return folder


def test_ab_ratios_order_shapes_and_mark_missing_runs(rp, tmp_path):
    acc = rp.harness_readings(harness_call(tmp_path / "call1-json"))
    shapes, ratios = rp.ab_ratios(acc, "X.hopper", "X.cand15")
    assert shapes == [(512, 16, 2048, 2048), (512, 16, 8192, 8192),
                      (512, 4, 32768, 32768), (512, 4, 32768, 2048)]
    assert ratios == pytest.approx([0.9, 1.1, 0, 1.0])
    assert [rp.shape_label(s) for s in shapes] == ["2k", "8k", "32k\n4 kv", "2k×32k\n4 kv"]


def test_plot_ab_draws_each_panels_bars(rp, tmp_path):
    harness_call(tmp_path / "call1-json")
    out = tmp_path / "ab.png"
    drawn = rp.plot_ab(
        tmp_path, (("call 1", "call1-json", "X.hopper",
                    (("X.cand15", "candidate"), ("X.hopper", "itself"))),
                   ("call 1 again", "call1-json", "X.cand15", (("X.hopper", "back"),))),
        out, "title", "ratio")
    assert out.stat().st_size > 0
    assert [(panel, legend) for panel, legend, _ in drawn] == [
        ("call 1", "candidate"), ("call 1", "itself"), ("call 1 again", "back")]
    assert drawn[1][2] == [1.0, 1.0, 1.0, 1.0]
    assert drawn[2][2] == pytest.approx([1 / 0.9, 1 / 1.1, 1.0])
