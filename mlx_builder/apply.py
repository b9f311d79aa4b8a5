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
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import git

from mlx_builder import gitops
from mlx_builder.errors import DirtyTreeError, PatchConflictError
from mlx_builder.series import (PatchEntry, Series, applies_to, check_target,
                                find_series, load_index, parse_patch,
                                select_series, with_applies_to)
from mlx_builder.settings import Settings
from mlx_builder.status import PatchStatus, check_patches

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
                 dest: Path | None = None) -> PreparedTree:
    """Check, then build a work tree of MLX ``mlx_ref`` with the series."""
    check_target(target)
    repo = gitops.ensure_mirror(settings)
    resolved = gitops.resolve_ref(repo, mlx_ref)
    index = load_index(settings.patches_dir)
    series = (find_series(index, series_name) if series_name
              else select_series(index, resolved, repo))
    dest = Path(dest or default_dest(settings, resolved, target)).resolve()
    existing = _existing_tree(dest)
    if existing:
        gitops.ensure_clean(dest)
    statuses = check_patches(repo, resolved.commit, series.for_target(target))
    _raise_on_problems(series, resolved, statuses)
    apply_list = [s for s in statuses if s.state == "applies"]
    skipped = tuple(s.patch for s in statuses if s.state == "upstream")
    branch = BRANCH_PREFIX + series.name
    was_dir = dest.is_dir()
    tree = _open_tree(dest, repo, settings.mlx_repo, existing)
    undo = _Undo(tree, dest, existing, was_dir)
    try:
        previous = gitops.checkout_branch(tree, branch, resolved.commit)
        for st in apply_list:
            commit_patch(tree, st.patch.path, three_way=st.three_way,
                         applies=applies_to(index, st.patch))
        _record(tree, settings.mlx_repo, resolved, series, target)
    except BaseException:
        undo.run()
        raise
    head = gitops.rev_commit(tree, "HEAD") or ""
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
    existing = _existing_tree(dest)
    if existing:
        gitops.ensure_clean(dest)
    was_dir = dest.is_dir()
    tree = _open_tree(dest, repo, settings.mlx_repo, existing)
    undo = _Undo(tree, dest, existing, was_dir)
    try:
        gitops.checkout_branch(tree, BRANCH_PREFIX + "clean", resolved.commit)
        gitops.run_git(tree, "config", "mlx-builder.ref", resolved.ref)
    except BaseException:
        undo.run()
        raise
    return dest, resolved


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
    raise DirtyTreeError(
        f"{dest} exists and is not a git work tree",
        "refusing to write into a directory mlx-builder did not create",
        "pass another --dest, or remove it")


def _open_tree(dest: Path, mirror: git.Repo, url: str,
               existing: bool) -> git.Repo:
    if not existing:
        return gitops.init_work_tree(dest, mirror, url)
    tree = git.Repo(dest)
    gitops.link_objects(tree, mirror)
    return tree


def _record(tree: git.Repo, url: str, resolved: gitops.ResolvedRef,
            series: Series, target: str) -> None:
    for key, value in (("upstream", url), ("ref", resolved.ref),
                       ("base", resolved.commit), ("series", series.name),
                       ("target", target)):
        gitops.run_git(tree, "config", f"mlx-builder.{key}", value)


class _Undo:
    """Puts a work tree back as it was if writing fails half-way."""

    def __init__(self, tree: git.Repo, dest: Path, existing: bool,
                 was_dir: bool) -> None:
        self.tree, self.dest, self.existing = tree, dest, existing
        self.was_dir = was_dir
        self.head = gitops.run_git(tree, "symbolic-ref", "-q", "HEAD",
                                   check=False).out.strip()
        self.commit = gitops.rev_commit(tree, "HEAD")
        self.refs = gitops.run_git(tree, "for-each-ref",
                                   "--format=%(refname) %(objectname)",
                                   check=False).out

    def run(self) -> None:
        if not self.existing:  # we made it (or it was an empty directory)
            shutil.rmtree(self.dest, ignore_errors=True)
            self.dest.mkdir(exist_ok=True) if self.was_dir else None
            return
        run = gitops.run_git
        before = dict(line.split() for line in self.refs.splitlines())
        now = run(self.tree, "for-each-ref", "--format=%(refname) %(objectname)",
                  check=False).out
        for line in now.splitlines():
            name = line.split()[0]
            if name not in before:
                run(self.tree, "update-ref", "-d", name, check=False)
        for name, sha in before.items():
            run(self.tree, "update-ref", name, sha, check=False)
        if self.commit:
            run(self.tree, "checkout", "-q", "-f", self.commit, check=False)
            if self.head.startswith("refs/heads/"):
                run(self.tree, "symbolic-ref", "HEAD", self.head, check=False)
