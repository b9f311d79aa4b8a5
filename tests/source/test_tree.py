"""What an MLX tree says about itself, and the staged setup.py version hook."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import MAIN_LIKE_SETUP as SETUP

from mlx_builder.errors import BuildError
from mlx_builder.source.tree import (
    FALLBACK_CUDA_REQUIRES,
    HOOK_MARK,
    VERSION_ENV,
    cmake_minimum,
    cuda_runtime_requirements,
    install_version_hook,
    read_build_requires,
    read_upstream_version,
)

OLD_SETUP = '''
if __name__ == "__main__":
    install_requires = []
    if build_stage == 2 and build_cuda:
        install_requires += ["nvidia-cublas-cu12==12.9.*", "nvidia-cudnn-cu12==9.*"]
    setup(version=get_version("0.23.0"))
'''


def tree(tmp_path: Path, setup: str = SETUP, version=(0, 32, 2)) -> Path:
    (tmp_path / "mlx").mkdir(parents=True, exist_ok=True)
    if version:
        (tmp_path / "mlx/version.h").write_text(
            "".join(f"#define MLX_VERSION_{k} {v}\n"
                    for k, v in zip(("MAJOR", "MINOR", "PATCH"), version)))
    (tmp_path / "setup.py").write_text(setup)
    (tmp_path / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.27)\n")
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=80", "cmake>=3.25"]\n')
    return tmp_path


def test_version_requires_and_cmake_minimum(tmp_path):
    t = tree(tmp_path)
    assert read_upstream_version(t) == "0.32.2"
    assert read_build_requires(t) == ["setuptools>=80", "cmake>=3.25"]
    assert cmake_minimum(t) == (3, 27)
    old = tree(tmp_path / "old", OLD_SETUP, version=None)
    assert read_upstream_version(old) == "0.23.0"
    (old / "setup.py").write_text("print(1)\n")
    with pytest.raises(BuildError, match="cannot read MLX's version"):
        read_upstream_version(old)


def test_version_hook_reaches_setup_py_and_is_idempotent(tmp_path):
    t = tree(tmp_path)
    install_version_hook(t)
    install_version_hook(t)
    text = (t / "setup.py").read_text()
    assert text.count(HOOK_MARK) == 1
    run = lambda env: subprocess.run([sys.executable, "setup.py"], cwd=t, text=True,  # noqa
                                     capture_output=True, env={**os.environ, **env})
    assert run({VERSION_ENV: "0.32.2+mlxb.0123456789ab.deadbeef.cu90a"}).stdout.strip() == \
        "0.32.2+mlxb.0123456789ab.deadbeef.cu90a"
    assert run({VERSION_ENV: ""}).stdout.strip() == "0.0.0.dev1+githash"


def test_hook_needs_get_version(tmp_path):
    t = tree(tmp_path, "print('no version function')\n")
    with pytest.raises(BuildError, match="no get_version"):
        install_version_hook(t)


def test_cuda_requirements_from_setup_py(tmp_path):
    reqs, where = cuda_runtime_requirements(tree(tmp_path), 13, "Linux")
    assert where == "setup.py"
    assert reqs == ["nvidia-cudnn-cu13==9.*", "nvidia-nccl-cu13", "nvidia-cublas==13.*",
                    "nvidia-cuda-nvrtc==13.*"]
    reqs, _ = cuda_runtime_requirements(tree(tmp_path), 13, "Windows")
    assert "nvidia-nccl-cu13" not in reqs


def test_cuda_requirements_fall_back_when_setup_py_knows_only_another_toolkit(tmp_path):
    old = tree(tmp_path, OLD_SETUP, version=None)
    reqs, where = cuda_runtime_requirements(old, 12)
    assert (reqs, where) == (["nvidia-cublas-cu12==12.9.*", "nvidia-cudnn-cu12==9.*"], "setup.py")
    reqs, where = cuda_runtime_requirements(old, 13)
    assert reqs == FALLBACK_CUDA_REQUIRES[13] and "copy of upstream main" in where
    with pytest.raises(BuildError, match="CUDA 11"):
        cuda_runtime_requirements(old, 11)


@pytest.mark.real_mlx
def test_real_setup_py(tmp_path):
    repo = os.environ.get("MLX_BUILDER_MLX_REPO")
    if not repo or not Path(repo).exists():
        pytest.skip("needs a real MLX checkout: set MLX_BUILDER_MLX_REPO to a clone/mirror")
    for ref in ("v0.32.1", "846d176227a0ac13d2667e58d2bb68b322109ab0"):
        proc = subprocess.run(["git", "-C", repo, "show", f"{ref}:setup.py"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"MLX_BUILDER_MLX_REPO lacks {ref}")
        t = tmp_path / ref
        t.mkdir()
        (t / "setup.py").write_text(proc.stdout)
        reqs, where = cuda_runtime_requirements(t, 13)
        assert where == "setup.py" and "nvidia-cudnn-cu13==9.*" in reqs
        assert "nvidia-cuda-runtime==13.*" in reqs
        install_version_hook(t)
        assert HOOK_MARK in (t / "setup.py").read_text()
