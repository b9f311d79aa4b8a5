"""pytest setup for the SDPA suites: markers, and this folder on sys.path.

The suites run three ways: from the repository (`python -m pytest`), from a
copy that `mlx-builder test` stages next to a fresh venv, and by hand against
any MLX install. None of them needs mlx_builder itself.

MLX_BUILDER_SHARD=i/n keeps every n-th collected test from the i-th (0-based)
and deselects the others: `mlx-builder test --jobs n` runs a part in n
processes that way. Taking every n-th test rather than a block spreads the
heavy parametrizations (long sequences, large head dims) over the shards.
Tests marked `solo` plan for most of the GPU's memory, so no shard takes
them: MLX_BUILDER_SHARD=solo keeps only those, and the command runs that
process alone after the shards.
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
        "solo: plans for most of the GPU's memory; with --jobs it runs alone "
        "after the shards",
    ):
        config.addinivalue_line("markers", line)


SHARD_ENV = "MLX_BUILDER_SHARD"
SOLO = "solo"


def parse_shard(text: str) -> tuple[int, int] | None:
    """'i/n' -> (i, n) with 0 <= i < n, 'solo' -> None; pytest.UsageError
    otherwise."""
    if text == SOLO:
        return None
    index, sep, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i, n = -1, 0
    if not sep or n < 1 or not 0 <= i < n:
        raise pytest.UsageError(
            f"{SHARD_ENV}={text!r} is not i/n with 0 <= i < n (e.g. 0/4) "
            f"or {SOLO}")
    return i, n


@pytest.fixture(autouse=True)
def _return_cached_memory():
    """Sharded, the processes share one GPU: each hands MLX's cached buffers
    back after every test, so that memory a finished test freed is not held
    from the others."""
    yield
    mx = sys.modules.get("mlx.core")
    if mx is not None and os.environ.get(SHARD_ENV):
        mx.clear_cache()


def pytest_collection_modifyitems(config, items):
    text = os.environ.get(SHARD_ENV)
    if not text:
        return
    shard = parse_shard(text)
    is_solo = [item.get_closest_marker(SOLO) is not None for item in items]
    if shard is None:
        keep = [item for item, solo in zip(items, is_solo) if solo]
    else:
        i, n = shard
        keep = [item for item, solo in zip(items, is_solo) if not solo][i::n]
    kept = {id(item) for item in keep}
    drop = [item for item in items if id(item) not in kept]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
