"""SIGTERM and SIGHUP handled like Ctrl-C, and held back inside critical sections.

CI runners and ``timeout`` send SIGTERM, a closed terminal SIGHUP; by default
either kills Python on the spot, with no ``finally`` and no undo. ``install()``
(done by the CLI) turns them into ``Terminated``, a BaseException, so the
same undo paths that handle KeyboardInterrupt run.

Inside ``critical()`` SIGINT, SIGTERM and SIGHUP are only recorded: a git
command in flight always finishes (a Python exception raised mid-``wait``
would leave it running and writing the index behind the undo). The work
checks ``checkpoint()`` between steps, which raises the held signal; the undo
runs under ``shield()``, where checkpoints do not raise. A signal that came
while the last step ran is raised when the section ends.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from mlx_builder.errors import Terminated

HANDLED = (signal.SIGTERM, signal.SIGHUP)
_state: dict[str, Any] = {"depth": 0, "pending": None, "shield": 0}


def _raise(signum: int) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


def _handler(signum: int, frame: FrameType | None) -> None:
    if _state["depth"]:
        _state["pending"] = _state["pending"] or signum
        return
    _raise(signum)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def install() -> None:
    """SIGTERM/SIGHUP raise Terminated (call once, from the main thread)."""
    if _main_thread():
        for sig in HANDLED:
            signal.signal(sig, _handler)


def pending() -> int | None:
    return _state["pending"]


def checkpoint() -> None:
    """Raise the signal held since the critical section began, if any."""
    signum = _state["pending"]
    if signum and not _state["shield"]:
        _state["pending"] = None
        _raise(signum)


@contextmanager
def critical() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP until the next checkpoint()."""
    if not _main_thread():
        yield
        return
    saved = {}
    if _state["depth"] == 0:
        saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, *HANDLED)}
        for sig in saved:
            signal.signal(sig, _handler)
    _state["depth"] += 1
    try:
        yield
    finally:
        _state["depth"] -= 1
        if _state["depth"] == 0:
            for sig, old in saved.items():
                signal.signal(sig, old)
    if _state["depth"] == 0:
        checkpoint()


@contextmanager
def shield() -> Iterator[None]:
    """Checkpoints inside do not raise (for undo code)."""
    _state["shield"] += 1
    try:
        yield
    finally:
        _state["shield"] -= 1
