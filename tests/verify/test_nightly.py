"""Nightly against a fixture upstream that moves under a patch series."""

from __future__ import annotations

import json
import os
import platform

import git
import pytest
from click.testing import CliRunner

from mlx_builder.cli import cli
from mlx_builder.errors import RegressionError
from mlx_builder.prebuilt.install import FAKE_GPU_ENV, detect_host
from mlx_builder.settings import Settings
from mlx_builder.source import gitops
from mlx_builder.verify.nightly import (
    REPORT_JSON,
    REPORT_MD,
    BuildOptions,
    compile_available,
    run_nightly,
    touched_commits,
    why_not_here,
)
from mlx_builder.wheelbuild.buildenv import PLATFORMS
from mlx_builder.wheelbuild.targets import parse_targets

CHUNKED = "0010-chunked-sdpa-fallback.patch"      # attention.cpp line 20
CUDA = "0020-cuda-tiled-flash-attention.patch"      # cuda/sdpa.cu line 10


def _change(up, path: str, line: int, new: str, message: str) -> str:
    """Upstream rewrites line ``line`` of a fixture file (``<name>_line_N = N;``)."""
    name = "cuda" if path.endswith(".cu") else path.rsplit("/", 1)[-1].split(".")[0]
    return up.commit({path: (f"{name}_line_{line} = {line};", new)}, message)


def _env(up) -> dict[str, str]:
    return {"MLX_BUILDER_MLX_REPO": str(up.path),
            "MLX_BUILDER_CACHE": str(up.root / "cache"),
            "MLX_BUILDER_PATCHES": str(up.patches_dir)}


def test_clean_main_applies_and_writes_both_reports(upstream, tmp_path):
    report = run_nightly(upstream.settings(), report_dir=tmp_path / "r")
    assert report.series == "main" and report.all_apply and not report.regressions
    assert [p.state for p in report.patches] == ["applies"] * 3
    assert report.commits == []        # main's README commit touched no patched file
    data = json.loads((tmp_path / "r" / REPORT_JSON).read_text())
    assert data["ok"] and data["commit"] == upstream.commits["main"]
    md = (tmp_path / "r" / REPORT_MD).read_text()
    assert "# mlx-builder nightly: ok" in md and CHUNKED in md


def test_upstream_change_on_a_patched_line_is_a_conflict_report(upstream, tmp_path):
    """The must-show: patch, file and line of the conflict, and the culprit."""
    culprit = _change(upstream, "mlx/attention.cpp", 20, "attention_line_20 = twenty;",
                      "Rework attention dispatch")
    report = run_nightly(upstream.settings(), report_dir=tmp_path / "r")
    by_name = {p.patch: p for p in report.patches}
    chunked = by_name[CHUNKED]
    assert chunked.state == "conflicts"
    assert {"file": "mlx/attention.cpp", "line": 17} == {
        k: chunked.conflicts[0][k] for k in ("file", "line")}   # hunk starts at 17
    assert chunked.refresh == ("hand rebase needed: 3-way merge conflicts in "
                               "mlx/attention.cpp (markers at mlx/attention.cpp:20)")
    assert chunked.touched_by == [culprit]
    assert all(by_name[p].state == "applies" and by_name[p].touched_by == []
               for p in by_name if p != CHUNKED)
    assert [c.subject for c in report.commits] == ["Rework attention dispatch"]
    md = (tmp_path / "r" / REPORT_MD).read_text()
    assert f"| {CHUNKED} | all | conflicts | `mlx/attention.cpp:17` (hunk #1) |" in md
    assert "Rework attention dispatch (mlx/attention.cpp)" in md
    assert not report.regressions       # no previous report to regress from


def test_context_drift_is_flagged_stale_not_conflict(upstream, tmp_path):
    _change(upstream, "mlx/attention.cpp", 22, "attention_line_22 = 22; // moved",
            "Nearby edit")
    report = run_nightly(upstream.settings(), report_dir=tmp_path / "r")
    chunked = next(p for p in report.patches if p.patch == CHUNKED)
    assert chunked.state == "applies"
    assert chunked.refresh.startswith("stale: applies only through a 3-way merge")
    assert len(chunked.touched_by) == 1


def test_regression_against_previous_report_exits_24(upstream, tmp_path, isolated_env):
    runner = CliRunner()
    args = ["nightly", "--no-compile", "--targets", "cpu",
            "--report-dir", str(tmp_path / "r")]
    env = _env(upstream)
    first = runner.invoke(cli, args, env=env, catch_exceptions=False)
    assert first.exit_code == 0, first.output
    _change(upstream, "mlx/backend/cuda/sdpa.cu", 10, "cuda_line_10 = upstream(10);",
            "CUDA rewrite")
    second = runner.invoke(cli, args, env=env)
    assert isinstance(second.exception, RegressionError), second.output
    assert second.exception.exit_code == 24
    assert CUDA in second.exception.what
    assert "mlx/backend/cuda/sdpa.cu:7" in second.exception.what
    data = json.loads((tmp_path / "r" / REPORT_JSON).read_text())
    assert data["ok"] is False
    assert [p["previous_state"] for p in data["patches"]] == ["applies"] * 3
    md = (tmp_path / "r" / REPORT_MD).read_text()
    assert "# mlx-builder nightly: REGRESSION" in md
    assert "**conflicts (was applies)**" in md
    third = runner.invoke(cli, args, env=env)   # same conflict again: not new
    assert third.exit_code == 0, third.output
    strict = runner.invoke(cli, [*args, "--fail-on-conflict"], env=env)
    assert isinstance(strict.exception, RegressionError)


def test_touched_commits_lists_only_patched_files(upstream):
    base = upstream.commits["main_base"]
    mid = _change(upstream, "mlx/attention.cpp", 30, "x", "Touch attention")
    repo = git.Repo(upstream.path)
    head = gitops.rev_commit(repo, "main")
    found = touched_commits(repo, base, head, ["mlx/attention.cpp", "mlx/backend/cuda/sdpa.cu"])
    assert [(c.commit, c.files) for c in found] == [(mid, ["mlx/attention.cpp"])]
    assert touched_commits(repo, base, head, []) == []


def test_build_failure_is_a_regression_and_conflicts_skip_builds(upstream, tmp_path):
    report = run_nightly(upstream.settings(), targets=["cuda-sm999"],
                         do_compile=True, report_dir=tmp_path / "r")
    assert report.builds[0].status == "failed"
    assert any("build cuda-sm999 failed" in r for r in report.regressions)
    _change(upstream, "mlx/attention.cpp", 20, "conflicting", "Conflict")
    again = run_nightly(upstream.settings(), targets=["cuda-sm90"],
                        do_compile=True, report_dir=tmp_path / "r2")
    assert again.builds[0].status == "skipped"
    assert again.builds[0].detail == "the series does not apply"


def test_compile_default_follows_the_toolchain(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert compile_available(["cuda-sm90"]) is False
    assert compile_available(["cpu"]) is True
    nvcc = tmp_path / "nvcc"
    nvcc.write_text("#!/bin/sh\n")
    nvcc.chmod(0o755)
    assert compile_available(["cuda-sm90", "cuda-sm121"]) is True
    nvcc.unlink()
    if platform.system() == "Linux":      # the registry toolchain needs no nvcc here
        assert compile_available(["cuda-sm90"], toolchain="pypi") is True
        assert compile_available(["cuda-sm90"], toolchain="auto") is True
    assert compile_available(["cuda-sm90"], toolchain="system") is False


def test_nightly_builds_with_the_toolchain_it_is_given(upstream, tmp_path, monkeypatch):
    """`nightly --toolchain pypi` builds as `build --toolchain pypi` does."""
    from mlx_builder.errors import BuildError
    from mlx_builder.wheelbuild import wheel as wheel_mod
    seen = {}

    def fake_build(settings, tree, tset, out_dir, **kw):
        seen.update(kw, target=tset.spec)
        raise BuildError("stopped here")

    monkeypatch.setattr(wheel_mod, "build_wheel", fake_build)
    report = run_nightly(upstream.settings(), targets=["cuda-sm90"], do_compile=True,
                         report_dir=tmp_path / "r",
                         options=BuildOptions("pypi", 13, PLATFORMS["linux-aarch64"]))
    assert seen == {"target": "cuda-sm90", "toolchain": "pypi", "cuda_major": 13,
                    "target_platform": PLATFORMS["linux-aarch64"]}
    assert report.builds[0].status == "failed" and report.builds[0].detail == "stopped here"


@pytest.mark.parametrize("target, gpu, runs", [
    ("cuda-sm90", "sm_90", True),          # 90a on an H200
    ("cuda-sm121", "sm_90", False),
    ("cuda-sm121", "sm_121", True),
    ("cuda-sm120", "sm_121", False),       # 120a never runs on 12.1
    ("cuda-sm90,cuda-sm121", "sm_121", True),
    ("cuda-sm90", "none", False),
    ("cpu", "none", True),
    ("cpu", "sm_90", True),
])
def test_tests_run_only_where_a_gpu_runs_the_wheel(target, gpu, runs):
    host = detect_host(env={FAKE_GPU_ENV: gpu})
    reason = why_not_here(parse_targets(target, system="Linux"), host)
    assert (reason is None) == runs, reason


@pytest.mark.real_mlx
def test_real_mirror_main(tmp_path):
    mirror = os.environ.get("MLX_BUILDER_MLX_REPO")
    if not mirror:
        pytest.skip("set MLX_BUILDER_MLX_REPO to an MLX clone or mirror to run "
                    "the nightly against real upstream main")
    settings = Settings(mlx_repo=mirror, cache_dir=tmp_path / "cache", offline=True)
    report = run_nightly(settings, report_dir=tmp_path / "r")
    assert report.series is not None, report.error
    assert (tmp_path / "r" / REPORT_MD).is_file()
    assert all(p.state in ("applies", "conflicts", "upstream") for p in report.patches)
