"""Terminal output: one rich console, progress bars, and tables."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

console = Console(stderr=False, highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def progress(description: str, total: float | None = None
             ) -> Iterator[tuple[Progress, TaskID]]:
    """A progress bar on stderr; ``total=None`` shows a spinner."""
    prog = Progress(
        SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
        MofNCompleteColumn(), TimeElapsedColumn(), console=err_console,
        transient=not sys.stderr.isatty(), disable=False)
    with prog:
        task = prog.add_task(description, total=total)
        yield prog, task
