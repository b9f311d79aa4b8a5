"""Patch series: patches/index.toml, series selection, and patch files.

The index format is documented in patches/index.toml itself. A patch file is
one ``git format-patch`` mail: ``From:``/``Date:``/``Subject:`` headers, a
message that says what and why and ends in trailers (``Origin:``,
``Forwarded:``, ``Bug:``, ``Applies-To:``), then the diff.
"""

from __future__ import annotations

import email
import email.policy
import hashlib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from mlx_builder.errors import SeriesError, TargetError

TARGETS = ("cuda", "metal", "all")
BUILD_TARGETS = ("cuda", "metal", "cpu", "all")
REQUIRED_TRAILERS = ("Origin", "Forwarded", "Bug", "Applies-To")
MAIN = "main"
_UPSTREAM = re.compile(r"^(not-forwarded|forwarded \S+|merged [0-9a-fA-F]{7,40})$")
_SERIES_KEYS = {"name", "base", "versions", "description", "patches"}
_PATCH_KEYS = {"file", "target", "upstream"}


@dataclass(frozen=True)
class PatchEntry:
    file: str          # file name inside patches/<series>/
    path: Path         # absolute path of the file
    target: str        # 'cuda' | 'metal' | 'all'
    upstream: str      # 'not-forwarded' | 'forwarded <url>' | 'merged <commit>'
    sha256: str        # of the file's bytes

    @property
    def merged_commit(self) -> str | None:
        """The upstream commit that merged this patch, if the index says so."""
        kind, _, rest = self.upstream.partition(" ")
        return rest if kind == "merged" else None


@dataclass(frozen=True)
class Series:
    name: str
    base: str          # upstream ref the series was made on (tag or commit)
    versions: str      # PEP 440 specifier, or 'main'
    description: str
    patches: tuple[PatchEntry, ...]

    @property
    def is_main(self) -> bool:
        return self.versions.strip() == MAIN

    @property
    def directory(self) -> Path | None:
        return self.patches[0].path.parent if self.patches else None

    def for_target(self, target: str) -> tuple[PatchEntry, ...]:
        """'cuda' -> cuda+all, 'metal' -> metal+all, 'cpu' -> all, 'all' -> every."""
        check_target(target)
        if target == "all":
            return self.patches
        wanted = {"all"} if target == "cpu" else {target, "all"}
        return tuple(p for p in self.patches if p.target in wanted)

    def covers(self) -> str:
        if self.is_main:
            return f"upstream main descending from {self.base[:9]}"
        return f"versions {self.versions}"


def check_target(target: str) -> str:
    if target not in BUILD_TARGETS:
        raise TargetError(f"unknown target {target!r}",
                          f"targets are: {', '.join(BUILD_TARGETS)}",
                          "pass --target cuda, metal, cpu or all")
    return target


# ---------------------------------------------------------------- index

def load_index(patches_dir: Path) -> tuple[Series, ...]:
    """Read and validate ``patches_dir/index.toml``."""
    patches_dir = Path(patches_dir)
    path = patches_dir / "index.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SeriesError(f"no patch index at {path}", "",
                          "set --patches-dir / MLX_BUILDER_PATCHES") from None
    except tomllib.TOMLDecodeError as exc:
        raise SeriesError(f"cannot parse {path}", str(exc),
                          "fix the TOML syntax") from None
    if data.get("schema", 1) != 1:
        raise SeriesError(f"{path}: unsupported schema {data.get('schema')!r}",
                          "this mlx-builder reads schema 1",
                          "upgrade mlx-builder")
    out: list[Series] = []
    for raw in data.get("series", []):
        out.append(_series(patches_dir, path, raw))
    names = [s.name for s in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SeriesError(f"{path}: series defined twice: {', '.join(dupes)}")
    return tuple(out)


def _series(root: Path, index: Path, raw: Mapping) -> Series:
    name = raw.get("name")
    where = f"{index}: series {name!r}"
    _no_unknown(raw, _SERIES_KEYS, where)
    for key in ("name", "base", "versions"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise SeriesError(f"{where}: missing or empty {key!r}",
                              "each [[series]] needs name, base and versions")
    versions = raw["versions"].strip()
    if versions != MAIN:
        try:
            SpecifierSet(versions)
        except InvalidSpecifier:
            raise SeriesError(f"{where}: versions {versions!r} is neither "
                              "'main' nor a PEP 440 specifier",
                              "", 'write e.g. versions = ">=0.32.0,<0.33"') from None
    patches = tuple(_patch(root / name, where, p) for p in raw.get("patches", []))
    files = [p.file for p in patches]
    if len(set(files)) != len(files):
        raise SeriesError(f"{where}: a patch file is listed twice")
    return Series(name=name, base=raw["base"].strip(), versions=versions,
                  description=str(raw.get("description", "")),
                  patches=patches)


def _patch(directory: Path, where: str, raw: Mapping) -> PatchEntry:
    _no_unknown(raw, _PATCH_KEYS, where)
    file = raw.get("file")
    if not isinstance(file, str) or not file or "/" in file:
        raise SeriesError(f"{where}: patch entry without a plain 'file' name")
    target = raw.get("target")
    if target not in TARGETS:
        raise SeriesError(f"{where}: {file}: target {target!r} is not one of "
                          f"{', '.join(TARGETS)}")
    upstream = str(raw.get("upstream", "")).strip()
    if not _UPSTREAM.match(upstream):
        raise SeriesError(f"{where}: {file}: upstream {upstream!r} is not "
                          "'not-forwarded', 'forwarded <url>' or "
                          "'merged <commit>'")
    path = (directory / file).resolve()
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        raise SeriesError(f"{where}: patch file {path} is missing",
                          "index.toml lists it but the file is not there",
                          "add the file, or remove its [[series.patches]] "
                          "entry") from None
    return PatchEntry(file=file, path=path, target=target, upstream=upstream,
                      sha256=digest)


def _no_unknown(raw: Mapping, known: set[str], where: str) -> None:
    unknown = sorted(set(raw) - known)
    if unknown:
        raise SeriesError(f"{where}: unknown keys {', '.join(unknown)}",
                          f"known keys are {', '.join(sorted(known))}")


def find_series(index: Iterable[Series], name: str) -> Series:
    index = tuple(index)
    for series in index:
        if series.name == name:
            return series
    raise SeriesError(f"no patch series named {name!r}",
                      "series in the index: " +
                      ", ".join(s.name for s in index),
                      "pass one of those to --series")


def select_series(index: Iterable[Series], resolved, repo) -> Series:
    """The series for a resolved ref.

    Release tags match by version specifier first; anything that descends
    from a 'main' series' base uses that series (the nearest base wins); a
    branch or commit that does not falls back to its mlx/version.h version.
    """
    from mlx_builder import gitops  # local: gitops imports settings only

    index = tuple(index)
    by_version = _match_version(index, resolved.version)
    mains = []
    for series in index:
        if series.is_main:
            base = gitops.rev_commit(repo, series.base)
            if base and gitops.is_ancestor(repo, base, resolved.commit):
                mains.append((series, base))
    nearest = None
    for series, base in mains:
        if nearest is None or gitops.is_ancestor(repo, nearest[1], base):
            nearest = (series, base)
    release = resolved.kind in ("version", "tag")
    if release and by_version is not None:
        return by_version
    if nearest is not None:
        return nearest[0]
    if by_version is not None:
        return by_version
    raise SeriesError(
        f"no patch series covers MLX {resolved.label()}"
        + (f" (version {resolved.version})" if resolved.version else ""),
        "supported: " + "; ".join(f"{s.name}: {s.covers()}" for s in index),
        "use a supported version, pass --series to force one, or add a "
        "series to patches/index.toml")


def _match_version(index: tuple[Series, ...], version: str | None) -> Series | None:
    if not version:
        return None
    try:
        parsed = Version(version)
    except InvalidVersion:
        return None
    for series in index:
        if not series.is_main and SpecifierSet(series.versions).contains(
                parsed, prereleases=True):
            return series
    return None


def patch_set_hash(patches: Iterable[PatchEntry]) -> str:
    """Short stable hash of the applied patches' contents, in order."""
    digest = hashlib.sha256()
    for patch in patches:
        digest.update(patch.sha256.encode() + b"\n")
    return digest.hexdigest()[:10]


# ---------------------------------------------------------------- patch files

@dataclass(frozen=True)
class Hunk:
    index: int          # 1-based within its file
    old_start: int
    header: str         # the '@@ -a,b +c,d @@' part


@dataclass(frozen=True)
class PatchFile:
    author: str
    email: str
    date: str
    subject: str
    body: str                                  # message after the subject
    trailers: Mapping[str, tuple[str, ...]]
    diff: str
    hunks: Mapping[str, tuple[Hunk, ...]] = field(default_factory=dict)

    @property
    def message(self) -> str:
        """The commit message this patch applies as."""
        return self.subject + ("\n\n" + self.body if self.body else "") + "\n"

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(self.hunks)

    def missing_trailers(self) -> list[str]:
        return [t for t in REQUIRED_TRAILERS if not self.trailers.get(t)]

    def context_lines(self) -> int | None:
        """The diff's context size (-U), as the widest run of context lines
        before or after a hunk's changes; None without hunks."""
        widest = None
        for block in re.split(r"^@@ .*$", self.diff, flags=re.M)[1:]:
            body = [ln[:1] for ln in block.split("\n")[1:]
                    if ln[:1] in (" ", "+", "-") or ln == ""]
            while body and body[-1] == "":
                body.pop()
            changed = [i for i, k in enumerate(body) if k in "+-" and k]
            if not changed:
                continue
            runs = (changed[0], len(body) - 1 - changed[-1])
            widest = max(widest or 0, *runs)
        return widest

    def hunk_at(self, file: str, old_start: int) -> Hunk | None:
        for hunk in self.hunks.get(file, ()):
            if hunk.old_start == old_start:
                return hunk
        return None


_SUBJECT_PREFIX = re.compile(r"^\s*(\[[^\]]*\]\s*)+")
_TRAILER = re.compile(r"^([A-Za-z][A-Za-z0-9-]*):\s+(.*\S)\s*$")
_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)$")
_HUNK = re.compile(r"^(@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@)")


def parse_patch(path: Path) -> PatchFile:
    """Parse a ``git format-patch`` file."""
    text = Path(path).read_text(encoding="utf-8", errors="surrogateescape")
    return parse_patch_text(text, str(path))


def parse_patch_text(text: str, name: str = "<patch>") -> PatchFile:
    lines = text.splitlines(keepends=True)
    if lines and lines[0].startswith("From ") and not lines[0].startswith("From:"):
        lines = lines[1:]
    head_end = next((i for i, ln in enumerate(lines) if not ln.strip()), None)
    if head_end is None:
        raise SeriesError(f"{name}: not a git format-patch file",
                          "no blank line after the mail headers")
    msg = email.message_from_string("".join(lines[:head_end]),
                                    policy=email.policy.default)
    sender = msg.get("From")
    if sender is None or not sender.addresses:
        raise SeriesError(f"{name}: no From: header",
                          "regenerate it with `mlx-builder export`")
    addr = sender.addresses[0]
    subject = _SUBJECT_PREFIX.sub("", " ".join(str(msg.get("Subject", "")).split()))
    rest = lines[head_end + 1:]
    cut = next((i for i, ln in enumerate(rest)
                if ln.rstrip("\n") == "---" or ln.startswith("diff --git ")),
               len(rest))
    body = "".join(rest[:cut]).strip("\n")
    body = "\n".join(ln.rstrip() for ln in body.splitlines())
    diff = "".join(rest[cut:])
    return PatchFile(author=addr.display_name or addr.username, email=addr.addr_spec,
                     date=_raw_header(lines[:head_end], "Date"), subject=subject,
                     body=body,
                     trailers=_trailers(body), diff=diff, hunks=_hunks(diff))


def _raw_header(lines: list[str], name: str) -> str:
    prefix = name.lower() + ":"
    for line in lines:
        if line.lower().startswith(prefix):
            return line[len(prefix):].strip()
    return ""


def _trailers(body: str) -> dict[str, tuple[str, ...]]:
    paragraphs = [p for p in re.split(r"\n\s*\n", body.strip()) if p.strip()]
    if not paragraphs:
        return {}
    found: dict[str, list[str]] = {}
    for line in paragraphs[-1].splitlines():
        match = _TRAILER.match(line)
        if not match:
            return {}
        found.setdefault(match.group(1), []).append(match.group(2))
    return {k: tuple(v) for k, v in found.items()}


def _hunks(diff: str) -> dict[str, tuple[Hunk, ...]]:
    out: dict[str, list[Hunk]] = {}
    current: list[Hunk] | None = None
    for line in diff.splitlines():
        match = _DIFF_FILE.match(line)
        if match:
            current = out.setdefault(match.group(2), [])
            continue
        match = _HUNK.match(line)
        if match and current is not None:
            current.append(Hunk(len(current) + 1, int(match.group(2)),
                                match.group(1)))
    return {k: tuple(v) for k, v in out.items()}
