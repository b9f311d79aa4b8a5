"""Run subprocesses as named steps, each with its own log file.

A step's full output goes to ``<log_dir>/<NN>-<step>.log``. On failure the
error names the step, the first line that looks like an error, and the log
path. Long steps can report progress through a callback that sees each line.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from mlx_builder.errors import BuildError, MlxBuilderError

logger = logging.getLogger(__name__)

_ERROR_LINE = re.compile(
    r"(\berror\b|\bError\b|FAILED|fatal:|CMake Error|undefined reference|"
    r"No such file or directory|Traceback)")


@dataclass(frozen=True)
class StepResult:
    step: str
    returncode: int
    log_path: Path
    seconds: float
    output_tail: str


def first_error_line(text: str) -> str:
    for line in text.splitlines():
        if _ERROR_LINE.search(line):
            return line.strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


class StepRunner:
    """Runs commands as numbered steps that log to ``log_dir``."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._count = len(list(self.log_dir.glob("*.log")))

    def log_path(self, step: str) -> Path:
        self._count += 1
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", step).strip("-") or "step"
        return self.log_dir / f"{self._count:02d}-{safe}.log"

    def run(self, step: str, cmd: Sequence[str | os.PathLike], *,
            cwd: Path | None = None, env: Mapping[str, str] | None = None,
            on_line: Callable[[str], None] | None = None,
            check: bool = True,
            error_cls: type[MlxBuilderError] = BuildError,
            hint: str = "") -> StepResult:
        path = self.log_path(step)
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        argv = [str(c) for c in cmd]
        logger.info("step %s: %s (log %s)", step, " ".join(argv), path)
        start = time.monotonic()
        tail: list[str] = []
        # Line-buffered: the log shows progress while a long step runs.
        with path.open("w", encoding="utf-8", errors="replace",
                       buffering=1) as log:
            log.write(f"$ {' '.join(argv)}\n")
            if cwd:
                log.write(f"# cwd: {cwd}\n")
            log.flush()
            try:
                proc = subprocess.Popen(
                    argv, cwd=cwd, env=full_env, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, text=True, errors="replace",
                    bufsize=1)
            except FileNotFoundError:
                raise error_cls(
                    f"step '{step}' could not start: {argv[0]} not found",
                    "the program is not installed or not on PATH",
                    hint or "install it, or run `mlx-builder doctor`",
                ) from None
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                tail.append(line)
                if len(tail) > 400:
                    del tail[:200]
                if on_line is not None:
                    on_line(line.rstrip("\n"))
            rc = proc.wait()
        seconds = time.monotonic() - start
        logger.info("step %s: exit %d after %.1f s", step, rc, seconds)
        result = StepResult(step, rc, path, seconds, "".join(tail))
        if check and rc != 0:
            full = path.read_text(encoding="utf-8", errors="replace")
            raise error_cls(
                f"step '{step}' failed with exit code {rc}: {first_error_line(full)}",
                f"full log: {path}",
                hint or "read the log, fix the cause and run the command again",
            )
        return result
