"""A wheel's .dist-info files (METADATA, WHEEL, RECORD), found and read one
way by every command: the member is ``<name>-<version>.dist-info/<file>`` at
the top of the archive, never one of a vendored package deeper inside.

Neutral ground: the build, the index and install read wheels through it.
"""

from __future__ import annotations

import os
import zipfile
from email.message import Message
from email.parser import HeaderParser
from typing import Literal, overload

from mlx_builder.errors import WheelError


def member(zf: zipfile.ZipFile, file: str) -> str | None:
    """The archive name of the top-level ``*.dist-info/<file>``, or None."""
    suffix = f".dist-info/{file}"
    return next((n for n in zf.namelist() if n.count("/") == 1 and n.endswith(suffix)), None)


@overload
def read_text(wheel: str | os.PathLike, file: str, *,
              required: Literal[True] = ...) -> str: ...
@overload
def read_text(wheel: str | os.PathLike, file: str, *, required: bool) -> str | None: ...


def read_text(wheel: str | os.PathLike, file: str, *, required: bool = True) -> str | None:
    """The text of the wheel's ``*.dist-info/<file>``. A file that is not a
    readable zip is a WheelError; a missing member is one too unless
    ``required`` is False (then None)."""
    name = os.path.basename(wheel)
    try:
        with zipfile.ZipFile(wheel) as zf:
            found = member(zf, file)
            if found is None:
                if not required:
                    return None
                raise WheelError(f"{name} has no .dist-info/{file}",
                                 "every wheel carries one at the top of the archive",
                                 "rebuild the wheel; this file is not a complete wheel")
            return zf.read(found).decode("utf-8", "replace")
    except (OSError, zipfile.BadZipFile) as exc:
        raise WheelError(f"{name} is not a readable wheel", str(exc),
                         "rebuild it or fetch it again") from None


@overload
def metadata(wheel: str | os.PathLike, *, required: Literal[True] = ...) -> Message: ...
@overload
def metadata(wheel: str | os.PathLike, *, required: bool) -> Message | None: ...


def metadata(wheel: str | os.PathLike, *, required: bool = True) -> Message | None:
    """The wheel's METADATA headers (Version, Requires-Dist, Requires-Python)."""
    text = read_text(wheel, "METADATA", required=required)
    return None if text is None else HeaderParser().parsestr(text)
