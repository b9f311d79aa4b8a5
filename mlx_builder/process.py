"""The one way mlx-builder runs other programs (git aside: gitops.run_git).

* ``run``: a short command, its output captured. With ``check`` a failure
  raises the caller's error class (errors.py) naming the full command and
  the end of its stderr; without, the result says what happened.
* ``stream``: a long command whose stdout is read line by line as it comes
  (``StepRunner`` and the bench workers).
* ``StepRunner``: commands as named steps, each with its own log file. A
  step's full output goes to ``<log_dir>/<NN>-<step>.log``. On failure the
  error names the step, the first line that looks like an error, and the
  log path. Long steps can report progress through a callback that sees
  each line.

Every command is logged (``logging``, DEBUG; a step at INFO) before it runs.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

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


def command_line(argv: Sequence[str | os.PathLike]) -> str:
    """``argv`` as one shell-quoted line (for logs and error messages)."""
    return shlex.join(str(a) for a in argv)


def tail(text: str, lines: int = 5, chars: int = 600) -> str:
    """The last ``lines`` non-blank lines of ``text``, on one line (`` | ``
    between them), at most ``chars`` long."""
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
    joined = " | ".join(kept)
    return joined if len(joined) <= chars else "…" + joined[-(chars - 1):]


@dataclass(frozen=True)
class Completed:
    """A command ``run`` ran, or tried to."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    # why it did not run to its end: not found, not executable, timed out
    # (returncode is then 127, like a shell's "command not found")
    failure: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.failure

    @property
    def output(self) -> str:
        """stdout then stderr."""
        return self.stdout + self.stderr

    def describe(self) -> str:
        """What went wrong, with the full command: for an error's *why*."""
        line = command_line(self.argv)
        if self.failure:
            return f"`{line}`: {self.failure}"
        said = tail(self.stderr) or tail(self.stdout)
        return f"`{line}` exited with code {self.returncode}" + (f": {said}" if said else "")


def run(cmd: Sequence[str | os.PathLike], *, cwd: Path | str | None = None,
        env: Mapping[str, str] | None = None, input: str | None = None,
        timeout: float | None = None, check: bool = True,
        error_cls: type[MlxBuilderError] = BuildError, what: str = "", hint: str = "",
        log: Path | None = None) -> Completed:
    """Run ``cmd`` to its end and capture its output (text; undecodable bytes
    replaced).

    ``env`` is the whole environment (default: this process's). ``log``
    appends the command and its output to that file (a step log). With
    ``check`` (the default) a command that fails, cannot start or outlives
    ``timeout`` raises ``error_cls(what, <the command and the end of its
    stderr>, hint)``; ``what`` defaults to "<program> failed". Without
    ``check`` the returned ``Completed`` says what happened."""
    argv = tuple(str(c) for c in cmd)
    line = command_line(argv)
    logger.debug("run: %s%s", line, f" (in {cwd})" if cwd else "")
    start = time.monotonic()
    failure = ""
    try:
        proc = subprocess.run(argv, cwd=cwd, env=None if env is None else dict(env),
                              input=input, capture_output=True, text=True,
                              errors="replace", timeout=timeout)
        result = Completed(argv, proc.returncode, proc.stdout, proc.stderr)
    except FileNotFoundError:
        failure = f"{argv[0]} not found"
    except subprocess.TimeoutExpired:
        failure = f"did not finish in {timeout:g} s"
    except OSError as exc:
        failure = f"cannot run {argv[0]}: {exc.strerror or exc}"
    if failure:
        result = Completed(argv, 127, "", "", failure)
    logger.debug("run: %s: %s after %.1f s", argv[0],
                 failure or f"exit {result.returncode}", time.monotonic() - start)
    if log is not None:
        with Path(log).open("a", encoding="utf-8", errors="replace") as fh:
            fh.write(f"$ {line}\n" + (f"# cwd: {cwd}\n" if cwd else "")
                     + result.output + (f"# {failure}\n" if failure else "")
                     + f"# exit code {result.returncode}\n")
    if check and not result.ok:
        raise error_cls(what or f"{Path(argv[0]).name} failed", result.describe(), hint)
    return result


def stream(cmd: Sequence[str | os.PathLike], on_line: Callable[[str], bool | None], *,
           cwd: Path | str | None = None, env: Mapping[str, str] | None = None,
           stderr: IO[str] | None = None) -> int:
    """Run ``cmd``, handing ``on_line`` each line of its stdout (newline kept)
    as it comes; its exit code. stderr joins stdout unless ``stderr`` is a
    file to write it to. ``on_line`` returning False stops the command (it
    is killed; the code is then negative). ``env`` is the whole environment
    (default: this process's). A program that cannot start raises OSError
    (FileNotFoundError when it is not there), as ``subprocess`` does; an
    exception out of ``on_line`` (Ctrl-C included) kills the command first."""
    argv = [str(c) for c in cmd]
    logger.debug("stream: %s%s", command_line(argv), f" (in {cwd})" if cwd else "")
    proc = subprocess.Popen(
        argv, cwd=cwd, env=None if env is None else dict(env), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if stderr is None else stderr, text=True,
        errors="replace", bufsize=1)
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if on_line(line) is False:
                proc.kill()
                break
    except BaseException:       # Ctrl-C, Terminated, on_line's own error:
        proc.kill()             # no command left running behind us
        proc.wait()
        raise
    finally:
        proc.stdout.close()
    return proc.wait()


class StepRunner:
    """Runs commands as numbered steps that log to ``log_dir``."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._count = len(list(self.log_dir.glob("*.log")))
        # run() may be called from several threads (test parts in shards):
        # each step still gets a number of its own.
        self._lock = threading.Lock()

    def log_path(self, step: str) -> Path:
        with self._lock:
            self._count += 1
            number = self._count
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", step).strip("-") or "step"
        return self.log_dir / f"{number:02d}-{safe}.log"

    def run(self, step: str, cmd: Sequence[str | os.PathLike], *,
            cwd: Path | None = None, env: Mapping[str, str] | None = None,
            on_line: Callable[[str], bool | None] | None = None,
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
        last: list[str] = []
        # Line-buffered: the log shows progress while a long step runs.
        with path.open("w", encoding="utf-8", errors="replace",
                       buffering=1) as log:
            log.write(f"$ {' '.join(argv)}\n")
            if cwd:
                log.write(f"# cwd: {cwd}\n")
            log.flush()

            def seen(line: str) -> bool | None:
                log.write(line)
                last.append(line)
                if len(last) > 400:
                    del last[:200]
                # on_line returning False stops the command (as in stream)
                return on_line(line.rstrip("\n")) if on_line is not None else None

            try:
                rc = stream(argv, seen, cwd=cwd, env=full_env)
            except FileNotFoundError:
                raise error_cls(
                    f"step '{step}' could not start: {argv[0]} not found",
                    "the program is not installed or not on PATH",
                    hint or "install it, or run `mlx-builder doctor`",
                ) from None
        seconds = time.monotonic() - start
        logger.info("step %s: exit %d after %.1f s", step, rc, seconds)
        result = StepResult(step, rc, path, seconds, "".join(last))
        if check and rc != 0:
            full = path.read_text(encoding="utf-8", errors="replace")
            raise error_cls(
                f"step '{step}' failed with exit code {rc}: {first_error_line(full)}",
                f"full log: {path}",
                hint or "read the log, fix the cause and run the command again",
            )
        return result
