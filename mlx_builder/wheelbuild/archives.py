"""Archives and source trees: safe extraction, downloads, content hashes."""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import urllib.request
import zipfile
from pathlib import Path

from mlx_builder.errors import DepsError, FetchError

META = ".mlxb-dep.json"        # a cache entry's record; not part of its content


def download(url: str, dest: Path) -> Path:
    try:
        with urllib.request.urlopen(url, timeout=60) as resp, dest.open("wb") as fh:
            shutil.copyfileobj(resp, fh)
    except (OSError, ValueError) as exc:
        raise FetchError(f"cannot download {url}", str(exc),
                         "check the network, or name a local source with "
                         "MLX_BUILDER_DEP_<NAME>") from None
    return dest


def safe_extract(tf: tarfile.TarFile, dest: Path, strip: int = 0) -> None:
    """Extract members inside ``dest`` only (no absolute paths, '..' or devices)."""
    root = dest.resolve()
    for member in tf.getmembers():
        parts = Path(member.name).parts[strip:]
        if not parts:
            continue
        target = (root / Path(*parts)).resolve()
        bad_link = (member.issym() or member.islnk()) and (
            os.path.isabs(member.linkname) or not
            (target.parent / member.linkname).resolve().is_relative_to(root))
        if not target.is_relative_to(root) or bad_link or member.isdev():
            raise DepsError(f"refusing unsafe archive member {member.name!r}")
        if member.isdir():
            target.mkdir(parents=True, exist_ok=True)
        elif member.issym():
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists() or target.is_symlink():
                target.unlink()
            os.symlink(member.linkname, target)
        elif member.isfile():
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tf.extractfile(member)
            assert src is not None  # a regular file always has data
            with src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.chmod(target, 0o755 if member.mode & 0o111 else 0o644)


def extract_archive(archive: Path, dest: Path) -> None:
    """Unpack a .zip or .tar.* into ``dest``, dropping one common top directory."""
    dest.mkdir(parents=True, exist_ok=True)
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            names = [n for n in zf.namelist() if n.strip("/")]
            strip = _common_top(names)
            for info in zf.infolist():
                parts = Path(info.filename).parts[strip:]
                if not parts or info.is_dir():
                    continue
                target = (dest / Path(*parts)).resolve()
                if not target.is_relative_to(dest.resolve()):
                    raise DepsError(f"refusing unsafe zip member {info.filename!r}")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(info))
                if (info.external_attr >> 16) & 0o111:
                    os.chmod(target, 0o755)
        return
    try:
        with tarfile.open(archive) as tf:
            safe_extract(tf, dest, _common_top([m.name for m in tf.getmembers()]))
    except tarfile.TarError as exc:
        raise DepsError(f"cannot unpack {archive.name}", str(exc)) from None


def _common_top(names: list[str]) -> int:
    tops = {Path(n).parts[0] for n in names if Path(n).parts}
    deep = any(len(Path(n).parts) > 1 for n in names)
    return 1 if len(tops) == 1 and deep else 0


def content_sha256(root: Path) -> str:
    """Hash of a source tree: paths, exec bits, contents, link targets (META left out)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(root).rglob("*") if p.name != META):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            digest.update(f"{rel}\0l\0{os.readlink(path)}\n".encode())
        elif path.is_file():
            h = hashlib.sha256(path.read_bytes()).hexdigest()
            x = "x" if os.access(path, os.X_OK) else "-"
            digest.update(f"{rel}\0{x}\0{h}\n".encode())
    return digest.hexdigest()
