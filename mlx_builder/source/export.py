"""Regenerate patches/<series>/ from a work-tree branch, deterministically.

The commits between the tree's recorded base (``refs/mlx-builder/base``) and
its HEAD (or a named branch) become one patch file each (see
gitops.format_patch for what keeps the output stable). A commit maps to the
index entry whose patch has the same subject; a commit without one becomes a
new file, numbered after the previous patch, and export prints the
index.toml entry to add (it never rewrites index.toml). ``check`` writes
nothing and raises StaleExportError when disk and branch differ.

Common patches (patches/common/, listed by several series) are written once;
the trees of several series can be exported together and must agree about
them. Applies-To is derived from the index, so it is left out of the files.
patches/SHA256SUMS gets the sha256 of every file written or confirmed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import git

from mlx_builder import locks, outputs, signals
from mlx_builder.errors import SeriesError, StaleExportError
from mlx_builder.settings import Settings
from mlx_builder.source import gitops
from mlx_builder.source.series import (
    SUMS,
    PatchEntry,
    Series,
    find_series,
    load_index,
    parse_patch,
    parse_patch_text,
    strip_applies_to,
    sums_text,
    without_offsets,
)
from mlx_builder.source.status import check_patches

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

    def rel(self, series: Series) -> str:
        """Path under patches/ (as SHA256SUMS names it)."""
        return self.entry.rel if self.entry else f"{series.name}/{self.name}"


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
    """Export one series (see export_many)."""
    return export_many(settings, [(series_name, source)], check=check)[0]


def export_many(settings: Settings, jobs: list[tuple[str, str]], *,
                check: bool = False) -> list[ExportResult]:
    """Export each (series, --from) pair; common patches are written once.

    A common patch (patches/common/) must come out byte-identical from every
    tree given for a series that lists it; one that changed must still apply
    at the base of every other series that lists it (checked in a scratch
    index) before anything is written. Then the files and their SHA256SUMS
    lines are written.
    """
    root = Path(settings.patches_dir)
    index = load_index(root, verify=check)
    names = [name for name, _ in jobs]
    if len(set(names)) != len(names):
        raise SeriesError("a series is named twice", "",
                          "pass each --series once, each with its --from")
    prepared = [_export_one(settings, index, find_series(index, name), source)
                for name, source in jobs]
    common = _agree_on_common(prepared)
    prepared = [_settle_texts(job, common) for job in prepared]
    if not check:
        for job in prepared:
            _refuse_missing_common(job.series, job.exported, job.target)
        _check_shared(settings, index, common, {j.series.name for j in prepared})
    planned: dict[Path, bytes] = {}        # a common patch is written once
    compared = [_compare(settings, job, planned) for job in prepared]
    results = [result for result, _ in compared]
    if check:
        _raise_stale(results)
        return results
    updates = {}
    for result in results:
        for patch in result.patches:
            rel = patch.rel(result.series)
            data = patch.text.encode("utf-8", "surrogateescape")
            updates[rel] = hashlib.sha256(data).hexdigest()
    with locks.patches_lock(settings, root):
        _write_all(root, [w for _, writes in compared for w in writes], updates)
    return results


def _write_all(root: Path, writes: list[tuple[Path, bytes]], updates: dict[str, str]) -> None:
    """Every patch file and SHA256SUMS, or none: all are staged beside their
    destinations first, and renamed only when each one was written."""
    sums = root / SUMS
    for path in [sums, *(p for p, _ in writes)]:
        outputs.remove_leftovers(path)
    text = sums_text(root, updates)
    with outputs.staging(f"cannot write the patch series into {root}") as staged:
        for path, data in writes:
            path.parent.mkdir(parents=True, exist_ok=True)
            staged.append((outputs.stage_bytes(path, data), path))
        if text is not None:
            staged.append((outputs.stage_bytes(sums, text.encode()), sums))
        with signals.critical():
            outputs.commit(staged)


def _export_one(settings: Settings, index: tuple[Series, ...], series: Series,
                source: str) -> _Job:
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
    return _Job(series, tree_path, base, head, target, exported)


class _Job(NamedTuple):
    series: Series
    tree: Path
    base: str
    head: str
    target: str
    exported: list[ExportedPatch]


def _agree_on_common(prepared: list[_Job]
                     ) -> dict[str, tuple[PatchEntry, str, str]]:
    """{common rel: (entry, text, origin)}: the one text each common patch
    gets, and the series whose tree gave it ("" for the file on disk).

    The trees must agree about it but for offsets (without_offsets: trees of
    different bases put its hunks at other lines). The file on disk is kept
    when it is that change, so exports stay byte-stable whichever tree runs
    them; otherwise the text of the first series the [[common]] entry names.
    A text is taken only if it gives, in every tree, exactly the commit the
    tree has: applied to the commit's parent, the same tree."""
    users: dict[str, list[tuple[_Job, ExportedPatch]]] = {}
    for job in prepared:
        for patch in job.exported:
            if patch.entry is not None and patch.entry.is_common:
                users.setdefault(patch.entry.rel, []).append((job, patch))
    out: dict[str, tuple[PatchEntry, str, str]] = {}
    for rel, found in users.items():
        entry = found[0][1].entry
        assert entry is not None
        shape = without_offsets(found[0][1].text)
        for job, patch in found[1:]:
            if without_offsets(patch.text) != shape:
                raise SeriesError(
                    f"the trees of series {found[0][0].series.name} and "
                    f"{job.series.name} disagree about {rel}",
                    "a common patch is one change for every series that lists "
                    "it (its hunks may start at other lines): "
                    + _first_difference(without_offsets(found[0][1].text),
                                        without_offsets(patch.text)),
                    "make the commit the same in both trees (e.g. `git "
                    "cherry-pick` the change over), then export again")
        order = {name: n for n, name in enumerate(entry.shared_by)}
        found.sort(key=lambda jp: order.get(jp[0].series.name, len(order)))
        candidates = [(job.series.name, patch.text) for job, patch in found]
        disk = _read_text(entry.path)
        if disk is not None and without_offsets(disk) == shape:
            candidates.insert(0, ("", disk))
        for origin, text in candidates:
            if all(patch.text == text or _reproduces(job.tree, patch.commit, text)
                   for job, patch in found):
                out[rel] = (entry, text, origin)
                break
        else:
            raise SeriesError(
                f"{rel}: no one text of it gives the commit of every tree "
                f"({', '.join(job.series.name for job, _ in found)})",
                "its hunks apply at other places than the commits made them "
                "in some tree (the context they carry is not unique there)",
                "export the series one at a time, or give the patch more "
                "context in the tree whose export differs")
    return out


def _read_text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", "surrogateescape")
    except FileNotFoundError:
        return None


def _reproduces(tree: Path, commit: str, text: str) -> bool:
    """Whether ``text``, applied to ``commit``'s parent as `apply` does (no
    3-way merge), gives exactly ``commit``'s tree."""
    repo = git.Repo(tree)
    parent = gitops.rev_commit(repo, f"{commit}^")
    if parent is None:
        return False
    want = gitops.run_git(repo, "rev-parse", f"{commit}^{{tree}}").out.strip()
    with tempfile.TemporaryDirectory(prefix="mlxb-offsets-") as tmp:
        path = Path(tmp) / "change.patch"
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
        with gitops.ScratchIndex(repo, parent) as idx:
            return idx.apply(path).ok and idx.tree() == want


def _settle_texts(job: _Job, common: dict[str, tuple[PatchEntry, str, str]]
                  ) -> _Job:
    """The job with each common patch's text replaced by the agreed one, and
    each of its own patches' by the file on disk where that is the same
    change but for offsets and still gives the commit (a tree of one target
    lacks the other targets' patches, so the blob ids and lines it exports
    can differ from the series' file)."""
    exported = []
    for patch in job.exported:
        if patch.entry is not None and patch.entry.rel in common:
            patch = dataclasses.replace(patch, text=common[patch.entry.rel][1])
        elif patch.entry is not None:
            disk = _read_text(patch.entry.path)
            if (disk is not None and disk != patch.text
                    and without_offsets(disk) == without_offsets(patch.text)
                    and _reproduces(job.tree, patch.commit, disk)):
                patch = dataclasses.replace(patch, text=disk)
        exported.append(patch)
    return job._replace(exported=exported)


def _first_difference(a: str, b: str) -> str:
    for number, (x, y) in enumerate(zip(a.splitlines(), b.splitlines()), 1):
        if x != y:
            return f"first difference at line {number}: {x[:60]!r} vs {y[:60]!r}"
    return "one is longer than the other"


def _refuse_missing_common(series: Series, exported: list[ExportedPatch],
                           target: str) -> None:
    on_branch = {p.entry.rel for p in exported if p.entry is not None}
    lost = [e.rel for e in series.for_target(target)
            if e.is_common and e.rel not in on_branch]
    if lost:
        raise SeriesError(
            f"the tree of series {series.name} has no commit for "
            f"{', '.join(lost)}; nothing was written",
            "commits map to patches by subject; a tree applied before those "
            "patches moved to patches/common/ holds them inside other commits, "
            "and exporting it would put them into those",
            "apply the series again (`mlx-builder apply --dest NEW`), carry "
            "your edits over (docs/patches.md, 'Re-exporting a tree'), and "
            "export the new tree")


def _check_shared(settings: Settings, index: tuple[Series, ...],
                  common: dict[str, tuple[PatchEntry, str, str]],
                  exported: set[str]) -> None:
    """A changed common patch must apply to the series not exported now, as
    it is (at an offset, but without a 3-way merge), after their patches
    before it."""
    changed = {rel: (entry, text, by) for rel, (entry, text, by) in common.items()
               if not entry.path.exists()
               or entry.path.read_bytes() != text.encode("utf-8", "surrogateescape")}
    others = [s for s in index if s.name not in exported
              and any(p.rel in changed for p in s.patches)]
    if not others:
        return
    repo = gitops.ensure_mirror(settings)
    with tempfile.TemporaryDirectory(prefix="mlxb-common-") as tmp:
        swapped: dict[str, PatchEntry] = {}
        for rel, (entry, text, _by) in changed.items():
            path = Path(tmp) / entry.file
            path.write_bytes(text.encode("utf-8", "surrogateescape"))
            swapped[rel] = dataclasses.replace(entry, path=path)
        for series in others:
            commit = gitops.resolve_ref(repo, series.base).commit
            patches = [swapped.get(p.rel, p) for p in series.patches]
            bad = [st for st in check_patches(repo, commit, patches)
                   if st.state == "conflicts"
                   or (st.three_way and st.patch.rel in changed)]
            if bad:
                rels = sorted(r for r in changed
                              if any(p.rel == r for p in series.patches))
                raise SeriesError(
                    f"{', '.join(rels)} as exported from the tree of series "
                    f"{changed[rels[0]][2]} does not apply to series "
                    f"{series.name} at {series.base}: "
                    + "; ".join(st.detail if st.state == "conflicts" else
                                f"{st.patch.label} needs a 3-way merge"
                                for st in bad)
                    + "; nothing was written",
                    "a common patch is shared; every series that lists it "
                    "must take the new version",
                    f"fix it in a tree of {series.name} too and export both: "
                    f"`--series {changed[rels[0]][2]} --from TREE --series "
                    f"{series.name} --from TREE2`, or move the patch out of "
                    "patches/common/")


def _export_commits(tree: git.Repo, series: Series,
                    commits: list[str]) -> list[ExportedPatch]:
    by_subject: dict[str, PatchEntry] = {}
    entry: PatchEntry | None
    context: dict[str, int] = {}
    for entry in series.patches:
        parsed = parse_patch(entry.path)
        by_subject.setdefault(parsed.subject, entry)
        context[entry.rel] = parsed.context_lines() or DEFAULT_CONTEXT
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
            if context[entry.rel] != DEFAULT_CONTEXT:
                text = gitops.format_patch(tree, commit,
                                           context=context[entry.rel])[1]
        else:
            number = last + 1
            while number in used:
                number += 1
            used.add(number)
            name = f"{number:04d}-{name.split('-', 1)[1]}"
        match = _NUMBER.match(name)
        last = int(match.group(1)) if match else last
        out.append(ExportedPatch(commit, name, strip_applies_to(text),
                                 header.subject, entry,
                                 tuple(header.missing_trailers())))
    return out


def _compare(settings: Settings, job: _Job, planned: dict[Path, bytes]
             ) -> tuple[ExportResult, list[tuple[Path, bytes]]]:
    """The result of exporting ``job``, and the files that would be written
    (``planned``: those an earlier job of this export writes)."""
    series, tree, base, head, target, exported = job
    root = Path(settings.patches_dir)
    directory = series.directory or (root / series.name)
    written, unchanged, stale, extra = [], [], [], []
    writes: list[tuple[Path, bytes]] = []
    for patch in exported:
        path = (patch.entry.path if patch.entry is not None
                else directory / patch.name)
        label = patch.entry.label if patch.entry is not None else patch.name
        data = patch.text.encode("utf-8", "surrogateescape")
        disk = planned.get(path, path.read_bytes() if path.exists() else None)
        if disk == data:
            unchanged.append(label)
            continue
        if patch.entry is None:
            extra.append(label)
        elif disk is not None:
            stale.append(label)
        written.append(label)
        writes.append((path, data))
        planned[path] = data
    in_branch = {p.entry.rel for p in exported if p.entry is not None}
    missing = [e.label for e in series.for_target(target)
               if e.rel not in in_branch]
    listed = ({e.file for e in series.patches if not e.is_common}
              | {p.name for p in exported if p.entry is None})
    if directory.is_dir():
        extra += sorted(p.name for p in directory.glob("*.patch")
                        if p.name not in listed)
    order = [p.entry.rel for p in exported if p.entry is not None]
    index_order = [e.rel for e in series.patches if e.rel in in_branch]
    warnings = [f"{p.name}: message lacks trailers {', '.join(p.missing_trailers)}"
                for p in exported if p.missing_trailers]
    return ExportResult(
        series=series, tree=tree, base=base, head=head, target=target,
        patches=tuple(exported), written=tuple(written),
        unchanged=tuple(unchanged), stale=tuple(stale), missing=tuple(missing),
        extra=tuple(extra), reordered=order != index_order,
        warnings=tuple(warnings)), writes


def _raise_stale(results: list[ExportResult]) -> None:
    bad = [r for r in results if not r.clean]
    if not bad:
        return
    parts = []
    for result in bad:
        problems = ([f"stale: {n}" for n in result.stale] +
                    [f"missing from branch: {n}" for n in result.missing] +
                    [f"extra (not in index.toml): {n}" for n in result.extra] +
                    (["order differs from index.toml"] if result.reordered else []))
        parts.append(f"patches/{result.series.name} differs from "
                     f"{result.tree} ({result.head[:9]}): " + "; ".join(problems))
    first = bad[0]
    raise StaleExportError(
        " | ".join(parts),
        "the series on disk is not what the branch exports",
        f"run `mlx-builder export --series {first.series.name} --from "
        f"{first.tree}` and update patches/index.toml, then commit")
