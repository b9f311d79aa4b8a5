"""Cross-building for another Linux platform (linux-aarch64 on an x86_64 host).

The host code is compiled by the target's GNU cross compiler
(``aarch64-linux-gnu-g++``, Debian's ``crossbuild-essential-arm64``); nvcc, a
host program, compiles the device code and hands host code to that compiler
(``CMAKE_CUDA_HOST_COMPILER``). The CUDA libraries and headers are the target
platform's (``buildenv``'s ``cuda/`` root). The target Python's headers and
extension suffix come from Debian's multiarch ``libpython3.X-dev:<arch>``;
BLAS/LAPACK from ``libopenblas-dev:<arch> liblapacke-dev:<arch>``.

CMake gets a generated toolchain file; setuptools gets ``_PYTHON_HOST_PLATFORM``
so the wheel is tagged for the target.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mlx_builder.wheelbuild.buildenv import Platform
from mlx_builder.wheelbuild.probe import Check, which

DEBIAN_ARCH = {"aarch64": "arm64", "x86_64": "amd64"}


def debian_arch(plat: Platform) -> str:
    return DEBIAN_ARCH.get(plat.machine, plat.machine)


def cross_compilers(plat: Platform, env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(gcc, g++) for the target, from PATH (``<triple>-gcc``, ``<triple>-g++``)."""
    return which(f"{plat.triple}-gcc", env), which(f"{plat.triple}-g++", env)


def check_cross_compiler(plat: Platform, env: Mapping[str, str]) -> Check:
    cc, cxx = cross_compilers(plat, env)
    if not (cc and cxx):
        return Check("cross-c++", False, True,
                     detail=f"{plat.triple}-g++ / -gcc not found on PATH",
                     fix=f"apt-get install crossbuild-essential-{debian_arch(plat)} "
                         f"(or g++-{plat.triple})")
    return Check("cross-c++", True, True, detail=f"{cxx} (host code for {plat.name})",
                 path=cxx)


@dataclass(frozen=True)
class TargetPython:
    version: str          # '3.11'
    include_dir: Path     # /usr/include/python3.11 (its pyconfig.h dispatches per arch)
    soabi: str            # 'cpython-311-aarch64-linux-gnu'

    @property
    def ext_suffix(self) -> str:
        return f".{self.soabi}.so"

    def cmake_args(self) -> list[str]:
        return [f"-DPython_INCLUDE_DIR={self.include_dir}", f"-DPython_SOABI={self.soabi}",
                f"-DNB_SUFFIX={self.ext_suffix}",
                "-DNB_SUFFIX_S=.abi3.so"]


def find_target_python(plat: Platform, version: str,
                       include_root: Path = Path("/usr/include")) -> TargetPython | None:
    """The target's Python headers for ``version`` (X.Y) from Debian multiarch:
    ``/usr/include/<triple>/python3.X/pyconfig.h`` plus the shared
    ``/usr/include/python3.X``."""
    shared = include_root / f"python{version}"
    arch = include_root / plat.triple / f"python{version}" / "pyconfig.h"
    if not ((shared / "Python.h").is_file() and arch.is_file()):
        return None
    return TargetPython(version, shared, f"cpython-{version.replace('.', '')}-{plat.triple}")


def check_target_python(plat: Platform, version: str,
                        include_root: Path = Path("/usr/include")) -> tuple[Check, TargetPython | None]:
    tp = find_target_python(plat, version, include_root)
    if tp is None:
        return Check("target-python", False, True,
                     detail=f"no Python {version} headers for {plat.name} "
                            f"({include_root}/{plat.triple}/python{version}/pyconfig.h)",
                     fix=f"dpkg --add-architecture {debian_arch(plat)} && apt-get update && "
                         f"apt-get install libpython{version}-dev:{debian_arch(plat)} "
                         f"(the build Python must be {version} too)"), None
    return Check("target-python", True, True, version,
                 detail=f"{tp.include_dir} + {plat.triple}/python{version}; "
                        f"extension suffix {tp.ext_suffix}"), tp


def check_target_blas(plat: Platform, root: Path = Path("/")) -> Check:
    """cblas.h, lapacke.h and liblapack/libopenblas for the target, in
    Debian's multiarch folders."""
    incs = [root / "usr/include", root / "usr/include" / plat.triple,
            root / "usr" / plat.triple / "include"]
    libdirs = [root / "usr/lib" / plat.triple, root / "usr" / plat.triple / "lib"]
    missing = [h for h in ("cblas.h", "lapacke.h") if not any((d / h).is_file() for d in incs)]
    if not any(d.is_dir() and (any(d.glob("liblapack.so*")) or any(d.glob("libopenblas.so*")))
               for d in libdirs):
        missing.append("liblapack/libopenblas")
    if missing:
        a = debian_arch(plat)
        return Check("blas-lapack", False, True,
                     detail=f"not found for {plat.name}: {', '.join(missing)}",
                     fix=f"apt-get install libopenblas-dev:{a} liblapacke-dev:{a}")
    return Check("blas-lapack", True, True,
                 detail=f"cblas.h, lapacke.h, LAPACK library for {plat.name}")


def toolchain_file(dest: Path, plat: Platform, cc: str, cxx: str,
                   find_roots: list[Path]) -> Path:
    """A CMake toolchain file for ``plat``: the cross compilers, nvcc's host
    compiler, the target's multiarch library folder; programs from the host."""
    roots = " ".join(f'"{p}"' for p in ["/", f"/usr/{plat.triple}", *map(str, find_roots)])
    text = f"""# generated by mlx-builder: cross build for {plat.name}
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR {plat.machine})
set(CMAKE_C_COMPILER "{cc}")
set(CMAKE_CXX_COMPILER "{cxx}")
set(CMAKE_CUDA_HOST_COMPILER "{cxx}")
set(CMAKE_LIBRARY_ARCHITECTURE {plat.triple})
set(CMAKE_FIND_ROOT_PATH {roots})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# the host's own libraries never serve the target
set(CMAKE_IGNORE_PATH "/usr/lib/{_other_triple(plat)}" "/lib/{_other_triple(plat)}")
"""
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text)
    return dest


def _other_triple(plat: Platform) -> str:
    return "x86_64-linux-gnu" if plat.machine != "x86_64" else "aarch64-linux-gnu"


def qemu_for(plat: Platform, env: Mapping[str, str]) -> str | None:
    """qemu-user for the target (Debian's qemu-user-static), to run its code."""
    return which(f"qemu-{plat.machine}-static", env) or which(f"qemu-{plat.machine}", env) \
        or shutil.which(f"qemu-{plat.machine}-static")


__all__ = [
    "TargetPython",
    "check_cross_compiler",
    "check_target_blas",
    "check_target_python",
    "cross_compilers",
    "debian_arch",
    "find_target_python",
    "qemu_for",
    "toolchain_file",
]
