"""Toolchain checks against fake tools on PATH."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from mlx_builder.errors import ToolchainError
from mlx_builder.wheelbuild.targets import parse_targets
from mlx_builder.wheelbuild.toolchain import (
    Toolchain,
    check_build_requires,
    check_cmake,
    check_cudnn,
    check_cxx,
    check_nvcc,
    check_toolchain,
)


def tool(bindir: Path, name: str, body: str) -> Path:
    bindir.mkdir(parents=True, exist_ok=True)
    path = bindir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def nvcc_body(release: str, codes: list[int]) -> str:
    listing = "\\n".join(f"sm_{c}" for c in codes)
    return (f'case "$1" in\n'
            f'  --version) echo "Cuda compilation tools, release {release}, V{release}.41";;\n'
            f'  --list-gpu-code) printf "{listing}\\n";;\n'
            f'  *) exit 1;;\nesac\n')


# A compiler that "links" by creating the -o file; a broken one fails like /opt/gcc.
GOOD_CXX = ('if [ "$1" = "--version" ]; then echo "g++ (GCC) 13.3.0"; exit 0; fi\n'
            'while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then : > "$2"; fi; shift; done\n')
BAD_CXX = ('if [ "$1" = "--version" ]; then echo "g++ (GCC) 14.2.0"; exit 0; fi\n'
           'echo "collect2: fatal error: could not run lto-wrapper" >&2; exit 1\n')


def env_with(bindir: Path, **extra: str) -> dict[str, str]:
    return {"PATH": str(bindir), "HOME": os.environ.get("HOME", "/tmp"), **extra}


def test_nvcc_too_old_for_sm121(tmp_path):
    tool(tmp_path / "bin", "nvcc", nvcc_body("12.8", [75, 80, 86, 89, 90, 100, 120]))
    env = env_with(tmp_path / "bin")
    bad = check_nvcc(parse_targets("cuda-sm121"), env)
    assert not bad.ok and bad.required
    assert "sm_121a needs CUDA >= 12.9" in bad.detail and bad.version == "12.8.41"
    good = check_nvcc(parse_targets("cuda-sm90,cuda-sm100"), env)
    assert good.ok and good.path == str(tmp_path / "bin" / "nvcc")


def test_nvcc_new_enough_but_missing_arch_in_listing(tmp_path):
    tool(tmp_path / "bin", "nvcc", nvcc_body("13.0", [75, 80, 90]))
    check = check_nvcc(parse_targets("cuda-sm120"), env_with(tmp_path / "bin"))
    assert not check.ok and "does not list sm_120" in check.detail


def test_nvcc_missing(tmp_path):
    (tmp_path / "bin").mkdir()
    check = check_nvcc(parse_targets("cuda-sm90"),
                       env_with(tmp_path / "bin", CUDA_HOME=str(tmp_path / "none")))
    if check.ok:        # this host has /usr/local/cuda/bin/nvcc
        assert check.path.startswith("/usr/local/cuda")
    else:
        assert "nvcc not found" in check.detail and "12.0" in check.fix


@pytest.mark.parametrize("version,ok", [("3.20.1", False), ("3.28.3", True), ("4.4.0", True)])
def test_cmake_version(tmp_path, version, ok):
    tool(tmp_path / "bin", "cmake", f'echo "cmake version {version}"\n')
    check = check_cmake(env_with(tmp_path / "bin"), (3, 25))
    assert check.ok is ok and check.version == version
    if not ok:
        assert "older than 3.25" in check.detail


def test_cxx_skips_a_compiler_whose_lto_link_fails(tmp_path):
    bindir = tmp_path / "bin"
    tool(bindir, "c++", BAD_CXX)
    good = tool(bindir, "g++", GOOD_CXX)
    check, chosen = check_cxx(env_with(bindir))
    assert check.ok and chosen == str(good)
    assert "could not run lto-wrapper" in check.detail and check.version == "g++ 13.3.0"


def test_cxx_kind_from_the_file_a_plain_cxx_links_to(tmp_path):
    real = tool(tmp_path / "bin", "x86_64-linux-gnu-g++-12", GOOD_CXX.replace(
        "g++ (GCC) 13.3.0", "c++ (Debian 12.2.0-14) 12.2.0"))
    (tmp_path / "bin" / "c++").symlink_to(real)
    check, _cxx = check_cxx(env_with(tmp_path / "bin", CXX=str(tmp_path / "bin" / "c++")))
    assert check.ok and check.version == "g++ 12.2.0"


def test_explicit_cxx_that_cannot_link_fails(tmp_path):
    bad = tool(tmp_path / "bin", "g++", BAD_CXX)
    check, chosen = check_cxx(env_with(tmp_path / "bin", CXX=str(bad)))
    assert chosen is None and not check.ok
    assert "lto-wrapper" in check.detail and "CXX" in check.fix


def cudnn_tree(root: Path, major: int = 9, minor: int = 19) -> tuple[Path, Path]:
    inc, lib = root / "include", root / "lib"
    inc.mkdir(parents=True)
    lib.mkdir()
    (inc / "cudnn_version.h").write_text(
        f"#define CUDNN_MAJOR {major}\n#define CUDNN_MINOR {minor}\n#define CUDNN_PATCHLEVEL 0\n")
    (lib / f"libcudnn.so.{major}").write_bytes(b"")
    return inc, lib


def test_cudnn_from_env_paths(tmp_path):
    inc, lib = cudnn_tree(tmp_path / "cudnn")
    env = env_with(tmp_path / "bin", CUDNN_INCLUDE_PATH=str(inc), CUDNN_LIBRARY_PATH=str(lib))
    check, args = check_cudnn(env, "/nonexistent/python", None)
    assert check.ok and check.version == "9.19.0"
    assert args == (f"-DCUDNN_INCLUDE_PATH={inc}", f"-DCUDNN_LIBRARY_PATH={lib}")


def test_cudnn_env_paths_that_hold_nothing_fail(tmp_path):
    env = env_with(tmp_path / "bin", CUDNN_INCLUDE_PATH=str(tmp_path), CUDNN_LIBRARY_PATH=str(tmp_path))
    check, args = check_cudnn(env, "/nonexistent/python", None)
    assert not check.ok and args == () and "hold no" in check.detail


def test_cudnn_from_the_python_package(tmp_path):
    site = tmp_path / "site"
    inc, _lib = cudnn_tree(site / "nvidia" / "cudnn", minor=2)
    python = tool(tmp_path / "bin", "python3",
                  f'PYTHONPATH={site} exec {sys.executable} "$@"\n')
    check, args = check_cudnn(env_with(tmp_path / "bin"), str(python), None)
    assert check.ok and check.version == "9.2.0" and "python package" in check.detail
    assert args[0] == f"-DCUDNN_INCLUDE_PATH={inc}"


def test_build_requires_against_a_real_python():
    env = dict(os.environ)
    ok = check_build_requires(sys.executable, ["pip>=1"], env)
    assert ok.ok
    bad = check_build_requires(sys.executable, ["pip>=1", "surely-absent-pkg-mlxb>=2"], env)
    assert not bad.ok and "surely-absent-pkg-mlxb>=2" in bad.detail
    assert bad.fix.startswith(sys.executable) and "surely-absent-pkg-mlxb>=2" in bad.fix


def test_cmake_requirement_is_met_by_cmake_on_path(tmp_path):
    tool(tmp_path / "bin", "cmake", 'echo "cmake version 3.30.0"\n')
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    cmake = check_cmake(env)
    check = check_build_requires(sys.executable, ["cmake>=3.25"], env, cmake)
    assert check.ok, check.detail


def test_whole_toolchain_for_cuda_with_fakes(tmp_path):
    bindir = tmp_path / "bin"
    tool(bindir, "nvcc", nvcc_body("13.0", [80, 90, 120, 121]))
    tool(bindir, "cmake", 'echo "cmake version 4.4.0"\n')
    tool(bindir, "g++", GOOD_CXX)
    inc, lib = cudnn_tree(tmp_path / "cudnn")
    env = env_with(bindir, CUDNN_INCLUDE_PATH=str(inc), CUDNN_LIBRARY_PATH=str(lib))
    tc = check_toolchain(parse_targets("cuda-sm90,cuda-sm121"), env=env,
                         python="/nonexistent/python")
    by = {c.name: c for c in tc.checks}
    assert by["nvcc"].ok and by["cmake"].ok and by["c++"].ok and by["cudnn"].ok
    assert not by["ninja"].ok and not by["ninja"].required
    assert tc.env["CUDACXX"] == str(bindir / "nvcc") and tc.env["CXX"] == str(bindir / "g++")
    assert f"-DCMAKE_CUDA_HOST_COMPILER={bindir / 'g++'}" in tc.cmake_args
    assert tc.versions()["nvcc"] == "13.0.41"


def test_cuda_needs_a_cmake_that_knows_nvccs_cxx20(tmp_path):
    """CMake 3.25.0/.1 cannot give nvcc C++20 (CUDA20); MLX's CUDA backend needs it."""
    bindir = tmp_path / "bin"
    tool(bindir, "cmake", 'echo "cmake version 3.25.1"\n')
    env = env_with(bindir)
    cuda = check_toolchain(parse_targets("cuda-sm121"), env=env, python="/nonexistent/python")
    cmake = next(c for c in cuda.checks if c.name == "cmake")
    assert not cmake.ok and "older than 3.25.2" in cmake.detail
    cpu = check_toolchain(parse_targets("cpu"), env=env, python="/nonexistent/python")
    assert next(c for c in cpu.checks if c.name == "cmake").ok


def test_build_pythons_venv_comes_first_on_path(tmp_path):
    venv = tmp_path / "venv"
    (venv / "pyvenv.cfg").parent.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    tool(venv / "bin", "python", f'exec {sys.executable} "$@"\n')
    tool(venv / "bin", "cmake", 'echo "cmake version 4.4.5"\n')
    tool(tmp_path / "bin", "cmake", 'echo "cmake version 3.25.1"\n')
    tc = check_toolchain(parse_targets("cuda-sm90"), env=env_with(tmp_path / "bin"),
                         python=str(venv / "bin" / "python"))
    cmake = next(c for c in tc.checks if c.name == "cmake")
    assert cmake.ok and cmake.path == str(venv / "bin" / "cmake")
    assert tc.env["PATH"] == f"{venv / 'bin'}:{tmp_path / 'bin'}"
    plain = check_toolchain(parse_targets("cpu"), env=env_with(tmp_path / "bin"),
                            python="/nonexistent/python")
    assert "PATH" not in plain.env


def test_require_raises_with_every_failure():
    from mlx_builder.wheelbuild.toolchain import Check
    tc = Toolchain((Check("nvcc", False, True, detail="too old", fix="upgrade"),
                    Check("ninja", False, False, detail="absent"),
                    Check("cmake", True, True, "4.4")))
    with pytest.raises(ToolchainError) as exc:
        tc.require()
    assert "nvcc" in exc.value.what and "ninja" not in exc.value.what
    assert exc.value.next_step == "upgrade" and exc.value.exit_code == 15


def test_doctor_command_reports_and_fails_on_missing_tools(tmp_path, monkeypatch):
    import json as _json

    from click.testing import CliRunner

    from mlx_builder.cli import cli
    tool(tmp_path / "bin", "nvcc", nvcc_body("12.8", [80, 90, 120]))
    tool(tmp_path / "bin", "cmake", 'echo "cmake version 4.4.0"\n')
    tool(tmp_path / "bin", "g++", GOOD_CXX)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.delenv("CUDACXX", raising=False)
    result = CliRunner().invoke(cli, ["--cache-dir", str(tmp_path / "c"), "doctor",
                                      "--target", "cuda-sm121", "--toolchain", "system",
                                      "--json"])
    assert isinstance(result.exception, ToolchainError)
    report = _json.loads(result.output[:result.output.rindex("}") + 1])
    by = {c["name"]: c for c in report["checks"]}
    assert report["target"] == "cuda-sm121" and not report["ok"]
    assert not by["nvcc"]["ok"] and "12.9" in by["nvcc"]["detail"] and by["cmake"]["ok"]
    assert by["build-python"]["required"] is False      # online: pip isolation installs them
