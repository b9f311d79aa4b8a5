"""Writing outputs a user keeps: checks before the work, staged files, and
the leftovers of runs that were killed.

A file is written under a hidden name beside its destination
(``.<name>.part-<random>``) and renamed over it, so a reader sees the old
file or the new one, never a half. A group of files that only make sense
together (a bundle and its ``.sha256``; a patch series and SHA256SUMS) is
all staged first; only when every one is written do the renames run. The
caller holds the output's lock, so the leftovers of a killed run (hidden
``.part-`` files) can be removed at the start of the next one.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from mlx_builder import faults
from mlx_builder.errors import FileSystemError

PART = ".part-"


def part_prefix(dest: Path) -> str:
    return f".{Path(dest).name}{PART}"


def remove_leftovers(dest: Path) -> list[Path]:
    """Delete the staged files a killed run left beside ``dest`` (its lock held)."""
    dest = Path(dest)
    found = sorted(dest.parent.glob(part_prefix(dest) + "*")) if dest.parent.is_dir() else []
    for path in found:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return found


def stage_path(dest: Path) -> Path:
    """A new, empty hidden file beside ``dest`` to write it into."""
    dest = Path(dest)
    try:
        fd, name = tempfile.mkstemp(prefix=part_prefix(dest), dir=dest.parent)
    except OSError as exc:
        raise disk_error(exc, f"cannot write into {dest.parent}") from None
    os.close(fd)
    return Path(name)


def stage_bytes(dest: Path, data: bytes) -> Path:
    path = stage_path(dest)
    try:
        path.write_bytes(data)
    except OSError as exc:
        path.unlink(missing_ok=True)
        raise disk_error(exc, f"cannot write {dest}") from None
    return path


def commit(staged: Iterable[tuple[Path, Path]], remove_first: Iterable[Path] = ()) -> None:
    """Rename each staged file over its destination. ``remove_first`` are
    files that describe the old destinations (a sidecar hash): they go before
    any rename, so no moment pairs a new file with an old description."""
    for path in remove_first:
        Path(path).unlink(missing_ok=True)
    for number, (tmp, dest) in enumerate(staged):
        os.replace(tmp, dest)
        if number == 0:
            faults.point("between-renames")


def discard(staged: Iterable[tuple[Path, Path]]) -> None:
    for tmp, _ in staged:
        Path(tmp).unlink(missing_ok=True)


@contextmanager
def staging(what: str) -> Iterator[list[tuple[Path, Path]]]:
    """A list to append ``(staged, destination)`` pairs to inside the block.
    If the block fails, every staged file is removed and the destinations
    stay as they were; an OSError becomes a FileSystemError about ``what``."""
    staged: list[tuple[Path, Path]] = []
    try:
        yield staged
    except OSError as exc:
        discard(staged)
        raise disk_error(exc, what) from None
    except BaseException:
        discard(staged)
        raise


# errno values that say the disk or its permissions refused a write, not
# that the input or the program is at fault
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_DENIED_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


def is_disk_error(exc: OSError) -> bool:
    """Whether ``exc`` is the disk's or its permissions' refusal (disk_error
    has advice for it)."""
    return exc.errno in _FULL_ERRNOS | _DENIED_ERRNOS


def disk_error(exc: OSError, what: str) -> FileSystemError:
    """A FileSystemError for an OSError met while writing ``what``."""
    why = exc.strerror or str(exc)
    if exc.errno in _FULL_ERRNOS:
        return FileSystemError(what, f"the disk is full ({why})",
                               "free some space (or point the output elsewhere) and run again")
    if exc.errno in _DENIED_ERRNOS:
        return FileSystemError(what, why, "check the folder's permissions, or choose another")
    return FileSystemError(what, why, "check the path and run again")


def check_out_dir(folder: Path, what: str, need_bytes: int = 0) -> Path:
    """``folder`` is a folder that takes new files, or can be made (it is not
    made here: a run that fails leaves nothing behind), and its disk has
    ``need_bytes`` free: checked before long work whose result goes there."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise FileSystemError(f"{what} {folder} is not a folder", "a file has that name",
                              "pass a folder (it is created), or remove the file")
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise FileSystemError(f"cannot create {what} {folder}", f"{existing} is a file",
                              "pass a folder you can write to")
    if existing == folder:
        try:
            fd, probe = tempfile.mkstemp(prefix=".mlxb-probe-", dir=folder)
        except OSError as exc:
            raise FileSystemError(f"cannot write into {what} {folder}",
                                  exc.strerror or str(exc),
                                  "pass a folder you can write to (check its permissions)"
                                  ) from None
        os.close(fd)
        os.unlink(probe)
    elif not os.access(existing, os.W_OK | os.X_OK):
        raise FileSystemError(f"cannot create {what} {folder}",
                              f"{existing} does not take new folders (permissions or a "
                              "read-only file system)",
                              "pass a folder you can write to")
    if need_bytes:
        free = shutil.disk_usage(existing).free
        if free < need_bytes:
            raise FileSystemError(
                f"{what} {folder} has {free / 2**20:.0f} MiB free",
                f"the output needs about {need_bytes / 2**20:.0f} MiB",
                "free some space, or pass a folder on another disk")
    return folder
