"""StepRunner: per-step log files, failure messages, live logs."""

from __future__ import annotations

import sys

import pytest

from mlx_builder.errors import BuildError, ToolchainError
from mlx_builder.process import StepRunner, first_error_line


def test_steps_log_to_numbered_files(tmp_path):
    runner = StepRunner(tmp_path / "logs")
    a = runner.run("configure", [sys.executable, "-c", "print('one')"])
    b = runner.run("compile step", [sys.executable, "-c", "print('two')"])
    assert a.log_path.name == "01-configure.log"
    assert b.log_path.name == "02-compile-step.log"
    assert "one" in a.log_path.read_text() and a.returncode == 0
    assert b.output_tail.strip() == "two"


def test_failure_names_step_first_error_and_log(tmp_path):
    runner = StepRunner(tmp_path)
    script = "print('ok line'); print('foo.cu(3): error: bad thing'); raise SystemExit(2)"
    with pytest.raises(BuildError) as info:
        runner.run("build", [sys.executable, "-c", script])
    err = info.value
    assert "step 'build' failed with exit code 2" in err.what
    assert "foo.cu(3): error: bad thing" in err.what
    assert str(tmp_path / "01-build.log") in err.why


def test_missing_program_uses_the_given_error_class(tmp_path):
    with pytest.raises(ToolchainError) as info:
        StepRunner(tmp_path).run("cmake", ["definitely-not-a-program-xyz"],
                                 error_cls=ToolchainError, hint="install it")
    assert "not found" in info.value.what and info.value.next_step == "install it"


def test_log_is_readable_while_the_step_runs(tmp_path):
    runner = StepRunner(tmp_path)
    seen = []

    def on_line(line):
        # Called after the line was written: it must already be in the file.
        seen.append(line in (tmp_path / "01-live.log").read_text())
    # The printed text is built at run time so the command line logged at
    # the top of the file does not contain it.
    runner.run("live", [sys.executable, "-u", "-c",
                        "print('li' + 'ne1'); print('li' + 'ne2')"],
               on_line=on_line)
    assert seen == [True, True]


def test_env_is_passed_and_check_false_returns_code(tmp_path):
    res = StepRunner(tmp_path).run(
        "env", [sys.executable, "-c", "import os,sys; print(os.environ['MLXB_X']); sys.exit(3)"],
        env={"MLXB_X": "hello"}, check=False)
    assert res.returncode == 3 and "hello" in res.output_tail


def test_first_error_line_falls_back_to_last_line():
    assert first_error_line("a\nb\n\n") == "b"
    assert first_error_line("x\nCMake Error at y\nz") == "CMake Error at y"
