"""The chunked SDPA fallback patch (0010) in patches/: one per series, listed
in the index, well-formed, the same change everywhere, and (with
MLX_BUILDER_MLX_REPO) applying to every MLX version its series covers, alone
and together with the other patches of its series that touch the same files.

No MLX build needed; plain git subprocesses. The parsing helpers come from
test_metal_patches.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from test_metal_patches import (
    AUTHOR,
    MLX_REPO,
    PATCHES,
    covered_revisions,
    load_index,
    patch_path,
    touched_paths,
    trailers_of,
)

NUMBER = "0010"
BUG = "https://github.com/ml-explore/mlx/pull/3307"
ENV = "MLX_SDPA_FALLBACK_CHUNK_BYTES"
SERIES = load_index()["series"]


def _entry(series: dict) -> dict:
    found = [p for p in series.get("patches", []) if p["file"].startswith(NUMBER)]
    assert len(found) == 1, f"{series['name']}: {len(found)} {NUMBER}-* entries"
    return found[0]


def _added_lines(text: str) -> list[str]:
    return [line for line in text.splitlines()
            if line.startswith("+") and not line.startswith("+++")]


@pytest.mark.parametrize("series", SERIES, ids=[s["name"] for s in SERIES])
def test_listed_and_well_formed(series):
    entry = _entry(series)
    assert entry["target"] == "all" and entry["upstream"] == "not-forwarded"
    path = patch_path(series, entry)
    assert path.is_file(), f"{path} is listed in index.toml but missing"
    text = path.read_text()
    head = text.splitlines()[:3]
    assert head[0].startswith("From 0000000000000000000000000000000000000000 ")
    assert head[1] == f"From: {AUTHOR}"
    assert head[2] == "Date: Sun, 29 Nov 2026 00:00:00 +0000"
    assert touched_paths(text) == ["mlx/fast.cpp"]
    assert ENV in text, "the patch documents its environment variable"

    trailers = dict(trailers_of(text))
    assert trailers["Origin"] == "mlx-builder"
    assert trailers["Forwarded"] == "no"
    assert trailers["Bug"] == BUG
    assert "Applies-To" not in trailers, "Applies-To comes from the index"


def test_same_change_in_every_series():
    texts = {s["name"]: patch_path(s, _entry(s)).read_text() for s in SERIES}
    added = {name: _added_lines(text) for name, text in texts.items()}
    first = next(iter(added.values()))
    assert len(first) > 50
    for name, lines in added.items():
        assert lines == first, f"{name}'s patch adds different lines"


def test_no_unlisted_file():
    listed = {patch_path(s, _entry(s)) for s in SERIES}
    on_disk = set(PATCHES.glob(f"*/{NUMBER}-*.patch"))
    assert len(listed) < len(SERIES), "identical copies live once, in common/"
    assert on_disk == listed, f"not in index.toml: {sorted(on_disk - listed)}"


# --- applying to real MLX versions -------------------------------------------

def _cases() -> list:
    if not MLX_REPO:
        return [pytest.param(None, None, marks=pytest.mark.skip(
            reason="set MLX_BUILDER_MLX_REPO to an MLX git repository (bare or "
                   "not) with the release tags and main to check that the "
                   f"{NUMBER} patch applies"))]
    return [pytest.param(s, rev, id=f"{s['name']}@{rev[:12]}")
            for s in SERIES for rev in covered_revisions(MLX_REPO, s)]


def _extract(rev: str, paths: list[str], dest: Path) -> None:
    """The files at ``rev`` of those ``paths`` that exist there (a patch may
    create the others)."""
    for path in paths:
        shown = subprocess.run(["git", "-C", MLX_REPO, "show", f"{rev}:{path}"],
                               capture_output=True)
        if shown.returncode != 0:
            continue
        (dest / path).parent.mkdir(parents=True, exist_ok=True)
        (dest / path).write_bytes(shown.stdout)


def _apply(patch: Path, cwd: Path, check_only: bool) -> str:
    args = ["git", "apply", *(["--check"] if check_only else []), str(patch)]
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    return "" if done.returncode == 0 else f"{patch.name}: {done.stderr.strip()}"


@pytest.mark.real_mlx
@pytest.mark.parametrize("series,rev", _cases())
def test_applies_alone_and_in_series_order(series, rev, tmp_path):
    mine = patch_path(series, _entry(series))
    paths = touched_paths(mine.read_text())
    alone, ordered = tmp_path / "alone", tmp_path / "ordered"
    _extract(rev, paths, alone)
    assert _apply(mine, alone, check_only=True) == "", rev

    # Every patch of the series that touches the same files, in index order,
    # on a tree holding every file those patches touch.
    sharing = [patch_path(series, entry) for entry in series["patches"]]
    sharing = [p for p in sharing if set(touched_paths(p.read_text())) & set(paths)]
    _extract(rev, sorted({f for p in sharing for f in touched_paths(p.read_text())}), ordered)
    for patch in sharing:
        assert _apply(patch, ordered, check_only=True) == "", rev
        assert _apply(patch, ordered, check_only=False) == "", rev
