"""pytest setup for the SDPA suites: markers, and this folder on sys.path.

The suites run three ways: from the repository (`python -m pytest`), from a
copy that `mlx-builder test` stages next to a fresh venv, and by hand against
any MLX install. None of them needs mlx_builder itself.

MLX_BUILDER_SHARD=i/n keeps every n-th collected test from the i-th (0-based)
and deselects the others: `mlx-builder test --jobs n` runs a part in n
processes that way. Taking every n-th test rather than a block spreads the
heavy parametrizations (long sequences, large head dims) over the shards.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


def pytest_configure(config):
    for line in (
        "gpu: needs a CUDA or Metal GPU and a built MLX wheel; skipped otherwise",
        "long: long-context case, runs only with MLX_BUILDER_LONG=1",
    ):
        config.addinivalue_line("markers", line)


SHARD_ENV = "MLX_BUILDER_SHARD"


def parse_shard(text: str) -> tuple[int, int]:
    """'i/n' -> (i, n) with 0 <= i < n; pytest.UsageError otherwise."""
    index, sep, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i, n = -1, 0
    if not sep or n < 1 or not 0 <= i < n:
        raise pytest.UsageError(
            f"{SHARD_ENV}={text!r} is not i/n with 0 <= i < n (e.g. 0/4)")
    return i, n


def pytest_collection_modifyitems(config, items):
    text = os.environ.get(SHARD_ENV)
    if not text:
        return
    i, n = parse_shard(text)
    keep = [item for k, item in enumerate(items) if k % n == i]
    drop = [item for k, item in enumerate(items) if k % n != i]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
