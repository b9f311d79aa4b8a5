"""The CUDA tiled-attention patches: metadata, the kernel sources only in
patches/common/, and a host compile of the kernel headers they add.

The tiled kernel comes in three common patches: the mma.sync family
(0020), the wgmma tiles at 192 / 256 (0025) and the warp-specialized block
at 512 (0026). The compile test writes the files 0020 and the decode patch
add, applies 0025 and 0026 to them (no MLX checkout needed), builds the
standalone harness against the result with nvcc, and checks that each tile
configuration fits the shared memory it promises (99 KB for sm_120/sm_121,
227 KB for sm_90). Running the kernel needs a GPU:
scripts/attn_harness/run.py check does that on the H200.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mlx_builder.source.series import REQUIRED_TRAILERS, applies_to, load_index, parse_patch

ROOT = Path(__file__).resolve().parents[2]
PATCHES = ROOT / "patches"
HARNESS = ROOT / "scripts" / "attn_harness" / "harness.cu"
CUDA_PATCH_SUBJECT = "cuda: tiled flash attention kernels for head_dim 192, 256 and 512"
# The patches after it that change the kernel's files, in series order.
KERNEL_FOLLOW_UPS = (
    "cuda: wgmma tiles for head_dim 192 and 256 on sm_90a",
    "cuda: warp-specialized wgmma block for head_dim 512 on sm_90a",
)
DECODE_PATCH_SUBJECT = "cuda: split-K decode attention kernel for head_dim 192, 256 and 512"
NEW_HEADER = re.compile(r"^diff --git a/(mlx/backend/cuda/device/attention_\w+\.cuh) ")
KERNEL_SOURCE = re.compile(
    r"^diff --git a/(mlx/backend/cuda/(device/attention_\w+\.cuh|attention_utils\.h|"
    r"scaled_dot_product_attention_(tiled|decode)\.cu)) ", re.M)

# Shared memory per block a configuration may use (cudaDevAttrMaxSharedMemoryPerBlockOptin).
SMALL_LIMIT = 99 * 1024   # sm_120 / sm_121 (GB10), sm_86, sm_89
MEDIUM_LIMIT = 163 * 1024  # sm_80, sm_87
LARGE_LIMIT = 227 * 1024  # sm_90, sm_100
HEAD_DIMS = (192, 256, 512)


def cuda_patches():
    found = []
    for series in load_index(PATCHES):
        for entry in series.patches:
            if parse_patch(entry.path).subject == CUDA_PATCH_SUBJECT:
                found.append((series, entry))
    return found


def new_files(patch_text: str) -> dict[str, str]:
    """Files the patch creates, path -> content (only whole new files)."""
    files, current, lines, in_hunk = {}, None, [], False
    for line in patch_text.splitlines():
        m = NEW_HEADER.match(line)
        if line.startswith("diff --git "):
            if current:
                files[current] = "\n".join(lines) + "\n"
            current, lines, in_hunk = (m.group(1) if m else None), [], False
            continue
        if current is None:
            continue
        if line.startswith("@@"):
            in_hunk = True
        elif in_hunk and line.startswith("+"):
            lines.append(line[1:])
    if current:
        files[current] = "\n".join(lines) + "\n"
    return files


def test_every_mainline_series_carries_the_cuda_patch():
    series_with = {s.name for s, _ in cuda_patches()}
    assert {"v0.32", "main"} <= series_with


@pytest.mark.parametrize("series,entry", cuda_patches(),
                         ids=lambda x: getattr(x, "name", getattr(x, "file", "")))
def test_cuda_patch_metadata(series, entry):
    header = parse_patch(entry.path)
    assert entry.target == "cuda"
    assert not header.missing_trailers(), header.missing_trailers()
    for trailer in REQUIRED_TRAILERS:
        assert header.trailers.get(trailer), trailer
    assert "Applies-To" not in header.trailers, "derived from the index"
    assert series.applies_label() in applies_to(load_index(PATCHES), entry)


def kernel_patches(series):
    """The series' tiled-kernel patches, in series order."""
    subjects = (CUDA_PATCH_SUBJECT, *KERNEL_FOLLOW_UPS)
    return [e for e in series.patches if parse_patch(e.path).subject in subjects]


@pytest.mark.parametrize("series", [s for s, _ in cuda_patches()],
                         ids=lambda s: s.name)
def test_the_kernel_comes_in_three_common_patches(series):
    entries = kernel_patches(series)
    assert [parse_patch(e.path).subject for e in entries] == [
        CUDA_PATCH_SUBJECT, *KERNEL_FOLLOW_UPS]
    assert all(e.is_common and e.target == "cuda" for e in entries)
    for entry in entries:
        header = parse_patch(entry.path)
        assert not header.missing_trailers(), (entry.file, header.missing_trailers())
        assert all(bug.startswith("https://github.com/ml-explore/mlx/")
                   for bug in header.trailers["Bug"]), entry.file
        # A message a reviewer reads in one screen.
        message = entry.path.read_text().split("\ndiff --git ", 1)[0]
        assert len(message.split("\n\n", 1)[1].splitlines()) <= 30, entry.file


def test_kernel_sources_exist_only_in_common_patches():
    """The kernel sources live in patches/common/ only; 0020 adds the
    mma.sync family's headers, 0025 and 0026 add the wgmma ones."""
    main = next(s for s in load_index(PATCHES) if s.name == "main")
    first, wgmma, ws = kernel_patches(main)
    device = "mlx/backend/cuda/device/attention_{}.cuh".format
    created = re.compile(r"^diff --git a/(\S+) b/\S+\nnew file mode", re.M)
    def headers(entry):
        return {f for f in created.findall(entry.path.read_text())
                if f.startswith("mlx/backend/cuda/device/")}
    assert headers(first) == {
        device(n) for n in ("mask", "mma", "softmax", "tma", "traits", "scope",
                            "mainloop_sm80", "kernel", "tile_size")}
    assert headers(wgmma) == {device("wgmma"), device("mainloop_sm90")}
    assert headers(ws) == {device("ws")}
    carriers: dict[str, list[str]] = {}
    for path in sorted(PATCHES.glob("*/*.patch")):
        for match in KERNEL_SOURCE.finditer(path.read_text()):
            carriers.setdefault(match.group(1), []).append(
                path.relative_to(PATCHES).as_posix())
    assert "mlx/backend/cuda/device/attention_decode.cuh" in carriers
    outside = {f: c for f, c in carriers.items()
               if any(not p.startswith("common/") for p in c)}
    assert not outside, outside


def test_new_file_extraction_reads_only_added_lines():
    text = (
        "diff --git a/mlx/backend/cuda/device/attention_x.cuh "
        "b/mlx/backend/cuda/device/attention_x.cuh\nnew file mode 100644\n"
        "--- /dev/null\n+++ b/mlx/backend/cuda/device/attention_x.cuh\n"
        "@@ -0,0 +1,2 @@\n+int a;\n+int b;\n"
        "diff --git a/other.cpp b/other.cpp\n@@ -1 +1 @@\n-x\n+y\n")
    assert new_files(text) == {
        "mlx/backend/cuda/device/attention_x.cuh": "int a;\nint b;\n"}


@pytest.fixture(scope="module")
def harness_lib(tmp_path_factory):
    nvcc = shutil.which("nvcc") or (
        "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if nvcc is None:
        pytest.skip("nvcc not found: the CUDA kernel compile check needs the CUDA toolkit")
    tree = tmp_path_factory.mktemp("mlx")
    # The harness compiles the prefill and the decode kernels of main.
    main = next(s for s in load_index(PATCHES) if s.name == "main")
    added = {}
    for entry in main.patches:
        if parse_patch(entry.path).subject in (CUDA_PATCH_SUBJECT, DECODE_PATCH_SUBJECT):
            added.update(new_files(entry.path.read_text()))
    assert "mlx/backend/cuda/device/attention_decode.cuh" in added
    for rel, content in added.items():
        path = tree / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    # The follow-ups change only kernel files (and add some): apply those.
    for entry in kernel_patches(main)[1:]:
        proc = subprocess.run(
            ["git", "apply", "--include=mlx/backend/cuda/device/*",
             str(entry.path)], cwd=tree, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    lib = tree / "libattn_harness.so"
    # One architecture keeps this quick; the nightly and the H200 cover more.
    proc = subprocess.run(
        [nvcc, "-O1", "-std=c++17", "-arch=sm_80", "--shared", "-Xcompiler",
         "-fPIC", f"-I{tree}", str(HARNESS), "-o", str(lib)],
        capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return ctypes.CDLL(str(lib))


@pytest.mark.nvcc
@pytest.mark.parametrize("D", HEAD_DIMS)
def test_tile_configs_fit_their_shared_memory(harness_lib, D):
    small = harness_lib.harness_smem_bytes(D, 0)
    large = harness_lib.harness_smem_bytes(D, 1)
    assert 0 < small <= SMALL_LIMIT, f"D={D} small config needs {small} bytes"
    assert 0 < large <= LARGE_LIMIT, f"D={D} large config needs {large} bytes"
    assert small <= large
    # The sm_80 configuration fits its 163 KB and needs more than the 99 KB
    # tiles only where it differs from them.
    medium = harness_lib.harness_smem_bytes(D, 9)
    assert small <= medium <= MEDIUM_LIMIT, f"D={D} medium config needs {medium} bytes"
    # The wgmma (sm_90a) configuration, alignment slack included.
    hopper = harness_lib.harness_smem_bytes(D, 4)
    assert 0 < hopper <= LARGE_LIMIT, f"D={D} hopper config needs {hopper} bytes"


@pytest.mark.nvcc
@pytest.mark.parametrize("D", HEAD_DIMS)
def test_the_harness_runs_only_mlx_configurations(harness_lib, D):
    # Codes 0, 1, 4 and 9 are MLX's small, large, hopper and medium
    # configurations; the kernel headers carry no other tiling.
    assert [c for c in range(17) if harness_lib.harness_smem_bytes(D, c) > 0] == [
        0, 1, 4, 9]


@pytest.mark.nvcc
def test_unknown_head_dim_is_rejected(harness_lib):
    assert harness_lib.harness_smem_bytes(160, 0) == -1


@pytest.mark.nvcc
def test_decode_rows_per_block_and_splits(harness_lib):
    rows = harness_lib.harness_decode_max_rows
    simt, mma = 0, 1
    # Registers bound the query rows a scalar CTA holds: 8 up to head_dim
    # 256, 4 at 512; the tensor-core kernel holds one n = 8 tile.
    assert [rows(simt, d) for d in (192, 256, 512)] == [8, 8, 4]
    assert [rows(mma, d) for d in (192, 256, 512)] == [8, 8, 8]
    assert rows(simt, 160) == -1 and rows(mma, 160) == -1
    # Both kernels fit the 99 KB of a block on sm_86/89/120/121.
    smem = harness_lib.harness_decode_smem_bytes
    for kind in (simt, mma):
        for d in (192, 256, 512):
            assert 0 < smem(kind, d) <= SMALL_LIMIT, (kind, d, smem(kind, d))
    assert smem(mma, 160) == -1
    splits = harness_lib.harness_decode_effective_splits
    assert splits(4097, 7) == 7      # 586 keys each, the last chunk ragged
    assert splits(10, 7) == 5        # 2 keys each: fewer, non-empty chunks
    assert splits(1, 33) == 1
