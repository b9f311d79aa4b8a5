"""apply under signals: a run stopped at any point leaves the old tree or the
new one (SIGINT, SIGTERM, SIGHUP at once; SIGKILL after the next run's repair).

The kill points are the git commands apply runs: a stand-in ``git`` on PATH
counts its calls and signals its parent (the mlx-builder process) at the
n-th one, so every point between two git commands is hit without timing.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from gitfixture import git, tree_digest

from mlx_builder.source.apply import JOURNAL, prepare_tree, repair

REAL_GIT = shutil.which("git")
# TERM/HUP/INT: the signal arrives while the n-th git command runs.
# KILL: right after the n-th git command has finished.
WRAPPER = """#!/bin/sh
n=$(cat "$KILL_COUNT" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$KILL_COUNT"
if [ "$n" = "$KILL_AT" ] && [ "$KILL_SIG" != KILL ]; then kill -$KILL_SIG $PPID; fi
"{git}" "$@"; rc=$?
if [ "$n" = "$KILL_AT" ] && [ "$KILL_SIG" = KILL ]; then kill -KILL $PPID; fi
exit $rc
"""


@pytest.fixture
def killer(tmp_path):
    bindir = tmp_path / "killbin"
    bindir.mkdir()
    (bindir / "git").write_text(WRAPPER.format(git=REAL_GIT))
    (bindir / "git").chmod(0o755)
    count = tmp_path / "git-calls"

    def run(upstream, dest: Path, at: int, sig: str, mlx: str = "0.2.0"):
        count.unlink(missing_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MLX_BUILDER_")}
        env.update(PATH=f"{bindir}{os.pathsep}{env['PATH']}", KILL_COUNT=str(count),
                   KILL_AT=str(at), KILL_SIG=sig, XDG_CONFIG_HOME=str(tmp_path / "xdg"),
                   MLX_BUILDER_MLX_REPO=str(upstream.path),
                   MLX_BUILDER_PATCHES=str(upstream.patches_dir),
                   MLX_BUILDER_CACHE=str(upstream.root / "cache"))
        proc = subprocess.run([sys.executable, "-m", "mlx_builder", "apply", "--mlx", mlx,
                               "--target", "cuda", "--dest", str(dest)],
                              env=env, capture_output=True, text=True)
        calls = int(count.read_text()) if count.exists() else 0
        return proc, calls

    return run


def _states(upstream, tmp_path):
    """The tree at 0.1.0 (old), a copy of it to start each run from, and the
    digests of old and of new (the same tree re-pointed to 0.2.0)."""
    dest = tmp_path / "tree"
    prepare_tree(upstream.settings(), "0.1.0", target="cuda", dest=dest)
    old = tree_digest(dest)
    keep = tmp_path / "keep"
    shutil.copytree(dest, keep, symlinks=True)
    prepare_tree(upstream.settings(), "0.2.0", target="cuda", dest=dest)
    new = tree_digest(dest)
    _reset(dest, keep)
    return dest, keep, old, new


def _reset(dest: Path, keep: Path) -> None:
    shutil.rmtree(dest)
    shutil.copytree(keep, dest, symlinks=True)


@pytest.mark.integration  # a process per kill point: tens of seconds
def test_sigterm_sighup_sigint_at_every_git_call_leave_old_or_new(upstream, tmp_path, killer):
    dest, keep, old, new = _states(upstream, tmp_path)
    proc, total = killer(upstream, dest, -1, "TERM")        # a run without a kill
    assert proc.returncode == 0 and tree_digest(dest) == new and total > 10
    outcomes = {"old": 0, "new": 0}
    for at in range(1, total + 1):
        sig = ("TERM", "HUP", "INT")[at % 3]
        _reset(dest, keep)
        proc, _ = killer(upstream, dest, at, sig)
        state = tree_digest(dest)
        assert state in (old, new), f"git call {at}, SIG{sig}: half-written tree"
        assert not (dest / ".git" / JOURNAL).exists()
        series = git(dest, "config", "mlx-builder.series")       # config comes back too
        assert series == ("v0.1" if state == old else "v0.2"), (at, sig)
        if "Traceback" in proc.stderr:     # Ctrl-C while Python imports, before main()
            assert sig == "INT" and state == old and at <= 2, proc.stderr
            assert proc.stderr.rstrip().endswith("KeyboardInterrupt")
        elif state == old:
            # 128 + signal from main(); killed by the signal itself (-n) only
            # before main() installs the handlers (GitPython runs `git version`
            # on import), when nothing has been written
            num = {"TERM": signal.SIGTERM, "HUP": signal.SIGHUP, "INT": signal.SIGINT}[sig]
            assert proc.returncode in (128 + num, -num), (at, sig, proc.stderr)
        outcomes["old" if state == old else "new"] += 1
    assert outcomes["old"] > 5        # most points really stop the run


@pytest.mark.integration  # a process per kill point: tens of seconds
def test_sigkill_at_every_git_call_is_repaired_by_the_next_run(upstream, tmp_path, killer):
    dest, keep, old, new = _states(upstream, tmp_path)
    _, total = killer(upstream, dest, -1, "KILL")
    repaired = []
    for at in range(1, total + 1, 3):
        _reset(dest, keep)
        proc, _ = killer(upstream, dest, at, "KILL")
        assert proc.returncode == -signal.SIGKILL
        if (dest / ".git" / JOURNAL).exists():
            assert repair(dest) is not None
            repaired.append(at)
        assert tree_digest(dest) in (old, new), f"git call {at}: not repaired"
    assert len(repaired) >= 3
    # and a plain apply after a kill finishes the job
    _reset(dest, keep)
    proc, _ = killer(upstream, dest, repaired[len(repaired) // 2], "KILL")
    proc, _ = killer(upstream, dest, -1, "KILL")
    assert proc.returncode == 0 and "repaired" in proc.stderr and tree_digest(dest) == new


@pytest.mark.integration  # a process per kill point: tens of seconds
def test_a_new_tree_is_all_or_nothing(upstream, tmp_path, killer):
    dest = tmp_path / "fresh"
    _, total = killer(upstream, tmp_path / "probe", -1, "TERM")
    for at in range(1, total + 1, 4):
        for sig in ("TERM", "KILL"):
            proc, _ = killer(upstream, dest, at, sig)
            if proc.returncode == 0:
                shutil.rmtree(dest)
                continue
            assert not dest.exists(), (at, sig)
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".fresh")]
    assert leftovers                        # SIGKILL leaves a hidden partial folder …
    proc, _ = killer(upstream, dest, -1, "TERM")
    assert proc.returncode == 0 and (dest / "mlx/backend/cuda/tiled.cu").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".fresh")]   # … gone


def test_apply_refuses_a_repository_it_did_not_make(upstream, tmp_path):
    from mlx_builder.errors import ForeignTreeError
    mine = tmp_path / "mine"
    mine.mkdir()
    git(mine, "init", "-q", "-b", "work")
    (mine / "notes.txt").write_text("mine\n")
    git(mine, "add", "-A")
    git(mine, "commit", "-q", "-m", "my work")
    before = tree_digest(mine)
    with pytest.raises(ForeignTreeError, match="did not make") as exc:
        prepare_tree(upstream.settings(), "0.1.0", dest=mine)
    assert exc.value.exit_code == 32 and tree_digest(mine) == before


def test_trees_of_earlier_versions_are_still_ours(upstream, tmp_path):
    tree = prepare_tree(upstream.settings(), "0.1.0", dest=tmp_path / "t")
    git(tree.path, "config", "--unset", "mlx-builder.managed")   # as before the marker
    again = prepare_tree(upstream.settings(), "0.2.0", dest=tree.path)
    assert git(again.path, "config", "mlx-builder.managed") == "true"


@pytest.mark.parametrize("state", ["MERGE_HEAD", "rebase-merge", "CHERRY_PICK_HEAD",
                                   "BISECT_LOG", "index.lock"])
def test_apply_refuses_a_tree_in_the_middle_of_a_git_operation(upstream, tmp_path, state):
    from mlx_builder.errors import DirtyTreeError
    tree = prepare_tree(upstream.settings(), "0.1.0", dest=tmp_path / "t")
    marker = tree.path / ".git" / state
    marker.mkdir() if state == "rebase-merge" else marker.write_text(tree.head + "\n")
    before = tree_digest(tree.path)
    with pytest.raises(DirtyTreeError, match="in the middle of"):
        prepare_tree(upstream.settings(), "0.2.0", dest=tree.path)
    assert tree_digest(tree.path) == before


def test_every_previous_tip_is_kept(upstream, tmp_path):
    tree = prepare_tree(upstream.settings(), "0.1.0", dest=tmp_path / "t")
    tips = []
    for i in range(3):
        (tree.path / f"work{i}.txt").write_text(f"{i}\n")
        git(tree.path, "add", "-A")
        git(tree.path, "commit", "-q", "-m", f"work {i}")
        tips.append(git(tree.path, "rev-parse", "HEAD"))
        again = prepare_tree(upstream.settings(), "0.1.0", dest=tree.path)
        assert again.previous == tips[-1]
    kept = git(tree.path, "for-each-ref", "--format=%(objectname)",
               "refs/mlx-builder/kept/").split()
    assert set(tips) <= set(kept)
    assert git(tree.path, "rev-parse", "refs/mlx-builder/previous") == tips[-1]


def test_build_trees_are_named_by_target(upstream):
    from mlx_builder.wheelbuild.bundle import prepare
    settings = upstream.settings()
    one, _ = prepare(settings, "0.2.0", "cuda-sm90")
    two, _ = prepare(settings, "0.2.0", "cuda-sm121")
    assert (Path(one.path).name, Path(two.path).name) == ("v0.2.0-cu90a", "v0.2.0-cu121a")
