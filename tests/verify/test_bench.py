"""mlx_builder.verify.bench, plots and the bench workers, without a GPU or MLX:
metrics, the JSON-lines protocol, crash recovery, reports and plots. The
real mlx_worker.py runs against a NumPy stand-in for mlx.core."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from mlx_builder.verify import bench, plots
from mlx_builder.verify.workers import _common

SMALL = bench.BenchConfig(dims=(64, 256), prefill_lengths=(128, 256),
                          decode_lengths=(512,), heads=4, kv_heads=2, warmup=1, iters=2)


def test_config_cases_and_job():
    assert SMALL.cases() == [["prefill", 64, 128, 128], ["prefill", 64, 256, 256],
                             ["decode", 64, 1, 512], ["prefill", 256, 128, 128],
                             ["prefill", 256, 256, 256], ["decode", 256, 1, 512]]
    job = SMALL.job("patched", ["flash"])
    assert job["label"] == "patched" and job["backends"] == ["flash"]
    assert job["heads"] == 4 and job["kv_heads"] == 2 and len(job["cases"]) == 6
    json.dumps(job)


def test_layer_cases_follow_the_sdpa_ones_and_reach_the_job():
    config = bench.BenchConfig(dims=(64,), prefill_lengths=(128,), decode_lengths=(),
                               qmm_shapes=((5376, 8192), (8192, 5376)), qmm_rows=(1, 2048),
                               qmm_bits=8, qmm_group=32, moe_shapes=((2048, 768),),
                               moe_tokens=(1, 2048), moe_experts=64, moe_top_k=4)
    assert config.cases() == [["prefill", 64, 128, 128],
                              ["qmm", 5376, 1, 8192], ["matmul", 5376, 1, 8192],
                              ["qmm", 5376, 2048, 8192], ["matmul", 5376, 2048, 8192],
                              ["qmm", 8192, 1, 5376], ["matmul", 8192, 1, 5376],
                              ["qmm", 8192, 2048, 5376], ["matmul", 8192, 2048, 5376],
                              ["gather_qmm", 2048, 1, 768], ["gather_mm", 2048, 1, 768],
                              ["gather_qmm", 2048, 2048, 768], ["gather_mm", 2048, 2048, 768]]
    job = config.job("patched")
    assert job["qmm_bits"] == 8 and job["qmm_group"] == 32
    assert job["moe_experts"] == 64 and job["moe_top_k"] == 4
    default = bench.BenchConfig()
    assert default.qmm_shapes == () and default.moe_shapes == ()  # none unless asked for


def test_parse_qmm_shapes():
    assert bench.parse_qmm_shapes("5376:8192, 21504:5376") == ((5376, 8192), (21504, 5376))
    assert bench.parse_qmm_shapes("gemma4-31b") == bench.QMM_PRESETS["gemma4-31b"]
    assert len(bench.parse_qmm_shapes("gemma4-31b")) == 6
    assert bench.parse_qmm_shapes("") == ()
    for bad in ("5376", "5376:x", "a:b", "llama"):
        with pytest.raises(ValueError, match="K:N"):
            bench.parse_qmm_shapes(bad)


def test_parse_moe():
    preset = bench.parse_moe("qwen3-30b-a3b")
    assert preset == bench.MOE_PRESETS["qwen3-30b-a3b"]
    assert (preset.experts, preset.top_k) == (128, 8) and len(preset.shapes) == 2
    assert bench.parse_moe("qwen3-30b-a3b", top_k=2).top_k == 2  # the options override
    own = bench.parse_moe("2048:768, 768:2048", experts=64)
    assert own == bench.MoeLayers(((2048, 768), (768, 2048)), 64, 8)
    assert bench.parse_moe("").shapes == ()
    for bad in ("2048", "2048:x", "mixtral"):
        with pytest.raises(ValueError, match="K:N"):
            bench.parse_moe(bad)
    with pytest.raises(ValueError, match="zero"):
        bench.parse_moe("0:768")
    with pytest.raises(ValueError, match="top-k 9 of 8 experts"):
        bench.parse_moe("2048:768", experts=8, top_k=9)


def test_expert_metrics_count_each_picked_expert_once():
    job = {"dtype": "bfloat16", "qmm_bits": 4, "qmm_group": 64, "moe_experts": 128,
           "moe_top_k": 8}
    expert = 768 * 2048 / 2 + 2 * 768 * (2048 // 64) * 2  # 4-bit [768, 2048] with scales
    one = _common.metrics(job, "gather_qmm", 2048, 1, 768, 0.01, 0)
    assert one["tbps"] == pytest.approx(8 * expert / 0.01e-3 / 1e12)  # its 8 experts
    many = _common.metrics(job, "gather_qmm", 2048, 2048, 768, 0.2, 0)
    assert many["tbps"] == pytest.approx(128 * expert / 0.2e-3 / 1e12)  # all 128, once
    assert many["tflops"] == pytest.approx(2 * 2048 * 8 * 768 * 2048 / 0.2e-3 / 1e12)
    dense = _common.metrics(job, "gather_mm", 2048, 4, 768, 0.05, 0)
    assert dense["tbps"] == pytest.approx(32 * 768 * 2048 * 2 / 0.05e-3 / 1e12)


def test_parse_variant():
    assert bench.parse_variant("fallback:MLX_CUDA_SDPA_TILED=0") == (
        "fallback", {"MLX_CUDA_SDPA_TILED": "0"})
    assert bench.parse_variant("gb10:A=1, B=2")[1] == {"A": "1", "B": "2"}
    for bad in ("noenv", "x:A", ":A=1"):
        with pytest.raises(ValueError):
            bench.parse_variant(bad)


def test_metrics_formulas():
    # causal prefill: 4·B·H·L²·D/2; 32 heads, L=8192, D=256 at 1 ms
    assert _common.prefill_flops(1, 32, 8192, 8192, 256) == 4 * 32 * 8192**2 * 256 / 2
    job = {"batch": 1, "heads": 32, "kv_heads": 16, "dtype": "bfloat16"}
    m = _common.metrics(job, "prefill", 256, 8192, 8192, 1.0, 16)
    assert m["tflops"] == pytest.approx(4 * 32 * 8192**2 * 256 / 2 / 1e-3 / 1e12)
    # decode: K and V once, 16 KV heads, kL=131072, D=256, bf16 at 0.72 ms
    d = _common.metrics(job, "decode", 256, 1, 131072, 0.72, 16)
    assert d["tbps"] == pytest.approx(2 * 16 * 131072 * 256 * 2 / 0.72e-3 / 1e12)
    assert d["tflops"] is None and m["tbps"] is None


def test_linear_metrics_count_the_weights_once():
    job = {"dtype": "bfloat16", "qmm_bits": 4, "qmm_group": 64}
    # 2048 x 5376 -> 43008 at 2 ms; 4-bit weights with bf16 scales and biases
    q = _common.metrics(job, "qmm", 5376, 2048, 43008, 2.0, 0)
    assert q["tflops"] == pytest.approx(2 * 2048 * 43008 * 5376 / 2e-3 / 1e12)
    wbytes = 43008 * 5376 / 2 + 2 * 43008 * (5376 // 64) * 2
    assert q["tbps"] == pytest.approx(wbytes / 2e-3 / 1e12)
    d = _common.metrics(job, "matmul", 5376, 1, 43008, 0.5, 0)
    assert d["tbps"] == pytest.approx(43008 * 5376 * 2 / 0.5e-3 / 1e12)


def test_classify_and_median():
    assert _common.classify(RuntimeError("cudaMallocAsync failed: out of memory")) == "oom"
    assert _common.classify(RuntimeError("No available kernel. Aborting")) == "unsupported"
    assert _common.classify(ValueError("shapes differ")) == "error"
    calls = []
    assert _common.median_ms(lambda: calls.append(1), 2, 5) >= 0
    assert len(calls) == 7


def test_per_call_ms_divides_a_round_of_queued_calls(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(_common.time, "perf_counter", lambda: clock[0])
    issued, waits = [], []

    def wait():
        waits.append(len(issued))
        clock[0] += 1.0  # every round takes one second, whatever its size

    job = {"warmup": 1, "iters": 3, "queue": 4}
    assert _common.per_call_ms(lambda: issued.append(1), wait, job) == pytest.approx(250.0)
    assert waits == [4, 8, 12, 16]  # one wait per round of four
    job["queue"] = 1
    assert _common.per_call_ms(lambda: issued.append(1), wait, job) == pytest.approx(1000.0)


def test_queue_reaches_the_job_and_the_report_header():
    from dataclasses import asdict, replace
    queued = replace(SMALL, queue=8)
    assert queued.job("patched")["queue"] == 8 and SMALL.job("patched")["queue"] == 1
    result = fake_result()
    assert "each call waited for (latency)" in bench.markdown_report(result)
    result["config"] = {**result["config"], "queue": 8}
    md = bench.markdown_report(result)
    assert "8 calls queued per wait (time per call: device throughput)" in md
    # bench.json files written before --queue existed read as latency runs
    old = fake_result()
    del old["config"]["queue"]
    assert "each call waited for" in bench.markdown_report(old)
    assert asdict(queued)["queue"] == 8


def _lines(text: str) -> list[dict]:
    return [json.loads(x) for x in text.splitlines() if x.strip()]


def test_run_cases_protocol_and_oom_skip(capsys):
    job = SMALL.job("x")

    def fake(backend, mode, D, qL, kL):
        if D == 256 and mode == "prefill" and kL >= 128:
            raise RuntimeError("[malloc] out of memory")
        if mode == "decode" and D == 64:
            raise ValueError("no fused kernel is available")
        return {"ms": 2.0, "peak_bytes": 1 << 30, "kv_heads_read": 2}

    # The out-of-memory ends the process (cases remain); the parent starts a
    # fresh one for the rest and tells it which lengths ran out of memory.
    with pytest.raises(SystemExit) as stop:
        _common.run_cases(job, ["mlx"], fake)
    assert stop.value.code == _common.RESTART_EXIT
    msgs = _lines(capsys.readouterr().out)
    assert "done" not in [m["type"] for m in msgs]
    rest = {**job, "cases": job["cases"][4:], "oom_at": [["prefill", 256, 128]]}
    _common.run_cases(rest, ["mlx"], fake)
    msgs += _lines(capsys.readouterr().out)
    assert msgs[-1] == {"type": "done"}
    results = [m for m in msgs if m["type"] == "result"]
    status = {(r["mode"], r["D"], r["kL"]): r["status"] for r in results}
    assert status == {("prefill", 64, 128): "ok", ("prefill", 64, 256): "ok",
                      ("decode", 64, 512): "unsupported",
                      ("prefill", 256, 128): "oom", ("prefill", 256, 256): "skipped",
                      ("decode", 256, 512): "ok"}
    ok = results[0]
    assert ok["peak_gib"] == 1.0 and ok["tflops"] > 0 and ok["label"] == "x"
    starts = [m for m in msgs if m["type"] == "start"]
    assert len(starts) == 5  # the skipped case never starts


def test_out_of_memory_as_the_last_case_ends_the_worker_normally(capsys):
    job = {**SMALL.job("x"), "cases": [["prefill", 64, 128, 128]]}

    def oom(*args):
        raise RuntimeError("[malloc] out of memory")

    _common.run_cases(job, ["mlx"], oom)
    msgs = _lines(capsys.readouterr().out)
    assert [m["type"] for m in msgs] == ["start", "result", "done"]


FAKE_WORKER = '''
import os, sys
sys.path.insert(0, {workers!r})
from _common import emit, load_job, run_cases
job = load_job(sys.argv)
if os.environ.get("DIE_AT_IMPORT"):
    sys.exit(3)
emit({{"type": "meta", "framework": "mlx", "label": job["label"], "version": "9",
      "device": "Fake GPU"}})
FAILED = []
def fake(backend, mode, D, qL, kL):
    if mode == "prefill" and D == 64 and kL == 256:
        os._exit(134)  # an abort inside the framework
    if FAILED or (os.environ.get("OOM_AT") == f"{{mode}}{{D}}" and kL >= 128):
        FAILED.append(1)  # like MLX: every allocation after an OOM fails
        raise RuntimeError("[malloc] out of memory")
    return {{"ms": 1.0, "peak_bytes": kL * 1024, "kv_heads_read": 2}}
run_cases(job, job["backends"] or ["mlx"], fake)
'''


@pytest.fixture
def fake_script(tmp_path):
    path = tmp_path / "fake_worker.py"
    path.write_text(FAKE_WORKER.format(workers=str(bench.WORKERS)))
    return path


def test_worker_crash_is_recorded_and_the_rest_still_runs(fake_script, tmp_path):
    run = bench.Run("patched", "mlx", sys.executable, script_path=fake_script)
    seen = []
    records, meta = bench.run_worker(run, SMALL, tmp_path / "w.log", on_record=seen.append)
    assert meta["device"] == "Fake GPU"
    status = {(r["mode"], r["D"], r["kL"]): r["status"] for r in records}
    assert status[("prefill", 64, 256)] == "crashed"
    assert "exited with 134" in next(r["error"] for r in records if r["status"] == "crashed")
    assert sum(s == "ok" for s in status.values()) == 5 and len(records) == 6 == len(seen)


def test_a_fresh_worker_takes_the_cases_after_an_out_of_memory(fake_script, tmp_path):
    run = bench.Run("patched", "mlx", sys.executable, {"OOM_AT": "prefill256"},
                    script_path=fake_script)
    records, _ = bench.run_worker(run, SMALL, tmp_path / "w.log")
    status = {(r["mode"], r["D"], r["kL"]): r["status"] for r in records}
    assert status == {("prefill", 64, 128): "ok", ("prefill", 64, 256): "crashed",
                      ("decode", 64, 512): "ok",
                      ("prefill", 256, 128): "oom", ("prefill", 256, 256): "skipped",
                      ("decode", 256, 512): "ok"}
    assert len(records) == 6


def test_worker_that_dies_before_any_case(fake_script, tmp_path):
    run = bench.Run("patched", "mlx", sys.executable, {"DIE_AT_IMPORT": "1"},
                    script_path=fake_script)
    records, meta = bench.run_worker(run, SMALL, tmp_path / "w.log")
    assert meta == {} and len(records) == 6
    assert {r["status"] for r in records} == {"crashed"}


def test_torch_style_run_gets_one_worker_per_backend(fake_script, tmp_path):
    config = bench.BenchConfig(dims=(128,), prefill_lengths=(128,), decode_lengths=(512,))
    run = bench.Run("torch", "torch", sys.executable, backends=("flash", "math"),
                    script_path=fake_script)
    result = bench.collect([run], config, tmp_path / "logs")
    cols = {bench.column(r) for r in result["records"]}
    assert cols == {"torch-flash", "torch-math"} and len(result["records"]) == 4
    assert result["runs"][0]["meta"]["version"] == "9"


FAKE_MLX = '''
"""NumPy stand-in for the parts of mlx.core that mlx_worker.py uses."""
import numpy as np
__version__ = "0.0-fake"
bfloat16 = float16 = "f2"
_peak = [0]
_live = [0]  # bytes held by live arrays: outputs waiting in a queue count
class _A:
    def __init__(self, a):
        self.a = a
        _live[0] += a.nbytes
    def __del__(self): _live[0] -= self.a.nbytes
    def astype(self, dt): return _A(self.a.astype(np.float16))
    def reshape(self, *shape): return _A(self.a.reshape(*shape))
    def swapaxes(self, a, b): return _A(np.swapaxes(self.a, a, b))
    def __mul__(self, c): return _A(self.a * c)
    def __matmul__(self, o): return _A(self.a @ o.a)
    @property
    def T(self): return _A(self.a.T)
uint32 = "u4"
def array(a, dtype=None): return _A(np.asarray(a, dtype=dtype))
def quantize(w, *, group_size, bits):
    *lead, n, k = w.a.shape
    g = np.random.standard_normal((*lead, n, k // group_size)).astype(np.float16)
    return _A(np.zeros((*lead, n, k * bits // 32), np.uint32)), _A(g), _A(g.copy())
def _check_layout(x, idx, sorted_indices):
    # mlx-lm's layouts: sorted rows [R, 1, K] with indices [R], or each
    # token's row [T, 1, 1, K] against indices [T, k].
    if sorted_indices:
        assert x.a.ndim == 3 and idx.a.ndim == 1 and (np.diff(idx.a) >= 0).all()
    else:
        assert x.a.ndim == 4 and idx.a.ndim == 2 and x.a.shape[0] == idx.a.shape[0]
def gather_qmm(x, wq, s, b, *, rhs_indices, transpose, group_size, bits, sorted_indices):
    assert transpose
    _check_layout(x, rhs_indices, sorted_indices)
    w = np.repeat(s.a[rhs_indices.a], group_size, axis=-1)
    return _A(x.a @ np.swapaxes(w, -1, -2))
def gather_mm(x, w, *, rhs_indices, sorted_indices):
    _check_layout(x, rhs_indices, sorted_indices)
    return _A(x.a @ w.a[rhs_indices.a])
def quantized_matmul(x, wq, s, b, *, transpose, group_size, bits):
    assert transpose
    return _A(x.a @ np.repeat(s.a, group_size, axis=1).T)
class _No:
    @staticmethod
    def is_available(): return False
cuda = metal = _No()
class random:
    @staticmethod
    def seed(s): np.random.seed(s)
    @staticmethod
    def normal(shape): return _A(np.random.standard_normal(shape))
class fast:
    @staticmethod
    def scaled_dot_product_attention(q, k, v, *, scale, mask=None):
        rep = q.a.shape[1] // k.a.shape[1]
        kk, vv = (np.repeat(x.a, rep, axis=1) for x in (k, v))
        s = q.a @ kk.swapaxes(-1, -2) * scale
        _peak[0] = max(_peak[0], _live[0] + s.nbytes)
        p = np.exp(s - s.max(-1, keepdims=True))
        return _A((p / p.sum(-1, keepdims=True)) @ vv)
def eval(*a): pass
def synchronize(): pass
def clear_cache(): pass
def get_active_memory(): return _live[0]
def reset_peak_memory(): _peak[0] = _live[0]
def get_peak_memory(): return _peak[0]
def device_info(): return {"device_name": "NumPy"}
'''


def fake_mlx_run(tmp_path) -> bench.Run:
    """A run of the real mlx_worker.py against FAKE_MLX."""
    pkg = tmp_path / "fake" / "mlx"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core.py").write_text(FAKE_MLX)
    return bench.Run("patched", "mlx", sys.executable, {"PYTHONPATH": str(tmp_path / "fake")})


def test_real_mlx_worker_against_a_numpy_stand_in(tmp_path):
    run = fake_mlx_run(tmp_path)
    config = bench.BenchConfig(dims=(16,), prefill_lengths=(32, 64), decode_lengths=(64,),
                               heads=4, kv_heads=2, warmup=0, iters=1)
    records, meta = bench.run_worker(run, config, tmp_path / "w.log")
    assert meta["version"] == "0.0-fake" and meta["device"] == "NumPy"
    assert [r["status"] for r in records] == ["ok"] * 3
    prefill64 = next(r for r in records if r["mode"] == "prefill" and r["kL"] == 64)
    assert prefill64["peak_gib"] * (1 << 30) == 4 * 64 * 64 * 2  # fp16 scores
    assert prefill64["tflops"] > 0 and records[-1]["tbps"] > 0
    from dataclasses import replace
    queued, _ = bench.run_worker(run, replace(config, queue=3), tmp_path / "q.log")
    assert [r["status"] for r in queued] == ["ok"] * 3
    q64 = next(r for r in queued if r["mode"] == "prefill" and r["kL"] == 64)
    assert q64["peak_gib"] == prefill64["peak_gib"]  # from one call, not the queue


def test_real_mlx_worker_times_the_linear_layers(tmp_path):
    run = fake_mlx_run(tmp_path)
    config = bench.BenchConfig(dims=(), qmm_shapes=((128, 48),), qmm_rows=(1, 3),
                               warmup=0, iters=1)
    records, _ = bench.run_worker(run, config, tmp_path / "w.log")
    assert [(r["mode"], r["qL"], r["status"]) for r in records] == [
        ("qmm", 1, "ok"), ("matmul", 1, "ok"), ("qmm", 3, "ok"), ("matmul", 3, "ok")]
    assert all(r["tflops"] > 0 and r["tbps"] > 0 and r["D"] == 128 and r["kL"] == 48
               for r in records)


def test_real_mlx_worker_times_the_expert_layers(tmp_path):
    run = fake_mlx_run(tmp_path)
    # 7 tokens x top-4 = 28 rows: the decode layout; 17 x 4 = 68: sorted.
    config = bench.BenchConfig(dims=(), moe_shapes=((128, 48),), moe_tokens=(7, 17),
                               moe_experts=6, moe_top_k=4, warmup=0, iters=1)
    records, _ = bench.run_worker(run, config, tmp_path / "w.log")
    assert [(r["mode"], r["qL"], r["status"]) for r in records] == [
        ("gather_qmm", 7, "ok"), ("gather_mm", 7, "ok"),
        ("gather_qmm", 17, "ok"), ("gather_mm", 17, "ok")], records
    assert all(r["tflops"] > 0 and r["tbps"] > 0 and r["D"] == 128 and r["kL"] == 48
               for r in records)


def layer_record(label, backend, mode, K, rows, N, status, tflops, tbps) -> dict:
    """A worker's result line for a linear or expert layer (D = K, qL = rows
    or tokens, kL = N)."""
    return {"type": "result", "label": label, "backend": backend, "mode": mode,
            "D": K, "qL": rows, "kL": N, "status": status, "ms": 1.0,
            "tflops": tflops, "tbps": tbps, "peak_gib": 0.1, "error": None}


def test_markdown_expert_section():
    result = fake_result()
    result["config"].update(moe_shapes=[[2048, 768]], moe_tokens=[1, 2048],
                            moe_experts=128, moe_top_k=8)

    def moe(label, backend, mode, T, status="ok", tflops=None, tbps=None):
        return layer_record(label, backend, mode, 2048, T, 768, status, tflops, tbps)
    result["records"] += [
        moe("patched", "mlx", "gather_qmm", 1, tflops=0.0031, tbps=0.41),
        moe("patched", "mlx", "gather_mm", 1, tflops=0.0042, tbps=1.2),
        moe("patched", "mlx", "gather_qmm", 2048, tflops=131.0, tbps=0.34),
        moe("patched", "mlx", "gather_mm", 2048, status="error"),
        moe("torch", "flash", "gather_qmm", 1, status="unsupported")]
    md = bench.markdown_report(result)
    assert ("## Mixture-of-experts layers, 128 experts, top 8, 4-bit group 64: "
            "TFLOP/s (2·tokens·k·N·K) / GB/s of the experts' weights read") in md
    assert "| K → N | tokens | patched gather_qmm | patched gather_mm |" in md
    assert "| 2048 → 768 | 1 | 0.0031 / 410 | 0.0042 / 1200 |" in md
    assert "| 2048 → 768 | 2048 | 131 / 340 | error |" in md
    assert "torch-flash gather_qmm" not in md
    assert "Mixture-of-experts" not in bench.markdown_report(fake_result())


def test_markdown_linear_section_leaves_out_runs_without_linear_results():
    result = fake_result()
    result["config"].update(qmm_shapes=[[5376, 8192]], qmm_rows=[1, 2048])

    def lin(label, backend, mode, M, status="ok", tflops=None, tbps=None):
        return layer_record(label, backend, mode, 5376, M, 8192, status, tflops, tbps)
    result["records"] += [
        lin("patched", "mlx", "qmm", 1, tflops=0.0125, tbps=2.1),
        lin("patched", "mlx", "matmul", 1, tflops=0.0131, tbps=2.9),
        lin("patched", "mlx", "qmm", 2048, tflops=455.0, tbps=0.05),
        lin("patched", "mlx", "matmul", 2048, tflops=625.0, tbps=0.07),
        lin("upstream", "mlx", "qmm", 1, tflops=0.0024, tbps=0.402),
        lin("upstream", "mlx", "qmm", 2048, status="oom"),
        lin("torch", "flash", "qmm", 1, status="unsupported")]
    md = bench.markdown_report(result)
    assert "## Linear layers, 4-bit group 64: TFLOP/s (2·M·N·K) / GB/s of weights read" in md
    assert ("| K → N | M | patched qmm | patched matmul | upstream qmm | upstream matmul |"
            in md)
    assert "| 5376 → 8192 | 1 | 0.0125 / 2100 | 0.0131 / 2900 | 0.0024 / 402 |  |" in md
    assert "| 5376 → 8192 | 2048 | 455 / 50 | 625 / 70 | OOM |  |" in md
    assert "torch-flash qmm" not in md
    assert "Linear layers" not in bench.markdown_report(fake_result())


def fake_result() -> dict:
    def rec(label, backend, mode, D, kL, status="ok", **kw):
        base = {"type": "result", "label": label, "backend": backend, "mode": mode, "D": D,
                "qL": kL if mode == "prefill" else 1, "kL": kL, "status": status,
                "ms": 2.0, "tflops": 300.0, "tbps": None, "peak_gib": 0.5, "error": None}
        if mode == "decode":
            base.update(tflops=None, tbps=3.1)
        if status != "ok":
            base.update(ms=None, tflops=None, tbps=None, peak_gib=None)
        return {**base, **kw}
    config = bench.BenchConfig(dims=(256, 512), prefill_lengths=(8192, 32768),
                               decode_lengths=(131072,))
    records = [rec("patched", "mlx", "prefill", 256, 8192),
               rec("patched", "mlx", "prefill", 256, 32768, tflops=320.0, peak_gib=2.0),
               rec("upstream", "mlx", "prefill", 256, 8192, tflops=66.0, peak_gib=4.31),
               rec("upstream", "mlx", "prefill", 256, 32768, status="oom"),
               rec("torch", "flash", "prefill", 256, 8192, tflops=303.0),
               rec("torch", "flash", "prefill", 512, 8192, status="unsupported"),
               rec("patched", "mlx", "decode", 256, 131072)]
    runs = [{"label": "patched", "framework": "mlx", "env": {},
             "meta": {"device": "NVIDIA H200", "version": "0.32.2+mlxb"}},
            {"label": "upstream", "framework": "mlx", "env": {},
             "meta": {"device": "NVIDIA H200", "version": "0.32.2"}},
            {"label": "torch", "framework": "torch", "env": {},
             "meta": {"device": "NVIDIA H200", "version": "2.11.0", "cudnn": 91900}}]
    from dataclasses import asdict
    return {"config": asdict(config), "host": "h", "date": "today", "runs": runs,
            "records": records}


def test_markdown_report_from_a_result():
    md = bench.markdown_report(fake_result())
    assert md.startswith("# SDPA benchmark on NVIDIA H200")
    assert "patched: mlx 0.32.2+mlxb; upstream: mlx 0.32.2; torch 2.11.0 (cuDNN 91900)" in md
    assert "| L | patched | upstream | torch-flash |" in md
    assert "| 8 192 | 300 / 0.5 | 66 / 4.31 | 303 / 0.5 |" in md
    assert "| 32 768 | 320 / 2 | OOM |  |" in md
    assert "head_dim 512" in md and "n/a" in md
    assert "| 131 072 | 3.1 / 2 |" in md


def test_speedups_of_the_wheel_under_test_over_each_other_run():
    result = fake_result()
    # patched 300 TFLOP/s at 8k against upstream 66 and torch flash 303; at 32k
    # upstream ran out of memory and torch did not run: no ratio there.
    assert bench.speedups(result, 256) == {"upstream": [(8192, 300.0 / 66.0)],
                                           "torch-flash": [(8192, 300.0 / 303.0)]}
    assert bench.speedups(result, 512) == {}  # nothing measured on both sides
    md = bench.markdown_report(result)
    assert "## Prefill speed-up of patched over each other run, head_dim 256" in md
    assert "| L | upstream | torch-flash |" in md
    assert "| 8 192 | 4.55 | 0.99 |" in md
    assert "| 32 768 | — | — |" in md
    assert "speed-up of patched over each other run, head_dim 512" not in md
    assert bench.speedups({**result, "runs": []}, 256) == {}  # no run to compare with


def test_write_outputs_without_matplotlib(tmp_path, monkeypatch):
    def missing():
        raise plots.PlotsUnavailable("matplotlib is not installed: pip install x")
    monkeypatch.setattr(plots, "_matplotlib", missing)
    paths = bench.write_outputs(fake_result(), tmp_path)
    assert json.loads(paths["json"].read_text())["records"]
    assert paths["markdown"].read_text().startswith("# SDPA")
    assert paths["plots"] == [] and "not installed" in paths["plots_skipped"]


def test_plots_from_a_result(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib (extra 'plot') not installed")
    written = plots.make_plots(fake_result(), tmp_path)
    assert [p.name for p in written] == ["prefill_tflops.png", "prefill_memory.png",
                                         "decode_tbps.png", "prefill_speedup.png"]
    for p in written:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000
    lines = plots.series(fake_result(), "prefill", 256, "tflops")
    assert lines["upstream"] == ([8192], [66.0], ["oom at 32768"])


def test_find_torch_python_says_why_not(tmp_path):
    probe = textwrap.dedent("""
        import subprocess, sys
        sys.exit(subprocess.run([sys.executable, "-c", "import torch"]).returncode)""")
    import subprocess
    if subprocess.run([sys.executable, "-c", probe]).returncode == 0:
        pytest.skip("torch is importable here")
    python, why = bench.find_torch_python([sys.executable, str(tmp_path / "nope")])
    assert python is None
    assert "torch does not import" in why and "nope" in why


def test_unmeasured_peak_memory_shows_as_a_dash():
    result = fake_result()
    result["records"][4]["peak_gib"] = None  # a backend that reports no peak
    result["records"][2]["peak_gib"] = float("nan")
    md = bench.markdown_report(result)
    assert "| 8 192 | 300 / 0.5 | 66 / — | 303 / — |" in md


def _cli(args, capsys):
    from mlx_builder.cli import main
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_report_rewrites_the_table_and_plots_from_a_bench_json(tmp_path, capsys):
    src = tmp_path / "device" / "bench.json"
    src.parent.mkdir()
    src.write_text(json.dumps(fake_result()))
    out = tmp_path / "report"
    code, stdout, _ = _cli(["bench", "--report", str(src), "--out", str(out)], capsys)
    assert code == 0
    md = (out / "bench.md").read_text()
    assert md == bench.markdown_report(fake_result())
    assert "| 8 192 | 300 / 0.5 | 66 / 4.31 | 303 / 0.5 |" in stdout
    assert json.loads((out / "bench.json").read_text()) == json.loads(src.read_text())
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == ["decode_tbps.png", "prefill_memory.png", "prefill_speedup.png",
                    "prefill_tflops.png"] or \
        "plots skipped" in stdout


@pytest.mark.parametrize("text,why", [("{not json", "cannot read"),
                                      ('{"records": []}', "no config, runs")])
def test_report_refuses_what_is_not_a_bench_json(tmp_path, capsys, text, why):
    src = tmp_path / "x.json"
    src.write_text(text)
    code, _, err = _cli(["bench", "--report", str(src), "--out", str(tmp_path / "o")],
                        capsys)
    assert code == 10
    assert why in err and "bench.json" in err
    assert not (tmp_path / "o").exists()


class RecordingRunner:
    def __init__(self):
        self.calls = []

    def run(self, step, argv, **kwargs):
        self.calls.append((step, [str(a) for a in argv]))


def test_a_release_baseline_installs_its_wheels_together(tmp_path, monkeypatch):
    from mlx_builder.verify import testing
    made = []
    monkeypatch.setattr(testing, "make_venv",
                        lambda runner, py, venv, **kw: made.append(venv) or venv / "bin" / "python")
    release = (tmp_path / "mlx-0.32.4-cp312-cp312-manylinux_2_35_x86_64.whl",
               tmp_path / "mlx_cuda_13-0.32.4-py3-none-manylinux_2_35_x86_64.whl")
    opts = bench.BenchOptions(out_dir=tmp_path, venv_root=tmp_path / "venvs",
                              baseline=release, torch_python=None, no_deps=True)
    runner = RecordingRunner()
    runs, _ = bench.plan_runs(runner, tmp_path / "mlx-0.32.2+mlxb.x.cu90a-cp312.whl", opts)
    assert [r.label for r in runs] == ["patched", "upstream"]
    installs = [cmd for step, cmd in runner.calls if step == "install-wheel"]
    assert installs[1][-2:] == [str(w.resolve()) for w in release]
    assert "--no-deps" in installs[1]
    # its own venv, never the patched wheel's or another set's
    assert len(set(made)) == 2
    assert bench.venv_name(release) != bench.venv_name(release[:1])
    assert bench.venv_name(release) != bench.venv_name((release[0], tmp_path / "other.whl"))
    assert bench.baseline_names(opts) == [w.name for w in release]
    assert bench.baseline_names(bench.BenchOptions(tmp_path, tmp_path, baseline=release[:1])) \
        == release[0].name
    assert bench.baseline_names(bench.BenchOptions(tmp_path, tmp_path)) is None
