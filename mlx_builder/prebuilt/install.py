"""Detect the host (platform tags, GPU) and choose the wheel that fits it.

Detection, in order: ``nvidia-smi --query-gpu=name,compute_cap``, then the
CUDA driver through ctypes (``cuDeviceGetAttribute``); macOS on arm64 is a
Metal host; anything else is a CPU host. ``MLX_BUILDER_FAKE_GPU``
(``sm_90``, ``sm_121``, ``9.0``, ``metal``, ``none``; comma-separated for
several GPUs) and ``MLX_BUILDER_FAKE_PLATFORM`` (``macosx_14_0_arm64``,
``manylinux_2_35_x86_64``…) replace detection for tests and ``--dry-run``;
every report says when they were used.

CUDA compatibility follows NVIDIA's rules: SASS for ``sm_XY`` runs on
compute capability X.Z with Z >= Y; ``sm_XYa`` runs only on X.Y exactly;
``sm_XYf`` on the X family from X.Y up; PTX for ``compute_XY`` JITs on any
newer device (``a``/``f`` PTX keep their suffix's limits). So an H200 (9.0)
runs a ``90a`` wheel and a GB10 (12.1) needs ``121a``, ``120f`` or plain
``120`` code, never ``120a``. Ranking: exact SASS, then compatible SASS,
then PTX; among equals the newest version, then the best wheel tag.

A CUDA wheel also needs a driver new enough for the CUDA major it was built
with (variants.MIN_DRIVER); the driver version comes from ``nvidia-smi`` or
``cuDriverGetVersion``, or ``MLX_BUILDER_FAKE_DRIVER`` (``575.57.08``).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import platform
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging import tags as ptags
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from mlx_builder import distinfo, process
from mlx_builder.errors import ConfigError, DriverTooOldError, FetchError, HashMismatchError, WheelError
from mlx_builder.lists import comma_list, loose_list
from mlx_builder.prebuilt.variants import (
    BACKENDS,
    cuda_major,
    driver_runs,
    min_driver,
    parse_driver,
    variant,
    wheel_backend,
)
from mlx_builder.wheelbuild.manifest import read_manifest

FAKE_GPU_ENV = "MLX_BUILDER_FAKE_GPU"
FAKE_PLATFORM_ENV = "MLX_BUILDER_FAKE_PLATFORM"
FAKE_DRIVER_ENV = "MLX_BUILDER_FAKE_DRIVER"
RANK_NAMES = {0: "exact SASS", 1: "compatible SASS", 2: "PTX (JIT at first use)"}


# --- CUDA architectures ------------------------------------------------------

@dataclass(frozen=True)
class CudaArch:
    major: int
    minor: int
    suffix: str = ""        # "", "a" (arch-specific) or "f" (family)
    sass: bool = True
    ptx: bool = False

    @property
    def name(self) -> str:
        return f"{self.major}{self.minor}{self.suffix}"

    def describe(self) -> str:
        kinds = [k for k, on in (("sm", self.sass), ("compute", self.ptx)) if on]
        return "+".join(f"{k}_{self.name}" for k in kinds)

    def rank_on(self, cc: tuple[int, int]) -> int | None:
        """0 exact SASS, 1 compatible SASS, 2 PTX, None if it cannot run."""
        major, minor = cc
        if self.sass:
            if self.suffix == "a" and (major, minor) == (self.major, self.minor):
                return 0
            if self.suffix != "a" and major == self.major and minor >= self.minor:
                return 0 if minor == self.minor else 1
        if self.ptx:
            if self.suffix == "a" and (major, minor) == (self.major, self.minor):
                return 2
            if self.suffix == "f" and major == self.major and minor >= self.minor:
                return 2
            if self.suffix == "" and (major, minor) >= (self.major, self.minor):
                return 2
        return None


_ARCH_RE = re.compile(r"^(?:(sm|compute|lto)_)?(\d{2,3})([af]?)(?:-(real|virtual))?$")


def parse_arch(text: str) -> CudaArch:
    """``90a``, ``90a-real``, ``120-virtual``, ``sm_121a``, ``compute_80``.

    A bare CMake entry (``90a``) means SASS and PTX, as in CMake.
    """
    match = _ARCH_RE.match(text.strip().lower())
    if not match:
        raise WheelError(f"unknown CUDA architecture {text!r}",
                         "expected forms like 90a, 121a-real, sm_90a, compute_80")
    prefix, digits, suffix, kind = match.groups()
    number = int(digits)
    sass = prefix == "sm" or (prefix is None and kind != "virtual")
    ptx = prefix == "compute" or (prefix is None and kind != "real")
    return CudaArch(number // 10, number % 10, suffix, sass, ptx)


def parse_cc(text: str) -> tuple[int, int]:
    """``9.0``, ``12.1``, ``sm_121``, ``121``, ``90`` → (major, minor)."""
    value = text.strip().lower().removeprefix("sm_").removeprefix("sm")
    if "." in value:
        major, minor = value.split(".", 1)
        return int(major), int(minor)
    number = int(value.rstrip("af"))
    return number // 10, number % 10


# --- host detection ----------------------------------------------------------

@dataclass(frozen=True)
class Gpu:
    name: str
    cc: tuple[int, int]

    def describe(self) -> str:
        return f"{self.name} (sm_{self.cc[0]}{self.cc[1]}, CC {self.cc[0]}.{self.cc[1]})"


@dataclass(frozen=True)
class Host:
    system: str
    machine: str
    backend: str                     # cuda, metal or cpu
    gpus: tuple[Gpu, ...]
    tags: tuple[ptags.Tag, ...]      # best first
    source: str                      # how the GPU was found
    faked: tuple[str, ...] = ()      # env variables that replaced detection
    driver: str | None = None        # NVIDIA driver version, when known

    def describe(self) -> str:
        what = {"cuda": ", ".join(g.describe() for g in self.gpus),
                "metal": "Apple GPU (Metal)", "cpu": "no GPU"}[self.backend]
        if self.backend == "cuda":
            what += f", driver {self.driver or 'version unknown'}"
        fake = f" (faked by {', '.join(self.faked)})" if self.faked else ""
        return (f"{self.system} {self.machine}, {what} via {self.source}; "
                f"best wheel tag {self.tags[0] if self.tags else '?'}{fake}")


def _nvidia_smi(path: str | None) -> tuple[tuple[Gpu, ...], str | None]:
    """GPUs (name, compute capability) and the driver version from one
    nvidia-smi query; ((), None) without nvidia-smi or when it fails."""
    if not path:
        return (), None
    out = process.run([path, "--query-gpu=name,compute_cap,driver_version",
                       "--format=csv,noheader"], timeout=30, check=False)
    if not out.ok:
        return (), None
    gpus, drivers = [], []
    for line in out.stdout.splitlines():
        fields = line.rsplit(",", 2)
        if len(fields) != 3:
            continue
        name, cap, driver = (f.strip() for f in fields)
        try:
            gpus.append(Gpu(name, parse_cc(cap)))
        except ValueError:
            continue
        if parse_driver(driver):
            drivers.append(driver)
    return tuple(gpus), (drivers[0] if drivers else None)


def _libcuda(library: str | None) -> ctypes.CDLL | None:
    """The CUDA driver library (``library``, else the system's), or None."""
    names = [library] if library else (
        ["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so"])
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def cuda_driver_version(library: str | None = None) -> str | None:
    """The CUDA version the driver supports (``13.0``) through libcuda, or None."""
    lib = _libcuda(library)
    value = ctypes.c_int()
    if lib is not None and lib.cuDriverGetVersion(ctypes.byref(value)) == 0 and value.value > 0:
        return f"{value.value // 1000}.{value.value % 1000 // 10}"
    return None


def cuda_driver_gpus(library: str | None = None) -> tuple[Gpu, ...]:
    """GPUs through the CUDA driver API (libcuda), or () when unavailable."""
    lib = _libcuda(library)
    if lib is None or lib.cuInit(0) != 0:
        return ()
    count = ctypes.c_int()
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return ()
    gpus = []
    for index in range(count.value):
        dev, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        buf = ctypes.create_string_buffer(256)
        if (lib.cuDeviceGet(ctypes.byref(dev), index) != 0
                or lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev) != 0
                or lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev) != 0):
            continue
        if lib.cuDeviceGetName(buf, 256, dev) != 0:
            buf.value = b"CUDA device"
        gpus.append(Gpu(buf.value.decode(errors="replace"),
                        (major.value, minor.value)))
    return tuple(gpus)


def _expand_platform(plat: str) -> list[str]:
    """All platform tags a faked platform accepts, best first."""
    mac = re.match(r"macosx_(\d+)_(\d+)_(\w+)$", plat)
    if mac:
        return list(ptags.mac_platforms((int(mac[1]), int(mac[2])), mac[3]))
    many = re.match(r"manylinux_(\d+)_(\d+)_(\w+)$", plat)
    if many:
        major, minor, arch = int(many[1]), int(many[2]), many[3]
        return ([f"manylinux_{major}_{m}_{arch}" for m in range(minor, -1, -1)]
                + [f"linux_{arch}"])
    return [plat]


def interpreter_tags(python: str | None = None,
                     platforms: Sequence[str] | None = None) -> tuple[ptags.Tag, ...]:
    """Supported wheel tags of ``python`` (default: this one), best first."""
    if python is None:
        version = sys.version_info[:2]
        if platforms is None:
            return tuple(ptags.sys_tags())
    else:
        code = ("import sys, json\n"
                "try:\n from packaging import tags\n"
                "except ImportError:\n from pip._vendor.packaging import tags\n"
                "print(json.dumps([list(sys.version_info[:2]),"
                " [str(t) for t in tags.sys_tags()]]))")
        out = process.run([python, "-c", code], timeout=60, error_cls=ConfigError,
                          what=f"cannot ask {python} for its wheel tags",
                          hint="pass a Python interpreter that has pip")
        data = json.loads(out.stdout)
        version = tuple(data[0])
        if platforms is None:
            return tuple(t for s in data[1] for t in ptags.parse_tag(s))
    return (tuple(ptags.cpython_tags(version, platforms=platforms))
            + tuple(ptags.compatible_tags(version, platforms=platforms)))


def detect_host(env: Mapping[str, str] | None = None,
                python: str | None = None) -> Host:
    """The platform, wheel tags and accelerator of this machine."""
    env = os.environ if env is None else env
    fake_gpu = (env.get(FAKE_GPU_ENV) or "").strip().lower()
    fake_plat = (env.get(FAKE_PLATFORM_ENV) or "").strip()
    fake_driver = (env.get(FAKE_DRIVER_ENV) or "").strip()
    if fake_driver and parse_driver(fake_driver) is None:
        raise ConfigError(f"cannot parse {FAKE_DRIVER_ENV}={fake_driver!r}",
                          "a driver version is numbers between dots", "use e.g. 580.82.07")
    faked = tuple(n for n, v in ((FAKE_GPU_ENV, fake_gpu), (FAKE_PLATFORM_ENV, fake_plat),
                                 (FAKE_DRIVER_ENV, fake_driver)) if v)
    system, machine = platform.system(), platform.machine().lower()
    if fake_gpu == "metal" and not fake_plat:
        fake_plat = "macosx_14_0_arm64"
    if fake_plat:
        system = "Darwin" if fake_plat.startswith("macosx") else "Linux"
        machine = re.sub(r"^(macosx_\d+_\d+|manylinux_\d+_\d+|linux)_", "",
                         fake_plat)
    tags = interpreter_tags(python, _expand_platform(fake_plat) if fake_plat else None)
    gpus: tuple[Gpu, ...] = ()
    if fake_gpu:
        if fake_gpu in ("metal", "none", "cpu"):
            backend, source = ("metal" if fake_gpu == "metal" else "cpu"), FAKE_GPU_ENV
        else:
            try:
                gpus = tuple(Gpu("faked GPU", parse_cc(p)) for p in comma_list(fake_gpu))
            except ValueError:
                raise ConfigError(f"cannot parse {FAKE_GPU_ENV}={fake_gpu!r}", "",
                                  "use sm_90, sm_121, 9.0, metal or none") from None
            backend, source = "cuda", FAKE_GPU_ENV
        return Host(system, machine, backend, gpus, tags, source, faked,
                    fake_driver or None)
    if system == "Darwin":
        backend = "metal" if machine in ("arm64", "aarch64") else "cpu"
        return Host(system, machine, backend, (), tags, "platform", faked)
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    gpus, smi_driver = _nvidia_smi(smi)
    source = "nvidia-smi"
    if not gpus:
        gpus, source = cuda_driver_gpus(), "CUDA driver"
    if gpus:
        driver = fake_driver or smi_driver or _cuda_driver_as_version()
        return Host(system, machine, "cuda", gpus, tags, source, faked, driver)
    return Host(system, machine, "cpu", (), tags,
                "nvidia-smi and CUDA driver (none found)", faked)


def _cuda_driver_as_version() -> str | None:
    """Without nvidia-smi: the driver's CUDA version, written as the oldest
    driver that supports it, so that one comparison serves both sources."""
    cuda = cuda_driver_version()
    if cuda is None:
        return None
    major = int(cuda.split(".")[0])
    return min_driver(major) if major in (12, 13) else None


# --- choosing a wheel --------------------------------------------------------

@dataclass
class Candidate:
    entry: dict[str, Any]
    location: str
    accepted: bool = False
    reason: str = ""
    arch_rank: int = 99
    tag_rank: int = 1 << 30
    version: Version | None = None
    driver_too_old: bool = False
    major_rank: int = 0         # among CUDA majors: lower is preferred

    @property
    def filename(self) -> str:
        return self.entry["filename"]


@dataclass
class Choice:
    host: Host
    backend: str
    chosen: Candidate | None
    candidates: list[Candidate] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "host": {"system": self.host.system, "machine": self.host.machine,
                     "backend": self.host.backend, "source": self.host.source,
                     "faked": list(self.host.faked),
                     "gpus": [{"name": g.name, "cc": f"{g.cc[0]}.{g.cc[1]}"}
                              for g in self.host.gpus],
                     "best_tag": str(self.host.tags[0]) if self.host.tags else None},
            "backend": self.backend,
            "chosen": self.chosen.filename if self.chosen else None,
            "variant": variant(self.chosen.entry.get("manifest")) if self.chosen else None,
            "location": self.chosen.location if self.chosen else None,
            "why": self.chosen.reason if self.chosen else None,
            "candidates": [{"filename": c.filename, "accepted": c.accepted,
                            "reason": c.reason} for c in self.candidates],
        }


def wheel_archs(manifest: Mapping[str, Any]) -> list[CudaArch]:
    archs = manifest.get("archs") or []
    if isinstance(archs, str):
        archs = loose_list(archs)
    return [parse_arch(a) for a in archs if str(a).strip()]


# Whether a wheel's version and manifest match what --mlx asked for.
Accepts = Callable[[Version, Mapping[str, Any]], bool]


def _version_filter(spec: str | None) -> Accepts:
    if not spec:
        return lambda version, manifest: True
    try:
        Version(spec)
        specifier = SpecifierSet(f"=={spec}")
    except InvalidVersion:
        try:
            specifier = SpecifierSet(spec)
        except InvalidSpecifier:
            specifier = None
    if specifier is not None:
        return lambda version, manifest: specifier.contains(version, prereleases=True)
    wanted = spec.lower()
    return lambda version, manifest: (
        str(manifest.get("upstream_commit", "")).lower().startswith(wanted)
        or str(manifest.get("series", "")).lower() == wanted)


def _judge_cuda(cand: Candidate, manifest: Mapping[str, Any], host: Host) -> None:
    archs = wheel_archs(manifest)
    if not archs:
        cand.reason = "manifest lists no CUDA architectures"
        return
    built = ", ".join(a.describe() for a in archs)
    worst, notes = 0, []
    for gpu in host.gpus:
        ranks = [(a.rank_on(gpu.cc), a) for a in archs]
        runs = [(r, a) for r, a in ranks if r is not None]
        if not runs:
            cand.reason = f"built for {built}; none runs on {gpu.describe()}"
            if any(a.suffix == "a" for a in archs):
                cand.reason += " (sm_XYa code runs only on CC X.Y exactly)"
            return
        rank, arch = min(runs, key=lambda ra: ra[0])
        worst = max(worst, rank)
        notes.append(f"{arch.describe()} is {RANK_NAMES[rank]} for {gpu.describe()}")
    major = cuda_major(manifest)
    driver = parse_driver(host.driver or "")
    if major is not None and driver is not None and not driver_runs(major, driver):
        cand.driver_too_old = True
        cand.reason = (f"built with CUDA {major}, which needs NVIDIA driver >= "
                       f"{min_driver(major)}; this host has {host.driver}")
        return
    cand.accepted, cand.arch_rank = True, worst
    # A known driver: the newest CUDA it runs. An unknown one: the oldest
    # CUDA, which the most drivers run.
    cand.major_rank = (-(major or 0)) if driver is not None else (major or 0)
    notes.append(f"CUDA {major}" if major is not None else "CUDA major not recorded")
    cand.reason = "; ".join(notes)


def judge(cand: Candidate, host: Host, backend: str, accepts: Accepts) -> None:
    """Accept or reject one candidate, recording why."""
    entry = cand.entry
    try:
        cand.version = Version(entry["version"])
    except (KeyError, InvalidVersion):
        cand.reason = f"unreadable version {entry.get('version')!r}"
        return
    host_rank = {t: i for i, t in enumerate(host.tags)}
    wheel_tags = [t for s in entry.get("tags", []) for t in ptags.parse_tag(s)]
    named = _name_tags(entry.get("filename", ""))
    if named != set(wheel_tags):
        cand.reason = ("the index lists tags that its file name contradicts "
                       f"({', '.join(sorted(str(t) for t in named)) or 'no valid wheel name'})")
        return
    ranks = [host_rank[t] for t in wheel_tags if t in host_rank]
    if not ranks:
        cand.reason = (f"wheel tags {', '.join(entry.get('tags', []))} do not fit "
                       f"this interpreter/platform (best: {host.tags[0]})")
        return
    cand.tag_rank = min(ranks)
    manifest = entry.get("manifest")
    if not manifest:
        cand.reason = entry.get("manifest_error") or "no mlx-builder manifest"
        return
    if not accepts(cand.version, manifest):
        cand.reason = "version/commit does not match --mlx"
        return
    kind = wheel_backend(manifest)
    if kind != backend:
        cand.reason = f"a {kind} wheel (target {manifest.get('target')!r}); want {backend}"
        return
    if backend == "cuda":
        _judge_cuda(cand, manifest, host)
    else:
        cand.accepted = True
        cand.reason = f"{backend} wheel for {host.system} {host.machine}"
    if cand.accepted:
        cand.reason += f"; wheel tag rank {cand.tag_rank} of {len(host.tags)}"


def _name_tags(filename: str) -> set[Any]:
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    try:
        return set(parse_wheel_filename(filename)[3])
    except InvalidWheelFilename:
        return set()


def _public(version: Version | None) -> Version:
    """The release a wheel's version names (local labels dropped)."""
    return Version(version.public) if version is not None else Version("0")


def choose_wheel(entries: Iterable[tuple[dict[str, Any], str]], host: Host,
                 backend: str | None = None, mlx: str | None = None) -> Choice:
    """Pick the best wheel for ``host``; every candidate keeps its reason.

    ``entries`` are (listing entry, location) pairs; ``backend`` overrides the
    detected one (e.g. ``cpu`` on a GPU host); ``mlx`` is a version,
    specifier, upstream commit prefix or series name.
    """
    backend = backend or host.backend
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}",
                          f"choose one of {', '.join(BACKENDS)}")
    if backend == "cuda" and not host.gpus:
        raise WheelError("a CUDA wheel was asked for but no NVIDIA GPU was found",
                         f"detection: {host.describe()}",
                         f"install a cpu wheel, or set {FAKE_GPU_ENV} to try")
    accepts = _version_filter(mlx)
    cands = [Candidate(entry, loc) for entry, loc in entries]
    for cand in cands:
        judge(cand, host, backend, accepts)
    good = [c for c in cands if c.accepted]
    good.sort(key=lambda c: (c.arch_rank, c.major_rank, c.tag_rank, c.filename))
    # Newest public version first (stable sort); local labels such as
    # +mlxb.<hash> name a build, not a newer release, so they do not count.
    good.sort(key=lambda c: _public(c.version), reverse=True)
    chosen = good[0] if good else None
    if chosen is not None:
        which = "newest that fits" if len(good) > 1 else "the only wheel that fits"
        chosen.reason = f"version {_public(chosen.version)} ({which}); {chosen.reason}"
    order = {id(c): i for i, c in enumerate(good)}
    cands.sort(key=lambda c: (not c.accepted, order.get(id(c), 0), c.filename))
    return Choice(host, backend, chosen, cands)


def driver_error(choice: Choice) -> DriverTooOldError | None:
    """When no wheel was chosen because the driver is too old for every CUDA
    wheel that fits the GPU: the error that says so."""
    old = next((c for c in choice.candidates if c.driver_too_old), None)
    if choice.chosen is not None or old is None:
        return None
    return DriverTooOldError(
        f"the CUDA wheels for this GPU need a newer NVIDIA driver than {choice.host.driver}",
        old.reason,
        "update the driver, or use a wheel built with an older CUDA "
        "(`mlx-builder build --cuda 12`); `--backend cpu` installs the CPU wheel")


# Upstream's split packages: each installs mlx/lib/libmlx.so (and mlx-metal
# mlx.metallib), the very files our wheel writes. pip would let the two
# overwrite each other, and uninstalling either later breaks the other.
UPSTREAM_BACKENDS = ("mlx-cuda-12", "mlx-cuda-13", "mlx-cuda", "mlx-cpu", "mlx-metal")


def installed_backends(python: str) -> list[tuple[str, str]]:
    """(name, version) of upstream backend packages installed for ``python``."""
    code = ("import importlib.metadata as m, json, re\n"
            "names = {re.sub(r'[-_.]+', '-', (d.metadata['Name'] or '').lower()): d.version\n"
            "         for d in m.distributions()}\n"
            f"print(json.dumps(sorted((n, v) for n, v in names.items() if n in {list(UPSTREAM_BACKENDS)!r})))")
    out = process.run([python, "-c", code], timeout=60, error_cls=ConfigError,
                      what=f"cannot list the packages installed for {python}",
                      hint="pass a working Python interpreter with --python")
    return [(str(n), str(v)) for n, v in json.loads(out.stdout)]


def pip_command(python: str, location: str, pip_args: Sequence[str] = (),
                offline: bool = False) -> list[str]:
    """The pip invocation that installs the chosen wheel."""
    cmd = [python, "-m", "pip", "install", "--disable-pip-version-check"]
    if offline:
        cmd.append("--no-index")
        if "://" not in location:
            cmd += ["--find-links", os.path.dirname(os.path.abspath(location))]
    return cmd + list(pip_args) + [location]


# --- hash-checked installation ------------------------------------------------

PIP_HASH_MISMATCH = "DO NOT MATCH THE HASHES"


def file_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def expected_sha256(entry: Mapping[str, Any]) -> str:
    value = str(entry.get("sha256") or "").lower()
    if not re.fullmatch(r"[0-9a-f]{64}", value):
        raise WheelError(f"the index lists no sha256 for {entry.get('filename')}",
                         f"sha256 {entry.get('sha256')!r}",
                         "regenerate the index with `mlx-builder index`")
    return value


def fetch_verified(location: str, sha256: str, dest_dir: str | os.PathLike,
                   timeout: float = 120.0) -> str:
    """A local path of the wheel at ``location`` whose sha256 is ``sha256``
    (a URL is downloaded into ``dest_dir`` first); HashMismatchError otherwise."""
    if "://" in location and not location.startswith("file://"):
        import urllib.request
        target = os.path.join(dest_dir, os.path.basename(location.split("?")[0]))
        os.makedirs(dest_dir, exist_ok=True)
        import http.client
        try:
            with urllib.request.urlopen(location, timeout=timeout) as resp, \
                    open(target, "wb") as fh:
                shutil.copyfileobj(resp, fh)
                length = resp.headers.get("Content-Length")
                if length and length.isdigit() and fh.tell() != int(length):
                    raise http.client.IncompleteRead(b"", int(length) - fh.tell())
        except (OSError, http.client.HTTPException) as exc:
            # A download cut short is a network failure, not a changed wheel.
            raise FetchError(f"cannot download {location}",
                             f"{type(exc).__name__}: {exc}"[:300],
                             "check the URL and the network, and run again") from None
        path = target
    else:
        import urllib.parse
        import urllib.request
        path = (urllib.request.url2pathname(urllib.parse.urlparse(location).path)
                if location.startswith("file://") else location)
        if not os.path.isfile(path):
            raise WheelError(f"the index names {path}, which does not exist",
                             "the wheelhouse changed after `mlx-builder index`",
                             "regenerate the index")
    got = file_sha256(path)
    if got != sha256:
        raise HashMismatchError(
            f"{os.path.basename(path)} does not match the sha256 the index lists",
            f"file {got} != index {sha256}",
            "the wheel was replaced or damaged after `mlx-builder index`: rebuild "
            "or re-download it and run `mlx-builder index` again; nothing was installed")
    check_wheel_tags(path)
    return path


def check_wheel_tags(path: str | os.PathLike) -> None:
    """The tags of the wheel's file name are those its WHEEL file declares and
    include the platform its manifest names: a renamed wheel would otherwise
    install on a host it was not built for."""
    import urllib.parse
    name = os.path.basename(path)
    named = _name_tags(urllib.parse.unquote(name))     # a download keeps the URL's %2B
    text = distinfo.read_text(path, "WHEEL", required=False) or ""
    manifest = None
    try:
        manifest = read_manifest(Path(path))
    except WheelError:
        pass
    declared = {t for line in text.splitlines() if line.startswith("Tag:")
                for t in ptags.parse_tag(line.split(":", 1)[1].strip())}
    plat = ((manifest or {}).get("platform") or {}).get("tag") \
        if isinstance((manifest or {}).get("platform"), dict) else None
    problem = ""
    if declared and named and declared != named:
        problem = (f"its WHEEL file declares {', '.join(sorted(map(str, declared)))}, "
                   f"its name {', '.join(sorted(map(str, named))) or 'nothing valid'}")
    elif isinstance(plat, str) and plat and named and \
            not any(t.platform == plat for t in named):
        problem = f"its manifest was built for platform {plat}, its name says otherwise"
    if problem:
        raise WheelError(f"{name}: the file name's tags contradict the wheel", problem,
                         "rebuild the wheel instead of renaming it; nothing was installed")


def wheel_requires(path: str | os.PathLike) -> list[str]:
    """The wheel's Requires-Dist lines, without those that only extras need."""
    headers = distinfo.metadata(path)
    return [r for r in headers.get_all("Requires-Dist") or []
            if "extra" not in r.partition(";")[2]]


def hashed_pip_commands(python: str, wheel: str, sha256: str, project: str,
                        req_file: str | os.PathLike, pip_args: Sequence[str] = (),
                        offline: bool = False) -> list[list[str]]:
    """pip in hash-checking mode for the wheel itself (``--require-hashes``,
    ``--no-deps``: the hash pins that one file), then, unless --no-deps was
    asked for, a second call for its Requires-Dist. Writes ``req_file``."""
    from pathlib import Path
    uri = Path(wheel).resolve().as_uri()
    Path(req_file).write_text(f"{project} @ {uri} --hash=sha256:{sha256}\n")
    first = pip_command(python, wheel, pip_args, offline)[:-1]
    commands = [[*first, "--require-hashes", "--no-deps", "-r", str(req_file)]]
    requires = wheel_requires(wheel)
    if requires and "--no-deps" not in pip_args:
        commands.append([*first, *requires])
    return commands
