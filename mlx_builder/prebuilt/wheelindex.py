"""PEP 503 simple indexes over a wheelhouse, one per variant, plus JSON listings.

Layout written under the index root (by default the wheelhouse itself)::

    index.json                        every wheel: file, url, variant, sha256, tags, manifest
    index.html                        the variants and the pip command of each
    <variant>/simple/<project>/       links to that variant's wheels, #sha256= fragments
    <variant>/constraints.txt         ``mlx==<newest version in the variant>``
    <variant>/index.json              the variant's wheels (``install --index ROOT/VARIANT``)

A variant (variants.py) is ``cpu``, ``metal`` or ``cu<major>-<targets>``
(``cu13-sm121``). Users point pip at one variant, PyPI staying the main
index for everything else (the nvidia-* runtime, mlx-lm), and the
constraints file pins our build so that a newer ``mlx`` on PyPI does not win::

    pip install -c ROOT/cu13-sm121/constraints.txt \
        --extra-index-url ROOT/cu13-sm121/simple/ mlx mlx-lm

``mlx-builder install`` reads ``index.json`` to choose the wheel that fits
the host. With ``keep`` the wheels an earlier ``index.json`` lists stay listed
(a release adds its wheels; the ones published before keep their links).
Output is deterministic: the same wheels give byte-identical files.
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
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from mlx_builder import __version__, distinfo, locks, outputs
from mlx_builder.errors import FetchError, WheelError
from mlx_builder.prebuilt.variants import variant
from mlx_builder.wheelbuild.manifest import read_manifest, verify_record

LISTING_NAME = "index.json"
SIMPLE_DIR = "simple"
CONSTRAINTS_NAME = "constraints.txt"
SCHEMA = 2


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

    @property
    def variant(self) -> str:
        return variant(self.manifest)

    def to_json(self) -> dict[str, Any]:
        return {
            "filename": self.filename, "url": self.url,
            "project": self.project, "version": self.version,
            "tags": list(self.tags), "sha256": self.sha256, "size": self.size,
            "requires_python": self.requires_python, "variant": self.variant,
            "manifest": self.manifest, "manifest_error": self.manifest_error,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WheelEntry:
        return cls(filename=data["filename"], url=data["url"], project=data["project"],
                   version=data["version"], tags=tuple(data["tags"]),
                   sha256=data["sha256"], size=int(data["size"]),
                   requires_python=data.get("requires_python"),
                   manifest=data.get("manifest"), manifest_error=data.get("manifest_error"))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _requires_python(wheel: Path) -> str | None:
    headers = distinfo.metadata(wheel, required=False)
    value = headers.get("Requires-Python") if headers is not None else None
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
    except (zipfile.BadZipFile, ValueError) as exc:
        raise WheelError(f"{path.name}: cannot check its RECORD", str(exc) or "no RECORD",
                         "rebuild the wheel; nothing was indexed") from None
    if problems:
        raise WheelError(f"{path.name} does not match its RECORD and manifest",
                         f"{len(problems)} member(s) changed, added or missing since it was "
                         f"built: {', '.join(problems[:5])}",
                         "rebuild the wheel with `mlx-builder build`; nothing was indexed")


def _url(wheel: Path, root: Path, base_url: str | None) -> str:
    """The wheel's URL as index.json lists it: absolute under ``base_url``,
    else relative to the index root."""
    wheel = _utf8_name(wheel)
    if base_url:
        return base_url.rstrip("/") + "/" + urllib.parse.quote(wheel.name)
    rel = os.path.relpath(wheel.resolve(), root.resolve())
    return urllib.parse.quote(Path(rel).as_posix())


def _href(url: str, root: Path, page_dir: Path) -> str:
    """A listed URL as a link from ``page_dir`` (relative URLs are relative to root)."""
    if urllib.parse.urlparse(url).scheme:
        return url
    rel = os.path.relpath(root / urllib.parse.unquote(url), page_dir)
    return urllib.parse.quote(Path(rel).as_posix())


def _page(title: str, links: list[str], head: str = "") -> str:
    body = "\n".join(links)
    return ("<!DOCTYPE html>\n<html>\n<head>\n"
            '<meta name="pypi:repository-version" content="1.0">\n'
            f"<title>{html.escape(title)}</title>\n</head>\n<body>\n"
            f"<h1>{html.escape(title)}</h1>\n{head}{body}\n</body>\n</html>\n")


@dataclass(frozen=True)
class IndexResult:
    root: Path
    listing: Path
    variants: dict[str, Path]          # variant -> its simple/ directory
    entries: tuple[WheelEntry, ...]    # every listed wheel, kept ones included
    kept: int = 0                      # how many came from the earlier index.json

    @property
    def simple(self) -> Path:
        """The simple/ directory of the only variant (tests, one-variant houses)."""
        if len(self.variants) != 1:
            raise ValueError(f"{len(self.variants)} variants: {', '.join(self.variants)}")
        return next(iter(self.variants.values()))


def newest(entries: list[WheelEntry], project: str = "mlx") -> WheelEntry | None:
    """The entry of ``project`` with the highest version (local labels count,
    as they do for pip)."""
    from packaging.version import InvalidVersion, Version
    best: tuple[Version, str] | None = None
    found = None
    for entry in entries:
        if canonicalize_name(entry.project) != project:
            continue
        try:
            key = (Version(entry.version), entry.filename)
        except InvalidVersion:
            continue
        if best is None or key > best:
            best, found = key, entry
    return found


def _earlier(root: Path, fresh: set[str]) -> list[WheelEntry]:
    """The wheels an existing ``root/index.json`` lists that this run does not
    index again: kept so that publishing a release adds to the index."""
    listing = root / LISTING_NAME
    if not listing.is_file():
        return []
    wheels, _ = _parse_listing(listing.read_bytes(), str(listing))
    kept = []
    for item in wheels:
        if item["filename"] in fresh:
            continue
        try:
            entry = WheelEntry.from_json(item)
        except (KeyError, TypeError, ValueError) as exc:
            raise WheelError(f"{listing} lists {item.get('filename')!r} without {exc}",
                             "an index written by an older mlx-builder, or edited",
                             "index the wheels again without --keep") from None
        if not urllib.parse.urlparse(entry.url).scheme and \
                not (root / urllib.parse.unquote(entry.url)).is_file():
            raise WheelError(f"{listing} lists {entry.filename} at {entry.url}, which is gone",
                             "a kept wheel must still be reachable from the index",
                             "restore the file, or index without --keep")
        kept.append(entry)
    return kept


def write_index(wheelhouse: Path, out_dir: Path | None = None,
                base_url: str | None = None, keep: bool = False,
                no_wait: bool = False) -> IndexResult:
    """Write the variants' ``simple/`` pages, constraints and listings for
    every ``*.whl`` in ``wheelhouse`` (and, with ``keep``, those the existing
    ``index.json`` lists).

    ``base_url`` makes links absolute (wheels published elsewhere, e.g. as
    release assets); otherwise links are relative to the index pages.
    """
    wheelhouse = Path(wheelhouse)
    if not wheelhouse.is_dir():
        raise WheelError(f"wheelhouse {wheelhouse} is not a directory", "",
                         "pass the directory that holds the built wheels")
    root = Path(out_dir) if out_dir else wheelhouse
    wheels = sorted(wheelhouse.glob("*.whl"), key=lambda p: p.name)
    if not wheels:
        raise WheelError(f"no wheels in {wheelhouse}", "the index would be empty",
                         "build wheels first (`mlx-builder build --out DIR`)")
    fresh = [describe_wheel(w, _url(w, root, base_url)) for w in wheels]
    kept = _earlier(root, {e.filename for e in fresh}) if keep else []
    entries = sorted([*fresh, *kept], key=lambda e: e.filename)
    by_variant: dict[str, list[WheelEntry]] = {}
    for entry in entries:
        by_variant.setdefault(entry.variant, []).append(entry)
    pages: dict[Path, str] = {}
    simple_dirs = {name: _variant_pages(root, name, group, pages)
                   for name, group in sorted(by_variant.items())}
    pages[root / "index.html"] = _overview(by_variant)
    listing = root / LISTING_NAME
    pages[listing] = _listing_text(entries, sorted(by_variant))
    _write_pages(root, pages, no_wait)
    return IndexResult(root, listing, simple_dirs, tuple(entries), len(kept))


def _listing_text(entries: list[WheelEntry], variants: list[str]) -> str:
    return json.dumps({
        "schema": SCHEMA, "generator": f"mlx-builder {__version__}",
        "variants": {v: {"simple": f"{v}/{SIMPLE_DIR}/",
                         "constraints": f"{v}/{CONSTRAINTS_NAME}"} for v in variants},
        "wheels": [e.to_json() for e in entries],
    }, indent=2, sort_keys=True) + "\n"


def _variant_pages(root: Path, name: str, entries: list[WheelEntry],
                   pages: dict[Path, str]) -> Path:
    """Add one variant's pages, constraints and listing to ``pages``; its simple/."""
    vdir = root / name
    simple = vdir / SIMPLE_DIR
    by_project: dict[str, list[WheelEntry]] = {}
    for entry in entries:
        by_project.setdefault(canonicalize_name(entry.project), []).append(entry)
    project_links = []
    for project in sorted(by_project):
        page_dir = simple / project
        links = []
        for entry in by_project[project]:
            href = f"{_href(entry.url, root, page_dir)}#sha256={entry.sha256}"
            attrs = f'href="{html.escape(href)}"'
            if entry.requires_python:
                attrs += (' data-requires-python="'
                          f'{html.escape(entry.requires_python)}"')
            links.append(f"<a {attrs}>{html.escape(entry.filename)}</a><br>")
        pages[page_dir / "index.html"] = _page(f"Links for {project}", links)
        project_links.append(
            f'<a href="{html.escape(project)}/">{html.escape(project)}</a><br>')
    pages[simple / "index.html"] = _page(f"Simple index: {name}", project_links)
    top = newest(entries)
    pins = f"mlx=={top.version}\n" if top is not None else ""
    pages[vdir / CONSTRAINTS_NAME] = (
        "# The newest mlx of this variant; `pip install -c` this file keeps pip and uv\n"
        "# on it even where PyPI has a newer mlx.\n" + pins)
    # The variant's own listing, with URLs relative to the variant directory.
    local = [WheelEntry.from_json({**e.to_json(), "url": _href(e.url, root, vdir)})
             for e in entries]
    pages[vdir / LISTING_NAME] = _listing_text(local, [])
    return simple


def _overview(by_variant: dict[str, list[WheelEntry]]) -> str:
    rows = []
    for name, group in sorted(by_variant.items()):
        top = newest(group)
        latest = f" (mlx {html.escape(top.version)})" if top else ""
        rows.append(f'<a href="{html.escape(name)}/{SIMPLE_DIR}/">{html.escape(name)}</a>'
                    f"{latest}: <code>pip install -c {html.escape(name)}/{CONSTRAINTS_NAME} "
                    f"--extra-index-url {html.escape(name)}/{SIMPLE_DIR}/ mlx</code><br>")
    head = ("<p>One index per variant; URLs below are relative to this page. "
            "<code>mlx-builder install</code> picks the variant for the host.</p>\n")
    return _page("mlx-builder wheels", rows, head)


def _write_pages(root: Path, pages: dict[Path, str], no_wait: bool) -> None:
    """The pages and index.json, under the index folder's lock: all staged
    first, then renamed (index.json last, the file install reads)."""
    order = sorted(pages, key=lambda p: (p.name == LISTING_NAME, str(p)))
    with locks.beside(root / LISTING_NAME, f"the index folder {root}", no_wait):
        with outputs.staging(f"cannot write the index into {root}") as staged:
            for path in order:
                path.parent.mkdir(parents=True, exist_ok=True)
                outputs.remove_leftovers(path)
                staged.append((outputs.stage_bytes(path, pages[path].encode("utf-8")), path))
            outputs.commit(staged)


# --- reading an index back (used by `mlx-builder install`) -------------------

@dataclass(frozen=True)
class Listing:
    """Wheels offered by an index; ``locate`` gives what pip should install."""

    source: str
    root: str              # directory path or URL ending in "/"
    local: bool
    wheels: tuple[dict[str, Any], ...]
    nested: bool = False   # the root holds <variant>/simple/ (else it is one variant)

    def pip_sources(self, variant_name: str) -> tuple[str, str]:
        """(simple index URL, constraints URL) of a variant, for pip and uv."""
        base = self.root if not self.local else Path(self.root).as_uri()
        base = base.rstrip("/") + "/" + (f"{variant_name}/" if self.nested else "")
        return base + f"{SIMPLE_DIR}/", base + CONSTRAINTS_NAME

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
            raw = listing.read_bytes()
            wheels, nested = _parse_listing(raw, str(listing))
            return Listing(location, str(local.resolve()), True, wheels, nested)
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
    return Listing(location, root, False, *_parse_listing(data, url))


# Optional fields of a listing entry and the types install reads them as.
_OPTIONAL = {"version": str, "sha256": str, "size": int, "requires_python": str,
             "manifest_error": str, "project": str, "manifest": dict}


def _parse_listing(raw: bytes, where: str) -> tuple[tuple[dict[str, Any], ...], bool]:
    """The wheels of a listing, and whether it is an index root with variant
    sub-indexes."""
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
    return tuple(wheels), bool(data.get("variants"))
