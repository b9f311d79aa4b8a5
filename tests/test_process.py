"""process.py: run (captured, typed errors), stream (line by line) and
StepRunner (per-step log files, failure messages, live logs)."""

from __future__ import annotations

import logging
import sys
import time

import pytest

from mlx_builder.errors import BuildError, ToolchainError, WheelError
from mlx_builder.process import StepRunner, first_error_line, run, stream, tail


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


def test_run_captures_output_and_logs_the_command(caplog):
    with caplog.at_level(logging.DEBUG, logger="mlx_builder"):
        res = run([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr)"])
    assert res.ok and res.stdout == "out\n" and res.stderr == "err\n"
    assert any(r.getMessage().startswith(f"run: {sys.executable} -c") for r in caplog.records)


def test_run_failure_raises_the_given_class_with_command_and_stderr_tail(tmp_path):
    script = "import sys; [print(f'line {i}', file=sys.stderr) for i in range(20)]; sys.exit(4)"
    with pytest.raises(WheelError) as info:
        run([sys.executable, "-c", script], error_cls=WheelError, what="patching failed",
            hint="try again", log=tmp_path / "step.log")
    err = info.value
    assert err.what == "patching failed" and err.next_step == "try again"
    assert "exited with code 4" in err.why and sys.executable in err.why
    assert "line 19" in err.why and "line 3 " not in err.why + " "   # the end only
    log = (tmp_path / "step.log").read_text()
    assert log.startswith(f"$ {sys.executable} -c") and "line 0" in log and "exit code 4" in log


def test_run_without_check_reports_missing_programs_and_timeouts():
    missing = run(["definitely-not-a-program-xyz", "--version"], check=False)
    assert not missing.ok and missing.returncode == 127 and "not found" in missing.failure
    slow = run([sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.2, check=False)
    assert slow.returncode == 127 and "did not finish in 0.2 s" in slow.failure
    with pytest.raises(ToolchainError, match="cc-xyz failed"):
        run(["cc-xyz"], error_cls=ToolchainError)


def test_run_passes_input_and_the_whole_environment():
    res = run([sys.executable, "-c", "import os, sys; print(sys.stdin.read(), os.environ.get('HOME'), "
               "os.environ['MLXB_Y'])"], input="piped", env={"MLXB_Y": "set", "PATH": "/usr/bin"})
    assert res.stdout.split() == ["piped", "None", "set"]


def test_stream_hands_over_lines_and_stops_when_asked(tmp_path):
    seen = []
    start = time.monotonic()
    rc = stream([sys.executable, "-u", "-c",
                 "import time\nfor i in range(100): print(i); time.sleep(0.05)"],
                lambda line: seen.append(line) or len(seen) < 3)
    assert seen == ["0\n", "1\n", "2\n"] and rc != 0 and time.monotonic() - start < 4
    with (tmp_path / "err.txt").open("w") as fh:
        rc = stream([sys.executable, "-c", "import sys; print('o'); print('e', file=sys.stderr)"],
                    seen.append, stderr=fh)
    assert rc == 0 and seen[-1] == "o\n" and (tmp_path / "err.txt").read_text() == "e\n"


def test_tail_keeps_the_last_lines_on_one_line():
    assert tail("a\n\nb\nc\n", lines=2) == "b | c"
    assert len(tail("x" * 2000)) == 600
