"""scripts/device_call.sh: the helpers device call scripts source."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HELPERS = ROOT / "scripts" / "device_call.sh"


def bash(script: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f". {HELPERS}\n{script}"], cwd=cwd,
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", **env})


def test_go_runs_steps_inside_the_budget():
    out = bash('budget_start 100; go "first" && echo ran').stdout
    assert out == "ran\n"


def test_go_skips_and_names_steps_past_the_budget():
    out = bash('budget_start 0; go "suite" && echo ran; echo after').stdout
    assert out == "skipped (past 0 s): suite\nafter\n"


def test_budget_from_the_environment_wins():
    out = bash('budget_start 100; go "x" && echo ran', BUDGET="0").stdout
    assert out.startswith("skipped (past 0 s): x")


def test_harness_build_leaves_no_library_when_nvcc_fails(tmp_path):
    if shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists():
        pytest.skip("no nvcc")
    src = tmp_path / "src"
    src.mkdir()
    (src / "harness.cu").write_text("#error not a harness\n")
    out = tmp_path / "lib"
    proc = bash(f"harness_build {src} {out}", PATH=os.environ["PATH"])
    assert proc.returncode != 0
    assert not (out / "libattn_harness.so").exists()
    assert not (out / "libattn_harness.so.part").exists()
    assert "not a harness" in (out / "build.txt").read_text()


def test_harness_bench_names_its_json_without_spaces(tmp_path):
    # A stand-in for torch's python: records its arguments, one per line.
    fake = tmp_path / "python"
    fake.write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$ARGS_OUT"\n')
    fake.chmod(0o755)
    args = tmp_path / "args.txt"
    proc = bash(f'budget_start 100; TP={fake}; H=h; '
                f'harness_bench {tmp_path} C_r1 lib.so "hopper cand13" 512 "8192 16384" 4 '
                f'--hkv 4 --q-len 2048', ARGS_OUT=str(args))
    assert proc.returncode == 0, proc.stderr
    argv = args.read_text().splitlines()
    assert argv[:2] == ["h/run.py", "bench"]
    assert argv[argv.index("--configs") + 1:argv.index("--lengths")] == ["hopper", "cand13"]
    assert argv[argv.index("--hkv") + 1] == "4"
    assert argv[argv.index("--q-len") + 1] == "2048"
    assert argv[-1] == f"{tmp_path}/C_r1_hopper-cand13_d512_8192-16384_hkv4qlen2048.json"


def test_harness_bench_skips_past_the_budget(tmp_path):
    proc = bash(f'budget_start 0; harness_bench {tmp_path} C lib.so hopper 256 8192 1; echo after')
    assert proc.stdout == "skipped (past 0 s): C hopper D256 8192 \nafter\n"
