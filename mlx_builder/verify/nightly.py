"""Nightly check of the patch series against upstream MLX main.

For the series that covers the ref (``main`` by default):

1. each patch: applies / conflicts (file:line) / already upstream, from
   ``status.series_status``;
2. a patch that conflicts is tried again with ``git apply --3way`` in a
   scratch work tree (on top of the patches before it) to tell whether a
   refresh is mechanical or needs hand work, and where the conflict markers
   land; a patch that only applies through a 3-way merge is flagged stale;
3. the upstream commits since the series' base that touched each patch's
   files (``git log base..commit -- files``);
4. when everything applies and compiling was asked for: a wheel per target
   (``build.build_wheel``) and, where a GPU that runs it is present, the test
   suites (``testing.run_wheel_tests``, what `mlx-builder test` runs).

The result goes to ``nightly.json`` and ``nightly.md``. A regression — a
patch that applied in the previous report and now conflicts, or a failed
build or test — makes ``mlx-builder nightly`` exit with RegressionError.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import git

from mlx_builder import __version__
from mlx_builder.errors import MlxBuilderError, SeriesError
from mlx_builder.settings import Settings
from mlx_builder.source import gitops
from mlx_builder.source.apply import prepare_tree
from mlx_builder.source.series import PatchEntry, Series, load_index, parse_patch, select_series
from mlx_builder.source.status import PatchStatus, series_status
from mlx_builder.wheelbuild.targets import TargetSet, parse_targets

if TYPE_CHECKING:
    from mlx_builder.prebuilt.install import Host

REPORT_JSON = "nightly.json"
REPORT_MD = "nightly.md"
SCHEMA = 1
MAX_COMMITS_SHOWN = 20


# ---------------------------------------------------------------- records

@dataclass
class UpstreamCommit:
    commit: str
    date: str
    author: str
    subject: str
    files: list[str]


@dataclass
class PatchResult:
    patch: str
    target: str
    state: str                      # applies | conflicts | upstream
    detail: str
    conflicts: list[dict[str, Any]]
    refresh: str                    # what a 3-way merge says (see three_way_probe)
    files: list[str]
    touched_by: list[str]           # upstream commits (full hashes) since base
    previous_state: str | None = None
    regression: bool = False


@dataclass
class BuildResult:
    target: str
    status: str                     # ok | failed | skipped
    detail: str = ""
    wheel: str | None = None
    tests: str = "not run"
    tests_ok: bool | None = None


@dataclass
class NightlyReport:
    upstream: str
    ref: str
    commit: str
    version: str | None
    series: str | None
    series_base: str | None
    base_commit: str | None
    generated: str
    patches: list[PatchResult] = field(default_factory=list)
    commits: list[UpstreamCommit] = field(default_factory=list)
    builds: list[BuildResult] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)
    previous: str | None = None
    error: str | None = None

    @property
    def all_apply(self) -> bool:
        return self.series is not None and all(
            p.state != "conflicts" for p in self.patches)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(schema=SCHEMA, generator=f"mlx-builder {__version__}",
                    all_apply=self.all_apply, ok=not self.regressions)
        return data


# ---------------------------------------------------------------- git helpers

def touched_commits(repo: git.Repo, base: str, commit: str,
                    files: Sequence[str]) -> list[UpstreamCommit]:
    """Commits in ``base..commit`` that touched any of ``files``, newest first."""
    if not files:
        return []
    res = gitops.run_git(repo, "log", "--no-color", "--name-only",
                         "--format=%x1e%H%x1f%aI%x1f%an%x1f%s",
                         f"{base}..{commit}", "--", *files)
    wanted = set(files)
    out = []
    for block in res.out.split("\x1e")[1:]:
        head, _, names = block.partition("\n")
        sha, date, author, subject = head.split("\x1f", 3)
        hit = sorted(n for n in names.split() if n in wanted)
        out.append(UpstreamCommit(sha, date, author, subject, hit))
    return out


def three_way_probe(repo: git.Repo, commit: str, before: Sequence[PatchStatus],
                    entry: PatchEntry) -> tuple[bool, list[tuple[str, int]], str]:
    """Try ``git apply --3way`` of ``entry`` in a scratch work tree.

    The tree is ``commit`` plus the patches in ``before`` that apply; only
    the patch's own files are checked out. Returns (clean, conflict markers
    as (file, line), message). Neither the mirror nor any tree is touched.
    """
    files = parse_patch(entry.path).files
    with tempfile.TemporaryDirectory(prefix="mlxb-3way-") as tmp:
        env = dict(gitops.ISOLATED_ENV)

        def run(*args: str, check: bool = True) -> gitops.GitResult:
            return gitops.run_git(tmp, *args, env=env, check=check)

        run("init", "-q")
        alternates = Path(tmp) / ".git" / "objects" / "info" / "alternates"
        alternates.write_text(str(gitops.objects_dir(repo)) + "\n")
        run("read-tree", commit)
        for st in before:
            if st.state == "applies":
                run("apply", "--cached", *(["--3way"] if st.three_way else []),
                    str(st.patch.path), check=False)
        present = run("ls-files", "--", *files).out.split()
        if present:
            run("checkout-index", "-f", "-u", "--", *present)
        res = run("apply", "--3way", str(entry.path), check=False)
        if res.ok:
            return True, [], "a 3-way merge applies cleanly"
        unmerged = sorted(set(run("diff", "--name-only", "--diff-filter=U",
                                  check=False).out.split()))
        markers = []
        for name in unmerged:
            text = (Path(tmp) / name).read_text(encoding="utf-8", errors="replace")
            markers += [(name, n) for n, line in enumerate(text.splitlines(), 1)
                        if line.startswith("<<<<<<<")]
        if markers:
            return False, markers, f"3-way merge conflicts in {', '.join(unmerged)}"
        errors = [ln.split(": ", 1)[-1] for ln in res.text.splitlines()
                  if ln.startswith(("error:", "fatal:"))]
        return False, [], "3-way merge impossible: " + (errors[0] if errors
                                                        else "git apply failed")


def _refresh_note(st: PatchStatus,
                  probe: tuple[bool, list[tuple[str, int]], str] | None = None) -> str:
    if st.state == "upstream":
        return "drop or mark merged: " + (st.detail or "already upstream")
    if st.state == "applies":
        return ("stale: applies only through a 3-way merge; refresh it "
                "(apply + export)" if st.three_way else "not needed")
    assert probe is not None, "a conflicting patch always comes with its 3-way probe"
    clean, markers, message = probe
    if clean:
        return f"refresh fixes it: {message}"
    where = ", ".join(f"{f}:{n}" for f, n in markers)
    return f"hand rebase needed: {message}" + (f" (markers at {where})" if where else "")


# ---------------------------------------------------------------- the run

def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def check_series(settings: Settings, repo: git.Repo, mlx: str) -> NightlyReport:
    """Steps 1–3: per-patch state, 3-way probe, upstream commits."""
    resolved = gitops.resolve_ref(repo, mlx)
    report = NightlyReport(settings.mlx_repo, resolved.ref, resolved.commit,
                           resolved.version, None, None, None, _now())
    try:
        series: Series = select_series(load_index(settings.patches_dir),
                                       resolved, repo)
    except SeriesError as exc:
        report.error = exc.render()
        return report
    report.series, report.series_base = series.name, series.base
    report.base_commit = gitops.rev_commit(repo, series.base)
    statuses = series_status(repo, series, resolved.commit)
    all_files = sorted({f for st in statuses for f in parse_patch(st.patch.path).files})
    if report.base_commit:
        report.commits = touched_commits(repo, report.base_commit,
                                         resolved.commit, all_files)
    for i, st in enumerate(statuses):
        files = list(parse_patch(st.patch.path).files)
        probe = (three_way_probe(repo, resolved.commit, statuses[:i], st.patch)
                 if st.state == "conflicts" else None)
        report.patches.append(PatchResult(
            patch=st.patch.file, target=st.patch.target, state=st.state,
            detail=st.detail,
            conflicts=[{"file": c.file, "line": c.line, "hunk": c.hunk}
                       for c in st.conflicts],
            refresh=_refresh_note(st, probe), files=files,
            touched_by=[c.commit for c in report.commits
                        if set(c.files) & set(files)]))
    return report


def compare(report: NightlyReport, previous: dict[str, Any] | None) -> None:
    """Mark regressions against the previous report (and failed builds/tests)."""
    before = {p["patch"]: p["state"] for p in (previous or {}).get("patches", [])}
    for p in report.patches:
        p.previous_state = before.get(p.patch)
        if p.state == "conflicts" and p.previous_state in ("applies", "upstream"):
            p.regression = True
            where = ", ".join(f"{c['file']}:{c['line']}" if c["line"] else c["file"]
                              for c in p.conflicts)
            report.regressions.append(
                f"{p.patch} applied at {str((previous or {}).get('commit', '?'))[:9]}"
                f" and now conflicts ({where})")
    if report.error:
        report.regressions.append(f"series check failed: {report.error.splitlines()[0]}")
    for b in report.builds:
        if b.status == "failed":
            report.regressions.append(f"build {b.target} failed: {b.detail}")
        if b.tests_ok is False:
            report.regressions.append(f"tests on {b.target} failed: {b.tests}")


def load_previous(path: Path | None) -> dict[str, Any] | None:
    if path is None or not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return None


@dataclass(frozen=True)
class BuildOptions:
    """How nightly builds its wheels: the same choices as `mlx-builder build`."""
    toolchain: str = "auto"              # pypi, system or auto (see build --toolchain)
    cuda_major: int | None = None
    platform: Any = None                 # buildenv.Platform, None for this host's


def compile_available(targets: Sequence[str], toolchain: str = "system") -> bool:
    """Compile by default only where the toolchain for the targets exists
    (the registry toolchain exists on any Linux host)."""
    for spec in targets:
        if spec.startswith("cuda") and not shutil.which("nvcc") and (
                toolchain == "system" or platform.system() != "Linux"):
            return False
        if spec == "metal" and platform.system() != "Darwin":
            return False
    return True


def build_and_test(settings: Settings, report: NightlyReport, target: str,
                   out_dir: Path, options: BuildOptions | None = None) -> BuildResult:
    """Step 4 for one target; failures are recorded, not raised."""
    if not report.all_apply:
        return BuildResult(target, "skipped", "the series does not apply")
    try:
        tset = parse_targets(target)
        tree = prepare_tree(settings, report.commit, series_name=report.series,
                            target=tset.patch_target, tree_name=tset.tag)
        from mlx_builder.wheelbuild.wheel import build_wheel  # heavy: only when compiling
        opts = options or BuildOptions()
        wheel = build_wheel(settings, tree, tset, out_dir, toolchain=opts.toolchain,
                            cuda_major=opts.cuda_major, target_platform=opts.platform)
    except MlxBuilderError as exc:
        return BuildResult(target, "failed", exc.what)
    result = BuildResult(target, "ok", f"built {Path(wheel).name}", str(wheel))
    result.tests, result.tests_ok = _run_tests(settings, Path(wheel), tset,
                                               out_dir.parent / "tests" / target)
    return result


def why_not_here(tset: TargetSet, host: Host) -> str | None:
    """Why a wheel for ``tset`` cannot be tested on ``host`` (None: it can)."""
    from mlx_builder.prebuilt.install import parse_arch
    if tset.backend == "cpu":
        return None
    if tset.backend != host.backend:
        return f"no {tset.backend} GPU here ({host.describe()})"
    if tset.backend == "cuda":
        archs = [parse_arch(a) for a in tset.cuda_archs]
        for gpu in host.gpus:
            if all(a.rank_on(gpu.cc) is None for a in archs):
                return f"{gpu.describe()} cannot run {tset.spec}"
    return None


def _run_tests(settings: Settings, wheel: Path, tset: TargetSet,
               out_dir: Path) -> tuple[str, bool | None]:
    """`mlx-builder test` on the wheel when a GPU here runs it."""
    from mlx_builder.prebuilt.install import detect_host
    reason = why_not_here(tset, detect_host())
    if reason:
        return f"skipped ({reason})", None
    from mlx_builder.verify.testing import WheelTestOptions, run_wheel_tests
    opts = WheelTestOptions(out_dir=out_dir,
                            venv_dir=settings.cache_dir / "test-venvs" / wheel.stem,
                            offline=settings.offline)
    try:
        results = run_wheel_tests(settings, wheel, opts)
    except MlxBuilderError as exc:
        return f"failed: {exc.what} ({out_dir})", False
    counts: dict[str, int] = {}
    for res in results:
        counts[res.status] = counts.get(res.status, 0) + 1
    return ("passed: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
            + f" ({out_dir})"), True


def run_nightly(settings: Settings, mlx: str = "main",
                targets: Sequence[str] = (), do_compile: bool = False,
                report_dir: Path = Path("nightly-report"),
                previous: Path | None = None,
                options: BuildOptions | None = None) -> NightlyReport:
    """The whole nightly; writes both reports and returns the report."""
    report_dir = Path(report_dir)
    prev_path = previous or report_dir / REPORT_JSON
    prev = load_previous(prev_path)
    repo = gitops.ensure_mirror(settings)
    report = check_series(settings, repo, mlx)
    report.previous = str(prev_path) if prev is not None else None
    if do_compile:
        for target in targets:
            report.builds.append(build_and_test(
                settings, report, target, report_dir / "wheels", options))
    else:
        report.builds = [BuildResult(t, "skipped", "compile not asked for")
                         for t in targets]
    compare(report, prev)
    write_reports(report, report_dir)
    return report


# ---------------------------------------------------------------- output

def write_reports(report: NightlyReport, report_dir: Path) -> tuple[Path, Path]:
    report_dir.mkdir(parents=True, exist_ok=True)
    js, md = report_dir / REPORT_JSON, report_dir / REPORT_MD
    js.write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    md.write_text(render_markdown(report), encoding="utf-8")
    return js, md


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _where(c: dict[str, Any]) -> str:
    at = f"`{c['file']}:{c['line']}`" if c["line"] else f"`{c['file']}`"
    hunk = str(c.get("hunk") or "").split(" @@")[0]
    return at + (f" (hunk {_cell(hunk)})" if hunk.startswith("#") else "")


def render_markdown(r: NightlyReport) -> str:
    verdict = "REGRESSION" if r.regressions else ("ok" if r.all_apply else "conflicts")
    lines = [f"# mlx-builder nightly: {verdict}", "",
             f"- upstream: {r.upstream} `{r.ref}` at `{r.commit[:12]}`"
             f" (version {r.version or '?'})",
             f"- series: `{r.series or '(none)'}` made on `{r.series_base or '?'}`"
             + (f" (`{r.base_commit[:12]}`)" if r.base_commit else ""),
             f"- generated: {r.generated}",
             f"- compared with: {r.previous or 'no previous report'}", ""]
    if r.error:
        lines += ["## Error", "", "```", r.error, "```", ""]
    if r.regressions:
        lines += ["## Regressions", ""] + [f"- {_cell(x)}" for x in r.regressions] + [""]
    lines += ["## Patches", "",
              "| patch | target | state | where | refresh | upstream commits |",
              "|---|---|---|---|---|---|"]
    for p in r.patches:
        where = ", ".join(_where(c) for c in p.conflicts) or _cell(p.detail)
        state = p.state + (" (was " + p.previous_state + ")"
                           if p.previous_state and p.previous_state != p.state else "")
        lines.append(f"| {p.patch} | {p.target} | {'**' + state + '**' if p.regression else state}"
                     f" | {where} | {_cell(p.refresh)} | {len(p.touched_by)} |")
    if not r.patches:
        lines.append("| (no patches) | | | | | |")
    lines += ["", "## Upstream commits touching patched files since the base", ""]
    if not r.commits:
        lines.append("none")
    for c in r.commits[:MAX_COMMITS_SHOWN]:
        lines.append(f"- `{c.commit[:9]}` {c.date[:10]} {_cell(c.subject)} "
                     f"({', '.join(c.files)})")
    if len(r.commits) > MAX_COMMITS_SHOWN:
        lines.append(f"- … {len(r.commits) - MAX_COMMITS_SHOWN} more in nightly.json")
    lines += ["", "## Builds and tests", ""]
    if not r.builds:
        lines.append("no targets asked for")
    for b in r.builds:
        lines.append(f"- {b.target}: {b.status}" + (f" ({_cell(b.detail)})" if b.detail else "")
                     + f"; tests: {_cell(b.tests)}")
    return "\n".join(lines) + "\n"
