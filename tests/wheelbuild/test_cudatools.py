"""CUDA checks that use NVIDIA's Python packages (a toolkit without cuBLAS,
cuFFT, NVRTC or NCCL), the include overlay, the libcuda link stub and a
toolkit reached through a wrapper script."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_toolchain import env_with, nvcc_body, tool

from mlx_builder.wheelbuild.cudatools import (
    CudaLibs,
    check_cuda_libs,
    check_nccl,
    cuda_root,
    driver_functions,
    make_driver_stub,
    packaged_cuda_lib,
)

CUDA_H = """typedef int CUresult;
CUresult cuInit(unsigned int flags);
#define cuMemAlloc cuMemAlloc_v2
CUresult cuMemAlloc(void **p, unsigned long n);
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#define cuMemcpyAsync cuMemcpyAsync_ptsz
#endif
CUresult cuMemcpyAsync(void *dst, const void *src, unsigned long n);
const char *notADriverCall(void);
"""


def toolkit(root: Path) -> str:
    """A CUDA 13.0 toolkit with only cudart (like this CPU machine's)."""
    nvcc = tool(root / "bin", "nvcc", nvcc_body("13.0", [90, 121]))
    (root / "bin" / "nvcc.profile").write_text("")
    (root / "include").mkdir(parents=True)
    (root / "include" / "cuda.h").write_text(CUDA_H)
    (root / "include" / "cuda_runtime.h").write_text("// toolkit's\n")
    (root / "lib64").mkdir()
    (root / "lib64" / "libcudart.so.13").write_bytes(b"")
    return str(nvcc)


def site_with_cu13(site: Path) -> Path:
    """nvidia/cu13 as the CUDA 13 wheels (nvidia-cublas, -cufft, -cuda-nvrtc) lay it out."""
    cu13 = site / "nvidia" / "cu13"
    (cu13 / "lib").mkdir(parents=True)
    (cu13 / "include").mkdir()
    for lib in ("libcublasLt.so.13", "libcublas.so.13", "libcufft.so.12", "libnvrtc.so.13",
                "libnvrtc.alt.so.13", "libnvrtc-builtins.so.13.0"):
        (cu13 / "lib" / lib).write_bytes(b"")
    for header in ("cublasLt.h", "cufft.h", "nvrtc.h", "cuda_runtime.h"):
        (cu13 / "include" / header).write_text(f"// {header} from the wheel\n")
    return cu13


def python_over(tmp_path: Path, site: Path) -> str:
    return str(tool(tmp_path / "pybin", "python3",
                    f'PYTHONPATH={site} exec {sys.executable} "$@"\n'))


def test_cuda_libs_come_from_the_build_pythons_packages(tmp_path):
    nvcc = toolkit(tmp_path / "cuda")
    cu13 = site_with_cu13(tmp_path / "site")
    python = python_over(tmp_path, tmp_path / "site")
    check, libs = check_cuda_libs(nvcc, env_with(tmp_path / "bin"), python, host=False)
    assert check.ok, check.detail
    assert libs.libraries == {"cublasLt": cu13 / "lib" / "libcublasLt.so.13",
                              "cufft": cu13 / "lib" / "libcufft.so.12",
                              "nvrtc": cu13 / "lib" / "libnvrtc.so.13"}
    assert libs.include_dirs == (cu13 / "include",) and libs.stub_driver
    assert "generated stub" in check.detail and "python package" in check.detail


def test_cusolver_is_handed_over_when_packaged_and_never_required(tmp_path):
    """MLX 0.32.3+ links cuSOLVER (nvidia-cusolver puts it in nvidia/cu13)."""
    nvcc = toolkit(tmp_path / "cuda")
    cu13 = site_with_cu13(tmp_path / "site")
    (cu13 / "lib" / "libcusolver.so.12").write_bytes(b"")
    (cu13 / "include" / "cusolverDn.h").write_text("// cusolverDn.h from the wheel\n")
    python = python_over(tmp_path, tmp_path / "site")
    check, libs = check_cuda_libs(nvcc, env_with(tmp_path / "bin"), python, host=False)
    assert check.ok and libs.libraries["cusolver"] == cu13 / "lib" / "libcusolver.so.12"
    with_driver = CudaLibs(libs.libraries, libs.include_dirs, libs.toolkit_include, False)
    assert f"-DCUDA_cusolver_LIBRARY={cu13 / 'lib' / 'libcusolver.so.12'}" in \
        with_driver.cmake_args(tmp_path / "scratch", None)
    (cu13 / "lib" / "libcusolver.so.12").unlink()
    check, libs = check_cuda_libs(nvcc, env_with(tmp_path / "bin"), python, host=False)
    assert check.ok and "cusolver" not in libs.libraries


def test_cuda_libs_missing_everywhere_fail_with_both_fixes(tmp_path):
    nvcc = toolkit(tmp_path / "cuda")
    check, libs = check_cuda_libs(nvcc, env_with(tmp_path / "bin"), "/nonexistent/python",
                                  host=False)
    assert not check.ok and check.required
    assert "libcublasLt" in check.detail and "libnvrtc" in check.detail
    assert "pip install nvidia-cublas" in check.fix and libs.libraries == {}


def test_toolkit_libs_win_over_packages_and_a_driver_needs_no_stub(tmp_path):
    nvcc = toolkit(tmp_path / "cuda")
    root = tmp_path / "cuda"
    for name in ("cublasLt", "cufft", "nvrtc"):
        (root / "lib64" / f"lib{name}.so").write_bytes(b"")
        (root / "include" / {"cublasLt": "cublasLt.h", "cufft": "cufft.h",
                             "nvrtc": "nvrtc.h"}[name]).write_text("//\n")
    (root / "lib64" / "stubs").mkdir()
    (root / "lib64" / "stubs" / "libcuda.so").write_bytes(b"")
    site_with_cu13(tmp_path / "site")
    check, libs = check_cuda_libs(nvcc, env_with(tmp_path / "bin"),
                                  python_over(tmp_path, tmp_path / "site"), host=False)
    assert check.ok and libs.libraries == {} and not libs.stub_driver
    assert libs.cmake_args(tmp_path / "scratch", None) == []


def test_cuda12_package_layout(tmp_path):
    nvidia = tmp_path / "site" / "nvidia"
    for pkg, lib, header in (("cublas", "libcublasLt.so.12", "cublasLt.h"),):
        (nvidia / pkg / "lib").mkdir(parents=True)
        (nvidia / pkg / "include").mkdir()
        (nvidia / pkg / "lib" / lib).write_bytes(b"")
        (nvidia / pkg / "include" / header).write_text("//\n")
    assert packaged_cuda_lib(nvidia, "cublasLt") == (
        nvidia / "cublas" / "lib" / "libcublasLt.so.12", nvidia / "cublas" / "include")
    assert packaged_cuda_lib(nvidia, "cufft") is None


def test_overlay_links_only_headers_the_toolkit_lacks(tmp_path):
    toolkit(tmp_path / "cuda")
    cu13 = site_with_cu13(tmp_path / "site")
    libs = CudaLibs({"cublasLt": cu13 / "lib" / "libcublasLt.so.13"}, (cu13 / "include",),
                    tmp_path / "cuda" / "include", False)
    args = libs.cmake_args(tmp_path / "scratch", None)
    inc = tmp_path / "scratch" / "include"
    assert sorted(p.name for p in inc.iterdir()) == ["cublasLt.h", "cufft.h", "nvrtc.h"]
    assert (inc / "cufft.h").resolve() == (cu13 / "include" / "cufft.h").resolve()
    assert args == [f"-DCUDA_cublasLt_LIBRARY={cu13 / 'lib' / 'libcublasLt.so.13'}",
                    f"-DCMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES={inc}",
                    f"-DCMAKE_CUDA_STANDARD_INCLUDE_DIRECTORIES={inc}"]


def _cc() -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler on PATH: the libcuda stub cannot be built")
    return cc


def test_driver_functions_follow_the_headers_macros(tmp_path):
    inc = tmp_path / "include"
    inc.mkdir()
    (inc / "cuda.h").write_text(CUDA_H)
    assert driver_functions(_cc(), inc) == ["cuInit", "cuMemAlloc_v2", "cuMemcpyAsync",
                                            "cuMemcpyAsync_ptsz"]


def test_driver_stub_links_and_answers_stub_library(tmp_path):
    inc = tmp_path / "include"
    inc.mkdir()
    (inc / "cuda.h").write_text(CUDA_H)
    stub = make_driver_stub(tmp_path / "lib", _cc(), inc)
    assert stub.name == "libcuda.so"
    lib = ctypes.CDLL(str(stub))
    assert lib.cuInit(0) == 34 and lib.cuMemAlloc_v2(None, 0) == 34
    if shutil.which("readelf"):
        dyn = subprocess.run(["readelf", "-d", str(stub)], capture_output=True, text=True).stdout
        assert "[libcuda.so.1]" in dyn


def test_stub_driver_is_linked_and_loadable_by_its_soname(tmp_path):
    toolkit(tmp_path / "cuda")
    libs = CudaLibs({}, (), tmp_path / "cuda" / "include", True)
    args = libs.cmake_args(tmp_path / "scratch", _cc())
    stub = tmp_path / "scratch" / "lib" / "libcuda.so"
    assert args == [f"-DCUDA_cuda_driver_LIBRARY={stub}"]
    # the type-stub generator loads libmlx, which asks for libcuda.so.1
    assert ctypes.CDLL(str(stub.parent / "libcuda.so.1")).cuInit(0) == 34


def test_nccl_from_the_python_package(tmp_path):
    nccl = tmp_path / "site" / "nvidia" / "nccl"
    (nccl / "include").mkdir(parents=True)
    (nccl / "lib").mkdir()
    (nccl / "include" / "nccl.h").write_text(
        "#define NCCL_MAJOR 2\n#define NCCL_MINOR 30\n#define NCCL_PATCH 7\n"
        "#define NCCL_SUFFIX \"\"\n")
    (nccl / "lib" / "libnccl.so.2").write_bytes(b"")
    check, args = check_nccl(env_with(tmp_path / "bin"), None,
                             python_over(tmp_path, tmp_path / "site"), host=False)
    assert check.ok and check.version == "2.30.7" and "python package" in check.detail
    assert args == (f"-DNCCL_INCLUDE_DIRS={nccl / 'include'}",
                    f"-DNCCL_LIBRARIES={nccl / 'lib' / 'libnccl.so.2'}")
    check, args = check_nccl(env_with(tmp_path / "bin"), None, "/nonexistent/python", host=False)
    assert not check.ok and not check.required and args == ()


def test_cuda_root_through_a_wrapper_script(tmp_path):
    real = tmp_path / "cuda-13.0" / "bin"
    tool(real, "nvcc", f'[ "$1" = "--dryrun" ] && echo "#$ _HERE_={real}" >&2; exit 0\n')
    (real / "nvcc.profile").write_text("")
    wrapper = tool(tmp_path / "wrap", "nvcc", f'exec {real / "nvcc"} "$@"\n')
    assert cuda_root(str(wrapper)) == tmp_path / "cuda-13.0"
    assert cuda_root(str(real / "nvcc")) == tmp_path / "cuda-13.0"


def test_toolkit_target_dirs_follow_the_host(monkeypatch):
    import platform as _platform

    from mlx_builder.wheelbuild import cudatools
    monkeypatch.setattr(_platform, "machine", lambda: "aarch64")
    assert cudatools._target_dirs() == ["sbsa-linux", "aarch64-linux"]
    monkeypatch.setattr(_platform, "machine", lambda: "x86_64")
    assert cudatools._target_dirs() == ["x86_64-linux"]
