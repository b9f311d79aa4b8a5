"""A PEP 503 simple index over a wheelhouse, plus a JSON listing.

Layout written under the index root (by default the wheelhouse itself)::

    index.json                  every wheel: file, url, sha256, tags, manifest
    simple/index.html           the project list
    simple/<project>/index.html links to the wheels, with #sha256= fragments

``pip install --index-url <root>/simple/ mlx`` works against it (also as a
``file://`` URL), and ``mlx-builder install`` reads ``index.json`` to choose
the wheel that fits the host. Output is deterministic: the same wheels give
byte-identical files.
"""

from __future__ import annotations

import hashlib
import html
import http.client
import json
import os
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from mlx_builder import __version__, locks, outputs
from mlx_builder.errors import FetchError, WheelError
from mlx_builder.wheelbuild.manifest import read_manifest, verify_record

LISTING_NAME = "index.json"
SIMPLE_DIR = "simple"
SCHEMA = 1


@dataclass(frozen=True)
class WheelEntry:
    """One wheel of a wheelhouse, as the index lists it."""

    filename: str
    url: str
    project: str
    version: str
    tags: tuple[str, ...]
    sha256: str
    size: int
    requires_python: str | None
    manifest: dict[str, Any] | None
    manifest_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "filename": self.filename, "url": self.url,
            "project": self.project, "version": self.version,
            "tags": list(self.tags), "sha256": self.sha256, "size": self.size,
            "requires_python": self.requires_python,
            "manifest": self.manifest, "manifest_error": self.manifest_error,
        }


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _requires_python(wheel: Path) -> str | None:
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = [n for n in zf.namelist()
                     if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            if not names:
                return None
            text = zf.read(names[0]).decode("utf-8", errors="replace")
    except zipfile.BadZipFile as exc:
        raise WheelError(f"{wheel.name} is not a valid wheel", str(exc),
                         "rebuild it or remove it from the wheelhouse") from None
    value = HeaderParser().parsestr(text).get("Requires-Python")
    return value.strip() if value else None


def _utf8_name(path: Path) -> Path:
    try:
        path.name.encode("utf-8")
    except UnicodeEncodeError:
        raise WheelError(f"{os.fsencode(path.name)!r} is not a valid wheel file name",
                         "the name is not UTF-8 text, which wheel names and the index are",
                         "rename it, or remove it from the wheelhouse") from None
    return path


def describe_wheel(path: Path, url: str) -> WheelEntry:
    """Read one wheel: name, version, tags, hash, Requires-Python, manifest."""
    _utf8_name(path)
    try:
        name, version, _build, tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise WheelError(f"{path.name} is not a valid wheel file name", str(exc),
                         "rename it to the wheel naming convention or remove it"
                         ) from None
    requires = _requires_python(path)
    manifest: dict[str, Any] | None = None
    problem = None
    try:
        manifest = read_manifest(path)
    except WheelError as exc:
        problem = exc.what
    if manifest is not None:
        check_wheel_matches_manifest(path, manifest, str(version))
    return WheelEntry(
        filename=path.name, url=url, project=str(name), version=str(version),
        tags=tuple(sorted(str(t) for t in tags)), sha256=_sha256(path),
        size=path.stat().st_size, requires_python=requires,
        manifest=manifest, manifest_error=problem)


def check_wheel_matches_manifest(path: Path, manifest: dict[str, Any], version: str) -> None:
    """Refuse a wheel whose manifest does not describe this very file: the
    manifest's version is the file's, and RECORD (which inject() rewrote with
    the manifest) matches every member, so nothing was added or changed since."""
    from packaging.version import InvalidVersion, Version
    try:
        same = Version(str(manifest.get("version"))) == Version(version)
    except InvalidVersion:
        same = False
    if not same:
        raise WheelError(f"{path.name}: its manifest says version {manifest.get('version')!r}",
                         f"the file name says {version}; the manifest belongs to another wheel",
                         "rebuild the wheel (`mlx-builder build`) instead of renaming it; "
                         "nothing was indexed")
    try:
        problems = verify_record(path)
    except (StopIteration, zipfile.BadZipFile, ValueError) as exc:
        raise WheelError(f"{path.name}: cannot check its RECORD", str(exc) or "no RECORD",
                         "rebuild the wheel; nothing was indexed") from None
    if problems:
        raise WheelError(f"{path.name} does not match its RECORD and manifest",
                         f"{len(problems)} member(s) changed, added or missing since it was "
                         f"built: {', '.join(problems[:5])}",
                         "rebuild the wheel with `mlx-builder build`; nothing was indexed")


def _link(wheel: Path, page_dir: Path, base_url: str | None) -> str:
    if base_url:
        return base_url.rstrip("/") + "/" + urllib.parse.quote(wheel.name)
    rel = os.path.relpath(wheel.resolve(), page_dir.resolve())
    return urllib.parse.quote(Path(rel).as_posix())


def _page(title: str, links: list[str]) -> str:
    body = "\n".join(links)
    return ("<!DOCTYPE html>\n<html>\n<head>\n"
            '<meta name="pypi:repository-version" content="1.0">\n'
            f"<title>{html.escape(title)}</title>\n</head>\n<body>\n"
            f"<h1>{html.escape(title)}</h1>\n{body}\n</body>\n</html>\n")


@dataclass(frozen=True)
class IndexResult:
    root: Path
    listing: Path
    simple: Path
    entries: tuple[WheelEntry, ...]


def write_index(wheelhouse: Path, out_dir: Path | None = None,
                base_url: str | None = None, no_wait: bool = False) -> IndexResult:
    """Write ``simple/`` and ``index.json`` for every ``*.whl`` in ``wheelhouse``.

    ``base_url`` makes links absolute (wheels published elsewhere, e.g. as
    release assets); otherwise links are relative to the index pages.
    """
    wheelhouse = Path(wheelhouse)
    if not wheelhouse.is_dir():
        raise WheelError(f"wheelhouse {wheelhouse} is not a directory", "",
                         "pass the directory that holds the built wheels")
    root = Path(out_dir) if out_dir else wheelhouse
    wheels = sorted((_utf8_name(w) for w in wheelhouse.glob("*.whl")), key=lambda p: p.name)
    if not wheels:
        raise WheelError(f"no wheels in {wheelhouse}", "the index would be empty",
                         "build wheels first (`mlx-builder build --out DIR`)")
    simple = root / SIMPLE_DIR
    pages: dict[Path, str] = {}
    entries = tuple(describe_wheel(w, _link(w, root, base_url)) for w in wheels)
    by_project: dict[str, list[tuple[Path, WheelEntry]]] = {}
    for wheel, entry in zip(wheels, entries):
        by_project.setdefault(canonicalize_name(entry.project), []).append(
            (wheel, entry))
    project_links = []
    for project in sorted(by_project):
        page_dir = simple / project
        links = []
        for wheel, entry in by_project[project]:
            href = f"{_link(wheel, page_dir, base_url)}#sha256={entry.sha256}"
            attrs = f'href="{html.escape(href)}"'
            if entry.requires_python:
                attrs += (' data-requires-python="'
                          f'{html.escape(entry.requires_python)}"')
            links.append(f"<a {attrs}>{html.escape(entry.filename)}</a><br>")
        pages[page_dir / "index.html"] = _page(f"Links for {project}", links)
        project_links.append(
            f'<a href="{html.escape(project)}/">{html.escape(project)}</a><br>')
    pages[simple / "index.html"] = _page("Simple index", project_links)
    listing = root / LISTING_NAME
    pages[listing] = (json.dumps({
        "schema": SCHEMA, "generator": f"mlx-builder {__version__}",
        "simple": f"{SIMPLE_DIR}/",
        "wheels": [e.to_json() for e in entries],
    }, indent=2, sort_keys=True) + "\n")
    _write_pages(root, pages, no_wait)
    return IndexResult(root, listing, simple, entries)


def _write_pages(root: Path, pages: dict[Path, str], no_wait: bool) -> None:
    """The pages and index.json, under the index folder's lock: all staged
    first, then renamed (index.json last, the file install reads)."""
    order = sorted(pages, key=lambda p: (p.name == LISTING_NAME, str(p)))
    with locks.hold(root / f".{LISTING_NAME}.lock", f"the index folder {root}", no_wait):
        staged: list[tuple[Path, Path]] = []
        try:
            for path in order:
                path.parent.mkdir(parents=True, exist_ok=True)
                outputs.remove_leftovers(path)
                staged.append((outputs.stage_bytes(path, pages[path].encode("utf-8")), path))
            outputs.commit(staged)
        except OSError as exc:
            outputs.discard(staged)
            raise outputs.disk_error(exc, f"cannot write the index into {root}") from None
        except BaseException:
            outputs.discard(staged)
            raise


# --- reading an index back (used by `mlx-builder install`) -------------------

@dataclass(frozen=True)
class Listing:
    """Wheels offered by an index; ``locate`` gives what pip should install."""

    source: str
    root: str              # directory path or URL ending in "/"
    local: bool
    wheels: tuple[dict[str, Any], ...]

    def locate(self, entry: dict[str, Any]) -> str:
        """Where the entry's wheel is. The link must name the entry's own
        file (an index may keep its wheels elsewhere: `index --out`, or
        --base-url), so an index cannot make install fetch another file."""
        url = entry["url"]
        tail = urllib.parse.unquote(urllib.parse.urlparse(url).path).rsplit("/", 1)[-1]
        if tail != entry.get("filename"):
            raise WheelError(f"the index links {url!r} for {entry.get('filename')}",
                             "the link does not name the wheel it is listed for",
                             "regenerate the index with `mlx-builder index`")
        if urllib.parse.urlparse(url).scheme:
            return url
        if self.local:
            return str(Path(self.root) / urllib.parse.unquote(url))
        return urllib.parse.urljoin(self.root, url)


def _local_root(location: str) -> Path | None:
    parsed = urllib.parse.urlparse(location)
    if parsed.scheme == "file":
        return Path(urllib.request.url2pathname(parsed.path))
    if parsed.scheme in ("", ) or len(parsed.scheme) == 1:  # path, or C:\
        return Path(location).expanduser()
    return None


def _strip_simple(path_or_url: str) -> str:
    trimmed = path_or_url.rstrip("/")
    if trimmed.endswith("/" + SIMPLE_DIR):
        trimmed = trimmed[: -len(SIMPLE_DIR) - 1]
    return trimmed


def load_listing(location: str, offline: bool = False,
                 timeout: float = 30.0) -> Listing:
    """The wheels of an index root, its ``simple/`` URL, or a bare wheelhouse.

    A local directory without ``index.json`` is scanned directly.
    """
    local = _local_root(_strip_simple(location))
    if local is not None:
        listing = local / LISTING_NAME
        if listing.is_file():
            data = _parse_listing(listing.read_bytes(), str(listing))
            return Listing(location, str(local.resolve()), True, data)
        if local.is_dir() and any(local.glob("*.whl")):
            wheels = tuple(describe_wheel(w, urllib.parse.quote(_utf8_name(w).name)).to_json()
                           for w in sorted(local.glob("*.whl")))
            return Listing(location, str(local.resolve()), True, wheels)
        raise WheelError(f"no wheel index at {location}",
                         f"neither {listing} nor any *.whl exists",
                         "run `mlx-builder index DIR` on the wheelhouse first")
    if offline:
        raise FetchError(f"cannot read the index {location} offline",
                         "--offline / MLX_BUILDER_OFFLINE forbids network access",
                         "use a local directory or file:// index")
    root = _strip_simple(location) + "/"
    url = urllib.parse.urljoin(root, LISTING_NAME)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            data = resp.read()
    except (OSError, http.client.HTTPException, ValueError) as exc:
        # HTTPException: a reply that is not HTTP (BadStatusLine) or was cut
        # short (IncompleteRead)
        raise FetchError(f"cannot fetch {url}",
                         f"{type(exc).__name__}: {exc}"[:300],
                         "check the URL and the network, or pass a local index"
                         ) from None
    return Listing(location, root, False, _parse_listing(data, url))


# Optional fields of a listing entry and the types install reads them as.
_OPTIONAL = {"version": str, "sha256": str, "size": int, "requires_python": str,
             "manifest_error": str, "project": str, "manifest": dict}


def _parse_listing(raw: bytes, where: str) -> tuple[dict[str, Any], ...]:
    try:
        data = json.loads(raw.decode("utf-8"))
        if not isinstance(data, dict):
            raise TypeError(f"a JSON object expected, got {type(data).__name__}")
        wheels = data["wheels"]
        if not isinstance(wheels, list):
            raise TypeError("'wheels' is not a list")
        for item in wheels:
            if not isinstance(item, dict):
                raise TypeError(f"a wheel entry is not an object: {item!r}"[:200])
            item["filename"], item["url"], item["tags"]
            if not all(isinstance(item[k], str) for k in ("filename", "url")) \
                    or not isinstance(item["tags"], list) \
                    or not all(isinstance(t, str) for t in item["tags"]):
                raise TypeError("filename/url must be strings and tags a list of strings: "
                                f"{item!r}"[:200])
            for key, kind in _OPTIONAL.items():
                if item.get(key) is not None and not isinstance(item[key], kind):
                    raise TypeError(f"{key} of {item['filename']} is not a "
                                    f"{kind.__name__}: {item[key]!r}"[:200])
    except (ValueError, KeyError, TypeError) as exc:
        raise WheelError(f"{where} is not an mlx-builder wheel listing",
                         f"{type(exc).__name__}: {exc}",
                         "regenerate it with `mlx-builder index`") from None
    return tuple(wheels)
