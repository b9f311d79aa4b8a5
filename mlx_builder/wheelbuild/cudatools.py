"""CUDA toolchain checks: nvcc per architecture, CUDA libraries, cuDNN, NCCL,
cuobjdump. Part of ``toolchain`` (which re-exports them)."""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mlx_builder import process
from mlx_builder.errors import ToolchainError
from mlx_builder.wheelbuild.probe import Check, fmt, query, which
from mlx_builder.wheelbuild.targets import TargetSet


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
        rc, out = query([nvcc, flag], env)
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
    rc, out = query([nvcc, "--version"], env)
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


@functools.cache
def cuda_root(nvcc: str) -> Path:
    """The toolkit root; nvcc may be a wrapper script elsewhere (it then says
    where it really lives in ``--dryrun``'s ``_HERE_`` line)."""
    real = Path(os.path.realpath(nvcc)).parent
    if not (real / "nvcc.profile").is_file():
        _rc, out = query([nvcc, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull])
        m = re.search(r"^#\$ _HERE_=(.+)$", out, re.M)
        if m and Path(m.group(1).strip(), "nvcc.profile").is_file():
            real = Path(os.path.realpath(m.group(1).strip()))
    return real.parent


# CUDA libraries MLX links (FindCUDAToolkit component -> header), and where
# NVIDIA's Python wheels put them: nvidia/cu13/ (CUDA 13 wheels share one
# folder) or nvidia/<package>/ (CUDA 12 wheels).
CUDA_LIBS = {"cublasLt": ("cublasLt.h", "cublas"), "cufft": ("cufft.h", "cufft"),
             "nvrtc": ("nvrtc.h", "cuda_nvrtc")}
# Linked only by newer MLX (cuSOLVER from 0.32.3): handed to CMake when
# found, never a reason to fail a build of a tree that does not link it.
OPTIONAL_CUDA_LIBS = {"cusolver": ("cusolverDn.h", "cusolver")}
CUDA_ERROR_STUB_LIBRARY = 34


@dataclass(frozen=True)
class CudaLibs:
    """CUDA libraries the toolkit lacks, taken from the build Python's
    ``nvidia-*`` packages, and whether libcuda must be a generated link stub."""
    libraries: Mapping[str, Path] = field(default_factory=dict)  # component -> file
    include_dirs: tuple[Path, ...] = ()
    toolkit_include: Path | None = None
    stub_driver: bool = False

    def cmake_args(self, scratch: Path, cc: str | None) -> list[str]:
        """Materialize the overlay under ``scratch``; the CMake args that use it.

        Headers the toolkit lacks are linked into ``scratch/include`` (never
        shadowing the toolkit's own), which every C++/CUDA compile sees; the
        wheels' versioned libraries (``libcublasLt.so.13``, no ``.so`` link)
        are handed to FindCUDAToolkit as its ``CUDA_<lib>_LIBRARY`` cache entries.
        """
        args = [f"-DCUDA_{name}_LIBRARY={path}" for name, path in sorted(self.libraries.items())]
        if self.include_dirs:
            inc = scratch / "include"
            shutil.rmtree(inc, ignore_errors=True)
            inc.mkdir(parents=True)
            have = self.toolkit_include
            for d in self.include_dirs:
                for entry in sorted(d.iterdir()):
                    if (have and (have / entry.name).exists()) or (inc / entry.name).exists():
                        continue
                    os.symlink(entry, inc / entry.name)
            args += [f"-DCMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES={inc}",
                     f"-DCMAKE_CUDA_STANDARD_INCLUDE_DIRECTORIES={inc}"]
        if self.stub_driver:
            if not (cc and self.toolkit_include):
                raise ToolchainError("libcuda is missing and no stub can be made",
                                     "a C compiler and the toolkit's cuda.h are needed",
                                     "install the NVIDIA driver or the toolkit's stubs")
            stub = make_driver_stub(scratch / "lib", cc, self.toolkit_include)
            args.append(f"-DCUDA_cuda_driver_LIBRARY={stub}")
        return args


def driver_functions(cc: str, include: Path) -> list[str]:
    """The driver API's exported names, from the preprocessed cuda.h (macros
    like ``cuMemAlloc -> cuMemAlloc_v2`` and the per-thread variants applied)."""
    names: set[str] = set()
    for extra in ([], ["-DCUDA_API_PER_THREAD_DEFAULT_STREAM"]):
        proc = process.run([cc, "-E", "-x", "c", f"-I{include}", *extra, "-"],
                           input="#include <cuda.h>\n", error_cls=ToolchainError,
                           what="cannot preprocess cuda.h for the libcuda stub")
        names |= set(re.findall(r"\bCUresult\s+(cu[A-Za-z0-9_]+)\s*\(", proc.stdout))
    return sorted(names)


def make_driver_stub(dest: Path, cc: str, include: Path) -> Path:
    """A ``libcuda.so`` (SONAME libcuda.so.1, like the toolkit's stub) whose
    every driver function returns CUDA_ERROR_STUB_LIBRARY. The wheel records
    only the SONAME; the real driver serves at run time. ``libcuda.so.1``
    links to it: with that dir on LD_LIBRARY_PATH the build's stub generator
    can import mlx.core on a host without a driver."""
    names = driver_functions(cc, include)
    if not names:
        raise ToolchainError("cuda.h declared no driver functions", str(include))
    dest.mkdir(parents=True, exist_ok=True)
    src = dest / "libcuda_stub.c"
    src.write_text("".join(f"int {n}(void) {{ return {CUDA_ERROR_STUB_LIBRARY}; }}\n"
                           for n in names))
    out = dest / "libcuda.so"
    process.run([cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(out), str(src)],
                error_cls=ToolchainError, what="cannot build the libcuda link stub")
    soname = dest / "libcuda.so.1"
    if soname.is_symlink() or soname.exists():
        soname.unlink()
    soname.symlink_to(out.name)
    return out


def _target_dirs() -> list[str]:
    """The toolkit's ``targets/<dir>`` names for this host: x86_64-linux; on
    Arm servers sbsa-linux (the toolkit's name), aarch64-linux on Jetson."""
    m = platform.machine().lower()
    if m in ("aarch64", "arm64"):
        return ["sbsa-linux", "aarch64-linux"]
    return [f"{m}-linux"]


def _toolkit_lib_dirs(nvcc: str | None, env: Mapping[str, str],
                      host: bool = True) -> list[Path]:
    roots = [cuda_root(nvcc)] if nvcc else []
    roots += [Path(p) for p in (env.get("CUDA_HOME"), "/usr/local/cuda" if host else None) if p]
    dirs = []
    for root in roots:
        dirs += [root / "lib64", root / "lib", root / "lib64" / "stubs"]
        for t in _target_dirs():
            dirs += [root / "targets" / t / "lib", root / "targets" / t / "lib" / "stubs"]
    if host:
        dirs.append(Path(f"/usr/lib/{platform.machine()}-linux-gnu"))
    return dirs


def _toolkit_include(nvcc: str | None) -> Path | None:
    if not nvcc:
        return None
    root = cuda_root(nvcc)
    for inc in (root / "include", *(root / "targets" / t / "include" for t in _target_dirs())):
        if (inc / "cuda.h").is_file():
            return inc
    return None


def packaged_cuda_lib(nvidia: Path, name: str) -> tuple[Path, Path] | None:
    """(library file, include dir) of one component in the nvidia namespace."""
    header, package = {**CUDA_LIBS, **OPTIONAL_CUDA_LIBS}[name]
    for base in [*sorted(nvidia.glob("cu[0-9]*"), reverse=True), nvidia / package]:
        libs = sorted((base / "lib").glob(f"lib{name}.so*")) if (base / "lib").is_dir() else []
        libs = [p for p in libs if re.fullmatch(rf"lib{name}\.so(\.\d+)*", p.name)]
        if libs and (base / "include" / header).is_file():
            return min(libs, key=lambda p: len(p.name)), base / "include"
    return None


def check_cuda_libs(nvcc: str | None, env: Mapping[str, str], python: str | None = None,
                    host: bool = True) -> tuple[Check, CudaLibs]:
    """cuBLASLt, cuFFT, NVRTC and the driver for linking libmlx: from the
    toolkit, else from the build Python's nvidia-* packages; a missing driver
    (a build host without a GPU) gets a generated link stub. ``host=False``
    looks only at nvcc's toolkit and CUDA_HOME (not /usr/local/cuda, /usr)."""
    dirs = _toolkit_lib_dirs(nvcc, env, host)
    include = _toolkit_include(nvcc)
    nvidia = _python_package_dir(python, "nvidia", env)
    libraries: dict[str, Path] = {}
    incs: list[Path] = []
    missing, found = [], []
    for name, (header, _) in {**CUDA_LIBS, **OPTIONAL_CUDA_LIBS}.items():
        if any(d.is_dir() and any(d.glob(f"lib{name}.so*")) for d in dirs) and \
                include and (include / header).is_file():
            found.append(name)
            continue
        hit = packaged_cuda_lib(nvidia, name) if nvidia else None
        if hit is None:
            if name not in OPTIONAL_CUDA_LIBS:
                missing.append(f"lib{name}")
            continue
        libraries[name] = hit[0]
        if hit[1] not in incs:
            incs.append(hit[1])
        found.append(f"{name} ({hit[0].name}, python package)")
    stub = not any(d.is_dir() and any(d.glob("libcuda.so*")) for d in dirs)
    libs = CudaLibs(libraries, tuple(incs), include, stub)
    if missing:
        return Check("cuda-libs", False, True,
                     detail=f"not found: {', '.join(missing)} (looked in the CUDA "
                            "toolkit's lib64, lib64/stubs, the system lib dir and the "
                            "build Python's nvidia-* packages)",
                     fix="install the CUDA toolkit's cuBLAS, cuFFT and NVRTC development "
                         "libraries, or pip install nvidia-cublas nvidia-cufft "
                         "nvidia-cuda-nvrtc (-cu12 for CUDA 12) into the build Python"), libs
    detail = ", ".join(found)
    if stub:
        detail += ("; no libcuda (no driver here): links against a generated stub, "
                   "which also lets the type-stub generator import mlx.core")
    return Check("cuda-libs", True, True, detail=detail), libs


def _python_package_dir(python: str | None, module: str,
                        env: Mapping[str, str]) -> Path | None:
    code = (f"import {module} as m, sys; p = list(getattr(m, '__path__', []));"
            "print(p[0] if p else '')")
    rc, out = query([python or "python3", "-c", code], env)
    line = out.strip().splitlines()[-1] if out.strip() else ""
    return Path(line) if rc == 0 and line and Path(line).is_dir() else None


def _header_version(header: Path, prefix: str) -> str | None:
    try:
        text = header.read_text(errors="replace")
    except OSError:
        return None
    # cuDNN says PATCHLEVEL, NCCL says PATCH
    parts = [re.search(rf"#define {prefix}_{k}\s+(\d+)\b", text)
             for k in ("MAJOR", "MINOR", "(?:PATCHLEVEL|PATCH)")]
    if not all(parts):
        return None
    return ".".join(p.group(1) for p in parts if p)


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


def check_nccl(env: Mapping[str, str], nvcc: str | None, python: str | None = None,
               host: bool = True) -> tuple[Check, tuple[str, ...]]:
    """nccl.h + libnccl from the toolkit/system, else from the build Python's
    nvidia-nccl package (then FindNCCL gets them as cache entries)."""
    roots = ([cuda_root(nvcc)] if nvcc else []) + (
        [Path("/usr/local/cuda"), Path("/usr")] if host else [])
    for root in roots:
        header = root / "include" / "nccl.h"
        if header.is_file():
            return Check("nccl", True, False, _header_version(header, "NCCL"),
                         detail=str(header)), ()
    pkg = _python_package_dir(python, "nvidia.nccl", env)
    if pkg:
        header = pkg / "include" / "nccl.h"
        libs = sorted((pkg / "lib").glob("libnccl.so*")) if (pkg / "lib").is_dir() else []
        if header.is_file() and libs:
            return (Check("nccl", True, False, _header_version(header, "NCCL"),
                          detail=f"{header} (python package nvidia-nccl)"),
                    (f"-DNCCL_INCLUDE_DIRS={pkg / 'include'}", f"-DNCCL_LIBRARIES={libs[0]}"))
    return Check("nccl", False, False, detail="nccl.h not found: the NCCL "
                 "distributed backend will be left out of the wheel",
                 fix="install NCCL headers (libnccl-dev), or pip install "
                     "nvidia-nccl-cu13 (-cu12) into the build Python"), ()


def check_cuobjdump(env: Mapping[str, str], nvcc: str | None) -> Check:
    path = which("cuobjdump", env)
    for cand in ([Path(nvcc).parent / "cuobjdump", cuda_root(nvcc) / "bin" / "cuobjdump"]
                 if nvcc and not path else []):
        if cand.exists():
            path = str(cand)
            break
    if not path:
        return Check("cuobjdump", False, False,
                     detail="not found: the SASS check reads libmlx's .nv_fatbin "
                            "section itself instead")
    rc, out = query([path, "--version"], env)
    m = re.search(r"V(\d+\.\d+\.\d+)", out) or re.search(r"(\d+\.\d+)", out)
    return Check("cuobjdump", rc == 0, False, m.group(1) if m else None,
                 detail=path, path=path)


