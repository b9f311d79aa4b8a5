"""Console output in a pipe: plain progress lines and tables at full width."""

from __future__ import annotations

import io
import time

from rich.console import Console
from rich.table import Table
from rich.text import Text

from mlx_builder import console as con
from mlx_builder.wheelbuild.wheel import Tracker


def test_plain_progress_lines_when_stderr_is_not_a_terminal(monkeypatch, capsys):
    """A CI log gets a line at the start, at each phase and every N seconds."""
    monkeypatch.setenv(con.PROGRESS_ENV, "0.2")
    with con.progress("mlx cpu") as (prog, task):
        track = Tracker(prog, task)
        track("running bdist_wheel")              # before the compile: not packaging yet
        track("-- Configuring done (1.2s)")
        track("[3/120] Building CXX object x.o")
        time.sleep(0.5)
        track("[120/120] Linking CXX shared library libmlx.so")
        track("running bdist_wheel")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].endswith("mlx cpu (started)") and "compiling" in lines[1]
    assert any(line.endswith("compiling 3/120") for line in lines), lines
    assert lines[-2].endswith("packaging 120/120") and lines[-1].endswith("(finished)")
    assert not any("packaging" in line for line in lines[:2])


def test_a_piped_table_keeps_its_natural_width():
    """No cut cells, no folding to an assumed 80 or 160 columns."""
    long = "mlx-0.32.2+mlxb.846d176227a0.1f3a9c0e.cu13.121a-cp312-cp312-manylinux_2_28_aarch64.whl"
    detail = "conflicts at mlx/backend/cuda/scaled_dot_product_attention.cu:412 (hunk 3) " * 3
    table = Table("wheel", "detail")
    table.add_row(Text(long), Text(detail))
    out = io.StringIO()
    con.print_table(table, Console(file=out, width=80, force_terminal=False))
    text = out.getvalue()
    assert long in text and detail.strip() in text
    assert max(len(line) for line in text.splitlines()) > 200


def test_a_piped_table_title_wider_than_its_columns_stays_on_one_line():
    title = "mlx-builder test mlx-0.32.2+mlxb.846d176227a0.1f3a9c0e.cu13.121a-cp312-cp312-linux_aarch64.whl"
    table = Table("part", "result", title=title)
    table.add_row("sdpa", "passed")
    out = io.StringIO()
    con.print_table(table, Console(file=out, width=80, force_terminal=False))
    assert title in out.getvalue().splitlines()[0]
