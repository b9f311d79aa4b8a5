"""Build an MLX wheel through MLX's own setup.py with pip as the front end.

1. Plan the sources: a prepared work tree (or a ref, prepared here) plus the
   dependency cache, or an unpacked bundle.
2. Stage them: a tree is copied to ``<work>/builds/<commit>.<target>/src``
   (the work tree stays clean; the folder is shared by every patch series
   built on that upstream commit for that target and ``build/`` there
   persists, so a rebuild after a kernel edit recompiles what includes it);
   a bundle builds where it was unpacked. The staged setup.py gets the version
   hook (source/tree.py).
3. Check the toolchain (toolchain.py) and, without build isolation, that the
   build Python has MLX's [build-system] requirements. Isolation is used
   online; offline (``--offline``, or a bundle) pip builds in the given
   Python with ``--no-build-isolation``, because an isolated environment
   would have to download setuptools and cmake.
4. ``python -m pip wheel --no-deps -v`` with CMAKE_ARGS = target args +
   FETCHCONTENT_SOURCE_DIR_* + FETCHCONTENT_FULLY_DISCONNECTED + cuDNN paths;
   Ninja when present, ``CMAKE_BUILD_PARALLEL_LEVEL`` = Settings.jobs; MLX's
   CMake uses ccache by itself when it is installed. Ninja's ``[n/N]`` lines
   drive the progress bar; the whole output is the step's log file.
5. Verify and finish: SASS for every requested architecture (sass.py),
   the CUDA runtime packages as Requires-Dist, the manifest, a fresh RECORD.
"""

from __future__ import annotations

import filecmp
import hashlib
import os
import platform
import re
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.version import Version
from rich.progress import Progress, TaskID

from mlx_builder import distinfo, locks, outputs, process
from mlx_builder.console import console, err_console, progress
from mlx_builder.errors import BuildError
from mlx_builder.process import StepRunner
from mlx_builder.settings import Settings
from mlx_builder.source.tree import (
    VERSION_ENV,
    cmake_minimum,
    cuda_runtime_requirements,
    install_version_hook,
    read_build_requires,
)
from mlx_builder.wheelbuild import buildenv as benv_mod
from mlx_builder.wheelbuild.buildenv import BuildEnv, Platform, cross_target, host_platform
from mlx_builder.wheelbuild.bundle import LOCAL_TREE, SourcePlan, open_bundle, plan_from_tree, tree_files
from mlx_builder.wheelbuild.cross import toolchain_file
from mlx_builder.wheelbuild.deps import setup_py_defines
from mlx_builder.wheelbuild.manifest import BACKEND_EXTRAS, build_manifest, inject, make_label
from mlx_builder.wheelbuild.probe import Check
from mlx_builder.wheelbuild.sass import verify_sass
from mlx_builder.wheelbuild.targets import TargetSet
from mlx_builder.wheelbuild.toolchain import Toolchain, check_toolchain, find_nvcc

_NINJA = re.compile(r"^\s*\[(\d+)/(\d+)\]\s")
_MAKE = re.compile(r"^\s*\[\s*(\d+)%\]")


# ----------------------------------------------------------------- planning / staging

def make_plan(settings: Settings, source: Any, targets: TargetSet | None,
              from_bundle: bool, bundle_sha256: str | None = None) -> SourcePlan:
    if from_bundle:
        return open_bundle(settings, Path(source), targets, bundle_sha256)
    if targets is None:
        raise BuildError("no build target given", "", "pass --target")
    if isinstance(source, (str, Path)) and Path(source).is_dir():
        return plan_from_tree(settings, Path(source), targets)
    if isinstance(source, str):
        from mlx_builder.source.apply import prepare_tree
        source = prepare_tree(settings, source, target=targets.patch_target,
                              tree_name=targets.tag)
    return plan_from_tree(settings, source, targets)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def stage(settings: Settings, plan: SourcePlan, target: Platform | None = None) -> Path:
    """Where setup.py runs; the version hook installed there."""
    if plan.bundle_sha256:
        staged = plan.src
    else:
        staged = build_folder(settings, plan, target) / "src"
        staged.mkdir(parents=True, exist_ok=True)
        with locks.tree_lock(settings, plan.src):
            _copy_tree(plan.src, staged)
    install_version_hook(staged)
    return staged


def build_folder(settings: Settings, plan: SourcePlan, target: Platform | None = None) -> Path:
    """The folder a build writes (and locks): the bundle's unpack folder, or
    ``<work>/builds/<version>_<commit12>.<target>``, with ``-<machine>`` for a
    cross build (the host's and the target's builds never share a CMake tree).
    The patch series is not part of the name: a kernel edit makes a new
    series hash, and its build reuses the CMake tree of the last one, so Ninja
    recompiles only what the edit touches."""
    if plan.bundle_sha256:
        return plan.src.parent
    cross_to = cross_target(target)
    suffix = f"-{cross_to.machine}" if cross_to else ""
    prov = plan.provenance
    if prov.upstream_ref == LOCAL_TREE:
        # --source DIR: its commits are the user's, so key by the directory;
        # an edit there rebuilds in the same tree.
        where = hashlib.sha256(str(Path(plan.src).resolve()).encode()).hexdigest()[:12]
        name = f"{prov.upstream_version}_src-{where}.{plan.targets.tag}"
    else:
        name = f"{prov.upstream_version}_{prov.upstream_commit[:12]}.{plan.targets.tag}"
    return settings.worktrees_dir / "builds" / (_slug(name) + suffix)


# The files the last staging copied, beside the staged tree: what a later
# staging removes when its tree no longer has them (a patch dropped from the
# series), without touching what the build itself writes there.
STAGED_LIST = "staged-files.txt"


def _copy_tree(source: Path, staged: Path) -> None:
    files = tree_files(source)
    listing = staged.parent / STAGED_LIST
    if listing.is_file():
        for rel in set(listing.read_text().splitlines()) - set(files):
            gone = staged / rel
            if gone.is_symlink() or gone.is_file():
                gone.unlink()
    for rel in files:
        src, dst = source / rel, staged / rel
        if src.is_symlink():
            if dst.is_symlink() or dst.exists():
                dst.unlink()
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(src), dst)
            continue
        st = src.stat()
        if dst.is_file() and not dst.is_symlink() and rel != "setup.py":
            dt = dst.stat()
            if dt.st_size == st.st_size and (int(dt.st_mtime) == int(st.st_mtime)
                                             or filecmp.cmp(src, dst, shallow=False)):
                # Same bytes: keep the staged file and its time, so a series
                # applied again (every patched file re-stamped) rebuilds
                # nothing and a kernel edit rebuilds only what includes it.
                continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    tmp = listing.with_suffix(".tmp")
    tmp.write_text("".join(f"{rel}\n" for rel in files))
    os.replace(tmp, listing)


# ----------------------------------------------------------------- environment

def public_args(args: Iterable[str]) -> list[str]:
    """CMake args without machine paths, for the manifest."""
    out = []
    for a in args:
        m = re.match(r"-D([A-Za-z0-9_-]+)(?::\w+)?=(.*)$", a)
        if m and m.group(2).startswith("/"):
            continue
        out.append(a)
    return out


_LIB_DIR_ARG = re.compile(r"-DCUDNN_LIBRARY_PATH=(.+)$")
_LIB_FILE_ARG = re.compile(r"-D(?:CUDA_\w+_LIBRARY|NCCL_LIBRARIES)=(.+)$")


def library_dirs(cmake_args: Iterable[str]) -> list[str]:
    """Dirs of the libraries the toolchain handed CMake by path (cuDNN, NCCL,
    CUDA libraries from Python packages, a libcuda stub). The type-stub
    generator imports mlx.core from the build tree, where libmlx's RPATH
    ($ORIGIN/../../nvidia/...) reaches none of them, so they go on
    LD_LIBRARY_PATH; without them stubgen fails and MLX's install step
    leaves the .pyi files out without failing."""
    out: list[str] = []
    for a in cmake_args:
        m = _LIB_DIR_ARG.match(a)
        d = m.group(1) if m else None
        if d is None:
            m = _LIB_FILE_ARG.match(a)
            d = os.path.dirname(m.group(1)) if m else None
        if d and d not in out:
            out.append(d)
    return out


def build_env(settings: Settings, plan: SourcePlan, tc: Toolchain,
              cmake_args: list[str]) -> dict[str, str]:
    spaced = [a for a in cmake_args if " " in a]
    if spaced:
        raise BuildError("a CMake argument contains a space", spaced[0],
                         "MLX's setup.py splits CMAKE_ARGS on spaces: move the cache "
                         "or work directory to a path without spaces")
    env = {
        "CMAKE_ARGS": " ".join([os.environ.get("CMAKE_ARGS", ""), *cmake_args]).strip(),
        "CMAKE_BUILD_PARALLEL_LEVEL": str(settings.jobs),
        VERSION_ENV: plan.label,
        "MLX_BUILD_FRONTEND_PACKAGE": "0", "MLX_BUILD_BACKEND_PACKAGE": "0",
        "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    load_dirs = [*tc.lib_dirs, *library_dirs(cmake_args)]
    if load_dirs:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (*load_dirs, os.environ.get("LD_LIBRARY_PATH")) if p)
    if "ninja" in tc.tools and not os.environ.get("CMAKE_GENERATOR"):
        env["CMAKE_GENERATOR"] = "Ninja"
    own = {"PATH", "CUDACXX", "CUDA_HOME", "CUDA_PATH", "CUDNN_INCLUDE_PATH",
           "CUDNN_LIBRARY_PATH"} if any(c.name == "toolchain" and c.version == "pypi"
                                        for c in tc.checks) else {"PATH"}
    for key, value in tc.env.items():
        if key in own or not os.environ.get(key):    # PATH: the build venv first
            env[key] = value
    if tc.target_python is not None:                 # cross: setuptools tags the target
        machine = tc.target_python.soabi.split("-")[2]
        env["_PYTHON_HOST_PLATFORM"] = f"linux-{machine}"
    if any(a.startswith("-DCMAKE_CXX_COMPILER_LAUNCHER=") and "sccache" in a
           for a in cmake_args):
        env.setdefault("SCCACHE_DIR", str(settings.cache_dir / "sccache"))
        env.setdefault("SCCACHE_CACHE_SIZE", "20G")
    return env


class Tracker:
    """Feeds build output lines to a progress bar: Ninja's [n/N] or make's [ p%]."""

    def __init__(self, prog: Progress, task: TaskID) -> None:
        self.prog, self.task = prog, task
        self.done = self.total = 0

    def __call__(self, line: str) -> None:
        m = _NINJA.match(line)
        if m:
            self.done, self.total = int(m.group(1)), int(m.group(2))
            self.prog.update(self.task, completed=self.done, total=self.total)
            return
        m = _MAKE.match(line)
        if m:
            self.prog.update(self.task, completed=int(m.group(1)), total=100)
        elif "-- Configuring done" in line:
            self.prog.update(self.task, description="compiling")
        elif self.total and self.done >= self.total and (
                ("Running command" in line and "setup.py" in line) or "bdist_wheel" in line):
            # pip names bdist_wheel before CMake starts too: packaging is after the compile
            self.prog.update(self.task, description="packaging")


# ----------------------------------------------------------------- the build

@dataclass(frozen=True)
class Prepared:
    plan: SourcePlan
    staged: Path
    tc: Toolchain
    cmake_args: list[str]
    isolate: bool
    python: str
    runner: StepRunner
    platform: Platform | None = None
    buildenv: BuildEnv | None = None


def _prepare(settings: Settings, plan: SourcePlan, from_bundle: bool,
             python: str | None, isolation: bool | None, extra: Iterable[str],
             check_python: bool = True, toolchain: str = "system",
             cuda_major: int | None = None,
             target_platform: Platform | None = None) -> Prepared:
    targets = plan.targets
    python = python or sys.executable
    staged = stage(settings, plan, target_platform)
    runner = StepRunner(settings.logs_dir / f"build-{time.strftime('%Y%m%d-%H%M%S')}"
                        f"-{_slug(targets.tag)}")
    isolate = (not (settings.offline or from_bundle)) if isolation is None else isolation
    requires = None if isolate or not check_python else read_build_requires(staged)
    plat = target_platform or host_platform()
    cross_to = cross_target(plat)
    if cross_to is not None and targets.backend != "cuda":
        raise BuildError(f"cross builds for {cross_to.name} are made for CUDA targets",
                         f"target {targets.spec}", "pick a cuda-sm target")
    benv, choice = None, None
    if targets.backend == "cuda":
        benv, choice = resolve_toolchain(settings, targets, plan, staged, python, toolchain,
                                         cuda_major, plat, runner)
        if benv is not None:
            python, isolate = benv.python, False
            requires = read_build_requires(staged) if check_python else None
    tc = check_toolchain(targets, python=python, min_cmake=cmake_minimum(staged),
                         build_requires=requires, buildenv=benv, platform_=plat,
                         choice=choice)
    if benv is None and requires and plan.wheels_dir and any(
            c.name == "build-python" and not c.ok for c in tc.checks):
        python = build_venv(python, plan.wheels_dir, requires, staged.parent / "buildenv",
                            runner)
        found = dict(a[2:].split("=", 1) for a in tc.cmake_args if a.startswith("-DCUDNN_"))
        tc = check_toolchain(targets, env={**os.environ, **found}, python=python,
                             min_cmake=cmake_minimum(staged), build_requires=requires)
    for c in tc.checks:
        if not c.ok and not c.required:
            err_console.print(f"note: {c.name}: {c.detail}", markup=False)
    tc.require()
    if targets.backend == "cuda":
        # The label names the CUDA major only now that the toolkit is known.
        plan = replace(plan, label=make_label(plan.provenance, targets.tag, toolkit_major(tc)))
    overlay_dir = staged.parent / ("cuda-overlay" + (f"-{cross_to.machine}" if cross_to else ""))
    overlay = (tc.cuda_libs.cmake_args(overlay_dir, tc.env.get("CC"))
               if tc.cuda_libs else [])
    cmake_args = [*targets.cmake_args(), *plan.deps.cmake_args(), *tc.cmake_args, *overlay,
                  *(cross_args(tc, cross_to, benv, staged.parent) if cross_to else []),
                  *launcher_args(tc, benv), *extra]
    return Prepared(plan, staged, tc, cmake_args, isolate, python, runner, plat, benv)


def toolkit_major(tc: Toolchain) -> int:
    """The CUDA major of the toolkit a build uses (its nvcc's version)."""
    version = tc.versions().get("nvcc", "")
    try:
        return int(version.split(".")[0])
    except ValueError:
        raise BuildError(f"cannot read the CUDA version of nvcc ({version!r})",
                         "the wheel's label names its CUDA major",
                         "run `mlx-builder doctor` to see which nvcc is used") from None


def resolve_toolchain(settings: Settings, targets: TargetSet, plan: SourcePlan, staged: Path,
                      python: str, mode: str, cuda_major: int | None,
                      plat: Platform | None, runner: StepRunner
                      ) -> tuple[BuildEnv | None, Check]:
    """The registry build environment (made or read from the cache) or None
    for the system toolkit, and the doctor/build line that says which and why."""
    cross = cross_target(plat) is not None
    system_nvcc = find_nvcc(os.environ)
    if mode == "system" and not cross:
        return None, Check("toolchain", True, True, "system",
                           detail=f"system CUDA toolkit ({system_nvcc or 'nvcc not found'}): "
                                  "--toolchain system")
    if plat is None:
        raise BuildError("registry CUDA toolchains exist for Linux hosts only")
    major = cuda_major or benv_mod.default_cuda_major(
        targets.min_cuda, min((e.number for e in targets.arch_entries), default=75))
    spec = benv_mod.make_spec(major, plat, read_build_requires(staged), python=python)
    cached = benv_mod.cached_env(settings.cache_dir, spec)
    wheelhouse = plan.toolchain_dir if getattr(plan, "toolchain_dir", None) else None
    which, why = benv_mod.choose(mode, offline=settings.offline, cached=cached is not None,
                                 wheelhouse=wheelhouse is not None,
                                 system_nvcc=system_nvcc, cross=cross)
    if which == "system":
        return None, Check("toolchain", True, True, "system",
                           detail=f"system CUDA toolkit ({system_nvcc}): {why}")
    env = cached or benv_mod.provision(
        settings.cache_dir, spec, runner, offline=settings.offline, wheelhouse=wheelhouse,
        say=lambda m: console.print(m, markup=False))
    nvcc_ver = env.versions.get(next(p.split("==")[0] for p in spec.cuda_host if "nvcc" in p), "")
    return env, Check("toolchain", True, True, "pypi",
                      detail=f"registry packages, CUDA {nvcc_ver} for {spec.target.name} "
                             f"({why}); {env.root}")


def cross_args(tc: Toolchain, plat: Platform, benv: BuildEnv | None, scratch: Path) -> list[str]:
    """The toolchain file and target-Python arguments of a cross build. The
    type stubs are left out: stubgen would have to run the target's mlx.core."""
    cc, cxx = tc.env.get("CC"), tc.env.get("CXX")
    if not (cc and cxx and tc.target_python is not None):
        raise BuildError(f"the cross build for {plat.name} lacks its compilers or Python",
                         "", "run `mlx-builder doctor --platform ...`")
    roots = [benv.cuda_root, benv.target_nvidia.parent] if benv else []
    tfile = toolchain_file(scratch / f"toolchain-{plat.machine}.cmake", plat, cc, cxx, roots)
    return [f"-DCMAKE_TOOLCHAIN_FILE={tfile}", *tc.target_python.cmake_args(),
            "-DMLX_BUILD_PYTHON_STUBS=OFF"]


def launcher_args(tc: Toolchain, benv: BuildEnv | None) -> list[str]:
    """sccache (from the registry environment) as the compiler launcher when
    there is no ccache, which MLX's CMake would take by itself."""
    if benv is None or tc.tools.get("ccache") or not benv.sccache():
        return []
    s = str(benv.sccache())
    return [f"-DCMAKE_{lang}_COMPILER_LAUNCHER={s}" for lang in ("C", "CXX", "CUDA")]


def build_venv(python: str, wheels: Path, requires: list[str], dest: Path,
               runner: StepRunner) -> str:
    """A venv over ``python``'s packages plus the bundle's build-requirement
    wheels, for an offline host whose Python lacks them. Returns its python."""
    if not (dest / "bin" / "python").exists():
        runner.run("build-venv", [python, "-m", "venv", "--system-site-packages", str(dest)])
    reqs = [r for r in requires if not r.replace(" ", "").lower().startswith("cmake")]
    venv_python = str(dest / "bin" / "python")
    runner.run("build-requirements", [venv_python, "-m", "pip", "install", "-q", "--no-index",
                                      "--find-links", str(wheels), *reqs])
    console.print(f"build requirements installed from the bundle into {dest}", markup=False)
    return venv_python


def build_wheel(settings: Settings, source: Any, targets: TargetSet | None,
                out_dir: Path, *, from_bundle: bool = False, python: str | None = None,
                isolation: bool | None = None,
                extra_cmake_args: Iterable[str] = (),
                bundle_sha256: str | None = None, toolchain: str = "system",
                cuda_major: int | None = None,
                target_platform: Platform | None = None, manylinux: bool = True,
                manylinux_floor: str | None = None) -> Path:
    """Build, verify and label one wheel; returns its path in ``out_dir``.
    The build folder is locked for the whole build.

    ``toolchain``: 'system' (the toolkit on this machine), 'pypi' (a cached
    environment of registry packages) or 'auto' (pypi unless offline without
    it); ``target_platform`` other than the host's cross-builds."""
    start = time.monotonic()
    outputs.check_out_dir(Path(out_dir), "--out")
    plan = make_plan(settings, source, targets, from_bundle, bundle_sha256)
    outputs.check_out_dir(Path(out_dir), "--out", expected_wheel_bytes(plan.targets))
    with locks.build_lock(settings, build_folder(settings, plan, target_platform)):
        p = _prepare(settings, plan, from_bundle, python, isolation, extra_cmake_args,
                     toolchain=toolchain, cuda_major=cuda_major,
                     target_platform=target_platform)
        return _build_wheel(settings, p, out_dir, manylinux, start, manylinux_floor)


# What a wheel of each backend needs in --out, checked before the compile
# (today's wheels: CUDA about 200-350 MiB with every arch, Metal and CPU
# under 60 MiB), with room to spare.
_WHEEL_BYTES = {"cuda": 600 * 2**20, "metal": 120 * 2**20, "cpu": 100 * 2**20}


def expected_wheel_bytes(targets: TargetSet) -> int:
    return _WHEEL_BYTES.get(targets.backend, _WHEEL_BYTES["cuda"])


def _build_wheel(settings: Settings, p: Prepared, out_dir: Path, manylinux: bool,
                 start: float, manylinux_floor: str | None = None) -> Path:
    plan, targets = p.plan, p.plan.targets
    env = build_env(settings, plan, p.tc, p.cmake_args)
    wheel_tmp = p.staged.parent / f"wheel-{_slug(targets.tag)}"
    shutil.rmtree(wheel_tmp, ignore_errors=True)
    argv = [p.python, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(wheel_tmp)]
    argv += [] if p.isolate else ["--no-build-isolation"]
    argv.append(str(p.staged))
    console.print(f"building mlx {plan.label} for {targets.spec} "
                  f"({'isolated' if p.isolate else 'no build isolation'}, {settings.jobs} jobs)",
                  markup=False)
    with progress(f"mlx {targets.spec}") as (prog, task):
        prog.update(task, description="configuring")
        result = p.runner.run("pip-wheel", argv, cwd=p.staged, env=env,
                              on_line=Tracker(prog, task),
                              hint="fix the first error above; `mlx-builder doctor` "
                                   "checks the toolchain")
    wheels = sorted(wheel_tmp.glob("*.whl"))
    if len(wheels) != 1:
        raise BuildError("the build produced no wheel" if not wheels else "several wheels",
                         f"log: {result.log_path}")
    built_from = f"bundle sha256:{plan.bundle_sha256}" if plan.bundle_sha256 else "tree"
    out = finish_wheel(wheels[0], plan, p.tc, p.staged, Path(out_dir), p.cmake_args,
                       built_from, p.python, plat=p.platform, runner=p.runner,
                       manylinux=manylinux, manylinux_floor=manylinux_floor,
                       packages=p.buildenv.versions if p.buildenv else None)
    took = time.monotonic() - start
    console.print(f"wheel: {out} ({out.stat().st_size / 2**20:.1f} MiB; log {result.log_path})",
                  markup=False)
    console.print(f"built in {int(took // 60)} min {took % 60:.0f} s "
                  f"(compile step {result.seconds:.0f} s)", markup=False)
    return out


def configure_only(settings: Settings, source: Any, targets: TargetSet | None, *,
                   from_bundle: bool = False, python: str | None = None,
                   extra_cmake_args: Iterable[str] = (),
                   bundle_sha256: str | None = None, toolchain: str = "system",
                   cuda_major: int | None = None,
                   target_platform: Platform | None = None) -> Path:
    """Run only CMake's configure step, with the arguments setup.py would pass:
    proves that every dependency resolves offline. Returns the build dir."""
    plan = make_plan(settings, source, targets, from_bundle, bundle_sha256)
    with locks.build_lock(settings, build_folder(settings, plan, target_platform)):
        p = _prepare(settings, plan, from_bundle, python, False, extra_cmake_args,
                     check_python=False, toolchain=toolchain, cuda_major=cuda_major,
                     target_platform=target_platform)
        return _configure_only(settings, p)


def _configure_only(settings: Settings, p: Prepared) -> Path:
    bdir = p.staged.parent / f"configure-{_slug(p.plan.targets.tag)}"
    shutil.rmtree(bdir, ignore_errors=True)
    argv = [p.tc.tools.get("cmake", "cmake"), "-S", str(p.staged), "-B", str(bdir)]
    argv += ["-G", "Ninja"] if "ninja" in p.tc.tools else []
    argv += ["-DCMAKE_BUILD_TYPE=Release", f"-DPython_EXECUTABLE={p.python}"]
    argv += [f"-D{k}={v}" for k, v in sorted(setup_py_defines(p.staged).items())]
    argv += [*p.cmake_args, f"-DMLX_VERSION={p.plan.label}"]
    env = build_env(settings, p.plan, p.tc, p.cmake_args)
    env.pop("CMAKE_ARGS", None)
    result = p.runner.run("cmake-configure", argv, cwd=p.staged, env=env)
    console.print(f"configure ok for {p.plan.targets.spec} in {result.seconds:.0f} s "
                  f"(offline: FETCHCONTENT_FULLY_DISCONNECTED=ON); log {result.log_path}",
                  markup=False)
    return bdir


def wheel_version(wheel: Path) -> str:
    version = distinfo.metadata(wheel)["Version"]
    if not version:
        raise BuildError(f"{wheel.name} has no Version in its METADATA")
    return version.strip()


def _python_version(python: str) -> str:
    proc = process.run([python, "-c", "import platform; print(platform.python_version())"],
                       check=False)
    return proc.stdout.strip() or "unknown"


def finish_wheel(raw: Path, plan: SourcePlan, tc: Toolchain, staged: Path, out_dir: Path,
                 cmake_args: list[str], built_from: str, python: str, *,
                 plat: Platform | None = None, runner: StepRunner | None = None,
                 manylinux: bool = True, packages: dict[str, str] | None = None,
                 manylinux_floor: str | None = None) -> Path:
    targets = plan.targets
    version = wheel_version(raw)
    if Version(version) != Version(plan.label):
        raise BuildError(f"the wheel {raw.name} has version {version}, not {plan.label}",
                         "the version hook in setup.py did not take effect")
    gpu: dict[str, Any] = {}
    requires: list[str] = []
    req_source = ""
    toolkit = toolkit_major(tc) if targets.backend == "cuda" else None
    with zipfile.ZipFile(raw) as zf, tempfile.TemporaryDirectory(prefix="mlxb-whl-") as tmp:
        members = zf.namelist()
        if targets.backend == "cuda":
            lib = next((m for m in members if re.search(r"(^|/)libmlx\.so[.\d]*$", m)), None)
            if lib is None:
                raise BuildError(f"{raw.name} has no libmlx.so", "cannot check its SASS")
            path = Path(zf.extract(lib, tmp))
            code = verify_sass(path, targets.sass_archs, tc.tools.get("cuobjdump"))
            gpu = {"sass": sorted(code.sass), "ptx": sorted(code.ptx), "method": code.method}
            assert toolkit is not None
            requires, req_source = cuda_runtime_requirements(staged, toolkit, platform.system())
        elif targets.backend == "metal" and not any(m.endswith("mlx.metallib") for m in members):
            raise BuildError(f"{raw.name} has no mlx.metallib", "the Metal kernels are missing")
        stubbed = any(re.search(r"(^|/)mlx/core/[^/]+\.pyi$", m) for m in members)
        if not stubbed and "-DMLX_BUILD_PYTHON_STUBS=OFF" not in cmake_args:
            err_console.print(f"warning: {raw.name} has no type stubs (mlx/core/*.pyi): "
                              "stubgen could not import mlx.core; see the build log",
                              markup=False)
    toolchain = {**tc.versions(), "python": _python_version(python),
                 **{f"pypi:{k}": v for k, v in sorted((packages or {}).items())}}
    platform_info: dict[str, Any] = {}
    if plat is not None:
        platform_info = {"name": plat.name, "machine": plat.machine,
                         "tag": raw.name.rsplit("-", 1)[-1][:-4]}
    work_dir = None
    if manylinux and plat is not None and runner is not None and \
            raw.name.endswith(f"-{plat.wheel_tag}.whl"):
        from mlx_builder.wheelbuild.manylinux import repair
        work_dir = Path(tempfile.mkdtemp(prefix="mlxb-manylinux-"))
        fixed = repair(raw, work_dir, plat, runner, floor=manylinux_floor)
        platform_info = fixed.to_json(plat)
        console.print(f"repaired to {fixed.tag} (glibc >= {fixed.glibc}; grafted "
                      f"{', '.join(fixed.grafted) or 'nothing'})", markup=False)
        raw = fixed.wheel
    manifest = build_manifest(
        version=plan.label, prov=plan.provenance, targets=targets, toolchain=toolchain,
        dependencies=[d.to_json() for d in plan.deps.deps],
        disabled_options=plan.deps.disabled, runtime_requires=requires,
        requires_source=req_source, gpu_code=gpu, cmake_args=public_args(cmake_args),
        built_from=built_from, bundle_sha256=plan.bundle_sha256, platform=platform_info,
        cuda_major=toolkit)
    try:
        return inject(raw, out_dir / raw.name, manifest=manifest, requires=requires,
                      extras=BACKEND_EXTRAS)
    except OSError as exc:
        failed = outputs.disk_error(exc, f"cannot write the wheel into --out {out_dir}")
        failed.next_step = (f"the built wheel (without its manifest) is kept at {raw}; "
                            f"{failed.next_step}: the next build reuses the build folder")
        work_dir = None                  # keep the repaired wheel named there
        raise failed from None
    finally:
        if work_dir is not None:
            shutil.rmtree(work_dir, ignore_errors=True)
