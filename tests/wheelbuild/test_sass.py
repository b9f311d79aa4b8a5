"""SASS checks: cuobjdump listings and the .nv_fatbin section read directly."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from mlx_builder.errors import BuildError
from mlx_builder.wheelbuild.sass import (
    FATBIN_MAGIC,
    elf_section,
    fatbin_entries,
    gpu_code,
    parse_cuobjdump,
    verify_sass,
)

CUOBJDUMP_ELF = """
ELF file    1: libmlx.1.sm_80.cubin
ELF file    2: libmlx.2.sm_90a.cubin
ELF file    3: libmlx.3.sm_90a.cubin
ELF file    4: libmlx.4.sm_121a.cubin
"""
CUOBJDUMP_PTX = "PTX file    1: libmlx.1.sm_121a.ptx\n"


def test_parse_cuobjdump_listing():
    assert parse_cuobjdump(CUOBJDUMP_ELF) == {"sm_80", "sm_90a", "sm_121a"}
    assert parse_cuobjdump(CUOBJDUMP_PTX, "ptx") == {"compute_121a"}
    assert parse_cuobjdump("cuobjdump info    : File 'x' does not contain device code\n") == set()


def entry(kind: int, arch: int, flags: int, payload: bytes, hdr: int = 64) -> bytes:
    head = struct.pack("<HHIQ", kind, 0x101, hdr, len(payload))
    head += b"\0" * (28 - len(head)) + struct.pack("<I", arch)
    head += b"\0" * (40 - len(head)) + struct.pack("<Q", flags)
    return head + b"\0" * (hdr - len(head)) + payload


def container(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(body)) + body


def synthetic_fatbin() -> bytes:
    one = container(entry(2, 80, 0x11, b"A" * 8), entry(2, 90, 0x100011, b"B" * 16),
                    entry(1, 90, 0x108011, b"C" * 8, hdr=80))
    two = container(entry(2, 120, 0x1200011, b"D" * 8, hdr=112))
    return b"\0" * 8 + one + b"\0" * 8 + two


def test_fatbin_entries_with_arch_and_family_flags():
    assert fatbin_entries(synthetic_fatbin()) == [(2, "80"), (2, "90a"), (1, "90a"), (2, "120f")]


def build_so(tmp_path: Path, blob: bytes) -> Path:
    """A real shared object whose .nv_fatbin section holds ``blob`` (g++ only)."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if not cxx:
        pytest.skip("needs a C++ compiler to build an ELF fixture")
    data = ", ".join(str(b) for b in blob)
    src = tmp_path / "fb.cpp"
    src.write_text("__attribute__((section(\".nv_fatbin\"), used)) "
                   f"static const unsigned char fatbin[] = {{{data}}};\n"
                   "extern \"C\" int probe() { return 1; }\n")
    out = tmp_path / "libfb.so"
    subprocess.run([cxx, "-shared", "-fPIC", str(src), "-o", str(out)], check=True)
    return out


def test_elf_section_and_verify_without_cuobjdump(tmp_path):
    lib = build_so(tmp_path, synthetic_fatbin())
    assert elf_section(lib, ".nv_fatbin").startswith(b"\0" * 8)
    code = verify_sass(lib, ("sm_80", "sm_90a"))
    assert code.method == "elf" and code.sass == {"sm_80", "sm_90a", "sm_120f"}
    assert code.ptx == {"compute_90a"}
    with pytest.raises(BuildError, match="lacks SASS for sm_121a") as exc:
        verify_sass(lib, ("sm_90a", "sm_121a"))
    assert "sm_120f" in exc.value.why


def test_verify_with_a_fake_cuobjdump(tmp_path):
    fake = tmp_path / "cuobjdump"
    fake.write_text("#!/bin/sh\nif [ \"$1\" = --list-elf ]; then cat <<'X'\n"
                    f"{CUOBJDUMP_ELF}X\nelse cat <<'X'\n{CUOBJDUMP_PTX}X\nfi\n")
    fake.chmod(0o755)
    lib = tmp_path / "libmlx.so"
    lib.write_bytes(b"not even elf")
    code = verify_sass(lib, ("sm_90a", "sm_121a"), str(fake))
    assert code.method == "cuobjdump" and code.ptx == {"compute_121a"}
    with pytest.raises(BuildError, match="sm_100a"):
        verify_sass(lib, ("sm_100a",), str(fake))


@pytest.mark.nvcc
def test_real_nvcc_output_when_available(tmp_path):
    nvcc = shutil.which("nvcc")
    if not nvcc:
        pytest.skip("nvcc not installed: real fat binaries cannot be made here")
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float* x) { x[threadIdx.x] *= 2.f; }\n")
    out = tmp_path / "k.fatbin"
    proc = subprocess.run([nvcc, "-fatbin", "-gencode", "arch=compute_80,code=sm_80",
                           "-gencode", "arch=compute_90a,code=[sm_90a,compute_90a]",
                           str(src), "-o", str(out)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"nvcc cannot compile here: {proc.stderr.strip()[:200]}")
    assert sorted(fatbin_entries(out.read_bytes())) == [(1, "90a"), (2, "80"), (2, "90a")]


def test_not_elf_is_reported(tmp_path):
    bad = tmp_path / "x.so"
    bad.write_bytes(b"\x7fELF\x01\x01")
    with pytest.raises(BuildError, match="not a 64-bit"):
        gpu_code(bad)
