"""mlx_builder.verify.testing and mlx_builder.verify.junit: venv/pip commands, staging,
JUnit parsing, judging parts, the summary, and a whole `mlx-builder test`
run against a wheel of a stand-in `mlx` package (no GPU, no real MLX)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import sysconfig
import threading
import zipfile
from pathlib import Path

import pytest
from gitfixture import git
from rich.console import Console

from mlx_builder import errors
from mlx_builder.process import StepRunner
from mlx_builder.settings import Settings
from mlx_builder.verify import testing
from mlx_builder.verify.junit import parse_junit, skip_reason
from mlx_builder.wheelbuild.manifest import inject

REPO = Path(__file__).resolve().parents[2]


def test_venv_command_system_site_packages():
    assert testing.venv_command("py", Path("/v")) == ["py", "-m", "venv", "/v"]
    assert testing.venv_command("py", Path("/v"), True) == [
        "py", "-m", "venv", "--system-site-packages", "/v"]


def test_pip_command_offline_uses_no_index_and_every_folder(tmp_path):
    wheel = tmp_path / "w" / "mlx-1-py3-none-any.whl"
    cmd = testing.pip_install_command("/v/bin/python", [wheel, "pytest>=8"],
                                      wheelhouse=tmp_path / "house", offline=True)
    assert cmd[:4] == ["/v/bin/python", "-m", "pip", "install"]
    assert "--no-index" in cmd
    links = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--find-links"]
    assert links == [str((tmp_path / "house").resolve()), str(wheel.parent.resolve())]
    assert cmd[-2:] == [str(wheel), "pytest>=8"]


def test_pip_command_online_prefers_wheelhouse_without_no_index(tmp_path):
    cmd = testing.pip_install_command("py", ["mlx-lm==0.32.2"], wheelhouse=tmp_path,
                                      no_deps=True)
    assert "--no-index" not in cmd and "--no-deps" in cmd
    assert cmd[cmd.index("--find-links") + 1] == str(tmp_path.resolve())
    assert "--find-links" not in testing.pip_install_command("py", ["x"])


class RecordingRunner:
    """Stands in for StepRunner: records (step, argv) and succeeds."""

    def __init__(self):
        self.calls = []

    def run(self, step, argv, **kwargs):
        self.calls.append((step, [str(a) for a in argv]))


def test_install_wheel_no_deps_keeps_dependencies_of_the_test_requirements(tmp_path):
    wheel = tmp_path / "mlx-1-cp312-cp312-linux_x86_64.whl"
    runner = RecordingRunner()
    testing.install_wheel(runner, Path("/v/bin/python"), wheel, ("pytest>=8", "numpy"),
                          no_deps=True)
    (step1, cmd1), (step2, cmd2) = runner.calls
    assert step1 == "install-wheel" and "--no-deps" in cmd1
    assert cmd1[-1] == str(wheel.resolve()) and "pytest>=8" not in cmd1
    assert step2 == "install-test-requirements" and "--no-deps" not in cmd2
    assert cmd2[-2:] == ["pytest>=8", "numpy"]


def test_install_wheel_with_deps_is_one_pip_call(tmp_path):
    wheel = tmp_path / "mlx-1-py3-none-any.whl"
    runner = RecordingRunner()
    testing.install_wheel(runner, Path("py"), wheel, ("pytest>=8",))
    [(step, cmd)] = runner.calls
    assert step == "install-wheel" and "--no-deps" not in cmd
    assert cmd[-2:] == [str(wheel.resolve()), "pytest>=8"]
    runner = RecordingRunner()
    testing.install_wheel(runner, Path("py"), wheel, no_deps=True)
    assert [s for s, _ in runner.calls] == ["install-wheel"]


def test_upstream_tests_from_a_folder_and_from_a_bundle(tmp_path):
    import tarfile
    src = tmp_path / "mlx" / "python" / "tests"
    src.mkdir(parents=True)
    (src / "test_fast_sdpa.py").write_text("# sdpa tests\n")
    (src / "mlx_tests.py").write_text("# helpers\n")
    got = testing.stage_upstream_tests_from(src, tmp_path / "a")
    assert got.read_text() == "# sdpa tests\n"
    assert (tmp_path / "a" / "mlx_tests.py").read_text() == "# helpers\n"
    assert (tmp_path / "a" / "pytest.ini").is_file()
    bundle = tmp_path / "b.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        tar.add(tmp_path / "mlx", arcname="mlx-0.32.2_mlxb.x.cu90a/mlx")
    got = testing.stage_upstream_tests_from(bundle, tmp_path / "b")
    assert got.read_text() == "# sdpa tests\n"
    (src / "mlx_tests.py").unlink()
    with pytest.raises(errors.TestFailureError, match=r"no mlx_tests.py"):
        testing.stage_upstream_tests_from(src, tmp_path / "c")
    (tmp_path / "plain.txt").write_text("x")
    with pytest.raises(errors.TestFailureError, match="neither a folder nor a tarball"):
        testing.stage_upstream_tests_from(tmp_path / "plain.txt", tmp_path / "d")


def test_a_crashed_part_names_the_test_and_the_cpp_message(tmp_path):
    """A suite whose test aborts the process the way MLX does on an uncaught
    C++ exception: the part's note names the test and the message."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")
    (suite / "test_dies.py").write_text(
        "import os, pytest\n"
        "def test_fine():\n    pass\n"
        "@pytest.mark.parametrize('n', [7])\n"
        "def test_dies(n):\n"
        "    os.write(2, b\"terminate called after throwing an instance of "
        "'std::runtime_error'\\n  what():  Cache thrashing is happening\\n\")\n"
        "    os.abort()\n")
    junit = tmp_path / "dies.xml"
    log = tmp_path / "dies.log"
    cmd = testing.pytest_command(sys.executable, [str(suite / "test_dies.py")], junit, suite)
    import resource

    def no_core_dump():
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    with log.open("w") as fh:
        rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=suite,
                            preexec_fn=no_core_dump).returncode
    part = testing.PARTS[1]
    result = testing.judge_part(part, rc, junit, log)
    assert rc != 0 and result.status == "error"
    assert "last test started:" in result.note and "test_dies[7]" in result.note
    assert "what():  Cache thrashing is happening" in result.note


def test_crash_context_is_empty_without_a_log(tmp_path):
    assert testing.crash_context(tmp_path / "none.log") == ""
    (tmp_path / "quiet.log").write_text("collected 0 items\n")
    assert testing.crash_context(tmp_path / "quiet.log") == ""


def test_part_targets_split_the_suite_folder(tmp_path):
    for name in ("test_sdpa_large_head.py", "test_memory.py", "test_e2e_model.py",
                 "test_other.py"):
        (tmp_path / name).write_text("")
    sdpa = testing.part_targets("sdpa", tmp_path, None)
    assert [Path(p).name for p in sdpa] == ["test_other.py", "test_sdpa_large_head.py"]
    assert testing.part_targets("e2e", tmp_path, None)[1:] == ["-k", "not greedy"]
    assert testing.part_targets("greedy", tmp_path, None)[1:] == ["-k", "greedy"]
    assert testing.part_targets("upstream", tmp_path, tmp_path / "t.py") == [
        str(tmp_path / "t.py")]
    with pytest.raises(ValueError):
        testing.part_targets("nope", tmp_path, None)


def test_make_venv_refuses_to_replace_a_folder_that_is_no_venv(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(errors.TestFailureError, match="not a virtual environment"):
        testing.make_venv(StepRunner(tmp_path / "logs"), sys.executable, tmp_path)
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_gpu_skip_reason():
    assert testing.gpu_skip_reason({"cuda": True, "metal": False}) == ""
    why = testing.gpu_skip_reason({"cuda": False, "metal": False, "version": "9.9"})
    assert "no GPU" in why and "9.9" in why and "mx.cuda.is_available()" in why


# ------------------------------------------------------------------ JUnit

SAMPLE_TESTS = '''
import pytest
def test_ok(record_property):
    record_property("exponent_patched_D256", 1.03)
def test_bad():
    assert 1 == 2, "numbers differ"
@pytest.mark.skipif(True, reason="needs a GPU: none here")
def test_gpu_a(): pass
@pytest.mark.skipif(True, reason="needs a GPU: none here")
def test_gpu_b(): pass
'''
MODULE_SKIP = '''
import pytest
pytest.skip("MLX is not installed here", allow_module_level=True)
'''


def run_pytest(folder: Path, junit: Path, *files: str) -> int:
    (folder / "pytest.ini").write_text(testing.PYTEST_INI)
    cmd = testing.pytest_command(sys.executable, [str(folder / f) for f in files],
                                 junit, folder)
    return subprocess.run(cmd, cwd=folder, capture_output=True).returncode


@pytest.fixture(scope="module")
def junit_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("junit")
    (folder / "test_sample.py").write_text(SAMPLE_TESTS)
    (folder / "test_modskip.py").write_text(MODULE_SKIP)
    mixed, skipped = folder / "mixed.xml", folder / "skipped.xml"
    rcs = (run_pytest(folder, mixed, "test_sample.py"),
           run_pytest(folder, skipped, "test_modskip.py"))
    return rcs, mixed, skipped


def test_parse_junit_counts_reasons_and_properties(junit_files):
    (rc, _), mixed, _ = junit_files
    report = parse_junit(mixed)
    assert rc == 1
    assert report.counts == {"passed": 1, "failed": 1, "error": 0, "skipped": 2}
    assert report.skip_reasons() == [("needs a GPU: none here", 2)]
    assert report.properties() == {"exponent_patched_D256": "1.03"}
    (bad,) = report.problems()
    assert bad.name == "test_bad" and "numbers differ" in bad.message


def test_module_level_skip_reason_is_cleaned(junit_files):
    (_, _rc), _, skipped = junit_files
    report = parse_junit(skipped)
    assert report.skip_reasons() == [("MLX is not installed here", 1)]
    assert skip_reason("collection skipped",
                       "('/x/test_m.py', 36, 'Skipped: needs a GPU: no CUDA')") == \
        "needs a GPU: no CUDA"


def test_parse_junit_rejects_other_xml(tmp_path):
    (tmp_path / "x.xml").write_text("<html/>")
    (tmp_path / "y.xml").write_text("not xml")
    for name in ("x.xml", "y.xml"):
        with pytest.raises(ValueError):
            parse_junit(tmp_path / name)


def test_judge_part(junit_files, tmp_path):
    (_, _), mixed, skipped = junit_files
    part = testing.PARTS[1]
    failed = testing.judge_part(part, 1, mixed, tmp_path / "log")
    assert failed.status == "failed" and failed.failed
    assert "test_bad" in failed.note
    assert testing.judge_part(part, 0, skipped, tmp_path / "log").status == "skipped"
    crashed = testing.judge_part(part, -11, tmp_path / "missing.xml", tmp_path / "log")
    assert crashed.status == "error" and "no JUnit" in crashed.note
    # a crash after the XML was written (exit 139) still counts as an error
    assert testing.judge_part(part, 139, skipped, tmp_path / "log").status == "error"


def test_summary_tables_and_json(junit_files, tmp_path):
    (_, _), mixed, skipped = junit_files
    results = [testing.judge_part(testing.PARTS[0], 1, mixed, tmp_path / "l"),
               testing.judge_part(testing.PARTS[2], 0, skipped, tmp_path / "l"),
               testing.PartResult(testing.PARTS[3], "skipped", note="no GPU (see above)")]
    con = Console(width=160, record=True)
    con.print(testing.summary_table(results))
    con.print(testing.measurements_table(results))
    text = con.export_text()
    for needle in ("upstream", "failed", "memory", "skipped", "no GPU (see above)",
                   "exponent_patched_D256", "1.03"):
        assert needle in text
    data = testing.summary_json(results, {"version": "x"})
    assert [p["status"] for p in data["parts"]] == ["failed", "skipped", "skipped"]
    json.dumps(data)
    with pytest.raises(errors.TestFailureError) as exc:
        testing.raise_on_failure(results, tmp_path)
    assert exc.value.exit_code == 21 and "upstream" in exc.value.what
    testing.raise_on_failure(results[1:], tmp_path)


# ---------------------------------------------------------- staging files

def test_stage_suites_copies_the_folder_and_skips_without_mlx(tmp_path):
    staged = testing.stage_suites(tmp_path)
    assert (staged / "pytest.ini").is_file()
    assert {"sdpa_support.py", "test_sdpa_large_head.py", "test_memory.py",
            "test_e2e_model.py"} <= {p.name for p in staged.iterdir()}
    probe = subprocess.run([sys.executable, "-c", "import mlx.core"], capture_output=True)
    if probe.returncode == 0:
        pytest.skip("this interpreter has MLX; the no-MLX skip cannot be seen here")
    junit = tmp_path / "j.xml"
    targets = testing.part_targets("memory", staged, None)
    subprocess.run(testing.pytest_command(sys.executable, targets, junit, staged),
                   cwd=staged, capture_output=True)
    (reason, n), = parse_junit(junit).skip_reasons()
    assert "MLX is not installed" in reason and n == 1


UPSTREAM_TEST = '''
import mlx.core as mx
import mlx_tests
def test_fake_mlx_imports():
    assert mx.__version__ == mlx_tests.EXPECTED
'''


@pytest.fixture
def upstream_repo(tmp_path):
    repo = tmp_path / "mlx-upstream"
    (repo / "python" / "tests").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "python" / "tests" / "test_fast_sdpa.py").write_text(UPSTREAM_TEST)
    (repo / "python" / "tests" / "mlx_tests.py").write_text("EXPECTED = '0.0.1'\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "tests")
    return repo, git(repo, "rev-parse", "HEAD")


def test_stage_upstream_tests_reads_the_commit(upstream_repo, tmp_path):
    import git as gitpython
    repo, commit = upstream_repo
    path = testing.stage_upstream_tests(gitpython.Repo(repo), commit, tmp_path / "up")
    assert path.read_text() == UPSTREAM_TEST
    assert (tmp_path / "up" / "mlx_tests.py").read_text() == "EXPECTED = '0.0.1'\n"
    with pytest.raises(errors.TestFailureError, match="cannot read"):
        testing.stage_upstream_tests(gitpython.Repo(repo), "0" * 40, tmp_path / "x")


# --------------------------------------------------- a whole test command

FAKE_CORE = '''
"""A stand-in for mlx.core: imports, reports no GPU, computes nothing."""
__version__ = "0.0.1"
class _Backend:
    @staticmethod
    def is_available():
        return False
cuda = metal = _Backend()
def device_info():
    return {"device_name": "stand-in CPU"}
class fast:
    @staticmethod
    def scaled_dot_product_attention(q, k, v, *, scale, mask=None):
        "scaled_dot_product_attention(q, k, v, *, scale, mask=None)"
        raise NotImplementedError
'''


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"{name},sha256={digest.decode()},{len(data)}"


def fake_mlx_wheel(folder: Path) -> Path:
    files = {"mlx/__init__.py": b"", "mlx/core.py": FAKE_CORE.encode(),
             "mlx-0.0.1.dist-info/METADATA":
                 b"Metadata-Version: 2.1\nName: mlx\nVersion: 0.0.1\n\n",
             "mlx-0.0.1.dist-info/WHEEL":
                 b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
                 b"Tag: py3-none-any\n"}
    record = "\n".join(_record_line(n, d) for n, d in files.items())
    files["mlx-0.0.1.dist-info/RECORD"] = (record + "\nmlx-0.0.1.dist-info/RECORD,,\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / "mlx-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return wheel


@pytest.fixture(scope="module")
def test_venv(tmp_path_factory):
    """A venv that sees this interpreter's packages (pytest, numpy) through a
    .pth file, so the run needs no network."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    runner = StepRunner(venv.parent / "logs")
    vpy = testing.make_venv(runner, sys.executable, venv)
    site = subprocess.run([str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


@pytest.mark.integration
def test_whole_run_on_a_wheel_without_gpu(test_venv, upstream_repo, tmp_path):
    repo, commit = upstream_repo
    raw = fake_mlx_wheel(tmp_path / "raw")
    wheel = inject(raw, tmp_path / "dist" / raw.name, manifest={
        "schema": 1, "version": "0.0.1", "upstream_commit": commit, "target": "cpu"})
    settings = Settings(mlx_repo=str(repo), cache_dir=tmp_path / "cache", offline=True)
    opts = testing.WheelTestOptions(
        out_dir=tmp_path / "out", venv_dir=test_venv, offline=True, reuse_venv=True,
        parts=("upstream", "memory", "e2e", "greedy"))
    results = testing.run_wheel_tests(settings, wheel, opts)
    status = {r.part.key: (r.status, r.note) for r in results}
    assert status["upstream"][0] == "passed"
    for key in ("memory", "e2e", "greedy"):
        assert status[key] == ("skipped", "no GPU (see above)")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["mlx"]["cuda"] is False and summary["mlx"]["force_fused"] is False
    assert (tmp_path / "out" / "junit" / "upstream.xml").is_file()

    # The same upstream test fails against another commit's expectation.
    (repo / "python" / "tests" / "mlx_tests.py").write_text("EXPECTED = 'other'\n")
    git(repo, "commit", "-q", "-am", "change")
    with pytest.raises(errors.TestFailureError, match="upstream"):
        testing.run_wheel_tests(settings, wheel, testing.WheelTestOptions(
            out_dir=tmp_path / "out2", venv_dir=test_venv, offline=True,
            reuse_venv=True, parts=("upstream",),
            upstream_commit=git(repo, "rev-parse", "HEAD")))


def test_wheel_without_manifest_skips_upstream_with_a_reason(tmp_path):
    raw = fake_mlx_wheel(tmp_path)
    commit, why = testing.upstream_commit_of(raw)
    assert commit is None and "--upstream-commit" in why
    assert testing.upstream_commit_of(raw, "abc") == ("abc", "")


def test_offline_without_a_mirror_runs_the_other_parts(test_venv, tmp_path):
    """--offline on a GPU node with no cached mirror: the upstream part is
    'not run' with the --upstream-tests hint; the rest runs and decides."""
    raw = fake_mlx_wheel(tmp_path / "raw")
    wheel = inject(raw, tmp_path / "dist" / raw.name, manifest={
        "schema": 1, "version": "0.0.1", "upstream_commit": "846d176227a0", "target": "cpu"})
    settings = Settings(mlx_repo="https://example.invalid/mlx", cache_dir=tmp_path / "cache",
                        offline=True)
    opts = testing.WheelTestOptions(
        out_dir=tmp_path / "out", venv_dir=test_venv, offline=True, reuse_venv=True,
        parts=("upstream", "memory"))
    results = testing.run_wheel_tests(settings, wheel, opts)
    status = {r.part.key: (r.status, r.note) for r in results}
    assert status["upstream"][0] == "not run"
    assert "no cached MLX mirror" in status["upstream"][1]
    assert "--upstream-tests DIR|BUNDLE" in status["upstream"][1]
    assert status["memory"] == ("skipped", "no GPU (see above)")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [p["status"] for p in summary["parts"]] == ["not run", "skipped"]


def test_fullscale_is_a_part_of_its_own_and_not_a_default():
    assert "fullscale" in testing.PART_KEYS
    assert "fullscale" not in testing.DEFAULT_PARTS
    assert set(testing.DEFAULT_PARTS) == set(testing.PART_KEYS) - {"fullscale"}
    assert testing.WheelTestOptions(Path("o"), Path("v")).parts == testing.DEFAULT_PARTS
    part = next(p for p in testing.PARTS if p.key == "fullscale")
    assert part.needs_gpu and part.needs_mlx_lm


def test_fullscale_targets_only_its_file(tmp_path):
    for name in ("test_fullscale.py", "test_fullscale_support.py",
                 "test_large_kernels.py", "test_memory.py", "test_e2e_model.py"):
        (tmp_path / name).write_text("")
    assert testing.part_targets("fullscale", tmp_path, None) == [
        str(tmp_path / "test_fullscale.py")]
    sdpa = [Path(p).name for p in testing.part_targets("sdpa", tmp_path, None)]
    assert sdpa == ["test_fullscale_support.py", "test_large_kernels.py"]


def test_parse_parts_default_and_fullscale():
    from mlx_builder.commands.test import parse_parts

    assert parse_parts(None) == testing.DEFAULT_PARTS
    assert parse_parts("fullscale") == ("fullscale",)
    assert parse_parts("sdpa, fullscale") == ("sdpa", "fullscale")
    with pytest.raises(errors.ConfigError):
        parse_parts("fullscales")


# ------------------------------------------------------------------ shards

SEVEN_TESTS = '''
import os
import pytest
def threads():
    return ",".join(os.environ.get(v, "-") for v in
                    ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"))
@pytest.mark.parametrize("n", range(6))
def test_case(n, record_property):
    record_property("shard", os.environ.get("MLX_BUILDER_SHARD", ""))
    record_property("threads", threads())
    assert n != 4, "case 4 fails"
def test_last(): pass
@pytest.mark.solo
def test_alone(record_property):
    record_property("shard", os.environ.get("MLX_BUILDER_SHARD", ""))
    record_property("threads", threads())
'''


def shard_folder(root: Path, body: str = SEVEN_TESTS) -> Path:
    """A staged copy of the real suite's conftest beside one test file."""
    folder = root / "sdpa"
    folder.mkdir(parents=True)
    conftest = testing.suite_dir() / "conftest.py"
    (folder / "conftest.py").write_text(conftest.read_text())
    (folder / "test_sample.py").write_text(body)
    (folder / "pytest.ini").write_text(testing.PYTEST_INI)
    return folder


def test_each_shard_takes_every_nth_test_and_together_they_take_all(tmp_path):
    folder = shard_folder(tmp_path)
    seen = []
    for i in range(3):
        junit = tmp_path / f"s{i}.xml"
        cmd = testing.pytest_command(sys.executable, [str(folder / "test_sample.py")],
                                     junit, folder)
        subprocess.run(cmd, cwd=folder, capture_output=True,
                       env={**os.environ, testing.SHARD_ENV: f"{i}/3"})
        names = [c.name for c in parse_junit(junit).cases]
        assert len(names) == (3 if i == 0 else 2)
        seen += names
    assert sorted(seen) == sorted([f"test_case[{n}]" for n in range(6)] + ["test_last"])


def test_the_solo_shard_takes_only_the_tests_marked_solo(tmp_path):
    folder = shard_folder(tmp_path)
    junit = tmp_path / "solo.xml"
    cmd = testing.pytest_command(sys.executable, [str(folder / "test_sample.py")],
                                 junit, folder)
    subprocess.run(cmd, cwd=folder, capture_output=True,
                   env={**os.environ, testing.SHARD_ENV: testing.SOLO_SHARD})
    assert [c.name for c in parse_junit(junit).cases] == ["test_alone"]


@pytest.mark.parametrize("value", ["3/3", "x/2", "1", "0/0", "-1/2"])
def test_a_bad_shard_value_is_a_usage_error(tmp_path, value):
    folder = shard_folder(tmp_path)
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-c", str(folder / "pytest.ini"),
                          str(folder / "test_sample.py")], cwd=folder, capture_output=True,
                         text=True, env={**os.environ, testing.SHARD_ENV: value})
    assert res.returncode == 4
    assert "MLX_BUILDER_SHARD" in res.stderr and "0 <= i < n" in res.stderr
    assert "or solo" in res.stderr


def fake_mlx(root: Path) -> Path:
    """A package `mlx.core` whose clear_cache() appends a line to calls.txt."""
    pkg = root / "fakemlx" / "mlx"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core.py").write_text(
        "def clear_cache():\n"
        f"    with open({str(root / 'calls.txt')!r}, 'a') as f:\n"
        "        f.write('clear\\n')\n")
    return pkg.parent


@pytest.mark.parametrize("shard,calls", [("0/2", 4), ("solo", 1), (None, 0)])
def test_shards_hand_mlx_cached_memory_back_after_each_test(tmp_path, shard, calls):
    folder = shard_folder(tmp_path, "import mlx.core\n" + SEVEN_TESTS)
    env = {**os.environ, "PYTHONPATH": str(fake_mlx(tmp_path))}
    env.pop(testing.SHARD_ENV, None)
    if shard is not None:
        env[testing.SHARD_ENV] = shard
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-c", str(folder / "pytest.ini"),
                          str(folder / "test_sample.py")], cwd=folder, capture_output=True,
                         text=True, env=env)
    assert res.returncode in (0, 1), res.stdout + res.stderr
    log = tmp_path / "calls.txt"
    assert (log.read_text().count("clear") if log.exists() else 0) == calls


def test_combined_returncode():
    assert testing.combined_returncode([0, 0, 5]) == 0
    assert testing.combined_returncode([5, 5]) == 5
    assert testing.combined_returncode([0, 1, 5]) == 1
    assert testing.combined_returncode([1, -9, 0]) == -9
    assert testing.combined_returncode([0, 2]) == 2


def run_sdpa_part(tmp_path: Path, folder: Path, jobs: int) -> testing.PartResult:
    runner = StepRunner(tmp_path / "logs")
    part = next(p for p in testing.PARTS if p.key == "sdpa")
    (result,) = testing.run_parts(runner, Path(sys.executable), [part], suites=folder,
                                  upstream_test=None, junit_dir=tmp_path / "junit",
                                  env={}, skip={}, jobs=jobs)
    return result


def test_a_part_in_three_processes_is_judged_as_one(tmp_path):
    result = run_sdpa_part(tmp_path, shard_folder(tmp_path / "suite"), jobs=3)
    assert result.status == "failed" and "case 4 fails" in result.note
    assert result.report is not None
    assert result.report.counts == {"passed": 7, "failed": 1, "error": 0, "skipped": 0}
    merged = parse_junit(tmp_path / "junit" / "sdpa.xml")
    assert len(merged.cases) == 8
    shard_of = {c.name: dict(c.properties).get("shard") for c in merged.cases if c.properties}
    assert set(shard_of.values()) == {"0/3", "1/3", "2/3", "solo"}
    assert shard_of["test_alone"] == "solo"
    logs = sorted(p.name for p in (tmp_path / "logs").glob("*.log"))
    assert sorted(name.split("-", 1)[1] for name in logs) == sorted(
        [f"test-sdpa-{i}of3.log" for i in (1, 2, 3)] + ["test-sdpa-solo.log"])
    assert len({name.split("-", 1)[0] for name in logs}) == 4  # numbered apart


def test_shards_share_the_cores_threads_and_the_solo_process_keeps_the_defaults(
        tmp_path, monkeypatch):
    for var in testing.THREAD_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "5")  # a user's own value stays
    monkeypatch.setattr(testing, "usable_cores", lambda: 7)
    run_sdpa_part(tmp_path, shard_folder(tmp_path / "suite"), jobs=3)
    merged = parse_junit(tmp_path / "junit" / "sdpa.xml")
    seen = {c.name: dict(c.properties) for c in merged.cases if c.properties}
    assert {p["threads"] for n, p in seen.items() if p["shard"] != "solo"} == {"2,2,5"}
    assert seen["test_alone"]["threads"] == "-,-,5"


@pytest.mark.parametrize("jobs,cores,share", [(12, 16, "1"), (4, 16, "4"), (3, 2, "1"),
                                              (1, 8, "8")])
def test_shard_threads_split_the_cores(monkeypatch, jobs, cores, share):
    for var in testing.THREAD_VARS:
        monkeypatch.delenv(var, raising=False)
    assert testing.shard_threads({}, jobs, cores) == dict.fromkeys(testing.THREAD_VARS, share)
    assert "OMP_NUM_THREADS" not in testing.shard_threads({"OMP_NUM_THREADS": "3"}, jobs, cores)


def test_a_shard_that_dies_makes_the_part_an_error_naming_its_log(tmp_path):
    body = SEVEN_TESTS + '''
def test_dies_in_its_shard():
    if os.environ.get("MLX_BUILDER_SHARD") == "1/2":
        os._exit(3)
'''
    result = run_sdpa_part(tmp_path, shard_folder(tmp_path / "suite", body), jobs=2)
    assert result.status == "error" and "no JUnit" in result.note
    assert result.log is not None and result.log.name.endswith("test-sdpa-2of2.log")
    assert "test_dies_in_its_shard" in result.note


def test_one_job_keeps_the_single_process_run(tmp_path):
    result = run_sdpa_part(tmp_path, shard_folder(tmp_path / "suite"), jobs=1)
    assert result.report is not None and len(result.report.cases) == 8
    logs = [p.name for p in (tmp_path / "logs").glob("*.log")]
    assert len(logs) == 1 and logs[0].endswith("test-sdpa.log")


class RaisingRunner(StepRunner):
    """Raises for the first shard once the second has started, as a Ctrl-C
    in the command would."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__(log_dir)
        self.started = threading.Event()

    def run(self, step, cmd, **kw):
        if step.endswith("-1of2"):
            self.started.wait(30)
            raise KeyboardInterrupt
        line = kw.pop("on_line")

        def seen(text):
            self.started.set()
            return line(text)
        return super().run(step, cmd, on_line=seen, **kw)


def test_an_interrupt_stops_the_other_shards(tmp_path):
    body = "import time\nimport pytest\n" \
           "@pytest.mark.parametrize('n', range(400))\n" \
           "def test_slow(n):\n    time.sleep(0.05)\n"
    folder = shard_folder(tmp_path / "suite", body)
    runner = RaisingRunner(tmp_path / "logs")
    part = next(p for p in testing.PARTS if p.key == "sdpa")
    with pytest.raises(KeyboardInterrupt):
        testing.run_parts(runner, Path(sys.executable), [part], suites=folder,
                          upstream_test=None, junit_dir=tmp_path / "junit",
                          env={}, skip={}, jobs=2)
    # the second shard (200 tests of 50 ms) was killed, not run to its end
    assert not (tmp_path / "junit" / "sdpa-2of2.xml").exists()
    (log,) = (tmp_path / "logs").glob("*-test-sdpa-2of2.log")
    assert "pytest" in log.read_text()  # it had started
    assert "test_slow[399]" not in log.read_text()  # its last test
