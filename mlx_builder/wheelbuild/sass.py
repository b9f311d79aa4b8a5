"""Which GPU code a CUDA shared library carries.

Primary: ``cuobjdump --list-elf`` (SASS) and ``--list-ptx``. Without
cuobjdump the library's ``.nv_fatbin`` ELF section is read directly: each
fat-binary container (magic 0xBA55ED50) holds entries whose header gives the
kind (1 PTX, 2 ELF/SASS), the SM number and flags; flag 0x100000 marks
arch-specific (``a``) code and 0x200000 family (``f``) code (checked against
nvcc 13.0 output: sm_90 vs sm_90a vs sm_120f).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

from mlx_builder import process
from mlx_builder.errors import BuildError

FATBIN_MAGIC = 0xBA55ED50
_KIND_PTX, _KIND_ELF = 1, 2
_FLAG_ARCH_SPECIFIC = 0x100000
_FLAG_FAMILY = 0x200000


@dataclass(frozen=True)
class GpuCode:
    sass: frozenset[str]      # {'sm_90a', ...}
    ptx: frozenset[str]       # {'compute_90a', ...}
    method: str               # 'cuobjdump' | 'elf'


def parse_cuobjdump(text: str, kind: str = "elf") -> set[str]:
    """Architectures named by ``cuobjdump --list-elf`` / ``--list-ptx`` output."""
    label = "ELF file" if kind == "elf" else "PTX file"
    out = set()
    for line in text.splitlines():
        if line.strip().startswith(label):
            m = re.search(r"\bsm_(\d+[af]?)\b", line)
            if m:
                out.add(("sm_" if kind == "elf" else "compute_") + m.group(1))
    return out


def fatbin_entries(data: bytes) -> list[tuple[int, str]]:
    """(kind, arch name) of every entry of every fat-binary container in ``data``."""
    out: list[tuple[int, str]] = []
    magic = struct.pack("<I", FATBIN_MAGIC)
    pos = data.find(magic)
    while pos >= 0 and pos + 16 <= len(data):
        _, _, _, size = struct.unpack_from("<IHHQ", data, pos)
        end = min(pos + 16 + size, len(data))
        off = pos + 16
        while off + 64 <= end:
            kind, _, hdr = struct.unpack_from("<HHI", data, off)
            payload, = struct.unpack_from("<Q", data, off + 8)
            arch, = struct.unpack_from("<I", data, off + 28)
            flags, = struct.unpack_from("<Q", data, off + 40)
            if hdr < 64:
                break
            suffix = "a" if flags & _FLAG_ARCH_SPECIFIC else "f" if flags & _FLAG_FAMILY else ""
            out.append((kind, f"{arch}{suffix}"))
            off += hdr + payload
        pos = data.find(magic, max(end, pos + 4))
    return out


def elf_section(path: Path, name: str) -> bytes:
    """Bytes of one section of a 64-bit little-endian ELF file (b'' if absent)."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise BuildError(f"{path} is not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
                for i in range(shnum)]
    str_off, str_size = sections[shstrndx][4], sections[shstrndx][5]
    names = data[str_off:str_off + str_size]
    for sh_name, _, _, _, offset, size in sections:
        end = names.find(b"\0", sh_name)
        if names[sh_name:end].decode(errors="replace") == name:
            return data[offset:offset + size]
    return b""


def gpu_code(lib: Path, cuobjdump: str | None = None) -> GpuCode:
    if cuobjdump:
        elf = process.run([cuobjdump, "--list-elf", str(lib)], check=False)
        ptx = process.run([cuobjdump, "--list-ptx", str(lib)], check=False)
        if elf.ok:
            return GpuCode(frozenset(parse_cuobjdump(elf.stdout, "elf")),
                           frozenset(parse_cuobjdump(ptx.stdout, "ptx")), "cuobjdump")
    entries = fatbin_entries(elf_section(lib, ".nv_fatbin"))
    return GpuCode(frozenset(f"sm_{a}" for k, a in entries if k == _KIND_ELF),
                   frozenset(f"compute_{a}" for k, a in entries if k == _KIND_PTX), "elf")


def verify_sass(lib: Path, wanted: tuple[str, ...], cuobjdump: str | None = None) -> GpuCode:
    """Fail unless ``lib`` holds SASS for every architecture in ``wanted``."""
    code = gpu_code(lib, cuobjdump)
    missing = [w for w in wanted if w not in code.sass]
    if missing:
        have = ", ".join(sorted(code.sass)) or "no SASS at all"
        raise BuildError(f"{Path(lib).name} lacks SASS for {', '.join(missing)}",
                         f"it holds {have} (read with {code.method})",
                         "check MLX_CUDA_ARCHITECTURES in the build log; the wheel "
                         "was not written to the output directory")
    return code
