"""Cross-build pieces: the target Python, BLAS, compilers, the CMake toolchain file."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner

from mlx_builder.wheelbuild.buildenv import PLATFORMS
from mlx_builder.wheelbuild.cross import (
    check_cross_compiler,
    check_target_blas,
    check_target_python,
    debian_arch,
    find_target_python,
    toolchain_file,
)

ARM = PLATFORMS["linux-aarch64"]


def touch(p: Path, text: str = "") -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_target_python_from_debian_multiarch(tmp_path):
    inc = tmp_path / "include"
    check, tp = check_target_python(ARM, "3.11", inc)
    assert not check.ok and tp is None
    assert "libpython3.11-dev:arm64" in check.fix and "dpkg --add-architecture arm64" in check.fix
    touch(inc / "python3.11" / "Python.h")
    touch(inc / "aarch64-linux-gnu" / "python3.11" / "pyconfig.h")
    check, tp = check_target_python(ARM, "3.11", inc)
    assert check.ok and tp == find_target_python(ARM, "3.11", inc)
    assert tp.soabi == "cpython-311-aarch64-linux-gnu"
    assert tp.ext_suffix == ".cpython-311-aarch64-linux-gnu.so"
    args = tp.cmake_args()
    assert f"-DPython_INCLUDE_DIR={inc / 'python3.11'}" in args
    assert "-DNB_SUFFIX=.cpython-311-aarch64-linux-gnu.so" in args


def test_target_blas_names_the_arm64_packages(tmp_path):
    check = check_target_blas(ARM, tmp_path)
    assert not check.ok and "libopenblas-dev:arm64 liblapacke-dev:arm64" in check.fix
    touch(tmp_path / "usr/include/lapacke.h")
    touch(tmp_path / "usr/include/aarch64-linux-gnu/cblas.h")
    touch(tmp_path / "usr/lib/aarch64-linux-gnu/libopenblas.so.0")
    assert check_target_blas(ARM, tmp_path).ok
    touch(tmp_path / "usr/lib/x86_64-linux-gnu/libopenblas.so.0")   # the host's do not count
    os.remove(tmp_path / "usr/lib/aarch64-linux-gnu/libopenblas.so.0")
    assert not check_target_blas(ARM, tmp_path).ok


def test_cross_compiler_on_path(tmp_path):
    env = {"PATH": str(tmp_path)}
    check = check_cross_compiler(ARM, env)
    assert not check.ok and "crossbuild-essential-arm64" in check.fix
    for name in ("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++"):
        touch(tmp_path / name, "#!/bin/sh\n").chmod(0o755)
    check = check_cross_compiler(ARM, env)
    assert check.ok and check.path.endswith("aarch64-linux-gnu-g++")
    assert debian_arch(ARM) == "arm64"


def test_toolchain_file(tmp_path):
    f = toolchain_file(tmp_path / "t.cmake", ARM, "/usr/bin/aarch64-linux-gnu-gcc",
                       "/usr/bin/aarch64-linux-gnu-g++", [tmp_path / "cuda"])
    text = f.read_text()
    assert "set(CMAKE_SYSTEM_PROCESSOR aarch64)" in text
    assert 'set(CMAKE_CUDA_HOST_COMPILER "/usr/bin/aarch64-linux-gnu-g++")' in text
    assert "set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)" in text
    assert f'"{tmp_path / "cuda"}"' in text and "MODE_PROGRAM NEVER" in text
    assert '"/usr/lib/x86_64-linux-gnu"' in text      # ignored for the target


def test_doctor_reports_the_registry_toolchain_before_it_is_made(tmp_path, monkeypatch):
    import json

    from mlx_builder.cli import cli
    monkeypatch.delenv("CUDACXX", raising=False)
    result = CliRunner().invoke(cli, ["--cache-dir", str(tmp_path / "c"), "doctor",
                                      "--target", "cuda-sm121", "--json"])
    report = json.loads(result.output[:result.output.rindex("}") + 1])
    by = {c["name"]: c for c in report["checks"]}
    assert by["toolchain"]["version"] == "pypi" and "not made yet" in by["toolchain"]["detail"]
    assert "nvidia-cuda-nvcc==" in by["toolchain"]["detail"]
    assert "nvcc" not in by and "cmake" not in by        # the environment supplies them
    offline = CliRunner().invoke(cli, ["--cache-dir", str(tmp_path / "c"), "--offline",
                                       "doctor", "--target", "cuda-sm121",
                                       "--toolchain", "pypi", "--json"])
    assert offline.exit_code != 0
    report = json.loads(offline.output[:offline.output.rindex("}") + 1])
    bad = {c["name"]: c for c in report["checks"]}["toolchain"]
    assert not bad["ok"] and "offline" in bad["detail"]
