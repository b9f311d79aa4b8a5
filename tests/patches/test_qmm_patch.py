"""The affine quantized-matmul patches (0060 and 0061's gathered products):
scripts/qmm_harness checks and times the kernel header the series give MLX,
so its copy must be that header byte for byte, and its C entry points must
compile against it. Running the kernels needs a GPU: scripts/qmm_harness/
run.py check does that.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mlx_builder.source.series import load_index

ROOT = Path(__file__).resolve().parents[2]
PATCHES = ROOT / "patches"
HARNESS = ROOT / "scripts" / "qmm_harness"
HEADER = "mlx/backend/cuda/device/qmm_affine.cuh"


def header_series():
    """The series whose patches carry the header."""
    return [s for s in load_index(PATCHES)
            if any(f"diff --git a/{HEADER} " in e.path.read_text() for e in s.patches)]


def patched_header(series, tmp_path: Path) -> bytes:
    """The header as the series' patches leave it: each patch that touches
    it, applied in series order to an empty folder, that file only."""
    touching = [e for e in series.patches if f"diff --git a/{HEADER} " in e.path.read_text()]
    assert touching, series.name
    for entry in touching:
        proc = subprocess.run(["git", "apply", f"--include={HEADER}", str(entry.path)],
                              cwd=tmp_path, capture_output=True, text=True)
        assert proc.returncode == 0, (entry.file, proc.stderr)
    return (tmp_path / HEADER).read_bytes()


def test_the_mainline_series_carry_the_header():
    assert {"v0.32", "main"} <= {s.name for s in header_series()}


@pytest.mark.parametrize("series", header_series(), ids=lambda s: s.name)
def test_the_harness_header_is_the_patched_header(series, tmp_path):
    assert (HARNESS / "qmm_affine.cuh").read_bytes() == patched_header(series, tmp_path), (
        "copy the header the series produce to scripts/qmm_harness/qmm_affine.cuh")


@pytest.mark.nvcc
def test_the_harness_compiles_with_its_entry_points(tmp_path):
    nvcc = shutil.which("nvcc") or (
        "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if nvcc is None:
        pytest.skip("nvcc not found: the harness compile check needs the CUDA toolkit")
    lib = tmp_path / "libqmm_harness.so"
    # One architecture keeps this quick (the kernels' mma.sync needs sm_80).
    proc = subprocess.run(
        [nvcc, "-O1", "-std=c++17", "-arch=sm_80", "--shared", "-Xcompiler", "-fPIC",
         str(HARNESS / "harness.cu"), "-o", str(lib)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    loaded = ctypes.CDLL(str(lib))
    for name in ("qmm_gemv", "qmm_gather_gemv", "qmm_dequant", "qmm_mma"):
        assert hasattr(loaded, name), name
