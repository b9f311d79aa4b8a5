"""Logging for the whole tool.

Library modules log through ``logging.getLogger(__name__)`` (all under the
``mlx_builder`` logger); only commands print. The CLI's global options set
this up once: ``-v`` shows INFO (each step and git command as it starts and
how long it took), ``-vv`` DEBUG, ``-q`` only errors and no command output
beyond them, ``--log-file PATH`` keeps everything at DEBUG with times. A
subprocess's own output still goes to its step log (process.py).
"""

from __future__ import annotations

import logging
from pathlib import Path

from rich.logging import RichHandler

from mlx_builder.console import console, err_console

LOGGER = "mlx_builder"
_OURS = "_mlx_builder_handler"
LEVELS = (logging.WARNING, logging.INFO, logging.DEBUG)


def level_for(verbose: int, quiet: bool) -> int:
    """The terminal's level: errors only with --quiet, else WARNING, INFO
    (-v) or DEBUG (-vv and more)."""
    if quiet:
        return logging.ERROR
    return LEVELS[min(max(verbose, 0), len(LEVELS) - 1)]


def configure(verbose: int = 0, quiet: bool = False, log_file: Path | None = None) -> None:
    """(Re)configure the tool's logger; safe to call more than once."""
    root = logging.getLogger(LOGGER)
    for handler in [h for h in root.handlers if getattr(h, _OURS, False)]:
        root.removeHandler(handler)
        handler.close()
    root.setLevel(logging.DEBUG)
    root.propagate = False
    term = RichHandler(console=err_console, show_time=False, show_path=False,
                       markup=False, rich_tracebacks=False)
    term.setLevel(level_for(verbose, quiet))
    setattr(term, _OURS, True)
    root.addHandler(term)
    if log_file is not None:
        log_file = Path(log_file)
        log_file.parent.mkdir(parents=True, exist_ok=True)
        file_handler = logging.FileHandler(log_file, encoding="utf-8")
        file_handler.setLevel(logging.DEBUG)
        file_handler.setFormatter(logging.Formatter(
            "%(asctime)s %(levelname)s %(name)s: %(message)s"))
        setattr(file_handler, _OURS, True)
        root.addHandler(file_handler)
    # --quiet also silences what commands print (tables, summaries); errors
    # go through err_console, which stays on.
    console.quiet = quiet
