"""CUDA toolchain checks: nvcc per architecture, CUDA libraries, cuDNN, NCCL,
cuobjdump. Part of ``toolchain`` (which re-exports them)."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path
from typing import Mapping

from mlx_builder.probe import Check, fmt, run, which
from mlx_builder.targets import TargetSet


def find_nvcc(env: Mapping[str, str]) -> str | None:
    if env.get("CUDACXX") and os.path.exists(env["CUDACXX"]):
        return env["CUDACXX"]
    found = which("nvcc", env)
    if found:
        return found
    for root in (env.get("CUDA_HOME"), env.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.path.exists(os.path.join(root, "bin", "nvcc")):
            return os.path.join(root, "bin", "nvcc")
    return None


def nvcc_supported(nvcc: str, env: Mapping[str, str]) -> set[int]:
    """SASS numbers nvcc can emit (``--list-gpu-code``, else ``--list-gpu-arch``)."""
    for flag, prefix in (("--list-gpu-code", "sm_"), ("--list-gpu-arch", "compute_")):
        rc, out = run([nvcc, flag], env)
        nums = {int(n) for n in re.findall(prefix + r"(\d+)", out)} if rc == 0 else set()
        if nums:
            return nums
    return set()


def check_nvcc(targets: TargetSet, env: Mapping[str, str]) -> Check:
    nvcc = find_nvcc(env)
    if not nvcc:
        return Check("nvcc", False, True, detail="nvcc not found (PATH, CUDACXX, "
                     "CUDA_HOME, /usr/local/cuda)",
                     fix=f"install the CUDA toolkit >= {fmt(targets.min_cuda)} "
                         "and put nvcc on PATH or set CUDACXX")
    rc, out = run([nvcc, "--version"], env)
    m = re.search(r"release (\d+)\.(\d+), V([\d.]+)", out)
    if rc != 0 or not m:
        return Check("nvcc", False, True, path=nvcc,
                     detail=f"`nvcc --version` failed: {out.strip()[:200]}")
    version = m.group(3)
    release = (int(m.group(1)), int(m.group(2)))
    supported = nvcc_supported(nvcc, env)
    problems = []
    for entry in targets.arch_entries:
        if release < entry.min_cuda:
            problems.append(f"sm_{entry.name} needs CUDA >= {fmt(entry.min_cuda)}")
        elif supported and entry.number not in supported:
            problems.append(f"this nvcc does not list sm_{entry.number}")
    if problems:
        listed = ", ".join(f"sm_{n}" for n in sorted(supported)) or "nothing"
        return Check("nvcc", False, True, version, path=nvcc,
                     detail=f"nvcc {version}: {'; '.join(problems)} (it lists {listed})",
                     fix=f"install CUDA >= {fmt(targets.min_cuda)} or drop those targets")
    return Check("nvcc", True, True, version, detail=nvcc, path=nvcc)


def cuda_root(nvcc: str) -> Path:
    return Path(os.path.realpath(nvcc)).parent.parent


def check_cuda_libs(nvcc: str | None, env: Mapping[str, str]) -> Check:
    """cuBLASLt, cuFFT, NVRTC and the driver (or its stub) for linking libmlx."""
    roots = [cuda_root(nvcc)] if nvcc else []
    roots += [Path(p) for p in (env.get("CUDA_HOME"), "/usr/local/cuda") if p]
    dirs = []
    for root in roots:
        dirs += [root / "lib64", root / "lib", root / "lib64" / "stubs",
                 root / "targets" / f"{platform.machine()}-linux" / "lib",
                 root / "targets" / f"{platform.machine()}-linux" / "lib" / "stubs"]
    dirs.append(Path(f"/usr/lib/{platform.machine()}-linux-gnu"))
    missing = []
    for lib in ("cublasLt", "cufft", "nvrtc", "cuda"):
        if not any(d.is_dir() and any(d.glob(f"lib{lib}.so*")) for d in dirs):
            missing.append(f"lib{lib}")
    if missing:
        return Check("cuda-libs", False, True,
                     detail=f"not found: {', '.join(missing)} (looked in the CUDA "
                            "toolkit's lib64, lib64/stubs and the system lib dir)",
                     fix="install the CUDA toolkit's cuBLAS, cuFFT and NVRTC "
                         "development libraries")
    return Check("cuda-libs", True, True, detail="cublasLt, cufft, nvrtc, cuda")


def _python_package_dir(python: str | None, module: str,
                        env: Mapping[str, str]) -> Path | None:
    code = (f"import {module} as m, sys; p = list(getattr(m, '__path__', []));"
            "print(p[0] if p else '')")
    rc, out = run([python or "python3", "-c", code], env)
    line = out.strip().splitlines()[-1] if out.strip() else ""
    return Path(line) if rc == 0 and line and Path(line).is_dir() else None


def _header_version(header: Path, prefix: str) -> str | None:
    try:
        text = header.read_text(errors="replace")
    except OSError:
        return None
    parts = [re.search(rf"#define {prefix}_{k}\s+(\d+)", text)
             for k in ("MAJOR", "MINOR", "PATCHLEVEL")]
    if not all(parts):
        return None
    return ".".join(p.group(1) for p in parts)


def check_cudnn(env: Mapping[str, str], python: str | None,
                nvcc: str | None) -> tuple[Check, tuple[str, ...]]:
    """Find cudnn.h + libcudnn; returns the CUDNN_*_PATH CMake args to use."""
    candidates: list[tuple[str, Path, Path]] = []
    if env.get("CUDNN_INCLUDE_PATH") or env.get("CUDNN_LIBRARY_PATH"):
        inc = Path(env.get("CUDNN_INCLUDE_PATH", ""))
        lib = Path(env.get("CUDNN_LIBRARY_PATH", ""))
        candidates.append(("CUDNN_INCLUDE_PATH/CUDNN_LIBRARY_PATH", inc, lib))
    pkg = _python_package_dir(python, "nvidia.cudnn", env)
    if pkg:
        candidates.append(("python package nvidia-cudnn", pkg / "include", pkg / "lib"))
    arch = f"{platform.machine()}-linux-gnu"
    system_roots = ([cuda_root(nvcc)] if nvcc else []) + [Path("/usr/local/cuda"), Path("/usr")]
    for root in system_roots:
        for inc in (root / "include", root / "include" / arch):
            for lib in (root / "lib64", root / "lib" / arch, root / "lib"):
                candidates.append((str(root), inc, lib))
    for origin, inc, lib in candidates:
        header = inc / "cudnn_version.h"
        libs = sorted(lib.glob("libcudnn.so*")) if lib.is_dir() else []
        if header.is_file() and libs:
            version = _header_version(header, "CUDNN")
            args = (f"-DCUDNN_INCLUDE_PATH={inc}", f"-DCUDNN_LIBRARY_PATH={lib}")
            note = ""
            if "python package" in origin:
                note = ("; at run time the wheel finds it through its RPATH "
                        "(site-packages/nvidia/cudnn/lib)")
            return Check("cudnn", True, True, version,
                         detail=f"{inc} and {lib} ({origin}){note}"), args
        if origin.startswith("CUDNN_"):
            return Check("cudnn", False, True,
                         detail=f"CUDNN_INCLUDE_PATH={inc} / CUDNN_LIBRARY_PATH={lib} "
                                "hold no cudnn_version.h / libcudnn.so*",
                         fix="point them at cuDNN 9's include and lib dirs"), ()
    return Check("cudnn", False, True, detail="cuDNN headers and libraries not found",
                 fix="pip install nvidia-cudnn-cu13 (or -cu12) into the build "
                     "Python, or set CUDNN_INCLUDE_PATH and CUDNN_LIBRARY_PATH"), ()


def check_nccl(env: Mapping[str, str], nvcc: str | None) -> Check:
    roots = ([cuda_root(nvcc)] if nvcc else []) + [Path("/usr/local/cuda"), Path("/usr")]
    for root in roots:
        header = root / "include" / "nccl.h"
        if header.is_file():
            return Check("nccl", True, False, _header_version(header, "NCCL"),
                         detail=str(header))
    return Check("nccl", False, False, detail="nccl.h not found: the NCCL "
                 "distributed backend will be left out of the wheel",
                 fix="install NCCL headers (libnccl-dev) to include it")


def check_cuobjdump(env: Mapping[str, str], nvcc: str | None) -> Check:
    path = which("cuobjdump", env)
    if not path and nvcc:
        cand = Path(nvcc).parent / "cuobjdump"
        path = str(cand) if cand.exists() else None
    if not path:
        return Check("cuobjdump", False, False,
                     detail="not found: the SASS check reads libmlx's .nv_fatbin "
                            "section itself instead")
    rc, out = run([path, "--version"], env)
    m = re.search(r"V(\d+\.\d+\.\d+)", out) or re.search(r"(\d+\.\d+)", out)
    return Check("cuobjdump", rc == 0, False, m.group(1) if m else None,
                 detail=path, path=path)


