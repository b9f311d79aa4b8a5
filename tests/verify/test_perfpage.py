"""verify/perfpage.py: the per-GPU data files, the page section rendered from
them, and `bench --publish`."""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict

import pytest

from mlx_builder.errors import ConfigError
from mlx_builder.verify import perfpage, plots
from mlx_builder.verify.bench import BenchConfig, parse_variant

PROSE = "# Performance\n\nWhat the columns mean.\n\n{region}\n## Measuring a GPU\n\nBy hand.\n"
FALLBACK = {"MLX_CUDA_SDPA_TILED": "0", "MLX_SDPA_FALLBACK_CHUNK_BYTES": "0"}


def result(device: str = "NVIDIA H100 80GB HBM3", patched_ms: float = 2.0) -> dict:
    def rec(label, backend, mode, D, kL, ms, status="ok", **kw):
        out = {"type": "result", "label": label, "backend": backend, "mode": mode, "D": D,
               "qL": kL if mode == "prefill" else 1, "kL": kL, "status": status, "ms": ms,
               "tflops": None, "tbps": None, "peak_gib": 0.25, "error": None, **kw}
        if status != "ok":
            out.update(ms=None, peak_gib=None)
        elif mode == "prefill":
            out["tflops"] = 2 * 32 * kL * kL * D / (ms / 1e3) / 1e12
        else:
            out["tbps"] = 1.5
        return out
    config = BenchConfig(dims=(256, 512), prefill_lengths=(8192,), decode_lengths=(131072,),
                         warmup=2, iters=3, torch_backends=("flash",))
    meta = {"device": device, "version": "0.32.2+mlxb.846d176227a0.c7eeee6a.cu90a"}
    return {"config": asdict(config), "host": "gpu-node-7", "date": "2026-12-06 10:00:00",
            "torch_note": "PyTorch from /home/me/venv/bin/python",
            "runs": [{"label": "patched", "framework": "mlx", "env": {}, "meta": meta},
                     {"label": "upstream", "framework": "mlx", "env": FALLBACK, "meta": meta},
                     {"label": "torch", "framework": "torch", "env": {},
                      "meta": {"device": device, "version": "2.11.0", "cudnn": 91900}}],
            "records": [rec("patched", "mlx", "prefill", 256, 8192, patched_ms),
                        rec("upstream", "mlx", "prefill", 256, 8192, 17.0, peak_gib=4.3),
                        rec("torch", "flash", "prefill", 256, 8192, 3.5, peak_gib=None),
                        rec("torch", "flash", "prefill", 512, 8192, None, status="unsupported"),
                        rec("patched", "mlx", "decode", 256, 131072, 0.84,
                            wheel="mlx-0.32.2+mlxb.846d176227a0.58c0c33e.cu90a")]}


@pytest.fixture
def docs(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "performance.md").write_text(
        PROSE.format(region=f"{perfpage.BEGIN}\n{perfpage.END}\n"))
    return folder


@pytest.mark.parametrize("device,slug", [("NVIDIA H100 80GB HBM3", "h100-80gb-hbm3"),
                                         ("NVIDIA H100 PCIe", "h100-pcie"),
                                         ("NVIDIA GB10", "gb10"),
                                         ("Apple M3 Max", "apple-m3-max")])
def test_a_gpu_names_its_data_file(device, slug):
    assert perfpage.gpu_slug(device) == slug


def test_runs_on_two_gpus_are_not_one_data_file():
    two = result()
    two["runs"][2]["meta"]["device"] = "NVIDIA H200"
    with pytest.raises(ConfigError, match="cannot publish"):
        perfpage.data_of(two)


def test_the_data_file_keeps_the_figures_not_the_machine():
    data = perfpage.data_of(result())
    assert data["device"] == "NVIDIA H100 80GB HBM3"
    assert "host" not in data and "torch_note" not in data
    assert all("type" not in r for r in data["records"])
    text = perfpage.dumps(data)
    assert len(text.splitlines()) == len(data) + 1 + len(data["records"]) + 2
    assert json.loads(text)["records"][0]["tflops"] == pytest.approx(
        data["records"][0]["tflops"], rel=1e-5)


def test_the_section_is_one_table_with_marks_for_another_wheel():
    section = perfpage.render_section(perfpage.data_of(result()), "perf/h100.png")
    assert section.startswith("## NVIDIA H100 80GB HBM3\n\nMeasured 2026-12-06 10:00:00: "
                              "patched: mlx 0.32.2+mlxb")
    assert "| head dim | shape | patched | upstream | torch-flash | × upstream |" in section
    # 4·32·8192²·256 / 2 FLOP in 2 ms = 550 TFLOP/s; upstream 17 ms: 8.50× slower
    assert ("| 256 | prefill L = 8k | 550 TFLOP/s · 2 ms · 0.25 GiB | "
            "64.7 TFLOP/s · 17 ms · 4.3 GiB | 314 TFLOP/s · 3.5 ms | 8.50× |") in section
    assert "| 256 | decode kL = 128k | 1.5 TB/s · 0.84 ms · 0.25 GiB† |  |  |  |" in section
    assert "| 512 | prefill L = 8k |  |  | n/a |  |" in section
    assert "† measured on `mlx-0.32.2+mlxb.846d176227a0.58c0c33e.cu90a`." in section
    assert "![prefill TFLOP/s on NVIDIA H100 80GB HBM3](perf/h100.png)" in section


def test_the_command_measures_the_same_again():
    command = perfpage.bench_command(perfpage.data_of(result()))
    args = shlex.split(command)
    assert args[:2] == ["mlx-builder", "bench"]
    variant = args[args.index("--variant") + 1]
    assert parse_variant(variant) == ("upstream", FALLBACK)
    assert args[args.index("--dims") + 1] == "256,512"
    assert args[args.index("--torch-backends") + 1] == "flash"
    assert args[args.index("--warmup") + 1] == "2" and "--heads" not in args
    assert args[-2:] == ["--publish", "docs/"]
    no_torch = result()
    no_torch["runs"].pop()
    assert "--no-torch" in perfpage.bench_command(no_torch)


def test_the_command_repeats_the_linear_layers():
    data = result()
    data["config"].update(qmm_shapes=[[5376, 8192], [21504, 5376]], qmm_rows=[1, 2048],
                          qmm_bits=8)
    args = shlex.split(perfpage.bench_command(perfpage.data_of(data)))
    assert args[args.index("--qmm-shapes") + 1] == "5376:8192,21504:5376"
    assert args[args.index("--qmm-rows") + 1] == "1,2048"
    assert args[args.index("--qmm-bits") + 1] == "8"
    assert "--qmm-shapes" not in perfpage.bench_command(perfpage.data_of(result()))


def test_the_command_repeats_the_expert_layers():
    data = result()
    data["config"].update(moe_shapes=[[2048, 768], [768, 2048]], moe_tokens=[1, 2048],
                          moe_experts=64, moe_top_k=4, qmm_bits=8)
    args = shlex.split(perfpage.bench_command(perfpage.data_of(data)))
    assert args[args.index("--moe-shapes") + 1] == "2048:768,768:2048"
    assert args[args.index("--moe-tokens") + 1] == "1,2048"
    assert args[args.index("--moe-experts") + 1] == "64"
    assert args[args.index("--moe-top-k") + 1] == "4"
    assert args[args.index("--qmm-bits") + 1] == "8" and "--qmm-shapes" not in args
    assert "--moe-shapes" not in perfpage.bench_command(perfpage.data_of(result()))


@pytest.mark.parametrize("upstream", ["mlx-0.32.2-cp312-cp312-linux_x86_64.whl",
                                      ["mlx-0.32.4-cp312-cp312-manylinux_2_35_x86_64.whl",
                                       "mlx_cuda_13-0.32.4-py3-none-manylinux_2_35_x86_64.whl"]])
def test_the_command_names_every_baseline_wheel(upstream):
    data = result()
    data["wheels"] = {"patched": "mlx-0.32.2+mlxb.x.whl", "upstream": upstream}
    args = shlex.split(perfpage.bench_command(perfpage.data_of(data)))
    given = [args[i + 1] for i, a in enumerate(args) if a == "--baseline"]
    assert given == ([upstream] if isinstance(upstream, str) else upstream)
    # the upstream run is the baseline's, not a variant of the patched wheel
    assert "--variant" not in args


def test_publish_writes_the_data_the_plot_and_only_the_generated_part(docs):
    pytest.importorskip("matplotlib", reason="matplotlib (extra 'plot') not installed")
    done = perfpage.publish(result(), docs)
    assert done.data == docs / "perf" / "h100-80gb-hbm3.json"
    assert done.plot == docs / "perf" / "h100-80gb-hbm3.png"
    assert done.plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = done.page.read_text()
    assert page.startswith("# Performance\n\nWhat the columns mean.\n\n" + perfpage.BEGIN)
    assert page.endswith(perfpage.END + "\n\n## Measuring a GPU\n\nBy hand.\n")
    assert "| 256 | prefill L = 8k | 550 TFLOP/s" in page
    assert "(perf/h100-80gb-hbm3.png)" in page


def test_a_new_measurement_replaces_its_gpu_and_keeps_the_others(docs):
    perfpage.publish(result(), docs)
    perfpage.publish(result("NVIDIA GB10"), docs)
    perfpage.publish(result(patched_ms=1.0), docs)  # the H100 again, twice as fast
    assert sorted(p.name for p in (docs / "perf").glob("*.json")) == [
        "gb10.json", "h100-80gb-hbm3.json"]
    page = (docs / "performance.md").read_text()
    assert page.index("## NVIDIA GB10") < page.index("## NVIDIA H100 80GB HBM3")
    assert page.count("## NVIDIA H100 80GB HBM3") == 1
    assert "| 256 | prefill L = 8k | 1100 TFLOP/s · 1 ms" in page
    assert "| 256 | prefill L = 8k | 550 TFLOP/s" in page  # the GB10's, unchanged
    assert page.count(perfpage.BEGIN) == page.count(perfpage.END) == 1


def test_without_matplotlib_no_figure_is_left_from_before(docs, monkeypatch):
    figure = docs / "perf" / "h100-80gb-hbm3.png"
    figure.parent.mkdir()
    figure.write_bytes(b"an old figure")

    def missing():
        raise plots.PlotsUnavailable("matplotlib is not installed")
    monkeypatch.setattr(plots, "_matplotlib", missing)
    done = perfpage.publish(result(), docs)
    assert done.plot is None and "not installed" in done.plot_skipped
    assert not figure.exists()
    assert ".png)" not in done.page.read_text()


def test_a_page_without_markers_gets_the_region_at_its_end(tmp_path):
    (tmp_path / "performance.md").write_text("# Performance\n\nProse.\n")
    measured = result()
    (tmp_path / "perf").mkdir()
    (tmp_path / "perf" / "x.json").write_text(perfpage.dumps(perfpage.data_of(measured)))
    text = perfpage.render_page(tmp_path).read_text()
    assert text.startswith("# Performance\n\nProse.\n\n" + perfpage.BEGIN)
    assert text.rstrip().endswith(perfpage.END)


def test_a_broken_data_file_is_named(tmp_path):
    (tmp_path / "perf").mkdir()
    (tmp_path / "perf" / "h100.json").write_text('{"device": "x"}')
    with pytest.raises(ConfigError, match=r"h100\.json is not a performance data file"):
        perfpage.render_region(tmp_path)


def test_bench_publish_from_a_bench_json(tmp_path, docs, capsys):
    from mlx_builder.cli import main
    src = tmp_path / "bench.json"
    src.write_text(json.dumps(result()))
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--report", str(src), "--out", str(tmp_path / "out"),
              "--publish", str(docs)])
    assert exc.value.code == 0
    assert "published:" in capsys.readouterr().out
    data = json.loads((docs / "perf" / "h100-80gb-hbm3.json").read_text())
    assert data["device"] == "NVIDIA H100 80GB HBM3" and len(data["records"]) == 5
    assert "550 TFLOP/s" in (docs / "performance.md").read_text()


def test_a_failed_publish_changes_nothing(docs):
    perfpage.publish(result(), docs)
    before = {p.name: p.read_bytes() for p in (docs / "perf").iterdir()}
    page = (docs / "performance.md").read_bytes()
    (docs / "perf" / "broken.json").write_text('{"device": "x"}')
    with pytest.raises(ConfigError, match=r"broken\.json"):
        perfpage.publish(result(patched_ms=1.0), docs)
    after = {p.name: p.read_bytes() for p in (docs / "perf").iterdir()}
    assert after == {**before, "broken.json": b'{"device": "x"}'}  # no staged leftovers
    assert (docs / "performance.md").read_bytes() == page
