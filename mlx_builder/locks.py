"""Locks (filelock) on what two runs must not write at once: a work tree, a
build folder, the mirror, a bundle's unpack folder, an output file (a bundle
``--out``, an index folder's listing), a dependency cache entry.

A second run waits, saying what for, or with ``--no-wait``
(``Settings.no_wait``) fails at once with LockError. Locks are re-entrant
within one process (a build holds its tree's lock while it applies the
series): one FileLock object per lock file, shared.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from filelock import FileLock, Timeout

from mlx_builder.console import err_console
from mlx_builder.errors import FileSystemError, LockError

if TYPE_CHECKING:
    from mlx_builder.settings import Settings

_LOCKS: dict[str, FileLock] = {}
_GUARD = threading.Lock()


def _lock_for(path: Path) -> FileLock:
    key = str(path)
    with _GUARD:
        if key not in _LOCKS:
            _LOCKS[key] = FileLock(key, thread_local=False)
        return _LOCKS[key]


@contextmanager
def hold(lock_file: Path, what: str, no_wait: bool = False) -> Iterator[None]:
    """Hold ``lock_file`` while the block runs; ``what`` names the resource."""
    lock_file = Path(lock_file)
    try:
        lock_file.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FileSystemError(f"cannot create the lock folder {lock_file.parent}",
                              exc.strerror or str(exc),
                              "check the cache/work directory's permissions, or "
                              "pass --cache-dir/--work-dir") from None
    lock = _lock_for(lock_file.resolve())
    try:
        try:
            lock.acquire(timeout=0)
        except Timeout:
            if no_wait:
                raise LockError(f"{what} is in use by another mlx-builder run",
                                f"lock {lock_file} is held",
                                "wait for that run to finish, or run without "
                                "--no-wait to wait for it") from None
            err_console.print(f"waiting for {what}: another mlx-builder run holds "
                              f"{lock_file} …", markup=False)
            lock.acquire()
    except OSError as exc:
        raise FileSystemError(f"cannot take the lock {lock_file}",
                              exc.strerror or str(exc),
                              "check the folder's permissions") from None
    try:
        yield
    finally:
        lock.release()


def path_key(path: Path) -> str:
    """A file-name-safe key for an absolute path."""
    resolved = str(Path(path).resolve())
    name = Path(resolved).name or "root"
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:40]
    return f"{safe}-{hashlib.sha256(resolved.encode()).hexdigest()[:16]}"


def tree_lock(settings: Settings, path: Path) -> AbstractContextManager[None]:
    """The lock of the work tree at ``path`` (under the cache's locks folder:
    the tree itself may not exist yet)."""
    return hold(settings.cache_dir / "locks" / f"tree-{path_key(path)}.lock",
                f"work tree {Path(path)}", settings.no_wait)


def beside(path: Path, what: str, no_wait: bool) -> AbstractContextManager[None]:
    """The lock of ``path`` (a folder or a file made whole), kept beside it
    as ``.<name>.lock``."""
    path = Path(path)
    return hold(path.parent / f".{path.name}.lock", what, no_wait)


def build_lock(settings: Settings, folder: Path) -> AbstractContextManager[None]:
    return beside(folder, f"build folder {folder}", settings.no_wait)


def mirror_lock(settings: Settings) -> AbstractContextManager[None]:
    return hold(settings.cache_dir / "locks" / "mirror.lock",
                f"the MLX mirror {settings.mirror_dir}", settings.no_wait)


def bundle_lock(settings: Settings, folder: Path) -> AbstractContextManager[None]:
    return beside(folder, f"bundle folder {folder}", settings.no_wait)


def output_lock(settings: Settings, path: Path) -> AbstractContextManager[None]:
    """The lock of an output file (a bundle, an index's listing), beside it."""
    return beside(path, f"output {path}", settings.no_wait)


def deps_lock(settings: Settings, entry: Path) -> AbstractContextManager[None]:
    """The lock of one dependency cache entry (``<cache>/deps/<name>-<pin>``)."""
    entry = Path(entry)
    return hold(settings.cache_dir / "locks" / f"dep-{entry.name}.lock",
                f"dependency cache entry {entry}", settings.no_wait)


def patches_lock(settings: Settings, root: Path) -> AbstractContextManager[None]:
    """The lock of a patches folder while export writes it (kept in the
    cache, not among the patches)."""
    return hold(settings.cache_dir / "locks" / f"patches-{path_key(root)}.lock",
                f"the patches folder {root}", settings.no_wait)
