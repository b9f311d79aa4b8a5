"""Kill points, for the tests of what a killed run leaves behind.

``MLX_BUILDER_KILL_AT=<point>`` makes the process kill itself with SIGKILL
(nothing runs after it: no ``finally``, no handler) the first time it
reaches ``point(<point>)``. Unset, a point costs one dictionary lookup.
Points: ``between-renames`` (outputs.commit, after its first rename),
``dep-fetched`` (a dependency written to its scratch folder, not yet
renamed into the cache), ``bundle-unpacked`` (a bundle unpacked into its
scratch folder, not yet verified).
"""

from __future__ import annotations

import os
import signal

ENV = "MLX_BUILDER_KILL_AT"


def point(name: str) -> None:
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
