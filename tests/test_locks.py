"""Locks: a second run on the same tree, build folder or mirror waits (saying
so) or, with --no-wait, fails with exit 30; two first clones of a mirror
leave no .partial behind."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mlx_builder import locks
from mlx_builder.cli import main
from mlx_builder.errors import LockError
from mlx_builder.settings import Settings


def _env(upstream, tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLX_BUILDER_")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "xdg"), MLX_BUILDER_MLX_REPO=str(upstream.path),
               MLX_BUILDER_PATCHES=str(upstream.patches_dir),
               MLX_BUILDER_CACHE=str(upstream.root / "cache"))
    return env


def test_no_wait_fails_fast_on_a_held_tree(upstream, tmp_path, held, capsys, monkeypatch):
    dest = tmp_path / "tree"
    settings = upstream.settings()
    held(settings.cache_dir / "locks" / f"tree-{locks.path_key(dest)}.lock")
    for key, value in _env(upstream, tmp_path).items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SystemExit) as exc:
        main(["--no-wait", "apply", "--mlx", "0.1.0", "--dest", str(dest)])
    assert exc.value.code == LockError.exit_code == 30
    assert "in use by another mlx-builder run" in capsys.readouterr().err
    assert not dest.exists()


def test_a_second_run_waits_with_a_message_then_goes_on(upstream, tmp_path, held):
    dest = tmp_path / "tree"
    holder = held(upstream.root / "cache" / "locks" / f"tree-{locks.path_key(dest)}.lock")
    run = subprocess.Popen([sys.executable, "-m", "mlx_builder", "apply", "--mlx", "0.1.0",
                            "--dest", str(dest)], env=_env(upstream, tmp_path),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = run.stderr.readline()            # blocks until the run says it waits
    assert first.startswith("waiting for work tree") and not dest.exists()
    holder.stdin.close()
    holder.wait()
    out, _ = run.communicate()
    assert run.returncode == 0 and "work tree:" in out and (dest / ".git").is_dir()


def test_locks_are_reentrant_in_one_process(tmp_path):
    settings = Settings(cache_dir=tmp_path / "c", no_wait=True)
    with locks.tree_lock(settings, tmp_path / "t"), locks.tree_lock(settings, tmp_path / "t"):
        pass


def test_build_folder_lock(tmp_path, held):
    settings = Settings(cache_dir=tmp_path / "c", no_wait=True)
    folder = tmp_path / "builds" / "label"
    held(folder.parent / ".label.lock")
    with pytest.raises(LockError, match="build folder"):
        with locks.build_lock(settings, folder):
            pass


def test_two_first_clones_of_the_mirror_leave_no_partial(upstream, tmp_path):
    env = _env(upstream, tmp_path)
    env["MLX_BUILDER_MLX_REPO"] = upstream.path.as_uri()     # a URL: mirrored in the cache
    runs = [subprocess.Popen([sys.executable, "-m", "mlx_builder", "status", "--mlx", "0.1.0"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    results = [(r.communicate(), r.returncode) for r in runs]
    assert [rc for _, rc in results] == [0, 0], results
    mirrors = upstream.root / "cache" / "mirrors"
    assert sorted(p.name for p in mirrors.iterdir()) == ["mlx.git"]


def test_a_killed_clone_s_partial_is_removed(upstream, tmp_path):
    mirrors = upstream.root / "cache" / "mirrors"
    (mirrors / "mlx.git.x1y2.partial" / "objects").mkdir(parents=True)
    env = _env(upstream, tmp_path)
    env["MLX_BUILDER_MLX_REPO"] = upstream.path.as_uri()
    proc = subprocess.run([sys.executable, "-m", "mlx_builder", "status", "--mlx", "0.1.0"],
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in mirrors.iterdir()) == ["mlx.git"]
