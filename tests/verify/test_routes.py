"""mlx_builder.verify.routes and `mlx-builder routes`: the probe program, parsing
trace lines, dedup, the table and JSON, and every error exit code, through
fake interpreters (scripts that print canned lines) and through the real
probe run against a stand-in `mlx` package."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from mlx_builder import errors
from mlx_builder.cli import main
from mlx_builder.verify import routes
from mlx_builder.verify.routes import (
    ProbeFailure,
    RouteGrid,
    RouteRecord,
    parse_probe_output,
    parse_route_line,
    unique_routes,
)

TILED = ('[mlx-sdpa-route] path=tiled arch=sm_90 dtype=bfloat16 D=256 Dv=256 qL=512 '
         'kL=4096 mask=causal training=0 reason=""')
FALLBACK = ('[mlx-sdpa-route] path=fallback arch=sm_90 dtype=float32 D=512 Dv=512 qL=3 '
            'kL=512 mask=array training=0 reason="float32: no fused kernel for D=512"')
CUDNN = ('[mlx-sdpa-route] path=cudnn arch=sm_90 dtype=float16 D=128 Dv=128 qL=512 '
         'kL=512 mask=none training=0 reason=""')
INFO = '[mlx-sdpa-probe-info] version="0.32.2+mlxb.test" device="NVIDIA H200" cases=3'
CASES = ['[mlx-sdpa-probe-case] case=bfloat16-D256-qL512-kL4096-causal',
         '[mlx-sdpa-probe-case] case=float32-D512-qL3-kL512-bool',
         '[mlx-sdpa-probe-case] case=float16-D128-qL512-kL512-none']


def fake_python(folder: Path, body: str, name: str = "python") -> Path:
    """An executable script that stands in for an interpreter; it ignores
    its arguments (the probe) and runs ``body``."""
    path = folder / name
    path.write_text(f"#!{sys.executable}\nimport os, sys\n{textwrap.dedent(body)}")
    path.chmod(0o755)
    return path


def canned(folder: Path, lines: list[str], rc: int = 0) -> Path:
    text = "".join(line + "\n" for line in lines)
    return fake_python(folder, f"sys.stderr.write({text!r})\nsys.exit({rc})\n")


@pytest.fixture
def routes_cli(isolated_env, tmp_path, capsys):
    """Run ``mlx-builder routes ARGS``; return (exit code, stdout, stderr)."""
    for name in list(os.environ):
        if name.startswith("MLX_"):
            isolated_env.delenv(name)

    def invoke(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exc:
            main(["--cache-dir", str(tmp_path / "cache"), "routes", *args])
        out = capsys.readouterr()
        return exc.value.code, out.out, out.err

    return invoke


# ------------------------------------------------------------------ parsing

def test_parse_route_line_fields_and_quoted_reason():
    record = parse_route_line(FALLBACK)
    assert record == RouteRecord(path="fallback", arch="sm_90", dtype="float32", D=512,
                                 Dv=512, qL=3, kL=512, mask="array", training=False,
                                 reason="float32: no fused kernel for D=512")
    tiled = parse_route_line(TILED + "\r\n")
    assert (tiled.path, tiled.reason, tiled.mask) == ("tiled", "", "causal")
    training = parse_route_line(TILED.replace("training=0", "training=1")
                                .replace("sm_90", "sm_121a"))
    assert training.training is True and training.arch == "sm_121a"


def test_parse_route_line_ignores_other_lines_and_finds_a_late_tag():
    for line in ("", "W1129 cuda: something", "[mlx-sdpa-probe-info] version=1",
                 "mlx-sdpa-route path=tiled"):
        assert parse_route_line(line) is None
    assert parse_route_line("a warning without newline" + CUDNN).path == "cudnn"


@pytest.mark.parametrize("line, problem", [
    (TILED.replace(" Dv=256", ""), "its keys are"),
    (TILED.replace("path=tiled arch=sm_90", "arch=sm_90 path=tiled"), "its keys are"),
    (TILED + " extra=1", "its keys are"),
    (TILED.replace("path=tiled", "path=flash"), "path=flash is not one of"),
    (TILED.replace("arch=sm_90", "arch=90"), "arch=90 is not sm_<NN>"),
    (TILED.replace("dtype=bfloat16", "dtype=float8"), "dtype=float8 is not one of"),
    (TILED.replace("D=256", "D=two"), "D=two is not an integer"),
    (TILED.replace("kL=4096", "kL="), "kL= is not an integer"),
    (TILED.replace("mask=causal", "mask=bool"), "mask=bool is not one of"),
    (TILED.replace("training=0", "training=2"), "training=2 is not one of"),
    (TILED.replace('reason=""', "reason=because"), "not in double quotes"),
    (TILED.replace('reason=""', 'reason="a "quoted" word"'), "key=value pairs"),
    (TILED.replace(" qL=", "  qL="), "key=value pairs"),
    ("[mlx-sdpa-route]", "key=value pairs"),
])
def test_malformed_route_lines_raise_with_the_problem(line, problem):
    with pytest.raises(errors.RouteParseError) as info:
        parse_route_line(line)
    assert problem in info.value.why and routes.ROUTE_FORMAT in info.value.why
    assert line.strip() in info.value.what and info.value.exit_code == 28


def test_parse_probe_output_sorts_lines_and_skips_noise():
    out = parse_probe_output([
        "Python warning: something", INFO, CASES[0], TILED, "", CASES[1],
        '[mlx-sdpa-probe-error] case=float32-D512-qL3-kL512-bool error="ValueError: bad"',
        CASES[2], CUDNN, "   ", "[other-tool] x=1"])
    assert [r.path for r in out.routes] == ["tiled", "cudnn"]
    assert out.cases == tuple(c.split("case=")[1] for c in CASES)
    assert out.errors == (ProbeFailure("float32-D512-qL3-kL512-bool", "ValueError: bad"),)
    assert out.info == {"version": "0.32.2+mlxb.test", "device": "NVIDIA H200", "cases": "3"}
    assert out.fatal is None and out.other == ("Python warning: something", "[other-tool] x=1")


def test_unique_routes_dedups_and_sorts_by_dtype_then_sizes():
    recs = [parse_route_line(x) for x in (FALLBACK, TILED, CUDNN, TILED, FALLBACK)]
    assert [r.dtype for r in unique_routes(recs)] == ["bfloat16", "float16", "float32"]
    small = parse_route_line(TILED.replace("D=256", "D=64"))
    assert unique_routes([recs[1], small]) == (small, recs[1])


def report(lines: list[str], env: dict | None = None) -> routes.RouteReport:
    return routes.RouteReport("/py", env or {routes.TRACE_ENV: "1"}, RouteGrid(),
                              parse_probe_output(lines), Path("/logs/01-probe.log"))


def test_render_table_columns_rows_and_title():
    rep = report([INFO, *CASES, TILED, FALLBACK, CUDNN, TILED],
                 {routes.TRACE_ENV: "1", routes.PATH_ENV: "fallback"})
    console = Console(width=250, record=True, file=open(os.devnull, "w"))
    console.print(routes.render_table(rep))
    text = console.export_text()
    assert ("CUDA SDPA routes: MLX 0.32.2+mlxb.test on NVIDIA H200 with "
            "MLX_CUDA_SDPA_PATH=fallback") in text
    header = next(line for line in text.splitlines() if "arch" in line)
    assert header.split() == ["┃", "arch", "┃", "dtype", "┃", "D", "┃", "qL", "┃", "kL",
                              "┃", "mask", "┃", "path", "┃", "reason", "┃"]
    rows = [line.split("│")[1:-1] for line in text.splitlines() if "sm_90" in line]
    assert [[c.strip() for c in row] for row in rows] == [
        ["sm_90", "bfloat16", "256", "512", "4096", "causal", "tiled", "(first choice)"],
        ["sm_90", "float16", "128", "512", "512", "none", "cudnn", "(first choice)"],
        ["sm_90", "float32", "512", "3", "512", "array", "fallback",
         "float32: no fused kernel for D=512"]]


def test_report_json_counts_calls_and_distinct_routes():
    data = report([INFO, *CASES, TILED, TILED, CUDNN]).to_json()
    assert (data["route_lines"], data["cases"], len(data["routes"])) == (3, 3, 2)
    assert data["routes"][0] == {"path": "tiled", "arch": "sm_90", "dtype": "bfloat16",
                                 "D": 256, "Dv": 256, "qL": 512, "kL": 4096,
                                 "mask": "causal", "training": False, "reason": ""}
    assert data["mlx_version"] == "0.32.2+mlxb.test" and data["grid"]["dims"][-1] == 512


# ------------------------------------------------------------------ the probe

def probe_namespace(grid: RouteGrid) -> dict:
    """The probe's definitions, without running its main."""
    namespace = {"__name__": "routes_probe"}
    exec(compile(routes.probe_source(grid), "routes_probe.py", "exec"), namespace)
    return namespace


def test_probe_compiles_and_runs_the_whole_grid_by_default():
    probe = probe_namespace(RouteGrid())
    cases = probe["cases"]()
    assert len(cases) == RouteGrid().case_count() == 360
    assert all(q <= k for _, _, q, k, _ in cases)
    assert {c[1] for c in cases} == {64, 128, 192, 256, 512}
    assert {c[4] for c in cases} == {"none", "causal", "bool", "additive"}


def test_grid_options_narrow_the_probe():
    grid = RouteGrid(dims=(256,), dtypes=("float16",), qlens=(512, 1024), klens=(512,),
                     masks=("causal", "bool"))
    probe = probe_namespace(grid)
    assert probe["GRID"] == grid.to_json()
    assert probe["cases"]() == [("float16", 256, 512, 512, "causal"),
                                ("float16", 256, 512, 512, "bool")]
    assert grid.case_count() == 2
    assert probe["case_name"](probe["cases"]()[0]) == "float16-D256-qL512-kL512-causal"


@pytest.mark.parametrize("kwargs, message", [
    ({"dtypes": ("float8",)}, "float8"),
    ({"masks": ()}, "--masks"),
    ({"dims": (0, 64)}, "positive"),
    ({"qlens": (8192,)}, "qL <= kL"),
])
def test_grid_rejects_bad_values(kwargs, message):
    with pytest.raises(errors.ConfigError, match=message):
        RouteGrid(**kwargs)


# ------------------------------------------------------------ the command

def test_routes_table_json_and_log(routes_cli, tmp_path):
    python = fake_python(tmp_path, f"""
        print("argv", " ".join(sys.argv[1:]))
        sys.stderr.write({"".join(x + chr(10) for x in
                                  ["loader: unrelated", INFO, *CASES, TILED, TILED,
                                   FALLBACK, CUDNN])!r})
        """)
    out_json = tmp_path / "out" / "routes.json"
    code, out, err = routes_cli("--python", str(python), "--json", str(out_json))
    assert code == 0, err
    assert "3 distinct routes from 4 routing lines, 3 cases, 0 probe errors" in out
    assert "tiled" in out and "cudnn" in out and "fallback" in out
    data = json.loads(out_json.read_text())
    assert [r["path"] for r in data["routes"]] == ["tiled", "cudnn", "fallback"]
    assert data["python"] == str(python) and data["env"] == {"MLX_CUDA_SDPA_TRACE": "1"}
    log = Path(data["log"])
    assert log.name == "01-sdpa-route-probe.log" and log.parent.parent == tmp_path / "cache" / "logs"
    text = log.read_text()
    assert "loader: unrelated" in text and FALLBACK in text
    script = log.parent / "routes_probe.py"
    assert f"argv -u {script}" in text
    assert script.read_text() == routes.probe_source(RouteGrid())


def test_env_values_reach_the_probe_and_the_report(routes_cli, tmp_path, isolated_env):
    python = fake_python(tmp_path, """
        sys.stderr.write('[mlx-sdpa-probe-info] version=1 device="GPU" cases=1\\n')
        sys.stderr.write('[mlx-sdpa-probe-case] case=bfloat16-D64-qL1-kL512-none\\n')
        sys.stderr.write('[mlx-sdpa-route] path=%s arch=sm_90 dtype=bfloat16 D=64 Dv=64 '
                         'qL=1 kL=512 mask=none training=0 reason="trace=%s tiled=%s"\\n'
                         % (os.environ["MLX_CUDA_SDPA_PATH"], os.environ["MLX_CUDA_SDPA_TRACE"],
                            os.environ.get("MLX_CUDA_SDPA_TILED")))
        """)
    isolated_env.setenv("MLX_CUDA_SDPA_TILED", "0")
    out_json = tmp_path / "r.json"
    code, out, err = routes_cli("--python", str(python), "--env", "MLX_CUDA_SDPA_PATH=fallback",
                                "--env", "MLX_CUDA_SDPA_TRACE=0", "--json", str(out_json))
    assert code == 0, err
    data = json.loads(out_json.read_text())
    [route] = data["routes"]
    assert (route["path"], route["reason"]) == ("fallback", "trace=1 tiled=0")
    assert data["env"] == {"MLX_CUDA_SDPA_PATH": "fallback", "MLX_CUDA_SDPA_TILED": "0",
                           "MLX_CUDA_SDPA_TRACE": "1"}
    assert "MLX_CUDA_SDPA_PATH=fallback MLX_CUDA_SDPA_TILED=0" in out


def test_bare_interpreter_name_is_looked_up_on_path(routes_cli, tmp_path, isolated_env):
    fake_python(tmp_path, f"sys.stderr.write({INFO + chr(10) + CASES[0] + chr(10) + TILED!r})",
                name="mlxpython")
    isolated_env.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    code, out, err = routes_cli("--python", "mlxpython")
    assert code == 0, err
    assert "1 distinct routes from 1 routing lines" in out


def test_missing_or_unrunnable_interpreter_exits_25(routes_cli, tmp_path):
    plain = tmp_path / "plain.py"
    plain.write_text("print()")
    for python, why in ((str(tmp_path / "nope" / "python"), "no such file"),
                        (str(plain), "not an executable file"),
                        ("no-such-python-xyz", "no program of that name on PATH")):
        code, _, err = routes_cli("--python", python)
        assert code == errors.InterpreterError.exit_code == 25
        assert f"Python interpreter {python} not found" in err and why in err


def test_failing_mlx_import_exits_26(routes_cli, tmp_path):
    python = canned(tmp_path, ['[mlx-sdpa-probe-fatal] kind=import error="ModuleNotFoundError: '
                               "No module named 'mlx'\""], rc=3)
    code, _, err = routes_cli("--python", str(python))
    assert code == errors.MlxImportError.exit_code == 26
    assert "`import mlx.core` fails in" in err and "No module named 'mlx'" in err


def test_mlx_without_gpu_exits_19(routes_cli, tmp_path):
    python = canned(tmp_path, ['[mlx-sdpa-probe-fatal] kind=no-gpu version="0.32.4" '
                               'device="Device(cpu, 0)" cuda=0'], rc=4)
    code, _, err = routes_cli("--python", str(python))
    assert code == errors.NoGpuError.exit_code == 19
    assert "MLX 0.32.4" in err and "Device(cpu, 0)" in err and "needs a CUDA GPU" in err


def test_no_route_lines_means_unpatched_exits_27(routes_cli, tmp_path):
    python = canned(tmp_path, [INFO, *CASES])
    code, _, err = routes_cli("--python", str(python))
    assert code == errors.UnpatchedMlxError.exit_code == 27
    assert "3 SDPA calls ran" in err and "not patched with the routing patch" in err
    assert "MLX_CUDA_SDPA_TRACE unsupported" in err


def test_malformed_route_line_exits_28_with_the_log(routes_cli, tmp_path):
    python = canned(tmp_path, [INFO, CASES[0], TILED.replace("path=tiled", "path=flash")])
    code, _, err = routes_cli("--python", str(python))
    assert code == errors.RouteParseError.exit_code == 28
    assert "path=flash is not one of" in err and "01-sdpa-route-probe.log" in err


def test_probe_that_dies_exits_29_naming_the_case(routes_cli, tmp_path):
    python = fake_python(tmp_path, f"""
        import signal
        sys.stderr.write({INFO + chr(10) + CASES[0] + chr(10) + TILED + chr(10) + CASES[1]!r})
        sys.stderr.write("\\nFatal Python error: Segmentation fault\\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGTERM)
        """)
    code, _, err = routes_cli("--python", str(python))
    assert code == errors.RouteProbeError.exit_code == 29
    assert "died with signal SIGTERM during case float32-D512-qL3-kL512-bool" in err
    assert "1 routing lines before" in err and "Fatal Python error: Segmentation fault" in err


def test_probe_where_nothing_ran_exits_29(routes_cli, tmp_path):
    failed = [INFO, CASES[0], '[mlx-sdpa-probe-error] case=bfloat16-D256-qL512-kL4096-causal '
                              'error="RuntimeError: out of memory"']
    code, _, err = routes_cli("--python", str(canned(tmp_path, failed)))
    assert code == 29 and "none of the 360 SDPA probe cases ran" in err
    assert "RuntimeError: out of memory" in err
    silent = tmp_path / "silent"
    silent.mkdir()
    code, _, err = routes_cli("--python", str(canned(silent, [])))
    assert code == 29 and "did not run" in err and "without printing" in err


def test_bad_grid_option_exits_10(routes_cli):
    code, _, err = routes_cli("--dtypes", "bfloat16,float8")
    assert code == errors.ConfigError.exit_code and "float8" in err


# --------------------------------------------- the real probe, stand-in MLX

STUB_CORE = r'''
import os, sys
__version__ = "0.0.stub"
gpu, cpu = "gpu", "cpu"
bfloat16, float16, float32 = "bfloat16", "float16", "float32"


class Device:
    def __init__(self, type):
        self.type = type

    def __str__(self):
        return "Device(%s, 0)" % self.type


def default_device():
    return Device(os.environ.get("STUB_DEVICE", "gpu"))


def device_info():
    return {"device_name": "Stub GPU"}


class cuda:
    is_available = staticmethod(lambda: os.environ.get("STUB_DEVICE", "gpu") == "gpu")


class Arr:
    def __init__(self, shape, dtype="float32"):
        self.shape, self.dtype = tuple(shape), dtype

    def astype(self, dtype):
        return Arr(self.shape, dtype)

    def __getitem__(self, index):
        dims = iter(self.shape)
        return Arr([1 if i is None else next(dims) for i in index], self.dtype)

    def __le__(self, other):
        return Arr([max(a, b) for a, b in zip(self.shape, other.shape)], "bool")


def arange(start, stop=None):
    return Arr([start if stop is None else stop - start], "int32")


def where(cond, x, y):
    return Arr(cond.shape, "float32")


class random:
    seed = staticmethod(lambda s: None)
    normal = staticmethod(lambda shape: Arr(shape))


def eval(*arrays):
    pass


class fast:
    @staticmethod
    def scaled_dot_product_attention(q, k, v, *, scale, mask=None):
        B, H, qL, D = q.shape
        kL = k.shape[2]
        assert (B, H) == (1, 4) and k.shape == v.shape == (1, 2, kL, D), (q.shape, k.shape)
        assert abs(scale - D ** -0.5) < 1e-12 and q.dtype == k.dtype == v.dtype
        if mask is None or isinstance(mask, str):
            kind = mask or "none"
        else:
            assert mask.shape == (qL, kL) and mask.dtype in ("bool", q.dtype), vars(mask)
            kind = "array"
        if D == 192 and q.dtype == "float16" and kind == "array":
            raise RuntimeError('no kernel for "D=192"\nwith an array mask')
        path, reason = ("decode" if qL <= 3 else "tiled"), ""
        if q.dtype == "float32":
            path, reason = "fallback", "float32 has no fused kernel"
        if os.environ.get("MLX_CUDA_SDPA_PATH"):
            path, reason = os.environ["MLX_CUDA_SDPA_PATH"], "forced"
        # Like the routing patch: one line when the graph is built, one when it runs.
        for _ in range(2 if os.environ.get("MLX_CUDA_SDPA_TRACE") == "1" else 0):
            sys.stderr.write('[mlx-sdpa-route] path=%s arch=sm_90 dtype=%s D=%d Dv=%d qL=%d '
                             'kL=%d mask=%s training=0 reason="%s"\n'
                             % (path, q.dtype, D, v.shape[3], qL, kL, kind, reason))
        return Arr(q.shape, q.dtype)
'''

STUB_GRID = ("--dims", "128,192", "--dtypes", "float16,float32", "--qlens", "1,512",
             "--klens", "512", "--masks", "none,bool,additive")


@pytest.fixture
def stub_mlx(tmp_path) -> Path:
    root = tmp_path / "stub"
    (root / "mlx").mkdir(parents=True)
    (root / "mlx" / "__init__.py").write_text("")
    (root / "mlx" / "core.py").write_text(STUB_CORE)
    return root


def test_real_probe_against_stand_in_mlx(routes_cli, stub_mlx, tmp_path):
    out_json = tmp_path / "r.json"
    code, out, err = routes_cli("--python", sys.executable, "--env", f"PYTHONPATH={stub_mlx}",
                                "--json", str(out_json), *STUB_GRID)
    assert code == 0, err
    data = json.loads(out_json.read_text())
    # 24 cases; float16 D=192 raises for both array masks at both qL.
    assert (data["cases"], data["route_lines"], len(data["routes"])) == (24, 40, 14)
    assert data["mlx_version"] == "0.0.stub" and data["device"] == "Stub GPU"
    assert {e["error"] for e in data["probe_errors"]} == {
        "RuntimeError: no kernel for 'D=192' with an array mask"}
    assert len(data["probe_errors"]) == 4
    assert "probe error: float16-D192-qL1-kL512-bool: RuntimeError" in out
    paths = {(r["dtype"], r["qL"]): r["path"] for r in data["routes"]}
    assert paths == {("float16", 1): "decode", ("float16", 512): "tiled",
                     ("float32", 1): "fallback", ("float32", 512): "fallback"}
    code, _, err = routes_cli("--python", sys.executable, "--env", f"PYTHONPATH={stub_mlx}",
                              "--env", "MLX_CUDA_SDPA_PATH=vector", "--json", str(out_json),
                              *STUB_GRID)
    assert code == 0, err
    assert {r["path"] for r in json.loads(out_json.read_text())["routes"]} == {"vector"}


def test_real_probe_reports_no_gpu_and_broken_import(routes_cli, stub_mlx, tmp_path):
    code, _, err = routes_cli("--python", sys.executable, "--env", f"PYTHONPATH={stub_mlx}",
                              "--env", "STUB_DEVICE=cpu", *STUB_GRID)
    assert code == 19 and "MLX 0.0.stub" in err and "mx.cuda.is_available() False" in err
    broken = tmp_path / "broken" / "mlx"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("")
    (broken / "core.py").write_text(
        "raise ImportError('libcudnn_graph.so.9: cannot open shared object file')")
    code, _, err = routes_cli("--python", sys.executable,
                              "--env", f"PYTHONPATH={broken.parent}", *STUB_GRID)
    assert code == 26 and "ImportError: libcudnn_graph.so.9: cannot open shared" in err


def test_real_probe_without_trace_support_exits_27(routes_cli, stub_mlx, tmp_path):
    core = stub_mlx / "mlx" / "core.py"
    core.write_text(core.read_text().replace('"MLX_CUDA_SDPA_TRACE"', '"NO_SUCH_TRACE"'))
    code, _, err = routes_cli("--python", sys.executable, "--env", f"PYTHONPATH={stub_mlx}",
                              *STUB_GRID)
    assert code == 27 and "20 SDPA calls ran" in err
