"""`mlx-builder test`: prove a wheel in a fresh virtual environment.

Steps: a venv, the wheel (and pytest, NumPy) installed with pip — offline
with ``--no-index --find-links`` when asked — a probe of what the wheel
sees (MLX version, CUDA/Metal), then five pytest runs, each with its own
JUnit XML and log:

1. ``upstream`` — upstream's python/tests/test_fast_sdpa.py and mlx_tests.py
   from the commit the wheel was built from (its manifest), read from the
   MLX mirror with ``git show``;
2. ``sdpa`` — this package's SDPA suites: suites/sdpa/test_*.py but the two below;
3. ``memory`` — suites/sdpa/test_memory.py (GPU);
4. ``e2e`` — suites/sdpa/test_e2e_model.py, long prefill (GPU, mlx-lm);
5. ``greedy`` — the same file's greedy identity check (GPU, mlx-lm).

GPU parts are skipped, with the probe's reason, when the wheel sees no GPU.
``jobs`` > 1 runs the sdpa part in that many pytest processes at once, then
its tests marked ``solo`` (those that plan for most of the GPU's memory) in
one process alone, one JUnit XML per process merged into the part's. A rich table sums the parts
up; any failed part raises TestFailureError.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from mlx_builder.console import console, print_table, progress
from mlx_builder.errors import FetchError, TestFailureError, WheelError
from mlx_builder.outputs import commit, stage_bytes
from mlx_builder.process import StepRunner
from mlx_builder.verify.junit import JUnitReport, merge_junit, parse_junit

PINNED_MLX_LM = "0.32.2"  # first release with both gemma4_text and qwen3_5
TEST_REQUIREMENTS = ("pytest>=8", "numpy")
UPSTREAM_TEST_FILES = ("python/tests/test_fast_sdpa.py", "python/tests/mlx_tests.py")
# Files of suites/sdpa that have a part of their own; every other test_*.py
# there belongs to the "sdpa" part.
OWN_PART_FILES = {"memory": "test_memory.py", "e2e": "test_e2e_model.py",
                  "greedy": "test_e2e_model.py", "fullscale": "test_fullscale.py"}

PROBE = r"""
import json
import mlx.core as mx
cuda = bool(getattr(mx, "cuda", None) and mx.cuda.is_available())
metal = bool(getattr(mx, "metal", None) and mx.metal.is_available())
try:
    info = {k: v for k, v in mx.device_info().items() if isinstance(v, (str, int))}
except Exception:
    info = {}
doc = mx.fast.scaled_dot_product_attention.__doc__ or ""
print(json.dumps({"version": mx.__version__, "cuda": cuda, "metal": metal,
                  "device": info, "force_fused": "force_fused" in doc}))
"""


@dataclass(frozen=True)
class Part:
    key: str
    title: str
    needs_gpu: bool
    needs_mlx_lm: bool = False
    default: bool = True  # run when --parts is not given


PARTS = (
    Part("upstream", "upstream test_fast_sdpa", False),
    Part("sdpa", "SDPA suite (large head dims)", False),
    Part("memory", "memory checks (L^e)", True),
    Part("e2e", "mlx-lm long prefill", True, True),
    Part("greedy", "greedy identity", True, True),
    # gemma-4 31B at full scale: minutes on an H200, >= 80 GB GPUs only
    Part("fullscale", "gemma-4 31B full scale", True, True, default=False),
)
PART_KEYS = tuple(p.key for p in PARTS)
DEFAULT_PARTS = tuple(p.key for p in PARTS if p.default)
# Parts whose tests are independent and time nothing and measure no memory:
# --jobs N runs each in N pytest processes at once, process i taking every
# N-th test from the i-th (the suite's conftest reads MLX_BUILDER_SHARD=i/N).
# The memory and model parts measure peaks and run alone.
SHARDABLE_PARTS = ("sdpa",)
SHARD_ENV = "MLX_BUILDER_SHARD"
# MLX_BUILDER_SHARD's value for the process that runs the part's tests marked
# solo (the suite's conftest keeps them out of every shard).
SOLO_SHARD = "solo"
# The thread pools of NumPy's BLAS and of OpenMP: each process's float64
# references would start one thread per core, so N shards at once would start
# N times the cores and spend them waiting on each other.
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def shard_threads(env: Mapping[str, str], jobs: int, cores: int) -> dict[str, str]:
    """The thread-pool variables each of ``jobs`` shards gets: an equal share
    of ``cores``, at least 1, for every variable neither ``env`` nor this
    process's environment sets (a user's own value is kept)."""
    share = str(max(1, cores // jobs))
    return {var: share for var in THREAD_VARS
            if var not in env and var not in os.environ}


@dataclass
class PartResult:
    part: Part
    status: str  # passed | failed | error | skipped | not run
    report: JUnitReport | None = None
    note: str = ""
    junit: Path | None = None
    log: Path | None = None

    @property
    def failed(self) -> bool:
        return self.status in ("failed", "error")


@dataclass(frozen=True)
class WheelTestOptions:
    out_dir: Path
    venv_dir: Path
    python: str = sys.executable
    wheelhouse: Path | None = None
    offline: bool = False
    system_site_packages: bool = False
    no_deps: bool = False
    reuse_venv: bool = False
    parts: tuple[str, ...] = DEFAULT_PARTS
    env: Mapping[str, str] = field(default_factory=dict)
    long: bool = False
    upstream_commit: str | None = None
    mlx_lm_version: str = PINNED_MLX_LM
    upstream_tests: Path | None = None
    pytest_args: tuple[str, ...] = ()
    jobs: int = 1  # pytest processes for each part in SHARDABLE_PARTS


# ------------------------------------------------------------ venv and pip

def venv_python(venv: Path) -> Path:
    if os.name == "nt":  # pragma: no cover - not a supported build host
        return venv / "Scripts" / "python.exe"
    return venv / "bin" / "python"


def venv_command(python: str, venv: Path, system_site_packages: bool = False) -> list[str]:
    cmd = [python, "-m", "venv"]
    if system_site_packages:
        cmd.append("--system-site-packages")
    return [*cmd, str(venv)]


def pip_install_command(python: Path | str, requirements: Sequence[str | Path], *,
                        wheelhouse: Path | None = None, offline: bool = False,
                        no_deps: bool = False) -> list[str]:
    """pip install; offline means --no-index with --find-links for every
    local wheel's folder and the wheelhouse."""
    cmd = [str(python), "-m", "pip", "install", "--disable-pip-version-check",
           "--no-input"]
    if no_deps:
        cmd.append("--no-deps")
    links: list[str] = []
    if wheelhouse is not None:
        links.append(str(Path(wheelhouse).resolve()))
    if offline:
        cmd.append("--no-index")
        for req in requirements:
            if str(req).endswith(".whl"):
                folder = str(Path(req).resolve().parent)
                if folder not in links:
                    links.append(folder)
    for link in links:
        cmd += ["--find-links", link]
    return cmd + [str(r) for r in requirements]


def make_venv(runner: StepRunner, python: str, venv: Path, *,
              system_site_packages: bool = False, reuse: bool = False) -> Path:
    """A fresh venv at ``venv`` (removed first unless ``reuse``)."""
    vpy = venv_python(venv)
    if reuse and vpy.exists():
        return vpy
    if venv.exists():
        if any(venv.iterdir()) and not (venv / "pyvenv.cfg").is_file():
            raise TestFailureError(
                f"{venv} exists and is not a virtual environment",
                "a fresh venv replaces the folder, and this one holds other files",
                "pass --venv with a new folder or an old test venv")
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    runner.run("venv", venv_command(python, venv, system_site_packages),
               error_cls=TestFailureError,
               hint="check that the Python given by --python has the venv module")
    return vpy


def install_wheel(runner: StepRunner, vpy: Path, wheel: Path | Sequence[Path],
                  extra: Sequence[str] = (), *, wheelhouse: Path | None = None,
                  offline: bool = False, no_deps: bool = False) -> None:
    """The wheel (or wheels installed together, such as a release's ``mlx``
    and ``mlx-cuda-13``) and ``extra`` into the venv. ``no_deps`` leaves out
    the wheels' declared runtime packages (the nvidia-* libraries of a CUDA
    wheel) for machines that provide them otherwise; ``extra`` still gets
    its dependencies."""
    hint = ("offline installs need the wheel's dependencies in --wheelhouse "
            "(or --no-deps where the CUDA libraries come from elsewhere)"
            if offline else "pass --wheelhouse DIR --offline to install without network")
    wheels = [w.resolve() for w in ([wheel] if isinstance(wheel, Path) else wheel)]
    groups: list[list[str | Path]] = ([[*wheels], list(extra)] if no_deps
              else [[*wheels, *extra]])
    for i, reqs in enumerate(g for g in groups if g):
        runner.run(
            "install-wheel" if i == 0 else "install-test-requirements",
            pip_install_command(vpy, reqs, wheelhouse=wheelhouse, offline=offline,
                                no_deps=no_deps and i == 0),
            error_cls=TestFailureError, hint=hint)


def probe(runner: StepRunner, vpy: Path, env: Mapping[str, str] | None = None) -> dict:
    """What the wheel sees: version, CUDA, Metal, device, force_fused API."""
    res = runner.run("probe", [vpy, "-c", PROBE], env=env, error_cls=TestFailureError,
                     hint="the wheel does not import in a clean venv; read the log")
    for line in reversed(res.output_tail.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise TestFailureError("the MLX probe printed no result", f"log: {res.log_path}")


def gpu_skip_reason(info: Mapping[str, Any]) -> str:
    if info.get("cuda") or info.get("metal"):
        return ""
    return (f"no GPU: MLX {info.get('version', '?')} in the test venv has "
            "neither CUDA (mx.cuda.is_available() is False) nor Metal "
            "(mx.metal.is_available() is False)")


# --------------------------------------------------------- staging the tests

def suite_dir() -> Path:
    """The SDPA suites the package carries (mlx_builder/suites/sdpa)."""
    suite = Path(__file__).resolve().parents[1] / "suites" / "sdpa"
    if (suite / "test_sdpa_large_head.py").is_file():
        return suite
    raise TestFailureError(
        f"cannot find the SDPA suites ({suite})",
        "the package ships them as data; this installation lacks them",
        "reinstall mlx-builder from its wheel or a checkout of the repository")


PYTEST_INI = """[pytest]
addopts = -ra -p no:cacheprovider
junit_family = xunit1
markers =
    gpu: needs a CUDA or Metal GPU
    long: long-context case (MLX_BUILDER_LONG=1)
"""


def stage_suites(dest: Path, source: Path | None = None) -> Path:
    """Copy the suites next to their own pytest.ini, out of reach of the
    repository's conftest (which needs mlx_builder, absent in the venv)."""
    source = source or suite_dir()
    target = dest / "sdpa"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for path in sorted(source.glob("*.py")):
        shutil.copy2(path, target / path.name)
    (target / "pytest.ini").write_text(PYTEST_INI)
    return target


def upstream_commit_of(wheel: Path, override: str | None = None) -> tuple[str | None, str]:
    """(commit, why-not) for the upstream tests: the override, else the
    wheel manifest's upstream_commit."""
    if override:
        return override, ""
    from mlx_builder.wheelbuild.manifest import read_manifest
    try:
        manifest = read_manifest(wheel)
    except WheelError as exc:
        return None, f"{exc.what}: pass --upstream-commit REF to pick the tests"
    commit = manifest.get("upstream_commit")
    if not commit:
        return None, "the wheel manifest has no upstream_commit"
    return str(commit), ""


def stage_upstream_tests(repo: Any, commit: str, dest: Path) -> Path:
    """Write upstream's test_fast_sdpa.py and mlx_tests.py at ``commit``."""
    from mlx_builder.source.gitops import run_git
    dest.mkdir(parents=True, exist_ok=True)
    for path in UPSTREAM_TEST_FILES:
        res = run_git(repo, "show", f"{commit}:{path}", check=False, strip=False)
        if not res.ok:
            raise TestFailureError(
                f"cannot read {path} at {commit[:12]} from the MLX mirror",
                (res.err or res.out).strip()[:300],
                "fetch the mirror (drop --offline) or pass --mlx-repo with that commit")
        (dest / Path(path).name).write_text(res.out)
    (dest / "pytest.ini").write_text(PYTEST_INI)
    return dest / "test_fast_sdpa.py"


def stage_upstream_tests_from(source: Path, dest: Path) -> Path:
    """Write upstream's test files from ``source``: a folder that holds them
    (an MLX checkout's python/tests) or an `mlx-builder bundle` tarball (its
    MLX tree; the patch series leaves these two files as upstream has them)."""
    import tarfile
    source = Path(source)
    dest.mkdir(parents=True, exist_ok=True)
    names = [Path(p).name for p in UPSTREAM_TEST_FILES]
    if source.is_dir():
        for name in names:
            found = source / name
            if not found.is_file():
                raise TestFailureError(f"no {name} in {source}",
                                       "--upstream-tests takes the folder of "
                                       "test_fast_sdpa.py and mlx_tests.py",
                                       "pass MLX's python/tests folder or a bundle")
            shutil.copyfile(found, dest / name)
    elif source.is_file() and tarfile.is_tarfile(source):
        with tarfile.open(source) as tar:
            members = {m.name: m for m in tar.getmembers() if m.isfile()}
            for path in UPSTREAM_TEST_FILES:
                match = [n for n in members if n.endswith("/mlx/" + path)]
                if len(match) != 1:
                    raise TestFailureError(
                        f"{source.name} has {len(match)} copies of {path}",
                        "an mlx-builder bundle holds exactly one MLX tree",
                        "pass the bundle the wheel was built from")
                data = tar.extractfile(members[match[0]])
                (dest / Path(path).name).write_bytes(data.read() if data else b"")
    else:
        raise TestFailureError(f"--upstream-tests {source} is neither a folder nor a "
                               "tarball", "", "pass MLX's python/tests folder or a bundle")
    (dest / "pytest.ini").write_text(PYTEST_INI)
    return dest / "test_fast_sdpa.py"


# ------------------------------------------------------------- the parts

def part_targets(key: str, suites: Path, upstream_test: Path | None) -> list[str]:
    if key == "upstream":
        return [str(upstream_test)]
    if key == "sdpa":
        own = set(OWN_PART_FILES.values())
        return [str(p) for p in sorted(suites.glob("test_*.py")) if p.name not in own]
    if key == "memory":
        return [str(suites / OWN_PART_FILES["memory"])]
    if key == "e2e":
        return [str(suites / OWN_PART_FILES["e2e"]), "-k", "not greedy"]
    if key == "greedy":
        return [str(suites / OWN_PART_FILES["greedy"]), "-k", "greedy"]
    if key == "fullscale":
        return [str(suites / OWN_PART_FILES["fullscale"])]
    raise ValueError(f"unknown test part {key!r}")


def pytest_command(vpy: Path | str, targets: Sequence[str], junit: Path,
                   rootdir: Path, extra: Sequence[str] = ()) -> list[str]:
    """-v names each test before it runs and --capture=sys leaves C-level
    stderr alone, so a process that dies (MLX aborts on some C++ errors)
    leaves the test and the error message in the log."""
    return [str(vpy), "-m", "pytest", "-v", "--capture=sys", "-rs",
            "-c", str(rootdir / "pytest.ini"), "--rootdir", str(rootdir),
            f"--junitxml={junit}", *targets, *extra]


# What a dying process leaves in its log: the test pytest -v started last,
# and the C++ runtime's message for an uncaught exception.
_STARTED_TEST = re.compile(r"^(\S+::\S+)(?: |$)")
_CPP_MESSAGE = re.compile(r"^(terminate called .*|\s*what\(\): .*)$")


def crash_context(log: Path) -> str:
    """'last test …; <C++ message>' from a crashed part's log, or ''."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    started = [m.group(1) for m in map(_STARTED_TEST.match, lines) if m]
    messages = [m.group(1).strip() for m in map(_CPP_MESSAGE.match, lines) if m]
    parts = []
    if started:
        parts.append(f"last test started: {started[-1]}")
    if messages:
        parts.append(" ".join(messages[-2:]))
    return "; ".join(parts)


def judge_part(part: Part, rc: int, junit: Path, log: Path) -> PartResult:
    """A part's result from pytest's exit code and its JUnit XML."""
    if not junit.is_file():
        context = crash_context(log)
        return PartResult(part, "error", note=f"pytest exited {rc} and wrote no JUnit "
                          f"XML (crash?){'; ' + context if context else ''}; see {log}",
                          log=log)
    try:
        report = parse_junit(junit)
    except ValueError as exc:
        return PartResult(part, "error", note=str(exc), junit=junit, log=log)
    counts = report.counts
    if rc not in (0, 1, 5) and not counts["failed"] and not counts["error"]:
        return PartResult(part, "error", report, f"pytest exited {rc}; see {log}",
                          junit, log)
    if counts["failed"] or counts["error"] or rc == 1:
        status = "failed"
    elif counts["passed"]:
        status = "passed"
    else:
        status = "skipped"
    note = ""
    if status == "failed":
        first = report.problems()[:2]
        note = "; ".join(f"{c.name}: {c.message}" for c in first) or f"see {log}"
    elif report.skip_reasons():
        reason, n = report.skip_reasons()[0]
        note = f"{n} skipped: {reason}"
    return PartResult(part, status, report, note, junit, log)


def combined_returncode(codes: Sequence[int]) -> int:
    """pytest's exit code for a part run as shards: a crash or usage error
    first, then failures, then 'nothing collected' only if every shard says
    so (a shard can be empty when there are fewer tests than shards)."""
    odd = [rc for rc in codes if rc not in (0, 1, 5)]
    if odd:
        return odd[0]
    if 1 in codes:
        return 1
    return 5 if codes and all(rc == 5 for rc in codes) else 0


def run_pytest(runner: StepRunner, vpy: Path, step: str, targets: Sequence[str], *,
               junit: Path, rootdir: Path, env: Mapping[str, str],
               pytest_args: Sequence[str],
               on_line: Callable[[str], bool | None] | None = None) -> tuple[int, Path]:
    """One pytest run as a step (``junit`` removed first, so that a crash
    leaves none): its exit code and log."""
    junit.unlink(missing_ok=True)
    res = runner.run(step, pytest_command(vpy, targets, junit, rootdir, pytest_args),
                     env=env, check=False, cwd=rootdir, on_line=on_line)
    return res.returncode, res.log_path


def run_sharded(runner: StepRunner, vpy: Path, part: Part, targets: Sequence[str], *,
                junit_dir: Path, rootdir: Path, env: Mapping[str, str],
                pytest_args: Sequence[str], jobs: int) -> PartResult:
    """``part`` in ``jobs`` pytest processes at once (process i with
    MLX_BUILDER_SHARD=i/jobs), then its tests marked solo in one process
    alone (MLX_BUILDER_SHARD=solo: they plan for most of the GPU's memory),
    judged as one: <part>.xml holds every process's suite; a process that
    wrote no JUnit XML makes the part an error that names its log. The shards
    share the cores' BLAS and OpenMP threads (shard_threads); the solo
    process runs alone and keeps the defaults."""
    stop = threading.Event()
    threads = shard_threads(env, jobs, usable_cores())

    def keep_going(_line: str) -> bool:
        return not stop.is_set()  # False kills that shard's pytest

    def run_shard(name: str, value: str, extra: Mapping[str, str]) -> tuple[int, Path, Path]:
        junit = junit_dir / f"{part.key}-{name}.xml"
        rc, log = run_pytest(runner, vpy, f"test-{part.key}-{name}", targets,
                             junit=junit, rootdir=rootdir,
                             env={**env, **extra, SHARD_ENV: value},
                             pytest_args=pytest_args, on_line=keep_going)
        return rc, junit, log

    def shard(i: int) -> tuple[int, Path, Path]:
        return run_shard(f"{i + 1}of{jobs}", f"{i}/{jobs}", threads)

    # An interrupt or error here stops every shard at its next line of output
    # instead of leaving pytest processes running behind the command.
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        futures = [pool.submit(shard, i) for i in range(jobs)]
        shards = [future.result() for future in futures]
    except BaseException:
        stop.set()
        raise
    finally:
        pool.shutdown(wait=True)
    shards.append(run_shard(SOLO_SHARD, SOLO_SHARD, {}))
    for rc, junit, log in shards:
        if not junit.is_file():
            return judge_part(part, rc, junit, log)
    merged = junit_dir / f"{part.key}.xml"
    try:
        data = merge_junit([junit for _, junit, _ in shards])
    except ValueError as exc:
        return PartResult(part, "error", note=str(exc), log=shards[0][2])
    commit([(stage_bytes(merged, data), merged)])
    codes = [rc for rc, _, _ in shards]
    rc = combined_returncode(codes)
    log = next((log for code, _, log in shards if code == rc), shards[0][2])
    return judge_part(part, rc, merged, log)


def run_parts(runner: StepRunner, vpy: Path, parts: Iterable[Part], *, suites: Path,
              upstream_test: Path | None, junit_dir: Path, env: Mapping[str, str],
              skip: Mapping[str, str], pytest_args: Sequence[str] = (),
              not_run: Mapping[str, str] | None = None, jobs: int = 1) -> list[PartResult]:
    """Run each part; ``skip`` and ``not_run`` map a part to why it does not
    run (skipped: it does not apply to this wheel or host; not run: something
    it needs is missing, and the note says how to provide it). ``jobs`` > 1
    runs each part of SHARDABLE_PARTS in that many processes."""
    not_run = not_run or {}
    results = []
    parts = list(parts)
    junit_dir.mkdir(parents=True, exist_ok=True)
    with progress("testing the wheel", total=len(parts)) as (prog, task):
        for part in parts:
            prog.update(task, description=f"test: {part.title}")
            if part.key in not_run:
                results.append(PartResult(part, "not run", note=not_run[part.key]))
            elif part.key in skip:
                results.append(PartResult(part, "skipped", note=skip[part.key]))
            else:
                targets = part_targets(part.key, suites, upstream_test)
                rootdir = Path(targets[0]).parent
                if jobs > 1 and part.key in SHARDABLE_PARTS:
                    prog.update(task, description=f"test: {part.title} ({jobs} processes)")
                    results.append(run_sharded(
                        runner, vpy, part, targets, junit_dir=junit_dir, rootdir=rootdir,
                        env=env, pytest_args=pytest_args, jobs=jobs))
                else:
                    junit = junit_dir / f"{part.key}.xml"
                    rc, log = run_pytest(runner, vpy, f"test-{part.key}", targets,
                                         junit=junit, rootdir=rootdir, env=env,
                                         pytest_args=pytest_args)
                    results.append(judge_part(part, rc, junit, log))
            prog.advance(task)
    return results


# ------------------------------------------------------------- reporting

_STYLE = {"passed": "green", "failed": "bold red", "error": "bold red",
          "skipped": "yellow", "not run": "bold yellow"}


def summary_table(results: Sequence[PartResult], title: str = "mlx-builder test") -> Table:
    table = Table(title=title, show_lines=False)
    table.add_column("part", no_wrap=True)
    table.add_column("result", no_wrap=True)
    for col in ("pass", "fail", "err", "skip", "time"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("notes", overflow="fold", min_width=24)
    for r in results:
        c = r.report.counts if r.report else {}
        secs = f"{r.report.seconds:.0f}s" if r.report else "-"
        table.add_row(r.part.key, f"[{_STYLE[r.status]}]{r.status}[/]",
                      *(str(c.get(k, "-")) for k in ("passed", "failed", "error", "skipped")),
                      secs, r.note)
    return table


def measurements_table(results: Sequence[PartResult]) -> Table | None:
    rows = [(r.part.key, k, v) for r in results if r.report
            for k, v in sorted(r.report.properties().items())]
    if not rows:
        return None
    table = Table(title="measurements (JUnit properties)")
    for col in ("part", "name", "value"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    return table


def summary_json(results: Sequence[PartResult], info: Mapping[str, Any]) -> dict:
    return {
        "mlx": dict(info),
        "parts": [{
            "part": r.part.key, "status": r.status, "note": r.note,
            "counts": r.report.counts if r.report else {},
            "skip_reasons": r.report.skip_reasons() if r.report else [],
            "properties": r.report.properties() if r.report else {},
            "junit": str(r.junit) if r.junit else None,
            "log": str(r.log) if r.log else None,
        } for r in results],
    }


def raise_on_failure(results: Sequence[PartResult], out_dir: Path) -> None:
    bad = [r for r in results if r.failed]
    if bad:
        raise TestFailureError(
            f"{len(bad)} of {len(results)} test parts failed: "
            + ", ".join(r.part.key for r in bad),
            "; ".join(f"{r.part.key}: {r.note}" for r in bad)[:800],
            f"JUnit XML and logs are under {out_dir}")


# ------------------------------------------------------------- the command

def run_wheel_tests(settings: Any, wheel: Path, opts: WheelTestOptions) -> list[PartResult]:
    """Everything `mlx-builder test WHEEL` does; raises TestFailureError on
    any failed part after printing the summary."""
    wheel = Path(wheel)
    if not wheel.is_file():
        raise WheelError(f"no wheel at {wheel}", "", "build one with `mlx-builder build`")
    selected = [p for p in PARTS if p.key in opts.parts]
    out_dir = opts.out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    runner = StepRunner(out_dir / "logs")
    env = dict(opts.env)
    if opts.long:
        env["MLX_BUILDER_LONG"] = "1"

    vpy = make_venv(runner, opts.python, opts.venv_dir,
                    system_site_packages=opts.system_site_packages, reuse=opts.reuse_venv)
    install_wheel(runner, vpy, wheel, TEST_REQUIREMENTS, wheelhouse=opts.wheelhouse,
                  offline=opts.offline, no_deps=opts.no_deps)
    info = probe(runner, vpy, env)
    console.print(f"MLX {info['version']} in {opts.venv_dir}: "
                  f"cuda={info['cuda']} metal={info['metal']} "
                  f"device={info['device'].get('device_name', '?')} "
                  f"force_fused API={info['force_fused']}")

    skip: dict[str, str] = {}
    no_gpu = gpu_skip_reason(info)
    if no_gpu and any(p.needs_gpu for p in selected):
        console.print(f"GPU parts skipped: {no_gpu}")
    for part in selected:
        if part.needs_gpu and no_gpu:
            skip[part.key] = "no GPU (see above)"
    if any(p.needs_mlx_lm and p.key not in skip for p in selected):
        res = runner.run("install-mlx-lm", pip_install_command(
            vpy, [f"mlx-lm=={opts.mlx_lm_version}"], wheelhouse=opts.wheelhouse,
            offline=opts.offline, no_deps=True), check=False)
        if res.returncode != 0:
            for part in selected:
                if part.needs_mlx_lm:
                    skip.setdefault(part.key, (
                        f"mlx-lm=={opts.mlx_lm_version} could not be installed "
                        f"(log {res.log_path}); put its wheel in --wheelhouse"))

    upstream_test = None
    not_run: dict[str, str] = {}
    if "upstream" in opts.parts and opts.upstream_tests is not None:
        upstream_test = stage_upstream_tests_from(opts.upstream_tests, out_dir / "upstream")
        console.print(f"upstream tests from {opts.upstream_tests}")
    elif "upstream" in opts.parts:
        commit, why = upstream_commit_of(wheel, opts.upstream_commit)
        if commit is None:
            skip["upstream"] = why
        else:
            from mlx_builder.source.gitops import ensure_mirror
            try:
                upstream_test = stage_upstream_tests(ensure_mirror(settings), commit,
                                                     out_dir / "upstream")
                console.print(f"upstream tests from {commit[:12]}")
            except FetchError as exc:
                not_run["upstream"] = (f"not run: {exc.what}; pass --upstream-tests "
                                       "DIR|BUNDLE (MLX's python/tests or the bundle "
                                       "the wheel was built from)")
                console.print(f"upstream part not run: {exc.what}", markup=False)
    suites = stage_suites(out_dir / "suites")

    results = run_parts(runner, vpy, selected, suites=suites, upstream_test=upstream_test,
                        junit_dir=out_dir / "junit", env=env, skip=skip,
                        pytest_args=opts.pytest_args, not_run=not_run, jobs=opts.jobs)
    print_table(summary_table(results, f"mlx-builder test {wheel.name}"))
    extra = measurements_table(results)
    if extra is not None:
        print_table(extra)
    (out_dir / "summary.json").write_text(json.dumps(summary_json(results, info), indent=2))
    console.print(f"JUnit XML: {out_dir / 'junit'}   logs: {out_dir / 'logs'}")
    raise_on_failure(results, out_dir)
    return results
