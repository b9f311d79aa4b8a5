"""Shared fixtures: a small git "upstream MLX" with tags and patch series.

Reuse from any test file:

* ``upstream`` – a fresh copy of the default fixture, per test;
* ``make_upstream()`` – the same as a factory (``make_upstream(series=False)``
  gives the repository without patches/ index);
* ``isolated_env`` – no MLX_BUILDER_* variables, no user config file, and
  a cache of the test's own (every test already runs without the user's
  MLX_BUILDER_* variables and config file: see ``_no_user_settings``);
* ``held`` – hold a lock file from another process until the test ends;
* helpers: ``from gitfixture import git, tree_digest, PatchSpec, Upstream``
  (tests/gitfixture.py documents the default fixture's layout).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from gitfixture import Upstream, build_upstream

# The one variable a test may take from the user: the real MLX checkout the
# opt-in ``real_mlx`` tests run against. Read before any test clears it.
REAL_MLX_REPO = os.environ.get("MLX_BUILDER_MLX_REPO")


@pytest.fixture(autouse=True)
def _no_user_settings(request, monkeypatch, tmp_path_factory):
    """Every test runs as on a machine without mlx-builder settings: the
    user's MLX_BUILDER_* variables (a MLX_BUILDER_DEP_* export, an offline
    flag) and config file would change what the code under test sees."""
    for name in list(os.environ):
        if name.startswith("MLX_BUILDER_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.getbasetemp() / "no-user-config"))
    if REAL_MLX_REPO and request.node.get_closest_marker("real_mlx"):
        monkeypatch.setenv("MLX_BUILDER_MLX_REPO", REAL_MLX_REPO)


@pytest.fixture(scope="session")
def _upstream_templates(tmp_path_factory) -> dict[bool, Upstream]:
    out = {}
    for with_series in (True, False):
        root = tmp_path_factory.mktemp(f"upstream-{int(with_series)}")
        out[with_series] = build_upstream(root, with_series)
    return out


@pytest.fixture
def make_upstream(_upstream_templates, tmp_path) -> Callable[..., Upstream]:
    """Factory: a private copy of the fixture upstream (and patches)."""
    count = [0]

    def make(series: bool = True) -> Upstream:
        count[0] += 1
        template = _upstream_templates[series]
        root = tmp_path / f"fx{count[0]}"
        shutil.copytree(template.root, root, symlinks=True)
        return Upstream(root, dict(template.commits),
                        [{**s, "patches": [dict(p) for p in s["patches"]]}
                         for s in template.series])

    return make


@pytest.fixture
def upstream(make_upstream) -> Upstream:
    return make_upstream()


@pytest.fixture
def isolated_env(monkeypatch, tmp_path):
    """No MLX_BUILDER_* variables and no user config leak into a test."""
    for name in list(os.environ):
        if name.startswith("MLX_BUILDER_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    return monkeypatch


HOLDER = """
import sys
from filelock import FileLock
lock = FileLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def held():
    """Hold a lock file from another process until the test lets go."""
    procs = []

    def hold(path: Path) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "held"
        procs.append(proc)
        return proc

    yield hold
    for proc in procs:
        if proc.poll() is None:
            proc.stdin.close()
            proc.wait()
