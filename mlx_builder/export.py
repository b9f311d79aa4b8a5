"""Regenerate patches/<series>/ from a work-tree branch, deterministically.

The commits between the tree's recorded base (``refs/mlx-builder/base``) and
its HEAD (or a named branch) become one patch file each (see
gitops.format_patch for what keeps the output stable). A commit maps to the
index entry whose patch has the same subject; a commit without one becomes a
new file, numbered after the previous patch, and export prints the
index.toml entry to add (it never rewrites index.toml). ``check`` writes
nothing and raises StaleExportError when disk and branch differ.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import git

from mlx_builder import gitops
from mlx_builder.errors import SeriesError, StaleExportError
from mlx_builder.series import (PatchEntry, Series, find_series, load_index,
                                parse_patch, parse_patch_text)
from mlx_builder.settings import Settings

_NUMBER = re.compile(r"^(\d{4})-")
# New patches get git's default context; an existing patch keeps the context
# size its file has (some carry minimal -U1 context on purpose).
DEFAULT_CONTEXT = 3


@dataclass(frozen=True)
class ExportedPatch:
    commit: str
    name: str
    text: str
    subject: str
    entry: PatchEntry | None          # None: no index entry yet
    missing_trailers: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExportResult:
    series: Series
    tree: Path
    base: str
    head: str
    target: str
    patches: tuple[ExportedPatch, ...]
    written: tuple[str, ...] = ()      # files (re)written (check: would be)
    unchanged: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()        # on disk, differs from the branch
    missing: tuple[str, ...] = ()      # in the index, not in the branch
    extra: tuple[str, ...] = ()        # in the branch (or dir), not the index
    reordered: bool = False            # branch order differs from the index
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def clean(self) -> bool:
        return not (self.stale or self.missing or self.extra or self.reordered)

    def index_snippet(self) -> str:
        """index.toml entries for the patches that have none yet."""
        return "\n".join(
            f'[[series.patches]]\nfile = "{p.name}"\ntarget = "all"  # or cuda / metal\n'
            'upstream = "not-forwarded"\n'
            for p in self.patches if p.entry is None)


def find_tree(settings: Settings, series: Series, source: str) -> tuple[Path, str]:
    """(work tree, revision) for ``--from``: a work tree path, or a branch of
    one of the work trees under settings.worktrees_dir made for ``series``."""
    path = Path(source).expanduser()
    if path.is_dir():
        if not gitops.is_work_tree(path):
            raise SeriesError(f"{path} is not a git work tree",
                              "", "pass a tree made by `mlx-builder apply`")
        return path.resolve(), "HEAD"
    candidates = []
    root = settings.worktrees_dir
    for tree in sorted(root.iterdir()) if root.is_dir() else []:
        if not (tree / ".git").exists():
            continue
        got = gitops.run_git(tree, "config", "mlx-builder.series", check=False)
        if got.out.strip() != series.name:
            continue
        for name in (source, f"mlx-builder/{source}"):
            if gitops.rev_commit(git.Repo(tree), f"refs/heads/{name}"):
                candidates.append((tree, f"refs/heads/{name}"))
                break
    if len(candidates) == 1:
        return candidates[0]
    raise SeriesError(
        f"--from {source!r} is neither a directory nor a branch of exactly one "
        f"work tree of series {series.name} under {root}",
        ("found it in: " + ", ".join(str(t) for t, _ in candidates))
        if candidates else "no such tree or branch",
        "pass the work tree's path")


def export_series(settings: Settings, series_name: str, source: str, *,
                  check: bool = False) -> ExportResult:
    series = find_series(load_index(settings.patches_dir), series_name)
    tree_path, rev = find_tree(settings, series, source)
    tree = git.Repo(tree_path)
    head = gitops.rev_commit(tree, rev)
    base = (gitops.rev_commit(tree, gitops.BASE_REF)
            or gitops.rev_commit(tree, series.base))
    if head is None or base is None:
        raise SeriesError(
            f"cannot find the series base in {tree_path}",
            f"no {gitops.BASE_REF} and {series.base} is not in that repository",
            "export from a tree made by `mlx-builder apply`")
    merges = gitops.run_git(tree, "rev-list", "--merges", f"{base}..{head}")
    if merges.out.strip():
        raise SeriesError(f"{tree_path}: merge commits between base and {rev}",
                          "a patch series is a straight line of commits",
                          "rebase the branch onto the base without merges")
    commits = gitops.run_git(tree, "rev-list", "--reverse",
                             f"{base}..{head}").out.split()
    target = gitops.run_git(tree, "config", "mlx-builder.target",
                            check=False).out.strip() or "all"
    exported = _export_commits(tree, series, commits)
    return _compare(settings, series, tree_path, base, head, target, exported,
                    check)


def _export_commits(tree: git.Repo, series: Series,
                    commits: list[str]) -> list[ExportedPatch]:
    by_subject: dict[str, PatchEntry] = {}
    context: dict[str, int] = {}
    for entry in series.patches:
        parsed = parse_patch(entry.path)
        by_subject.setdefault(parsed.subject, entry)
        context[entry.file] = parsed.context_lines() or DEFAULT_CONTEXT
    used = {int(m.group(1)) for e in series.patches
            if (m := _NUMBER.match(e.file))}
    out: list[ExportedPatch] = []
    last = 0
    for commit in commits:
        name, text = gitops.format_patch(tree, commit)
        header = parse_patch_text(text, name)
        entry = by_subject.get(header.subject)
        if any(p.entry is not None and p.entry == entry for p in out):
            raise SeriesError(f"two commits have the subject {header.subject!r}",
                              "export maps commits to patches by subject",
                              "give each commit its own subject")
        if entry is not None:
            name = entry.file
            if context[name] != DEFAULT_CONTEXT:
                text = gitops.format_patch(tree, commit,
                                           context=context[name])[1]
        else:
            number = last + 1
            while number in used:
                number += 1
            used.add(number)
            name = f"{number:04d}-{name.split('-', 1)[1]}"
        match = _NUMBER.match(name)
        last = int(match.group(1)) if match else last
        out.append(ExportedPatch(commit, name, text, header.subject, entry,
                                 tuple(header.missing_trailers())))
    return out


def _compare(settings: Settings, series: Series, tree: Path, base: str,
             head: str, target: str, exported: list[ExportedPatch],
             check: bool) -> ExportResult:
    directory = series.directory or (Path(settings.patches_dir) / series.name)
    written, unchanged, stale, extra = [], [], [], []
    for patch in exported:
        path = directory / patch.name
        data = patch.text.encode("utf-8", "surrogateescape")
        if path.exists() and path.read_bytes() == data:
            unchanged.append(patch.name)
            continue
        if patch.entry is None:
            extra.append(patch.name)
        elif path.exists():
            stale.append(patch.name)
        written.append(patch.name)
        if not check:
            directory.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    in_branch = {p.entry.file for p in exported if p.entry is not None}
    missing = [e.file for e in series.for_target(target)
               if e.file not in in_branch]
    listed = {e.file for e in series.patches} | {p.name for p in exported}
    if directory.is_dir():
        extra += sorted(p.name for p in directory.glob("*.patch")
                        if p.name not in listed)
    order = [p.entry.file for p in exported if p.entry is not None]
    index_order = [e.file for e in series.patches if e.file in in_branch]
    warnings = [f"{p.name}: message lacks trailers {', '.join(p.missing_trailers)}"
                for p in exported if p.missing_trailers]
    result = ExportResult(
        series=series, tree=tree, base=base, head=head, target=target,
        patches=tuple(exported), written=tuple(written),
        unchanged=tuple(unchanged), stale=tuple(stale), missing=tuple(missing),
        extra=tuple(extra), reordered=order != index_order,
        warnings=tuple(warnings))
    if check and not result.clean:
        problems = ([f"stale: {n}" for n in result.stale] +
                    [f"missing from branch: {n}" for n in result.missing] +
                    [f"extra (not in index.toml): {n}" for n in result.extra] +
                    (["order differs from index.toml"] if result.reordered else []))
        raise StaleExportError(
            f"patches/{series.name} differs from {tree} ({head[:9]}): " +
            "; ".join(problems),
            "the series on disk is not what the branch exports",
            f"run `mlx-builder export --series {series.name} --from {tree}` "
            "and update patches/index.toml, then commit")
    return result
