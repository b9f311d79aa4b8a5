"""Which patches of a series apply to an MLX commit, and why not.

Each patch is checked in order in a scratch index (nothing on disk changes),
so later patches see the earlier ones applied:

* ``applies``   – applies as is, or with a clean 3-way merge;
* ``upstream``  – already upstream: marked ``merged <commit>`` in the index
  with that commit reachable, reverse-applies, or becomes empty after a
  3-way merge;
* ``conflicts`` – does not apply; ``conflicts`` names file, line and hunk.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import git
from rich.markup import escape
from rich.table import Table

from mlx_builder.errors import Conflict, SeriesError
from mlx_builder.settings import Settings
from mlx_builder.source import gitops
from mlx_builder.source.series import PatchEntry, Series, find_series, load_index, parse_patch, select_series

STATES = ("applies", "conflicts", "upstream")
_FAILED = re.compile(r"^error: patch failed: (.+):(\d+)$")
_FILE_ERR = re.compile(r"^error: (.+?): (does not exist in index|already "
                       r"exists in index|does not match index|No such file"
                       r".*|patch does not apply)$")
_OTHER_ERR = re.compile(r"^(error|fatal): (.*)$")


@dataclass(frozen=True)
class PatchStatus:
    patch: PatchEntry
    state: str                                 # one of STATES
    conflicts: list[Conflict] = field(default_factory=list)
    detail: str = ""
    three_way: bool = False                    # needs `git apply --3way`
    missing_trailers: tuple[str, ...] = ()

    def where(self) -> str:
        return "; ".join(c.describe().split(": ", 1)[-1] for c in self.conflicts)


@dataclass(frozen=True)
class SeriesReport:
    series: Series
    ref: gitops.ResolvedRef
    target: str
    statuses: tuple[PatchStatus, ...]

    @property
    def ok(self) -> bool:
        return all(s.state != "conflicts" for s in self.statuses)


def parse_conflicts(entry: PatchEntry, output: str) -> list[Conflict]:
    """Conflicts from ``git apply -v`` error output (C locale)."""
    header = parse_patch(entry.path)
    found: list[Conflict] = []
    seen: set[str] = set()
    for line in output.splitlines():
        match = _FAILED.match(line.strip())
        if match:
            file, line_no = match.group(1), int(match.group(2))
            hunk = header.hunk_at(file, line_no)
            found.append(Conflict(entry.label, file, line_no,
                                  f"#{hunk.index} {hunk.header}" if hunk else ""))
            seen.add(file)
            continue
        match = _FILE_ERR.match(line.strip())
        if match and match.group(1) not in seen:
            found.append(Conflict(entry.label, match.group(1), None,
                                  match.group(2)))
            seen.add(match.group(1))
    if not found:
        errors = [m.group(2) for m in map(_OTHER_ERR.match, output.splitlines())
                  if m]
        found.append(Conflict(entry.label, entry.file, None,
                              errors[0] if errors else "git apply failed"))
    return found


def check_patches(repo: git.Repo, commit: str,
                  patches: Iterable[PatchEntry]) -> list[PatchStatus]:
    """Classify each patch, in order, against ``commit`` (read-only)."""
    out: list[PatchStatus] = []
    with gitops.ScratchIndex(repo, commit) as idx:
        for entry in patches:
            missing = tuple(parse_patch(entry.path).missing_trailers())
            merged = entry.merged_commit
            merged_full = gitops.rev_commit(repo, merged) if merged else None
            if merged_full and gitops.is_ancestor(repo, merged_full, commit):
                out.append(PatchStatus(entry, "upstream", [],
                                       f"merged upstream in {(merged or '')[:9]}",
                                       missing_trailers=missing))
                continue
            before = idx.tree()
            forward = idx.apply(entry.path)
            if forward.ok:
                out.append(PatchStatus(entry, "applies",
                                       missing_trailers=missing))
                continue
            conflicts = parse_conflicts(entry, forward.text)
            if idx.apply(entry.path, check=True, reverse=True).ok:
                out.append(PatchStatus(entry, "upstream", [], "reverse-applies",
                                       missing_trailers=missing))
                continue
            if idx.apply(entry.path, three_way=True).ok:
                if idx.tree() == before:
                    out.append(PatchStatus(entry, "upstream", [],
                                           "empty after 3-way merge",
                                           missing_trailers=missing))
                else:
                    out.append(PatchStatus(entry, "applies", [],
                                           "with 3-way merge", three_way=True,
                                           missing_trailers=missing))
                continue
            if before:
                idx.reset(before)
            out.append(PatchStatus(entry, "conflicts", conflicts,
                                   "; ".join(c.describe() for c in conflicts),
                                   missing_trailers=missing))
    return out


def series_status(repo: git.Repo, series: Series, commit: str,
                  target: str = "all") -> list[PatchStatus]:
    return check_patches(repo, commit, series.for_target(target))


def status_report(settings: Settings, mlx_ref: str | None = None, *,
                  series_name: str | None = None,
                  target: str = "all") -> list[SeriesReport]:
    """Reports for one ref, or for every series at its base (and main)."""
    repo = gitops.ensure_mirror(settings)
    index = load_index(settings.patches_dir)
    if not index:
        raise SeriesError(f"{settings.patches_dir}/index.toml has no series")
    jobs: list[tuple[Series, gitops.ResolvedRef]] = []
    if mlx_ref is not None:
        resolved = gitops.resolve_ref(repo, mlx_ref)
        series = (find_series(index, series_name) if series_name
                  else select_series(index, resolved, repo))
        jobs.append((series, resolved))
    else:
        chosen = [find_series(index, series_name)] if series_name else index
        for series in chosen:
            base = gitops.resolve_ref(repo, series.base)
            jobs.append((series, base))
            if series.is_main and "main" in gitops.branch_names(repo):
                head = gitops.resolve_ref(repo, "main")
                if head.commit != base.commit:
                    jobs.append((series, head))
    return [SeriesReport(s, r, target,
                         tuple(series_status(repo, s, r.commit, target)))
            for s, r in jobs]


_STYLE = {"applies": "green", "upstream": "cyan", "conflicts": "bold red"}


def render_table(reports: Iterable[SeriesReport]) -> Table:
    table = Table(title="mlx-builder patch status")
    table.add_column("series", no_wrap=True)
    table.add_column("MLX", no_wrap=True)
    table.add_column("version", no_wrap=True)
    table.add_column("patch", no_wrap=True)
    table.add_column("target", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("detail", overflow="fold")
    for rep in reports:
        label = (rep.ref.label(), rep.ref.version or "?")
        if not rep.statuses:
            table.add_row(rep.series.name, *label, "(no patches)", rep.target,
                          "-", "")
        for st in rep.statuses:
            detail = st.where() if st.state == "conflicts" else st.detail
            if st.missing_trailers:
                detail = (detail + "; " if detail else "") + \
                    "missing trailers: " + ", ".join(st.missing_trailers)
            table.add_row(rep.series.name, *label, st.patch.label,
                          st.patch.target,
                          f"[{_STYLE[st.state]}]{st.state}[/]", escape(detail))
        table.add_section()
    return table


def to_json(reports: Iterable[SeriesReport], upstream: str) -> dict:
    return {
        "upstream": upstream,
        "reports": [{
            "series": rep.series.name,
            "ref": rep.ref.ref,
            "kind": rep.ref.kind,
            "commit": rep.ref.commit,
            "version": rep.ref.version,
            "target": rep.target,
            "ok": rep.ok,
            "patches": [{
                "file": st.patch.file,
                "folder": st.patch.folder,
                "target": st.patch.target,
                "upstream": st.patch.upstream,
                "sha256": st.patch.sha256,
                "state": st.state,
                "three_way": st.three_way,
                "detail": st.detail,
                "missing_trailers": list(st.missing_trailers),
                "conflicts": [{"file": c.file, "line": c.line, "hunk": c.hunk}
                              for c in st.conflicts],
            } for st in rep.statuses],
        } for rep in reports],
    }
