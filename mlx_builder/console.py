"""Terminal output: one rich console, progress, and tables.

On a terminal a progress bar redraws in place. In a pipe or a CI log it
cannot, so ``progress`` prints a plain line instead when the step starts,
when its description changes, and at least every ``PROGRESS_EVERY_S``
seconds while it runs (``done/total`` and the elapsed time), so that a
40-minute build shows it is alive. Tables printed with ``print_table`` keep
their natural width in a pipe (no cut or folded cells), whatever the width
of the terminal that is not there.
"""

from __future__ import annotations

import contextlib
import copy
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

console = Console(stderr=False, highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

PROGRESS_ENV = "MLX_BUILDER_PROGRESS_EVERY"     # seconds between plain progress lines
PROGRESS_EVERY_S = 60.0


def print_table(table: Table, out: Console | None = None) -> None:
    """A table on a terminal as rich draws it; in a pipe at its natural width."""
    out = out or console
    if out.is_terminal:
        out.print(table)
        return
    # rich wraps the title at the table's width: a title wider than the
    # columns (a wheel's file name) widens the table instead.
    title = len(str(table.title)) if table.title else 0
    if title > (table.min_width or 0):
        table = copy.copy(table)
        table.min_width = title
    width = max(Console(width=100_000).measure(table).maximum, 20)
    wide = Console(file=out.file, width=width, highlight=False, soft_wrap=False,
                   color_system=None, force_terminal=False)
    wide.print(table)


class LineProgress:
    """The part of rich's Progress that the commands use, printing lines."""

    def __init__(self, out: Console, every: float) -> None:
        self.out, self.every = out, every
        self.tasks: dict[TaskID, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._tick, daemon=True)

    def __enter__(self) -> LineProgress:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        for task in self.tasks:
            self._line(task, "finished")

    def add_task(self, description: str, total: float | None = None, **_: Any) -> TaskID:
        task = TaskID(len(self.tasks))
        self.tasks[task] = {"description": description, "total": total, "completed": 0.0,
                            "start": time.monotonic(), "last": 0.0}
        self._line(task, "started")
        return task

    def update(self, task: TaskID, *, description: str | None = None,
               completed: float | None = None, total: float | None = None,
               advance: float | None = None, **_: Any) -> None:
        with self.lock:
            state = self.tasks[task]
            changed = description is not None and description != state["description"]
            if description is not None:
                state["description"] = description
            if total is not None:
                state["total"] = total
            if completed is not None:
                state["completed"] = completed
            if advance is not None:
                state["completed"] += advance
        if changed:
            self._line(task)

    def advance(self, task: TaskID, advance: float = 1) -> None:
        self.update(task, advance=advance)

    def _tick(self) -> None:
        while not self.stop.wait(min(self.every, 5.0)):
            now = time.monotonic()
            for task, state in list(self.tasks.items()):
                if now - state["last"] >= self.every:
                    self._line(task)

    def _line(self, task: TaskID, note: str = "") -> None:
        with self.lock:
            state = self.tasks[task]
            state["last"] = time.monotonic()
            took = int(state["last"] - state["start"])
            done = (f" {int(state['completed'])}/{int(state['total'])}"
                    if state["total"] else "")
        self.out.print(f"[{took // 60}:{took % 60:02d}] {state['description']}{done}"
                       + (f" ({note})" if note else ""), markup=False, highlight=False)


def _every() -> float:
    try:
        return max(float(os.environ.get(PROGRESS_ENV, PROGRESS_EVERY_S)), 0.1)
    except ValueError:
        return PROGRESS_EVERY_S


@contextlib.contextmanager
def progress(description: str, total: float | None = None
             ) -> Iterator[tuple[Any, TaskID]]:
    """A progress bar on stderr (``total=None`` shows a spinner); plain,
    periodic lines when stderr is not a terminal."""
    if not err_console.is_terminal:
        with LineProgress(err_console, _every()) as lines:
            yield lines, lines.add_task(description, total=total)
        return
    prog = Progress(
        SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
        MofNCompleteColumn(), TimeElapsedColumn(), console=err_console)
    with prog:
        task = prog.add_task(description, total=total)
        yield prog, task
