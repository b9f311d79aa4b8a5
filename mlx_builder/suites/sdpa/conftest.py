"""pytest setup for the SDPA suites: markers, and this folder on sys.path.

The suites run three ways: from the repository (`python -m pytest`), from a
copy that `mlx-builder test` stages next to a fresh venv, and by hand against
any MLX install. None of them needs mlx_builder itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


def pytest_configure(config):
    for line in (
        "gpu: needs a CUDA or Metal GPU and a built MLX wheel; skipped otherwise",
        "long: long-context case, runs only with MLX_BUILDER_LONG=1",
    ):
        config.addinivalue_line("markers", line)
