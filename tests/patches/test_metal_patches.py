"""The Metal patches in patches/: listed in the index, well-formed, and (with
MLX_BUILDER_MLX_REPO) applying to every MLX version their series covers.

Self-contained on purpose: plain tomllib and git subprocesses, no
mlx_builder modules. test_metal_routing.py reuses the parsing helpers here.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PATCHES = Path(__file__).resolve().parents[2] / "patches"
METAL_NUMBERS = range(1, 10)  # 0001-0009 belong to the Metal patches
AUTHOR = "mlx-builder <mlx-builder@users.noreply.github.com>"
BUG_URL = re.compile(r"^https://github\.com/ml-explore/mlx/(pull|issues)/\d+$")
# Applies-To is derived from the index (mlx_builder.source.series.applies_to), not
# stored in the files.
REQUIRED_TRAILERS = ("Origin", "Forwarded", "Bug")


# --- parsing helpers (also used by test_metal_routing.py) -------------------


def load_index() -> dict:
    """index.toml as a dict, each series' `common = ...` entries replaced by
    their [[common]] table (with "folder": "common")."""
    with open(PATCHES / "index.toml", "rb") as f:
        index = tomllib.load(f)
    common = {c["file"]: {**c, "folder": "common"} for c in index.get("common", [])}
    for series in index.get("series", []):
        series["patches"] = [common[p["common"]] if "common" in p else p
                             for p in series.get("patches", [])]
    return index


def metal_entries(index: dict | None = None) -> list[tuple[dict, dict]]:
    """(series, patch) for every patch with target "metal", in index order."""
    index = load_index() if index is None else index
    return [
        (series, patch)
        for series in index.get("series", [])
        for patch in series.get("patches", [])
        if patch.get("target") == "metal"
    ]


def patch_path(series: dict, patch: dict) -> Path:
    return PATCHES / patch.get("folder", series["name"]) / patch["file"]


def message_of(text: str) -> str:
    """The commit message of a format-patch file: from the subject to the
    '---' line or, exported with --no-stat, the first 'diff --git'."""
    match = re.search(
        r"^Subject: (?:\[PATCH[^\]]*\] )?(.*?)^(?:---$|diff --git )",
        text,
        re.M | re.S,
    )
    assert match, "no Subject: line followed by a diff"
    return match.group(1)


def trailers_of(text: str) -> list[tuple[str, str]]:
    """Key/value trailers of the message's last paragraph."""
    last = message_of(text).strip().split("\n\n")[-1]
    pairs = []
    for line in last.splitlines():
        key, sep, value = line.partition(": ")
        assert sep and re.fullmatch(r"[A-Za-z-]+", key), f"not a trailer: {line!r}"
        pairs.append((key, value.strip()))
    return pairs


def touched_paths(text: str) -> list[str]:
    return re.findall(r"^diff --git a/(\S+) b/\S+$", text, re.M)


def new_file_from_patch(text: str, path: str) -> str | None:
    """Content of a file the patch creates, rebuilt from its single hunk."""
    start = text.find(f"diff --git a/{path} b/{path}\n")
    if start < 0:
        return None
    lines = text[start:].splitlines(keepends=True)
    if not any(line.startswith("new file mode") for line in lines[1:4]):
        raise AssertionError(f"{path}: the patch changes it, not creates it")
    i = next(n for n, line in enumerate(lines) if line.startswith("@@ "))
    match = re.match(r"@@ -0,0 \+1(?:,(\d+))? @@", lines[i])
    assert match, f"{path}: unexpected hunk header {lines[i]!r}"
    count = int(match.group(1) or 1)
    body = lines[i + 1 : i + 1 + count]
    assert all(line.startswith("+") for line in body), f"{path}: short hunk"
    content = "".join(line[1:] for line in body)
    after = lines[i + 1 + count] if i + 1 + count < len(lines) else ""
    if after.startswith("\\ No newline at end of file"):
        content = content[:-1]
    return content


# --- the index and the files -------------------------------------------------


def test_every_series_has_metal_patches():
    index = load_index()
    names = {series["name"] for series, _ in metal_entries(index)}
    assert names == {series["name"] for series in index["series"]}


@pytest.mark.parametrize(
    "series,patch",
    metal_entries(),
    ids=[f"{s['name']}/{p['file'][:4]}" for s, p in metal_entries()],
)
def test_metal_patch_is_well_formed(series, patch):
    path = patch_path(series, patch)
    assert path.is_file(), f"{path} is listed in index.toml but missing"
    assert int(patch["file"][:4]) in METAL_NUMBERS, "Metal patches are 0001-0009"
    text = path.read_text()
    first = text.splitlines()[:3]
    assert first[0].startswith("From 0000000000000000000000000000000000000000 ")
    assert first[1] == f"From: {AUTHOR}"
    assert first[2].startswith("Date: "), "export with fixed dates"
    assert touched_paths(text), "no diff in the patch"

    trailers = trailers_of(text)
    keys = [key for key, _ in trailers]
    for key in REQUIRED_TRAILERS:
        assert key in keys, f"missing trailer {key}"
    values = {key: value for key, value in trailers}
    assert values["Origin"] == "mlx-builder"
    bugs = [value for key, value in trailers if key == "Bug"]
    assert all(BUG_URL.match(bug) for bug in bugs), bugs
    assert "Applies-To" not in values, "Applies-To comes from the index"

    # The index's `upstream` and the Forwarded trailer tell the same story.
    upstream = patch["upstream"]
    forwarded = values["Forwarded"]
    if upstream == "not-forwarded":
        assert forwarded == "no"
    elif upstream.startswith("forwarded "):
        assert forwarded == upstream.split(" ", 1)[1]
    else:
        assert upstream.startswith("merged ") and forwarded == "not-needed"


def test_no_unlisted_metal_patch_files():
    listed = {patch_path(s, p) for s, p in metal_entries()}
    on_disk = {
        path
        for path in PATCHES.glob("*/*.patch")
        if path.name[:4].isdigit() and int(path.name[:4]) in METAL_NUMBERS
    }
    assert on_disk <= listed, f"not in index.toml: {sorted(on_disk - listed)}"


# --- applying to real MLX versions -------------------------------------------

MLX_REPO = os.environ.get("MLX_BUILDER_MLX_REPO")
NO_REPO = (
    "set MLX_BUILDER_MLX_REPO to an MLX git repository (bare or not) with the "
    "release tags and main to check that the Metal patches apply"
)


def _git(repo: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-C", repo, *args], capture_output=True, check=check
    )


def covered_revisions(repo: str, series: dict) -> list[str]:
    """The revisions of `repo` that a series covers."""
    if series["versions"] == "main":
        revs = [series["base"]]
        for ref in ("refs/heads/main", "refs/remotes/origin/main"):
            head = _git(repo, "rev-parse", "--verify", "-q", ref, check=False)
            sha = head.stdout.decode().strip()
            if not sha or sha.startswith(series["base"]):
                continue
            if _git(repo, "merge-base", "--is-ancestor", series["base"], sha,
                    check=False).returncode == 0:
                revs.append(ref)
            break
        return revs
    spec = SpecifierSet(series["versions"])
    tags = _git(repo, "tag", "-l", "v*").stdout.decode().split()
    found = []
    for tag in tags:
        try:
            version = Version(tag[1:])
        except InvalidVersion:
            continue
        if version in spec:
            found.append((version, tag))
    return [tag for _, tag in sorted(found)]


def _apply_cases() -> list:
    if not MLX_REPO:
        return [pytest.param(None, None, marks=pytest.mark.skip(reason=NO_REPO))]
    cases = []
    for series in load_index()["series"]:
        if not any(p.get("target") == "metal" for p in series.get("patches", [])):
            continue
        for rev in covered_revisions(MLX_REPO, series):
            cases.append(pytest.param(series, rev, id=f"{series['name']}@{rev[:12]}"))
    return cases


@pytest.mark.real_mlx
@pytest.mark.parametrize("series,rev", _apply_cases())
def test_metal_series_applies(series, rev, tmp_path):
    """The patches of a Metal build (targets metal and all), in index order,
    each pass `git apply --check` on the tree left by the ones before."""
    patches = [
        patch_path(series, p)
        for p in series["patches"]
        if p.get("target") in ("metal", "all")
    ]
    paths = sorted({path for p in patches for path in touched_paths(p.read_text())})
    existing = [
        path
        for path in paths
        if _git(MLX_REPO, "cat-file", "-e", f"{rev}:{path}", check=False).returncode
        == 0
    ]
    tree = _git(MLX_REPO, "archive", "--format=tar", rev, "--", *existing).stdout
    with tarfile.open(fileobj=io.BytesIO(tree)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(tmp_path, filter="data")
        else:  # pragma: no cover - older Python
            tar.extractall(tmp_path)
    for patch in patches:
        check = subprocess.run(
            ["git", "apply", "--check", str(patch)],
            cwd=tmp_path, capture_output=True, text=True,
        )
        assert check.returncode == 0, f"{patch.name} on {rev}: {check.stderr}"
        subprocess.run(["git", "apply", str(patch)], cwd=tmp_path, check=True)
