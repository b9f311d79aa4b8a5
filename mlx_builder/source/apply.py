"""Atomic apply of a patch series into a work tree.

1. Resolve the ref and pick the series; take the patches for the target.
2. Check every patch, in order, in a scratch index (see status.py). Any
   conflict, or a patch already upstream that the index does not mark
   ``merged``, raises PatchConflictError before anything on disk changes.
   (Patch files and their sha256 in patches/SHA256SUMS are checked when the
   index is read.)
3. Only then create (or re-point a clean existing) work tree at the base,
   record the base as ``refs/mlx-builder/base`` and commit each patch with
   its own author and date (committer fixed, committer date = author date),
   so the same series on the same base always gives the same hashes. The
   message gets the Applies-To trailer derived from the index.

The tree's lock (locks.py) is held from the first look at it to the end. The
write is atomic (``write_tree``): the tree ends as the old one or the new one
on an error, Ctrl-C, SIGTERM or SIGHUP, and a tree left by a SIGKILL is put
back by the next run. Only trees mlx-builder made (``mlx-builder.managed`` in
their git config) are re-pointed, never one in the middle of a git operation.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import git

from mlx_builder import locks, signals
from mlx_builder.console import err_console
from mlx_builder.errors import DirtyTreeError, FileSystemError, ForeignTreeError, PatchConflictError
from mlx_builder.settings import Settings
from mlx_builder.source import gitops
from mlx_builder.source.series import (
    PatchEntry,
    Series,
    applies_to,
    check_target,
    find_series,
    load_index,
    parse_patch,
    select_series,
    with_applies_to,
)
from mlx_builder.source.status import PatchStatus, check_patches

T = TypeVar("T")
BRANCH_PREFIX = "mlx-builder/"
FALLBACK_DATE = "2000-01-01T00:00:00+00:00"


@dataclass(frozen=True)
class PreparedTree:
    path: Path
    upstream_url: str
    base_commit: str
    ref: gitops.ResolvedRef
    series: Series
    applied: tuple[PatchEntry, ...]
    target: str
    skipped: tuple[PatchEntry, ...] = ()   # merged upstream at this base
    head: str = ""                         # HEAD commit after the series
    branch: str = ""
    previous: str | None = None            # old tip of the branch, if moved


def default_dest(settings: Settings, resolved: gitops.ResolvedRef,
                 target: str) -> Path:
    name = resolved.short if resolved.kind == "commit" else resolved.ref
    return settings.worktrees_dir / f"{re.sub(r'[^A-Za-z0-9._-]+', '-', name)}-{target}"


def prepare_tree(settings: Settings, mlx_ref: str, *,
                 series_name: str | None = None, target: str = "all",
                 dest: Path | None = None, tree_name: str | None = None) -> PreparedTree:
    """Check, then build a work tree of MLX ``mlx_ref`` with the series.

    ``tree_name`` names the default tree (``<ref>-<tree_name>``, default the
    patch target): builds pass their target's tag so that two CUDA targets do
    not share one tree."""
    check_target(target)
    repo = gitops.ensure_mirror(settings)
    resolved = gitops.resolve_ref(repo, mlx_ref)
    index = load_index(settings.patches_dir)
    series = (find_series(index, series_name) if series_name
              else select_series(index, resolved, repo))
    dest = Path(dest or default_dest(settings, resolved, tree_name or target)).resolve()
    branch = BRANCH_PREFIX + series.name
    with locks.tree_lock(settings, dest):
        existing = _check_dest(dest)
        statuses = check_patches(repo, resolved.commit, series.for_target(target))
        _raise_on_problems(series, resolved, statuses)
        apply_list = [s for s in statuses if s.state == "applies"]
        skipped = tuple(s.patch for s in statuses if s.state == "upstream")

        def steps(tree: git.Repo) -> str | None:
            previous = gitops.checkout_branch(tree, branch, resolved.commit)
            for st in apply_list:
                signals.checkpoint()
                commit_patch(tree, st.patch.path, three_way=st.three_way,
                             applies=applies_to(index, st.patch))
            signals.checkpoint()
            _record(tree, settings.mlx_repo, resolved, series, target)
            return previous

        previous = write_tree(dest, repo, settings.mlx_repo, existing, steps)
        head = gitops.rev_commit(dest, "HEAD") or ""
    return PreparedTree(path=dest, upstream_url=settings.mlx_repo,
                        base_commit=resolved.commit, ref=resolved,
                        series=series,
                        applied=tuple(s.patch for s in apply_list),
                        target=target, skipped=skipped, head=head,
                        branch=branch, previous=previous)


def checkout_clean(settings: Settings, mlx_ref: str,
                   dest: Path | None = None) -> tuple[Path, gitops.ResolvedRef]:
    """A clean work tree at ``mlx_ref`` without patches (branch mlx-builder/clean)."""
    repo = gitops.ensure_mirror(settings)
    resolved = gitops.resolve_ref(repo, mlx_ref)
    dest = Path(dest or default_dest(settings, resolved, "clean")).resolve()

    def steps(tree: git.Repo) -> None:
        gitops.checkout_branch(tree, BRANCH_PREFIX + "clean", resolved.commit)
        signals.checkpoint()
        gitops.run_git(tree, "config", "mlx-builder.ref", resolved.ref)

    with locks.tree_lock(settings, dest):
        existing = _check_dest(dest)
        write_tree(dest, repo, settings.mlx_repo, existing, steps)
    return dest, resolved


# ----------------------------------------------------------------- atomic tree writes

JOURNAL = "mlx-builder-journal.json"   # in the tree's git dir while a run writes it
MARKER_KEY = "mlx-builder.managed"     # git config: a tree mlx-builder made
_LEGACY_KEYS = ("mlx-builder.base", "mlx-builder.ref")   # trees of earlier versions
_PARTIAL = ".mlxb-partial-"
_GIT_OPERATIONS = {"MERGE_HEAD": "a merge", "CHERRY_PICK_HEAD": "a cherry-pick",
                   "REVERT_HEAD": "a revert", "BISECT_LOG": "a bisect",
                   "rebase-merge": "a rebase", "rebase-apply": "a rebase or `git am`",
                   "index.lock": "another git command (index.lock exists)"}


def write_tree(dest: Path, mirror: git.Repo, url: str, existing: bool,
               steps: Callable[[git.Repo], T]) -> T:
    """Run ``steps`` on the tree at ``dest`` so that it ends as the old tree or
    the new one, whatever stops the run.

    A new tree is made in a hidden sibling folder and renamed into place at the
    end. An existing tree gets a journal (its HEAD and refs) in its git dir
    first; on an error, Ctrl-C, SIGTERM or SIGHUP the journal puts it back,
    and after a SIGKILL the next run finds the journal and does the same
    (``repair``). Signals wait for the git command in flight (signals.py).
    """
    with signals.critical():
        if not existing:
            dest.parent.mkdir(parents=True, exist_ok=True)
            partial = Path(tempfile.mkdtemp(prefix=f".{dest.name}{_PARTIAL}",
                                            dir=dest.parent))
            try:
                tree = gitops.init_work_tree(partial, mirror, url)
                gitops.run_git(tree, "config", MARKER_KEY, "true")
                result = steps(tree)
                signals.checkpoint()
                if dest.is_dir():
                    dest.rmdir()                 # an empty folder (checked before)
                partial.rename(dest)
            except BaseException:
                with signals.shield():
                    shutil.rmtree(partial, ignore_errors=True)
                raise
            return result
        tree = git.Repo(dest)
        gitops.link_objects(tree, mirror)
        undo = _Undo.capture(tree)
        journal = _journal_path(tree)
        journal.write_text(json.dumps(undo.to_json()))
        try:
            result = steps(tree)
            gitops.run_git(tree, "config", MARKER_KEY, "true")
            signals.checkpoint()
        except BaseException:
            with signals.shield():
                undo.run()
                journal.unlink(missing_ok=True)
            raise
        journal.unlink(missing_ok=True)
        return result


def repair(dest: Path) -> str | None:
    """Undo what a killed run left at ``dest``: its hidden partial folders,
    and an existing tree's half-written state (from the journal). Returns a
    note when something was repaired. Call with the tree's lock held."""
    notes = []
    if dest.parent.is_dir():
        for stale in dest.parent.glob(f".{dest.name}{_PARTIAL}*"):
            shutil.rmtree(stale, ignore_errors=True)
            notes.append(f"removed {stale.name}, left by a run that was killed")
    git_dir = dest / ".git"
    journal = git_dir / JOURNAL
    if journal.is_file():
        try:
            data = json.loads(journal.read_text())
            undo = _Undo.from_json(git.Repo(dest), data)
        except (ValueError, KeyError, TypeError, git.GitError) as exc:
            raise DirtyTreeError(
                f"work tree {dest} was left half-written by a run that was killed",
                f"its journal {journal} cannot be read ({exc})",
                "inspect the tree (git status, git log); when it is as you want it, "
                f"delete {journal}") from None
        for lock in [*git_dir.glob("*.lock"), *git_dir.glob("refs/**/*.lock")]:
            lock.unlink(missing_ok=True)        # left by the killed git command
        with signals.critical(), signals.shield():
            undo.run()
            journal.unlink(missing_ok=True)
        notes.append("restored the tree a killed run was writing to its state "
                     "before that run")
    if notes:
        err_console.print(f"note: repaired {dest}: " + "; ".join(notes), markup=False)
        return "; ".join(notes)
    return None


def _journal_path(tree: git.Repo) -> Path:
    return Path(tree.git_dir) / JOURNAL


def _check_dest(dest: Path) -> bool:
    """Whether ``dest`` is an existing tree to reuse (after repairing what a
    killed run left). Raises for a folder that is not ours, a tree in the
    middle of a git operation, or uncommitted changes."""
    _check_length(dest)
    repair(dest)
    existing = _existing_tree(dest)
    if existing:
        ensure_ours(dest)
        ensure_no_operation(dest)
        gitops.ensure_clean(dest)
    return existing


# Room a work tree's path must leave below it: MLX's deepest file is 75
# characters below the tree today, the refs mlx-builder writes under .git
# about 70 (refs/mlx-builder/kept/<commit>), and a new tree is first made
# under a hidden name about 25 characters longer. Without the room, git
# itself fails half-way (`git init` cannot write its hooks).
_ROOM = 200


def _check_length(dest: Path) -> None:
    try:
        limit = os.pathconf(dest.anchor or "/", "PC_PATH_MAX")
    except (OSError, ValueError):
        limit = 4096
    if len(os.fsencode(dest)) + _ROOM > limit:
        raise FileSystemError(
            f"the work tree path is {len(os.fsencode(dest))} characters long",
            f"the files of an MLX tree below it would pass this system's limit of "
            f"{limit} characters for a path",
            "use a shorter --work-dir or --dest")


def ensure_ours(dest: Path) -> None:
    for key in (MARKER_KEY, *_LEGACY_KEYS):
        if gitops.run_git(dest, "config", "--local", "--get", key, check=False).ok:
            return
    raise ForeignTreeError(
        f"{dest} is a git repository mlx-builder did not make",
        "apply and checkout only re-point work trees they created (they carry "
        f"`{MARKER_KEY}` in .git/config); this one could hold your branches",
        "pass another --dest (a new or empty folder)")


def ensure_no_operation(dest: Path) -> None:
    git_dir = Path(gitops.run_git(dest, "rev-parse", "--absolute-git-dir").out.strip())
    for name, what in _GIT_OPERATIONS.items():
        if (git_dir / name).exists():
            raise DirtyTreeError(
                f"work tree {dest} is in the middle of {what}",
                f"{git_dir / name} exists",
                "finish or abort it (git merge/rebase/cherry-pick --abort, git "
                "bisect reset), then run again")


def commit_patch(tree: git.Repo, patch: Path, *, three_way: bool = False,
                 applies: str | None = None) -> str:
    """Apply one patch file to the index and commit it like `git am`;
    ``applies`` (derived from the index) becomes the Applies-To trailer."""
    header = parse_patch(patch)
    message = (header.message if applies is None
               else with_applies_to(header.message, applies))
    args = ["apply", "--index", "--whitespace=nowarn"]
    args += ["--3way"] if three_way else []
    gitops.run_git(tree, *args, str(patch), env=gitops.ISOLATED_ENV)
    with tempfile.NamedTemporaryFile("w", suffix=".msg", delete=False,
                                     encoding="utf-8") as fh:
        fh.write(message)
        msg = fh.name
    try:
        gitops.run_git(
            tree, "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify",
            "--allow-empty", "--cleanup=verbatim", "-F", msg,
            env=gitops.commit_env(header.author, header.email,
                                  header.date or FALLBACK_DATE))
    finally:
        Path(msg).unlink(missing_ok=True)
    return gitops.rev_commit(tree, "HEAD") or ""


def _raise_on_problems(series: Series, resolved: gitops.ResolvedRef,
                       statuses: list[PatchStatus]) -> None:
    bad = [s for s in statuses if s.state == "conflicts"]
    unmarked = [s for s in statuses
                if s.state == "upstream" and s.patch.merged_commit is None]
    if bad:
        conflicts = [c for s in bad for c in s.conflicts]
        raise PatchConflictError(
            f"{len(bad)} patch(es) of series {series.name} do not apply to "
            f"MLX {resolved.label()}: " +
            "; ".join(c.describe() for c in conflicts),
            "every patch is checked before anything is written; nothing was "
            "changed",
            f"rebase the series (apply to an older base, fix, `mlx-builder "
            f"export --series {series.name}`), or pick another --mlx",
            conflicts=conflicts)
    if unmarked:
        raise PatchConflictError(
            f"patch(es) already upstream in MLX {resolved.label()}: " +
            ", ".join(f"{s.patch.file} ({s.detail})" for s in unmarked),
            "applying them again would fail or do nothing; nothing was changed",
            "mark them `upstream = \"merged <commit>\"` in patches/index.toml "
            "or drop them from the series")


def _existing_tree(dest: Path) -> bool:
    if not dest.exists():
        return False
    if dest.is_dir() and not any(dest.iterdir()):
        return False
    if dest.is_dir() and gitops.is_work_tree(dest):
        return True
    raise ForeignTreeError(
        f"{dest} exists and is not a git work tree",
        "refusing to write into a directory mlx-builder did not create",
        "pass another --dest, or remove it")


def _record(tree: git.Repo, url: str, resolved: gitops.ResolvedRef,
            series: Series, target: str) -> None:
    for key, value in (("upstream", url), ("ref", resolved.ref),
                       ("base", resolved.commit), ("series", series.name),
                       ("target", target)):
        gitops.run_git(tree, "config", f"mlx-builder.{key}", value)


class _Undo:
    """Puts an existing work tree back as it was: HEAD, its commit, every ref
    and the ``mlx-builder.*`` config keys."""

    def __init__(self, tree: git.Repo, head: str, commit: str | None,
                 refs: dict[str, str], config: dict[str, str] | None = None) -> None:
        self.tree, self.head, self.commit, self.refs = tree, head, commit, refs
        self.config = config or {}

    @classmethod
    def capture(cls, tree: git.Repo) -> _Undo:
        head = gitops.run_git(tree, "symbolic-ref", "-q", "HEAD", check=False).out.strip()
        return cls(tree, head, gitops.rev_commit(tree, "HEAD"), _refs(tree), _config(tree))

    def to_json(self) -> dict:
        return {"head": self.head, "commit": self.commit, "refs": self.refs,
                "config": self.config}

    @classmethod
    def from_json(cls, tree: git.Repo, data: dict) -> _Undo:
        refs, config = data["refs"], data.get("config", {})
        if not isinstance(refs, dict) or not isinstance(config, dict):
            raise TypeError("refs and config must be tables")
        return cls(tree, str(data["head"]), data["commit"], dict(refs), dict(config))

    def run(self) -> None:
        run = gitops.run_git
        for name in _refs(self.tree):
            if name not in self.refs:
                run(self.tree, "update-ref", "-d", name, check=False)
        for name, sha in self.refs.items():
            run(self.tree, "update-ref", name, sha, check=False)
        if self.commit:
            run(self.tree, "checkout", "-q", "-f", self.commit, check=False)
            if self.head.startswith("refs/heads/"):
                run(self.tree, "symbolic-ref", "HEAD", self.head, check=False)
        for key in _config(self.tree):
            if key not in self.config:
                run(self.tree, "config", "--local", "--unset-all", key, check=False)
        for key, value in self.config.items():
            run(self.tree, "config", "--local", key, value, check=False)


def _config(tree: git.Repo) -> dict[str, str]:
    out = gitops.run_git(tree, "config", "--local", "--get-regexp", r"^mlx-builder\.",
                         check=False).out
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def _refs(tree: git.Repo) -> dict[str, str]:
    out = gitops.run_git(tree, "for-each-ref", "--format=%(refname) %(objectname)",
                         check=False).out
    return dict(line.split() for line in out.splitlines() if line.strip())
