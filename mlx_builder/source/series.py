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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from mlx_builder.errors import SeriesError, TargetError

if TYPE_CHECKING:
    import git

    from mlx_builder.source.gitops import ResolvedRef

TARGETS = ("cuda", "metal", "all")
BUILD_TARGETS = ("cuda", "metal", "cpu", "all")
# Applies-To is not stored in patch files: it is derived from the index
# (applies_to()) and added to the commit message when a patch is applied.
REQUIRED_TRAILERS = ("Origin", "Forwarded", "Bug")
APPLIES_TO = "Applies-To"
MAIN = "main"
COMMON = "common"                 # patches/common/: patches shared by series
SUMS = "SHA256SUMS"               # patches/SHA256SUMS, written by export
SCHEMAS = (1, 2)                  # 2 adds [[common]]
_UPSTREAM = re.compile(r"^(not-forwarded|forwarded \S+|merged [0-9a-fA-F]{7,40})$")
# Names that become path components: one plain component, no dot-only or
# hidden names, no separators, so no path formed from the index leaves
# patches/ (checked again on the resolved path).
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$")
_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,194}\.patch$")
_SUM_LINE = re.compile(r"^([0-9a-f]{64}) [ *]([^\s/]+)/([^\s/]+)$")
_TOP_KEYS = {"schema", "series", COMMON}
_SERIES_KEYS = {"name", "base", "versions", "description", "patches"}
_PATCH_KEYS = {"file", "target", "upstream"}
_COMMON_REF_KEYS = {COMMON}
_COMMON_KEYS = {"file", "target", "upstream", "series"}


@dataclass(frozen=True)
class PatchEntry:
    file: str          # file name inside patches/<folder>/
    path: Path         # absolute path of the file
    target: str        # 'cuda' | 'metal' | 'all'
    upstream: str      # 'not-forwarded' | 'forwarded <url>' | 'merged <commit>'
    sha256: str        # of the file's bytes
    folder: str = ""   # the series' name, or 'common'
    shared_by: tuple[str, ...] = ()   # a common patch: the series it is in

    @property
    def merged_commit(self) -> str | None:
        """The upstream commit that merged this patch, if the index says so."""
        kind, _, rest = self.upstream.partition(" ")
        return rest if kind == "merged" else None

    @property
    def is_common(self) -> bool:
        return self.folder == COMMON

    @property
    def rel(self) -> str:
        """Path relative to patches/ (as SHA256SUMS names it)."""
        return f"{self.folder}/{self.file}" if self.folder else self.file

    @property
    def label(self) -> str:
        """How tables name it: common patches with their folder."""
        return self.rel if self.is_common else self.file


@dataclass(frozen=True)
class Series:
    name: str
    base: str          # upstream ref the series was made on (tag or commit)
    versions: str      # PEP 440 specifier, or 'main'
    description: str
    patches: tuple[PatchEntry, ...]
    root: Path | None = None    # the patches/ folder the index is in

    @property
    def is_main(self) -> bool:
        return self.versions.strip() == MAIN

    @property
    def directory(self) -> Path | None:
        """patches/<name>/: where this series' own patches live."""
        if self.root is not None:
            return self.root / self.name
        own = [p for p in self.patches if not p.is_common]
        return own[0].path.parent if own else None

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

    def applies_label(self) -> str:
        """This series in an Applies-To trailer."""
        if self.is_main:
            return f"{self.name} (made on {self.base[:7]})"
        return f"{self.name} ({self.versions})"


def applies_to(index: Iterable[Series], entry: PatchEntry) -> str:
    """The Applies-To trailer of a patch: every series that lists it."""
    names = [s.applies_label() for s in index
             if any(p.rel == entry.rel for p in s.patches)]
    return "; ".join(names)


def check_target(target: str) -> str:
    if target not in BUILD_TARGETS:
        raise TargetError(f"unknown target {target!r}",
                          f"targets are: {', '.join(BUILD_TARGETS)}",
                          "pass --target cuda, metal, cpu or all")
    return target


# ---------------------------------------------------------------- index

def load_index(patches_dir: Path, *, verify: bool = True) -> tuple[Series, ...]:
    """Read and validate ``patches_dir/index.toml`` completely.

    With ``verify`` (the default) every listed patch file must match its
    sha256 in ``patches_dir/SHA256SUMS``; only ``export`` (which rewrites
    the files and their sums) reads without it.
    """
    patches_dir = Path(patches_dir)
    path = patches_dir / "index.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SeriesError(f"no patch index at {path}", "",
                          "set --patches-dir / MLX_BUILDER_PATCHES") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SeriesError(f"cannot parse {path}", str(exc),
                          "fix the TOML syntax") from None
    _no_unknown(data, _TOP_KEYS, str(path))
    schema = data.get("schema")
    if "schema" not in data:
        raise SeriesError(f"{path}: no 'schema' key",
                          "the index starts with its format version",
                          f"add `schema = {SCHEMAS[-1]}` at the top")
    if type(schema) is not int or schema not in SCHEMAS:
        raise SeriesError(f"{path}: unsupported schema {schema!r}",
                          "this mlx-builder reads schema "
                          + " and ".join(map(str, SCHEMAS)),
                          "upgrade mlx-builder")
    if schema < 2 and COMMON in data:
        raise SeriesError(f"{path}: [[common]] needs schema = 2",
                          "schema 1 has no shared patches",
                          "set `schema = 2`")
    root = patches_dir.resolve()
    raw_series = _tables(data.get("series", []), f"{path}: series")
    names = [_series_name(path, raw) for raw in raw_series]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SeriesError(f"{path}: series defined twice: {', '.join(dupes)}")
    common = _common(root, path, data.get(COMMON, []), names)
    out = tuple(_series(root, path, raw, common) for raw in raw_series)
    for entry in common.values():
        users = tuple(s.name for s in out
                      if any(p is entry for p in s.patches))
        if sorted(users) != sorted(entry.shared_by):
            raise SeriesError(
                f"{path}: common patch {entry.file} names series "
                f"{', '.join(entry.shared_by)} but is listed in "
                f"{', '.join(users) or 'none'}",
                "a [[common]] entry's `series` and the series that list it "
                "with `common = ...` must agree",
                "add `common = \"" + entry.file + "\"` to each series it "
                "names, or fix its `series` list")
    if verify:
        verify_sums(root, [p for s in out for p in s.patches])
    return out


def _tables(value: object, where: str) -> list[Mapping]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise SeriesError(f"{where}: expected an array of tables",
                          "", "write [[...]] tables")
    return value


def _series_name(index: Path, raw: Mapping) -> str:
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name) or name == COMMON:
        raise SeriesError(f"{index}: series name {name!r} is not a plain "
                          "folder name",
                          "a series' name is its folder under patches/: "
                          "letters, digits, '.', '_', '+', '-', not starting "
                          f"with '.' or '-', not {COMMON!r}",
                          'write e.g. name = "v0.32"')
    return name


def _common(root: Path, index: Path, raw_list: object, series_names: list[str]
            ) -> dict[str, PatchEntry]:
    out: dict[str, PatchEntry] = {}
    for raw in _tables(raw_list, f"{index}: common"):
        where = f"{index}: common patch {raw.get('file')!r}"
        _no_unknown(raw, _COMMON_KEYS, where)
        users = raw.get("series")
        if (not isinstance(users, list) or not users
                or not all(isinstance(u, str) for u in users)
                or len(set(users)) != len(users)):
            raise SeriesError(f"{where}: 'series' must be a list of distinct "
                              "series names",
                              "a common patch names the series it belongs to",
                              'write e.g. series = ["v0.32", "main"]')
        unknown = sorted(set(users) - set(series_names))
        if unknown:
            raise SeriesError(f"{where}: unknown series {', '.join(unknown)}",
                              "series in the index: " + ", ".join(series_names))
        entry = _patch(root, COMMON, where, raw, _PATCH_KEYS | {"series"},
                       tuple(users))
        if entry.file in out:
            raise SeriesError(f"{where}: listed twice")
        out[entry.file] = entry
    return out


def _series(root: Path, index: Path, raw: Mapping,
            common: Mapping[str, PatchEntry]) -> Series:
    name = raw["name"]
    where = f"{index}: series {name!r}"
    _no_unknown(raw, _SERIES_KEYS, where)
    for key in ("base", "versions"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise SeriesError(f"{where}: missing or empty {key!r}",
                              "each [[series]] needs name, base and versions")
    if not isinstance(raw.get("description", ""), str):
        raise SeriesError(f"{where}: description must be a string")
    versions = raw["versions"].strip()
    if versions != MAIN:
        try:
            SpecifierSet(versions)
        except InvalidSpecifier:
            raise SeriesError(f"{where}: versions {versions!r} is neither "
                              "'main' nor a PEP 440 specifier",
                              "", 'write e.g. versions = ">=0.32.0,<0.33"') from None
    patches = []
    for entry in _tables(raw.get("patches", []), f"{where}: patches"):
        if COMMON in entry:
            _no_unknown(entry, _COMMON_REF_KEYS, f"{where}: common patch")
            file = entry[COMMON]
            if not isinstance(file, str) or file not in common:
                raise SeriesError(f"{where}: common = {file!r} is not a "
                                  "[[common]] entry",
                                  "common patches are declared once in "
                                  "[[common]] tables",
                                  "add the [[common]] entry or fix the name")
            patches.append(common[file])
        else:
            patches.append(_patch(root, name, where, entry, _PATCH_KEYS))
    labels = [p.rel for p in patches]
    files = [p.file for p in patches]
    if len(set(labels)) != len(labels) or len(set(files)) != len(files):
        raise SeriesError(f"{where}: a patch file is listed twice")
    return Series(name=name, base=raw["base"].strip(), versions=versions,
                  description=str(raw.get("description", "")),
                  patches=tuple(patches), root=root)


def _patch(root: Path, folder: str, where: str, raw: Mapping,
           known: set[str], shared_by: tuple[str, ...] = ()) -> PatchEntry:
    _no_unknown(raw, known, where)
    file = raw.get("file")
    if not isinstance(file, str) or not _FILE.match(file):
        raise SeriesError(f"{where}: patch entry without a plain 'file' name "
                          f"({file!r})",
                          "a patch file is named <name>.patch inside its "
                          "folder: letters, digits, '.', '_', '+', '-'",
                          'write e.g. file = "0020-cuda-x.patch"')
    target = raw.get("target")
    if target not in TARGETS:
        raise SeriesError(f"{where}: {file}: target {target!r} is not one of "
                          f"{', '.join(TARGETS)}")
    upstream = raw.get("upstream", "")
    if not isinstance(upstream, str) or not _UPSTREAM.match(upstream.strip()):
        raise SeriesError(f"{where}: {file}: upstream {upstream!r} is not "
                          "'not-forwarded', 'forwarded <url>' or "
                          "'merged <commit>'")
    path = (root / folder / file).resolve()
    if path.parent != root / folder:
        raise SeriesError(f"{where}: {file} resolves outside "
                          f"{root / folder}",
                          "a symbolic link or name leaves the patch folder",
                          "keep patch files as plain files in their folder")
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise SeriesError(f"{where}: patch file {path} is missing",
                          "index.toml lists it but the file is not there",
                          "add the file, or remove its entry") from None
    return PatchEntry(file=file, path=path, target=target,
                      upstream=upstream.strip(), sha256=digest, folder=folder,
                      shared_by=shared_by)


def _no_unknown(raw: Mapping, known: set[str], where: str) -> None:
    unknown = sorted(map(str, set(raw) - known))
    if unknown:
        raise SeriesError(f"{where}: unknown keys {', '.join(unknown)}",
                          f"known keys are {', '.join(sorted(known))}")


# ---------------------------------------------------------------- SHA256SUMS

def read_sums(root: Path) -> dict[str, str]:
    """``patches/SHA256SUMS`` as {folder/file: sha256} (``sha256sum`` format)."""
    path = Path(root) / SUMS
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SeriesError(f"no {path}",
                          "every patch file's sha256 is recorded there, so a "
                          "changed or truncated patch is refused",
                          "run `mlx-builder export` for the series (it writes "
                          f"the file), or `cd {Path(root)} && sha256sum "
                          f"*/*.patch > {SUMS}` for patches you trust") from None
    except UnicodeDecodeError as exc:
        raise SeriesError(f"cannot read {path}", str(exc)) from None
    sums: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        match = _SUM_LINE.match(line)
        if not match or not _NAME.match(match.group(2)) \
                or not _FILE.match(match.group(3)):
            raise SeriesError(f"{path}:{number}: not a `<sha256>  <folder>/"
                              f"<file>.patch` line: {line[:80]!r}",
                              "SHA256SUMS is written by `mlx-builder export`",
                              "fix or regenerate the line")
        rel = f"{match.group(2)}/{match.group(3)}"
        if rel in sums:
            raise SeriesError(f"{path}:{number}: {rel} listed twice")
        sums[rel] = match.group(1)
    return sums


def verify_sums(root: Path, patches: Iterable[PatchEntry]) -> None:
    sums = read_sums(root)
    for entry in {p.rel: p for p in patches}.values():
        want = sums.get(entry.rel)
        if want is None:
            raise SeriesError(f"{entry.rel} has no sha256 in {Path(root) / SUMS}",
                              "every patch file the index lists is checksummed",
                              "run `mlx-builder export` for its series, or "
                              f"`cd {Path(root)} && sha256sum {entry.rel} >> "
                              f"{SUMS}` if you trust the file")
        if want != entry.sha256:
            raise SeriesError(
                f"{entry.rel} does not match its sha256 in {Path(root) / SUMS}",
                f"the file changed (or was cut short) after it was exported: "
                f"sha256 {entry.sha256[:12]}..., recorded {want[:12]}...",
                "restore it (`git checkout -- patches/`), re-export it from "
                "its work tree, or update its SHA256SUMS line if you edited "
                "it on purpose")


def sums_text(root: Path, updates: Mapping[str, str]) -> str | None:
    """SHA256SUMS with the lines for ``updates`` ({folder/file: sha256}) set
    and the rest kept but those whose file is gone (a patch moved to common/
    or renamed); None when that is the file as it is."""
    path = Path(root) / SUMS
    try:
        sums = read_sums(root)
    except SeriesError:
        if path.exists():
            raise
        sums = {}
    kept = {rel: digest for rel, digest in sums.items()
            if (Path(root) / rel).is_file()}
    merged = {**kept, **updates}
    if merged == sums and path.exists():
        return None
    return "".join(f"{digest}  {rel}\n" for rel, digest in sorted(merged.items()))


def write_sums(root: Path, updates: Mapping[str, str]) -> bool:
    """sums_text written atomically. Returns whether the file changed."""
    text = sums_text(root, updates)
    if text is None:
        return False
    path = Path(root) / SUMS
    tmp = path.with_name(f".{SUMS}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return True


def find_series(index: Iterable[Series], name: str) -> Series:
    index = tuple(index)
    for series in index:
        if series.name == name:
            return series
    raise SeriesError(f"no patch series named {name!r}",
                      "series in the index: " +
                      ", ".join(s.name for s in index),
                      "pass one of those to --series")


def select_series(index: Iterable[Series], resolved: ResolvedRef, repo: git.Repo) -> Series:
    """The series for a resolved ref.

    Release tags match by version specifier first; anything that descends
    from a 'main' series' base uses that series (the nearest base wins); a
    branch or commit that does not falls back to its mlx/version.h version.
    """
    from mlx_builder.source import gitops  # local: gitops imports settings only

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


_APPLIES_LINE = re.compile(r"^Applies-To:.*\n", re.M)


def with_applies_to(message: str, value: str) -> str:
    """A commit message with its Applies-To trailer set to ``value``: joined
    to the trailer paragraph at its end, or as a paragraph of its own."""
    text = _APPLIES_LINE.sub("", message.rstrip("\n") + "\n").rstrip("\n")
    if not value:
        return text + "\n"
    last = re.split(r"\n\s*\n", text)[-1] if "\n" in text else ""
    is_trailers = bool(last) and all(_TRAILER.match(ln)
                                     for ln in last.splitlines())
    sep = "\n" if is_trailers else "\n\n"
    return f"{text}{sep}{APPLIES_TO}: {value}\n"


def strip_applies_to(text: str) -> str:
    """A patch file's text without Applies-To in its message (the index is
    where that lives)."""
    cut = re.search(r"^diff --git ", text, re.M)
    head, diff = (text[:cut.start()], text[cut.start():]) if cut else (text, "")
    end = re.search(r"^---$", head, re.M)
    msg, rest = (head[:end.start()], head[end.start():]) if end else (head, "")
    stripped = _APPLIES_LINE.sub("", msg)
    if stripped != msg:
        stripped = stripped.rstrip("\n") + "\n\n"
    return stripped + rest + diff


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


# What differs between two exports of one change made on different bases:
# where its hunks start, and the blob ids of the files before and after.
_HUNK_START = re.compile(r"^@@ -\d+((?:,\d+)? \+)\d+((?:,\d+)? @@)", re.M)
_INDEX_IDS = re.compile(r"^index [0-9a-f]+\.\.[0-9a-f]+", re.M)


def without_offsets(text: str) -> str:
    """A patch's text with its hunks' start lines and its blob ids left out:
    two exports of one change from trees of different bases are equal here
    when only the lines around the change moved (``git apply`` finds such
    hunks at an offset). Context lines, counts and every changed line stay."""
    text = _INDEX_IDS.sub("index ..", text)
    return _HUNK_START.sub(r"@@ -\1\2", text)


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
