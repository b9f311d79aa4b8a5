"""The logging layer: the CLI's -v / -q / --log-file, library modules'
records reaching the terminal and the file at the right levels."""

from __future__ import annotations

import logging

import pytest
from click.testing import CliRunner

from mlx_builder import logs
from mlx_builder.cli import cli
from mlx_builder.console import console
from mlx_builder.process import StepRunner


@pytest.fixture(autouse=True)
def _reset():
    yield
    logs.configure()            # back to the default for the other tests


def _terminal_level() -> int:
    root = logging.getLogger(logs.LOGGER)
    return next(h.level for h in root.handlers if getattr(h, logs._OURS, False)
                and not isinstance(h, logging.FileHandler))


@pytest.mark.parametrize("verbose,quiet,level", [
    (0, False, logging.WARNING), (1, False, logging.INFO), (2, False, logging.DEBUG),
    (5, False, logging.DEBUG), (0, True, logging.ERROR)])
def test_levels(verbose, quiet, level):
    logs.configure(verbose, quiet)
    assert _terminal_level() == level
    assert console.quiet is quiet


def test_configure_twice_keeps_one_handler_each(tmp_path):
    logs.configure(1, log_file=tmp_path / "a.log")
    logs.configure(1, log_file=tmp_path / "b.log")
    ours = [h for h in logging.getLogger(logs.LOGGER).handlers if getattr(h, logs._OURS, False)]
    assert len(ours) == 2


def test_log_file_gets_every_step_at_debug(tmp_path):
    """A step run by StepRunner is logged (command, log path, exit, time) to
    the --log-file even when the terminal shows warnings only."""
    log_file = tmp_path / "logs" / "run.log"
    logs.configure(0, False, log_file)
    StepRunner(tmp_path / "steps").run("hello", ["sh", "-c", "echo hi"])
    logging.getLogger("mlx_builder.source.gitops").debug("git status (in /x)")
    text = log_file.read_text()
    assert "step hello: sh -c echo hi" in text and "exit 0 after" in text
    assert "DEBUG mlx_builder.source.gitops: git status (in /x)" in text


def test_cli_takes_the_global_options(tmp_path):
    runner = CliRunner()
    log_file = tmp_path / "x.log"
    res = runner.invoke(cli, ["-vv", "--log-file", str(log_file), "status", "--help"])
    assert res.exit_code == 0, res.output
    assert _terminal_level() == logging.DEBUG and log_file.exists()
    res = runner.invoke(cli, ["-v", "-q", "status", "--help"])
    assert res.exit_code != 0 and "-v and -q together" in str(res.exception)
