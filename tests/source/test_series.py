"""series: index.toml parsing and validation, selection, patch files."""

from __future__ import annotations

import hashlib
from pathlib import Path

import git as gitpython
import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlx_builder.errors import SeriesError, TargetError
from mlx_builder.source import gitops
from mlx_builder.source.series import (
    applies_to,
    find_series,
    load_index,
    parse_patch,
    parse_patch_text,
    patch_set_hash,
    select_series,
    strip_applies_to,
    with_applies_to,
    without_offsets,
    write_sums,
)


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


def assert_index_refused(patches_dir, mutate, message):
    """index.toml rewritten by `mutate` fails to load with `message` (exit 12)."""
    index = patches_dir / "index.toml"
    index.write_text(mutate(index.read_text()))
    with pytest.raises(SeriesError) as info:
        load_index(patches_dir)
    assert message in info.value.what
    assert info.value.exit_code == 12


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
    assert_index_refused(upstream.patches_dir, mutate, message)


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
    root = Path(__file__).resolve().parents[2] / "patches"
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


# ---------------------------------------------------------------- schema 2

CUDA = "0020-cuda-tiled-flash-attention.patch"


@pytest.fixture
def shared(upstream):
    """The fixture with 0020 (byte-identical in every series) in common/."""
    upstream.share(CUDA, ["v0.1", "v0.2", "main"])
    return upstream


def test_common_patch_is_one_entry_in_every_series(shared):
    index = load_index(shared.patches_dir)
    entries = [p for s in index for p in s.patches if p.file == CUDA]
    assert len(entries) == 3 and len({id(e) for e in entries}) == 1
    entry = entries[0]
    assert entry.is_common and entry.rel == f"common/{CUDA}"
    assert entry.path == (shared.patches_dir / "common" / CUDA).resolve()
    assert entry.shared_by == ("v0.1", "v0.2", "main")
    assert [p.file for p in index[0].patches][-1] == CUDA  # order kept
    assert index[0].directory == (shared.patches_dir / "v0.1").resolve()
    assert applies_to(index, entry) == (
        f"v0.1 (>=0.1.0,<0.2); v0.2 (>=0.2.0,<0.3); "
        f"main (made on {shared.commits['main_base'][:7]})")
    assert applies_to(index, index[0].patches[1]) == "v0.1 (>=0.1.0,<0.2)"


@pytest.mark.parametrize("mutate, message", [
    (lambda t: t.replace('series = ["v0.1", "v0.2", "main"]',
                         'series = ["v0.1", "v0.2"]'), "but is listed in"),
    (lambda t: t.replace('series = ["v0.1", "v0.2", "main"]',
                         'series = ["v0.1", "v0.2", "main", "v9"]'),
     "unknown series v9"),
    (lambda t: t.replace('series = ["v0.1", "v0.2", "main"]', 'series = "v0.1"'),
     "'series' must be a list"),
    (lambda t: t.replace(f'common = "{CUDA}"', 'common = "0099-nope.patch"', 1),
     "is not a [[common]] entry"),
    (lambda t: t.replace(f'common = "{CUDA}"',
                         f'common = "{CUDA}"\ntarget = "cuda"', 1),
     "unknown keys target"),
    (lambda t: t.replace("schema = 2", "schema = 1"), "[[common]] needs schema = 2"),
    (lambda t: t.replace('series = ["v0.1"', 'colour = 1\nseries = ["v0.1"'),
     "unknown keys colour"),
])
def test_common_index_errors(shared, mutate, message):
    assert_index_refused(shared.patches_dir, mutate, message)


@pytest.mark.parametrize("mutate, message", [
    (lambda t: t.replace("schema = 1\n", ""), "no 'schema' key"),
    (lambda t: t.replace("schema = 1", 'schema = "1"'), "unsupported schema"),
    (lambda t: t.replace("schema = 1", "schema = true"), "unsupported schema"),
    (lambda t: "colour = 1\n" + t, "unknown keys colour"),
    (lambda t: "schema = 1\nseries = 3\n", "expected an array of tables"),
    (lambda t: "schema = 1\nseries = [1, 2]\n", "expected an array of tables"),
    (lambda t: t.replace('name = "v0.1"', 'name = "../v0.1"'), "not a plain folder name"),
    (lambda t: t.replace('name = "v0.1"', 'name = "common"'), "not a plain folder name"),
    (lambda t: t.replace('name = "v0.1"', 'name = ".hidden"'), "not a plain folder name"),
    (lambda t: t.replace('name = "v0.1"', 'name = 7'), "not a plain folder name"),
    (lambda t: t.replace('file = "0001-metal', 'file = "../v0.2/0001-metal', 1),
     "without a plain 'file' name"),
    (lambda t: t.replace('file = "0001-metal', 'file = "sub/0001-metal', 1),
     "without a plain 'file' name"),
    (lambda t: t.replace('0001-metal-steel-attention-bd256.patch"',
                         '0001-metal-steel-attention-bd256.diff"', 1),
     "without a plain 'file' name"),
    (lambda t: t.replace('description = "series v0.1"', "description = 3"),
     "description must be a string"),
    (lambda t: t.replace('upstream = "not-forwarded"', "upstream = 1", 1),
     "upstream 1"),
])
def test_index_top_level_and_names(upstream, mutate, message):
    assert_index_refused(upstream.patches_dir, mutate, message)


def test_patch_file_linked_outside_its_folder_is_refused(upstream, tmp_path):
    outside = tmp_path / "elsewhere.patch"
    target = upstream.patches_dir / "v0.1" / "0001-metal-steel-attention-bd256.patch"
    outside.write_bytes(target.read_bytes())
    target.unlink()
    target.symlink_to(outside)
    with pytest.raises(SeriesError, match="resolves outside"):
        load_index(upstream.patches_dir)


# ---------------------------------------------------------------- SHA256SUMS

def test_sums_missing_malformed_or_mismatched(upstream):
    sums = upstream.patches_dir / "SHA256SUMS"
    good = sums.read_text()
    assert len(good.splitlines()) == 9
    sums.unlink()
    with pytest.raises(SeriesError, match=r"no .*SHA256SUMS"):
        load_index(upstream.patches_dir)
    assert load_index(upstream.patches_dir, verify=False)
    sums.write_text(good.replace("  v0.1/", "  ../v0.1/", 1))
    with pytest.raises(SeriesError, match="not a `<sha256>"):
        load_index(upstream.patches_dir)
    sums.write_text("\n".join(good.splitlines()[1:]) + "\n")
    with pytest.raises(SeriesError, match="has no sha256"):
        load_index(upstream.patches_dir)
    sums.write_text(good + good.splitlines()[0] + "\n")
    with pytest.raises(SeriesError, match="listed twice"):
        load_index(upstream.patches_dir)
    sums.write_text(good)
    patch = upstream.patches_dir / "main" / "0010-chunked-sdpa-fallback.patch"
    patch.write_bytes(patch.read_bytes()[:-1])
    with pytest.raises(SeriesError) as info:
        load_index(upstream.patches_dir)
    assert "main/0010-chunked-sdpa-fallback.patch does not match" in info.value.what
    assert "cut short" in info.value.why


def test_write_sums_keeps_other_lines(upstream):
    sums = upstream.patches_dir / "SHA256SUMS"
    before = sums.read_text().splitlines()
    assert write_sums(upstream.patches_dir, {}) is False
    assert write_sums(upstream.patches_dir, {"v0.1/0099-new.patch": "a" * 64})
    after = sums.read_text().splitlines()
    assert set(after) == set(before) | {"a" * 64 + "  v0.1/0099-new.patch"}
    assert after == sorted(after, key=lambda ln: ln.split("  ")[1])


def test_write_sums_drops_lines_of_files_that_are_gone(upstream):
    sums = upstream.patches_dir / "SHA256SUMS"
    gone = "v0.1/0001-metal-steel-attention-bd256.patch"
    (upstream.patches_dir / gone).unlink()
    assert gone in sums.read_text()
    assert write_sums(upstream.patches_dir, {})
    assert gone not in sums.read_text()
    assert "v0.2/0001-metal-steel-attention-bd256.patch" in sums.read_text()


OFFSET_PATCH = """diff --git a/f.c b/f.c
index 1111111..2222222 100644
--- a/f.c
+++ b/f.c
@@ -10,3 +10,3 @@ int f(void)
 a;
-b;
+c;
 d;
"""


@pytest.mark.parametrize("other, same", [
    (OFFSET_PATCH, True),
    (OFFSET_PATCH.replace("-10,3 +10,3", "-42,3 +44,3"), True),
    (OFFSET_PATCH.replace("1111111..2222222", "3333333..4444444"), True),
    (OFFSET_PATCH.replace(" a;", " z;"), False),            # context
    (OFFSET_PATCH.replace("+c;", "+e;"), False),            # the change
    (OFFSET_PATCH.replace("-10,3 +10,3", "-10,4 +10,4"), False),   # counts
    (OFFSET_PATCH.replace("int f(void)", "int g(void)"), False),   # heading
    (OFFSET_PATCH.replace("100644", "100755"), False),      # mode
])
def test_without_offsets_ignores_only_start_lines_and_blob_ids(other, same):
    assert (without_offsets(other) == without_offsets(OFFSET_PATCH)) is same


# ---------------------------------------------------------------- Applies-To

def test_applies_to_is_added_and_stripped():
    message = "cuda: x\n\nWhy.\n\nOrigin: here\nBug: none\n"
    with_it = with_applies_to(message, "main (made on 1234567)")
    assert with_it == ("cuda: x\n\nWhy.\n\nOrigin: here\nBug: none\n"
                       "Applies-To: main (made on 1234567)\n")
    assert with_applies_to(with_it, "v0.1") == with_it.replace(
        "main (made on 1234567)", "v0.1")
    assert with_applies_to("subject only\n", "v0.1") == \
        "subject only\n\nApplies-To: v0.1\n"
    assert with_applies_to("s\n\nJust prose.\n", "v0.1") == \
        "s\n\nJust prose.\n\nApplies-To: v0.1\n"
    patch = ("From: a <a@b>\nSubject: [PATCH] s\n\nWhy.\n\nOrigin: here\n"
             "Applies-To: v0.1\n\ndiff --git a/x b/x\n+Applies-To: kept\n")
    assert strip_applies_to(patch) == patch.replace("Applies-To: v0.1\n", "")
    assert strip_applies_to(strip_applies_to(patch)) == strip_applies_to(patch)


# ---------------------------------------------------------------- fuzzing

_KEYS = st.sampled_from(["schema", "series", "common", "name", "base", "versions",
                         "description", "patches", "file", "target", "upstream",
                         "x"])
_SCALARS = st.one_of(
    st.sampled_from([1, 2, "main", ">=0.1.0,<0.2", "v0.1.0", "cuda", "all",
                     "not-forwarded", "merged abcdef1", "v0.1", "common",
                     "../v0.1", "0001-metal-steel-attention-bd256.patch",
                     "0020-cuda-tiled-flash-attention.patch", "x/../y.patch"]),
    st.integers(-3, 3), st.booleans(), st.text(max_size=8))
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=12)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=st.dictionaries(_KEYS, _VALUES, max_size=4))
def test_fuzz_index_only_series_errors(upstream, doc):
    """Any TOML document: the parser returns a valid index or raises
    SeriesError, and every patch path it returns is inside patches/."""
    (upstream.patches_dir / "index.toml").write_text(tomli_w.dumps(doc))
    _load_or_series_error(upstream.patches_dir)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_mutated_index_only_series_errors(shared, data):
    """The valid schema-2 index with lines dropped, repeated or changed."""
    path = shared.patches_dir / "index.toml"
    if not hasattr(shared, "_text"):
        shared._text = path.read_text()
    lines = shared._text.splitlines()
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(lines) - 1))
        how = data.draw(st.sampled_from(["drop", "repeat", "value", "key"]))
        if how == "drop":
            del lines[i]
        elif how == "repeat":
            lines.insert(i, lines[i])
        elif " = " in lines[i]:
            key, value = lines[i].split(" = ", 1)
            new = data.draw(st.sampled_from(
                ['"../x"', '"common"', "[]", '["main"]', "0", '"main"',
                 '"0001-metal-steel-attention-bd256.patch"', "{}", '"a/b.patch"']))
            lines[i] = f"{key} = {new}" if how == "value" else \
                f"{data.draw(_KEYS)} = {value}"
        if not lines:
            break
    path.write_text("\n".join(lines) + "\n")
    _load_or_series_error(shared.patches_dir)


def _load_or_series_error(root):
    try:
        index = load_index(root)
    except SeriesError:
        return
    resolved = root.resolve()
    for series in index:
        assert _NAME_OK(series.name)
        for patch in series.patches:
            assert patch.path.parent.parent == resolved
            assert patch.path.is_file()


def _NAME_OK(name: str) -> bool:
    return "/" not in name and name not in (".", "..", "common") \
        and not name.startswith(".")
