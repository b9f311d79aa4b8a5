"""Which sub-index a wheel belongs to: one per backend, CUDA major and GPU target.

A pip or uv user picks a variant the way PyTorch users pick ``cu130``: by
URL (``<index>/cu13-sm121/simple/``). Inside one variant every wheel is built
for the same GPUs with the same CUDA major, so the resolver's only choice is
the version and the wheel tag (Python, platform): nothing it compares as a
string can hand an sm_90 wheel to a GB10. Names:

- ``cpu``, ``metal``
- ``cu<major>-<targets>``: ``cu13-sm121``, ``cu12-sm80``, ``cu13-sm80-sm121``
  (a wheel built for several targets), ``cu13-all`` (upstream's set).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mlx_builder.lists import loose_list
from mlx_builder.wheelbuild.manifest import parse_label

BACKENDS = ("cuda", "metal", "cpu")
OTHER = "other"        # wheels without our manifest (not ours, or unreadable)

# The oldest driver each CUDA major runs on (NVIDIA's minor-version
# compatibility: any 12.x on >= 525.60.13, any 13.x on >= 580.65.06).
MIN_DRIVER = {12: (525, 60, 13), 13: (580, 65, 6)}


def wheel_backend(manifest: Mapping[str, Any]) -> str:
    if manifest.get("backend") in BACKENDS:
        return str(manifest["backend"])
    target = str(manifest.get("target", "")).lower()
    parts = loose_list(target)
    for backend in BACKENDS:
        if any(p == backend or p.startswith(backend + "-") for p in parts):
            return backend
    return "unknown"


def cuda_major(manifest: Mapping[str, Any]) -> int | None:
    """The CUDA major a wheel was built with: the manifest's ``cuda_major``,
    else its label, else the nvcc version its toolchain records."""
    value = manifest.get("cuda_major")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    label = parse_label(str(manifest.get("version", ""))) or {}
    if "cuda_major" in label:
        return int(label["cuda_major"])
    toolchain = manifest.get("toolchain")
    nvcc = str(toolchain.get("nvcc", "")) if isinstance(toolchain, Mapping) else ""
    match = re.match(r"(\d+)\.", nvcc)
    return int(match[1]) if match else None


def variant(manifest: Mapping[str, Any] | None) -> str:
    """The sub-index name of a wheel with this manifest."""
    if not manifest:
        return OTHER
    backend = wheel_backend(manifest)
    if backend != "cuda":
        return backend if backend in BACKENDS else OTHER
    parts = [p.removeprefix("cuda-") for p in loose_list(str(manifest.get("target", "")).lower())]
    targets = "-".join("all" if p == "cuda" else p for p in parts) or "all"
    major = cuda_major(manifest)
    return f"cu{major}-{targets}" if major is not None else f"cuda-{targets}"


def parse_driver(text: str) -> tuple[int, ...] | None:
    """``580.82.07`` -> (580, 82, 7); None when it is not a driver version."""
    parts = text.strip().split(".")
    if not text.strip() or not all(p.isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)


def driver_runs(major: int, driver: tuple[int, ...]) -> bool:
    """Whether a driver of this version runs code built with CUDA ``major``."""
    need = MIN_DRIVER.get(major)
    return need is None or driver >= need


def min_driver(major: int) -> str:
    need = MIN_DRIVER.get(major)
    return ".".join(f"{n:02d}" if i else str(n) for i, n in enumerate(need)) if need else "?"
