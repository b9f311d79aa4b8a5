"""series: index.toml parsing and validation, selection, patch files."""

from __future__ import annotations

import hashlib
from pathlib import Path

import git as gitpython
import pytest

from mlx_builder import gitops
from mlx_builder.errors import SeriesError, TargetError
from mlx_builder.series import (find_series, load_index, parse_patch,
                                parse_patch_text, patch_set_hash,
                                select_series)


def test_load_index(upstream):
    index = load_index(upstream.patches_dir)
    assert [s.name for s in index] == ["v0.1", "v0.2", "main"]
    v01 = index[0]
    assert (v01.base, v01.versions, v01.is_main) == ("v0.1.0", ">=0.1.0,<0.2", False)
    assert index[2].is_main and index[2].base == upstream.commits["main_base"]
    assert [p.target for p in v01.patches] == ["metal", "all", "cuda"]
    first = v01.patches[0]
    assert first.path == (upstream.patches_dir / "v0.1" / first.file).resolve()
    assert first.sha256 == hashlib.sha256(first.path.read_bytes()).hexdigest()


def test_for_target(upstream):
    series = load_index(upstream.patches_dir)[0]
    files = lambda t: [p.target for p in series.for_target(t)]  # noqa: E731
    assert files("cuda") == ["all", "cuda"]
    assert files("metal") == ["metal", "all"]
    assert files("cpu") == ["all"]
    assert files("all") == ["metal", "all", "cuda"]
    with pytest.raises(TargetError):
        series.for_target("rocm")


@pytest.mark.parametrize("mutate, message", [
    (lambda t: t.replace('target = "cuda"', 'target = "rocm"'), "target 'rocm'"),
    (lambda t: t.replace('upstream = "not-forwarded"', 'upstream = "maybe"', 1),
     "upstream 'maybe'"),
    (lambda t: t.replace('versions = ">=0.1.0,<0.2"', 'versions = "0.1 or so"'),
     "PEP 440"),
    (lambda t: t.replace('name = "v0.2"', 'name = "v0.1"'), "defined twice"),
    (lambda t: t.replace('target = "cuda"', 'target = "cuda"\ncolour = "red"', 1),
     "unknown keys colour"),
    (lambda t: t.replace('base = "v0.1.0"\n', ''), "missing or empty 'base'"),
    (lambda t: t.replace("0001-metal", "0009-metal", 1), "is missing"),
    (lambda t: t + "\n[[series\n", "cannot parse"),
    (lambda t: t.replace("schema = 1", "schema = 3"), "unsupported schema"),
])
def test_index_errors(upstream, mutate, message):
    index = upstream.patches_dir / "index.toml"
    index.write_text(mutate(index.read_text()))
    with pytest.raises(SeriesError) as info:
        load_index(upstream.patches_dir)
    assert message in info.value.what
    assert info.value.exit_code == 12


def test_missing_index(tmp_path):
    with pytest.raises(SeriesError, match="no patch index"):
        load_index(tmp_path)


def test_merged_commit_parsed(upstream):
    index = upstream.patches_dir / "index.toml"
    index.write_text(index.read_text().replace(
        'upstream = "not-forwarded"', 'upstream = "merged abcdef12"', 1))
    first = load_index(upstream.patches_dir)[0].patches[0]
    assert first.merged_commit == "abcdef12"
    assert load_index(upstream.patches_dir)[0].patches[1].merged_commit is None


@pytest.fixture
def repo(upstream):
    return gitpython.Repo(upstream.path)


def _select(upstream, repo, ref):
    return select_series(load_index(upstream.patches_dir),
                         gitops.resolve_ref(repo, ref), repo).name


def test_select_by_version_and_main(upstream, repo):
    assert _select(upstream, repo, "0.1.0") == "v0.1"
    assert _select(upstream, repo, "v0.2.0") == "v0.2"
    assert _select(upstream, repo, "main") == "main"
    assert _select(upstream, repo, upstream.commits["main_base"][:10]) == "main"


def test_select_newer_tag_on_main_uses_main_series(upstream, repo):
    upstream.commit({"mlx/version.h": ("MINOR 2", "MINOR 3")}, "release 0.3.0",
                    tag="v0.3.0")
    assert _select(upstream, repo, "0.3.0") == "main"


def test_select_commit_off_main_uses_version_h(upstream, repo):
    upstream.commit({"README.md": ("fixture", "fixture (0.2 branch)")},
                    "backport", branch="release-0.2", label="backport")
    # release-0.2 forks from main at main's tip, so it descends from main_base
    assert _select(upstream, repo, "release-0.2") == "main"
    git_reset = upstream.git
    git_reset("branch", "-f", "old-0.1", "v0.1.0")
    upstream.commit({"README.md": ("fixture", "fixture 0.1.x")}, "fix",
                    branch="old-0.1")
    assert _select(upstream, repo, "old-0.1") == "v0.1"


def test_select_unsupported_lists_lines(upstream, repo):
    index = upstream.patches_dir / "index.toml"
    index.write_text(index.read_text().replace('">=0.1.0,<0.2"', '">=0.1.5,<0.2"'))
    with pytest.raises(SeriesError) as info:
        _select(upstream, repo, "0.1.0")
    assert "v0.1: versions >=0.1.5,<0.2" in info.value.why
    assert "main: upstream main descending from" in info.value.why


def test_find_series(upstream):
    index = load_index(upstream.patches_dir)
    assert find_series(index, "main").is_main
    with pytest.raises(SeriesError, match="no patch series named 'v9'"):
        find_series(index, "v9")


def test_patch_set_hash(upstream):
    series = load_index(upstream.patches_dir)[0]
    full = patch_set_hash(series.patches)
    assert full == patch_set_hash(load_index(upstream.patches_dir)[0].patches)
    assert len(full) == 10
    assert patch_set_hash(series.for_target("cuda")) != full
    series.patches[0].path.write_text(series.patches[0].path.read_text() + "\n")
    upstream.write_sums()
    assert patch_set_hash(load_index(upstream.patches_dir)[0].patches) != full


def test_parse_patch_header_and_trailers(upstream):
    patch = parse_patch(upstream.patches_dir / "v0.1" /
                        "0020-cuda-tiled-flash-attention.patch")
    assert patch.author == "Fixture Author"
    assert patch.email == "author@example.com"
    assert patch.date == "Sat, 3 Feb 2024 10:00:00 +0000"
    assert patch.subject == "cuda: tiled flash attention for head_dim 129-512"
    assert patch.trailers["Bug"] == ("https://example.com/bug/1",)
    assert patch.missing_trailers() == []
    assert patch.message.startswith(patch.subject + "\n\nWhy: tests")
    assert set(patch.files) == {"mlx/backend/cuda/sdpa.cu",
                                "mlx/backend/cuda/tiled.cu"}
    hunk = patch.hunks["mlx/backend/cuda/sdpa.cu"][0]
    assert (hunk.index, hunk.old_start) == (1, 7)
    assert patch.hunk_at("mlx/backend/cuda/sdpa.cu", 7) == hunk


def test_parse_patch_encoded_author_and_missing_trailers():
    text = ("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
            "From: =?UTF-8?q?J=C3=BCrgen=20M=C3=BCller?= <jm@example.com>\n"
            "Date: Mon, 1 Jan 2024 00:00:00 +0000\n"
            "Subject: [PATCH] a subject folded\n over two lines\n\n"
            "Body text.\n\nOrigin: here\nBug: none\n---\n"
            "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    patch = parse_patch_text(text)
    assert patch.author == "Jürgen Müller"
    assert patch.subject == "a subject folded over two lines"
    assert patch.missing_trailers() == ["Forwarded"]
    assert patch.hunks == {"x": patch.hunks["x"]} and patch.hunks["x"][0].old_start == 1


def test_parse_patch_rejects_non_patch():
    with pytest.raises(SeriesError):
        parse_patch_text("just some text with no headers")


def test_project_index_is_valid():
    """The project's own patches/: index parses (sha256 included), every file
    is listed, every patch says Origin / Forwarded / Bug."""
    root = Path(__file__).resolve().parent.parent / "patches"
    index = load_index(root)
    assert {"main", "v0.32"} <= {s.name for s in index}
    problems = []
    listed_all = {p.rel for s in index for p in s.patches}
    problems += [f"{rel}: not in index.toml" for rel in sorted(
        {p.relative_to(root).as_posix() for p in root.glob("*/*.patch")}
        - listed_all)]
    for series in index:
        for entry in series.patches:
            missing = parse_patch(entry.path).missing_trailers()
            if missing:
                problems.append(f"{series.name}/{entry.file}: no {missing}")
    assert not problems, "\n".join(problems)
