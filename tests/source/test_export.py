"""export: deterministic regeneration of a series and --check."""

from __future__ import annotations

import git as gitpython
import pytest
from gitfixture import PatchSpec, git, tree_digest

from mlx_builder.errors import SeriesError, StaleExportError
from mlx_builder.source.apply import prepare_tree
from mlx_builder.source.export import export_many, export_series
from mlx_builder.source.gitops import format_patch
from mlx_builder.source.series import load_index, strip_applies_to, without_offsets


def _snapshot(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.fixture
def tree(upstream, tmp_path):
    return prepare_tree(upstream.settings(), "0.1.0", dest=tmp_path / "wt")


def test_roundtrip_is_byte_identical(upstream, tree):
    series_dir = upstream.patches_dir / "v0.1"
    before = _snapshot(series_dir)
    result = export_series(upstream.settings(), "v0.1", str(tree.path), check=True)
    assert result.clean and result.written == ()
    assert len(result.unchanged) == 3
    result = export_series(upstream.settings(), "v0.1", str(tree.path))
    assert _snapshot(series_dir) == before


def test_amended_commit_is_stale_then_exported(upstream, tree):
    series_dir = upstream.patches_dir / "v0.1"
    git(tree.path, "checkout", "-q", "HEAD~1")  # the 0010 commit
    (tree.path / "mlx/attention.cpp").write_text(
        (tree.path / "mlx/attention.cpp").read_text().replace(
            "chunked(20)", "chunked(20, 512)"))
    git(tree.path, "commit", "-q", "-a", "--amend", "--no-edit")
    git(tree.path, "cherry-pick", "mlx-builder/v0.1")
    git(tree.path, "branch", "-f", "mlx-builder/v0.1", "HEAD")
    git(tree.path, "checkout", "-q", "mlx-builder/v0.1")
    before = _snapshot(series_dir)
    with pytest.raises(StaleExportError) as info:
        export_series(upstream.settings(), "v0.1", str(tree.path), check=True)
    assert "stale: 0010-chunked-sdpa-fallback.patch" in info.value.what
    assert info.value.exit_code == 20
    assert _snapshot(series_dir) == before
    result = export_series(upstream.settings(), "v0.1", str(tree.path))
    assert result.written == ("0010-chunked-sdpa-fallback.patch",)
    after = _snapshot(series_dir)
    assert b"chunked(20, 512)" in after["0010-chunked-sdpa-fallback.patch"]
    assert after["0001-metal-steel-attention-bd256.patch"] == \
        before["0001-metal-steel-attention-bd256.patch"]
    # deterministic: exporting again changes nothing, and --check passes
    export_series(upstream.settings(), "v0.1", str(tree.path))
    assert _snapshot(series_dir) == after
    assert export_series(upstream.settings(), "v0.1", str(tree.path),
                         check=True).clean


def test_new_commit_is_extra_and_gets_a_number(upstream, tree):
    (tree.path / "mlx/attention.cpp").write_text(
        (tree.path / "mlx/attention.cpp").read_text() + "extra();\n")
    git(tree.path, "commit", "-q", "-a", "-m", "sdpa: one more fix\n\nBecause.")
    with pytest.raises(StaleExportError, match=r"extra .*0021-sdpa-one-more-fix"):
        export_series(upstream.settings(), "v0.1", str(tree.path), check=True)
    result = export_series(upstream.settings(), "v0.1", str(tree.path))
    assert result.extra == ("0021-sdpa-one-more-fix.patch",)
    assert 'file = "0021-sdpa-one-more-fix.patch"' in result.index_snippet()
    assert any("lacks trailers Origin, Forwarded, Bug" in w
               for w in result.warnings)
    assert (upstream.patches_dir / "v0.1" / "0021-sdpa-one-more-fix.patch").is_file()


def test_dropped_commit_is_missing(upstream, tree):
    git(tree.path, "reset", "-q", "--hard", "HEAD~1")
    with pytest.raises(StaleExportError,
                       match="missing from branch: 0020-cuda-tiled"):
        export_series(upstream.settings(), "v0.1", str(tree.path), check=True)


def test_target_tree_only_owns_its_patches(upstream, tmp_path):
    tree = prepare_tree(upstream.settings(), "0.1.0", target="cuda",
                        dest=tmp_path / "cuda")
    result = export_series(upstream.settings(), "v0.1", str(tree.path), check=True)
    assert result.clean and result.target == "cuda"


def test_from_branch_name(upstream):
    prepare_tree(upstream.settings(), "0.1.0")
    result = export_series(upstream.settings(), "v0.1", "v0.1", check=True)
    assert result.clean
    with pytest.raises(SeriesError, match="neither a directory nor a branch"):
        export_series(upstream.settings(), "v0.1", "no-such-branch")


# ---------------------------------------------------------------- common/

CUDA = "0020-cuda-tiled-flash-attention.patch"


def _edit_last_commit(tree_path, rel, old, new):
    path = tree_path / rel
    path.write_text(path.read_text().replace(old, new))
    git(tree_path, "commit", "-q", "-a", "--amend", "--no-edit")


@pytest.fixture
def shared_trees(upstream, tmp_path):
    """0020 shared by every series, and trees of v0.1 and v0.2 (0020 last)."""
    upstream.share(CUDA, ["v0.1", "v0.2", "main"])
    settings = upstream.settings()
    return (prepare_tree(settings, "0.1.0", dest=tmp_path / "t1"),
            prepare_tree(settings, "0.2.0", dest=tmp_path / "t2"))


def test_applies_to_comes_from_the_index(upstream, shared_trees):
    t1, _ = shared_trees
    message = git(t1.path, "log", "-1", "--format=%B")
    assert message.splitlines()[-1] == (
        "Applies-To: v0.1 (>=0.1.0,<0.2); v0.2 (>=0.2.0,<0.3); "
        f"main (made on {upstream.commits['main_base'][:7]})")
    assert b"Applies-To" not in (upstream.patches_dir / "common" / CUDA).read_bytes()
    assert export_many(upstream.settings(), [("v0.1", str(t1.path))],
                       check=True)[0].clean


def test_common_patch_written_once(upstream, shared_trees):
    t1, t2 = shared_trees
    settings = upstream.settings()
    jobs = [("v0.1", str(t1.path)), ("v0.2", str(t2.path))]
    assert all(r.clean for r in export_many(settings, jobs, check=True))
    _edit_last_commit(t1.path, "mlx/backend/cuda/tiled.cu", "tiled kernel",
                      "tiled kernel, faster")
    _edit_last_commit(t2.path, "mlx/backend/cuda/tiled.cu", "tiled kernel",
                      "tiled kernel, faster")
    results = export_many(settings, jobs)
    assert results[0].written == (f"common/{CUDA}",)
    assert results[1].written == ()          # already written, identical
    text = (upstream.patches_dir / "common" / CUDA).read_text()
    assert "+// tiled kernel, faster" in text
    assert not list(upstream.patches_dir.glob(f"v0.*/{CUDA}"))
    load_index(upstream.patches_dir)          # SHA256SUMS follows the file
    assert all(r.clean for r in export_many(settings, jobs, check=True))


def test_trees_that_disagree_about_a_common_patch_write_nothing(upstream,
                                                               shared_trees):
    t1, t2 = shared_trees
    _edit_last_commit(t1.path, "mlx/backend/cuda/tiled.cu", "tiled kernel",
                      "tiled kernel, faster")
    before = tree_digest(upstream.patches_dir)
    with pytest.raises(SeriesError) as info:
        export_many(upstream.settings(), [("v0.1", str(t1.path)),
                                          ("v0.2", str(t2.path))])
    assert f"disagree about common/{CUDA}" in info.value.what
    assert "first difference at line" in info.value.why
    assert tree_digest(upstream.patches_dir) == before


def test_changed_common_patch_is_checked_against_the_other_series(
        upstream, shared_trees):
    t1, _ = shared_trees
    settings = upstream.settings()
    # A change every series can take: written, after the check.
    _edit_last_commit(t1.path, "mlx/backend/cuda/tiled.cu", "tiled kernel",
                      "tiled kernel, faster")
    assert export_series(settings, "v0.1", str(t1.path)).written == (f"common/{CUDA}",)
    # One that v0.2 (whose attention.cpp line 3 differs) cannot take: refused.
    _edit_last_commit(t1.path, "mlx/attention.cpp", "attention_line_3 = 3;",
                      "attention_line_3 = 33;")
    before = tree_digest(upstream.patches_dir)
    with pytest.raises(SeriesError) as info:
        export_series(settings, "v0.1", str(t1.path))
    assert "does not apply to series v0.2 at v0.2.0" in info.value.what
    assert "mlx/attention.cpp" in info.value.what
    assert tree_digest(upstream.patches_dir) == before


def test_tree_without_the_common_commit_is_refused(upstream, shared_trees):
    t1, _ = shared_trees
    git(t1.path, "reset", "-q", "--hard", "HEAD~1")
    before = tree_digest(upstream.patches_dir)
    with pytest.raises(SeriesError, match=f"no commit for common/{CUDA}"):
        export_series(upstream.settings(), "v0.1", str(t1.path))
    assert tree_digest(upstream.patches_dir) == before
    with pytest.raises(StaleExportError, match=f"missing from branch: common/{CUDA}"):
        export_series(upstream.settings(), "v0.1", str(t1.path), check=True)


def test_export_repairs_its_own_files_and_sums(upstream, tree):
    patch = upstream.patches_dir / "v0.1" / "0010-chunked-sdpa-fallback.patch"
    good = patch.read_bytes()
    patch.write_bytes(good[:len(good) // 2])
    with pytest.raises(SeriesError, match="does not match its sha256"):
        export_series(upstream.settings(), "v0.1", str(tree.path), check=True)
    result = export_series(upstream.settings(), "v0.1", str(tree.path))
    assert result.stale == ("0010-chunked-sdpa-fallback.patch",)
    assert patch.read_bytes() == good
    load_index(upstream.patches_dir)


# ---------------------------------------------------------------- all or nothing

def test_a_failed_export_writes_nothing(upstream, tree, monkeypatch):
    from pathlib import Path

    from mlx_builder.errors import FileSystemError
    series_dir = upstream.patches_dir / "v0.1"
    for name in ("0010-chunked-sdpa-fallback.patch", "0020-cuda-tiled-flash-attention.patch"):
        path = series_dir / name
        path.write_text(path.read_text().replace("Why: tests need", "Why: tests wanted"))
    before = tree_digest(upstream.patches_dir)
    real = Path.write_bytes

    def disk_full_at_0020(self, data):
        if "0020-cuda" in self.name:
            raise OSError(28, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", disk_full_at_0020)
    with pytest.raises(FileSystemError, match="cannot write") as exc:
        export_series(upstream.settings(), "v0.1", str(tree.path))
    assert "disk is full" in exc.value.why
    assert tree_digest(upstream.patches_dir) == before


TARGET_SPECS = [
    PatchSpec("0001-metal-steel.patch", "metal", "metal: steel attention",
              {"mlx/backend/metal/sdpa.metal": ("metal_line_10 = 10;", "metal_line_10 = 256;")}),
    PatchSpec("0010-everywhere.patch", "all", "sdpa: ask every backend",
              {"mlx/backend/metal/sdpa.metal": ("metal_line_30 = 30;", "metal_line_30 = ask();"),
               "mlx/attention.cpp": ("attention_line_20 = 20;", "attention_line_20 = ask();")}),
    PatchSpec("0020-cuda-route.patch", "cuda", "cuda: route",
              {"mlx/backend/cuda/sdpa.cu": ("cuda_line_10 = 10;", "cuda_line_10 = route();")}),
]


@pytest.mark.parametrize("target", ["all", "metal", "cuda", "cpu"])
def test_export_is_the_same_from_a_tree_of_any_target(make_upstream, tmp_path, target):
    """0010 changes a file that the metal patch before it changed too: its
    text (blob ids, offsets) depends on whether that patch was applied, and
    a tree of any target still checks clean and exports the same files."""
    up = make_upstream(series=False)
    up.add_series("v0.1", "v0.1.0", ">=0.1.0,<0.2", specs=TARGET_SPECS)
    settings = up.settings()
    tree = prepare_tree(settings, "0.1.0", target=target, dest=tmp_path / target)
    before = tree_digest(up.patches_dir)
    assert export_series(settings, "v0.1", str(tree.path), check=True).clean
    result = export_series(settings, "v0.1", str(tree.path))
    assert result.written == () and tree_digest(up.patches_dir) == before


def test_a_real_change_is_still_stale_on_a_tree_of_another_target(make_upstream, tmp_path):
    up = make_upstream(series=False)
    up.add_series("v0.1", "v0.1.0", ">=0.1.0,<0.2", specs=TARGET_SPECS)
    tree = prepare_tree(up.settings(), "0.1.0", target="cpu", dest=tmp_path / "cpu")
    _edit_last_commit(tree.path, "mlx/attention.cpp", "ask()", "ask(1)")
    with pytest.raises(StaleExportError, match=r"stale: 0010-everywhere\.patch"):
        export_series(up.settings(), "v0.1", str(tree.path), check=True)
    git(tree.path, "commit", "-q", "--amend", "-m", "sdpa: ask every backend, again")
    with pytest.raises(StaleExportError, match="extra"):
        export_series(up.settings(), "v0.1", str(tree.path), check=True)


# ---------------------------------------------------------------- offsets

CHUNKED = "0010-chunked-sdpa-fallback.patch"
TARGETS = ("cuda", "metal", "cpu")


@pytest.fixture
def offsets(upstream):
    """Series v0.2 and v0.3 whose 0010 is the same change but for where its
    hunk starts (v0.3.0 has two more lines above it) and its blob ids."""
    upstream.commit({"mlx/attention.cpp": ("attention_line_1 = 1;\n",
                                           "attention_line_1 = 1;\nextra_a();\n"
                                           "extra_b();\n"),
                     "mlx/version.h": ("MINOR 2", "MINOR 3")},
                    "release 0.3.0", tag="v0.3.0", branch="release-0.3")
    upstream.add_series("v0.3", "v0.3.0", ">=0.3.0,<0.4")
    return upstream


def _tree_ids(settings, root):
    """{(series, target): HEAD^{tree}} of v0.2 and v0.3 applied per target."""
    ids = {}
    for ref, name in (("0.2.0", "v0.2"), ("0.3.0", "v0.3")):
        for target in TARGETS:
            tree = prepare_tree(settings, ref, target=target,
                                dest=root / f"{name}-{target}")
            ids[name, target] = git(tree.path, "rev-parse", "HEAD^{tree}")
    return ids


def _amend_chunked(tree_path, new):
    """Change the 0010 commit (second of three) of a tree's branch."""
    git(tree_path, "checkout", "-q", "HEAD~1")
    path = tree_path / "mlx/attention.cpp"
    path.write_text(path.read_text().replace("chunked(20)", new))
    git(tree_path, "commit", "-q", "-a", "--amend", "--no-edit")
    git(tree_path, "cherry-pick", "mlx-builder/" + git(
        tree_path, "config", "mlx-builder.series"))
    git(tree_path, "branch", "-f", "mlx-builder/" + git(
        tree_path, "config", "mlx-builder.series"), "HEAD")
    git(tree_path, "checkout", "-q", "mlx-builder/" + git(
        tree_path, "config", "mlx-builder.series"))


def test_patch_shared_at_offsets_gives_the_same_trees(offsets, tmp_path):
    v02 = (offsets.patches_dir / "v0.2" / CHUNKED).read_text()
    v03 = (offsets.patches_dir / "v0.3" / CHUNKED).read_text()
    assert v02 != v03 and without_offsets(v02) == without_offsets(v03)
    before = _tree_ids(offsets.settings(), tmp_path / "before")
    offsets.share(CHUNKED, ["v0.2", "v0.3"])
    assert not (offsets.patches_dir / "v0.3" / CHUNKED).exists()
    assert _tree_ids(offsets.settings(), tmp_path / "after") == before


def test_export_keeps_a_patch_shared_at_offsets(offsets, tmp_path):
    offsets.share(CHUNKED, ["v0.2", "v0.3"])
    settings = offsets.settings()
    jobs = [(name, str(prepare_tree(settings, ref, dest=tmp_path / name).path))
            for name, ref in (("v0.2", "0.2.0"), ("v0.3", "0.3.0"))]
    before = tree_digest(offsets.patches_dir)
    for job in jobs:
        assert export_many(settings, [job], check=True)[0].clean
    results = export_many(settings, jobs)
    assert [r.written for r in results] == [(), ()]
    assert f"common/{CHUNKED}" in results[1].unchanged
    assert export_series(settings, "v0.3", jobs[1][1]).written == ()
    assert tree_digest(offsets.patches_dir) == before


def test_shared_patch_changed_in_one_tree_keeps_the_other_clean(offsets,
                                                                tmp_path):
    offsets.share(CHUNKED, ["v0.2", "v0.3"])
    settings = offsets.settings()
    t2 = prepare_tree(settings, "0.2.0", dest=tmp_path / "t2").path
    t3 = prepare_tree(settings, "0.3.0", dest=tmp_path / "t3").path
    _amend_chunked(t3, "chunked(20, 512)")
    # written from v0.3's tree, at its lines, after the check that v0.2's
    # base takes it as it is
    assert export_series(settings, "v0.3", str(t3)).written == (f"common/{CHUNKED}",)
    text = (offsets.patches_dir / "common" / CHUNKED).read_text()
    assert "+attention_line_20 = chunked(20, 512);" in text
    with pytest.raises(StaleExportError, match=f"stale: common/{CHUNKED}"):
        export_series(settings, "v0.2", str(t2), check=True)
    # the same change in v0.2's tree exports at other lines: kept as it is
    _amend_chunked(t2, "chunked(20, 512)")
    before = tree_digest(offsets.patches_dir)
    assert export_series(settings, "v0.2", str(t2), check=True).clean
    assert export_series(settings, "v0.2", str(t2)).written == ()
    assert tree_digest(offsets.patches_dir) == before


def test_trees_that_differ_beyond_offsets_disagree(offsets, tmp_path):
    offsets.share(CHUNKED, ["v0.2", "v0.3"])
    settings = offsets.settings()
    t2 = prepare_tree(settings, "0.2.0", dest=tmp_path / "t2").path
    t3 = prepare_tree(settings, "0.3.0", dest=tmp_path / "t3").path
    _amend_chunked(t3, "chunked(20, 512)")
    before = tree_digest(offsets.patches_dir)
    with pytest.raises(SeriesError, match=f"disagree about common/{CHUNKED}"):
        export_many(settings, [("v0.2", str(t2)), ("v0.3", str(t3))])
    assert tree_digest(offsets.patches_dir) == before


def test_shared_text_that_lands_elsewhere_in_a_tree_is_not_kept(upstream,
                                                                tmp_path):
    """v0.3.0 has a copy of the lines around 0010's hunk above them, and its
    0010 changes that copy. v0.2's text is the same but for offsets, yet
    applied there it would change the other copy: another commit."""
    block = "".join(f"attention_line_{i} = {i};\n" for i in range(16, 24))
    upstream.commit({"mlx/attention.cpp": ("attention_line_1 = 1;\n",
                                           "attention_line_1 = 1;\n" + block),
                     "mlx/version.h": ("MINOR 2", "MINOR 3")},
                    "release 0.3.0", tag="v0.3.0", branch="release-0.3")
    upstream.add_series("v0.3", "v0.3.0", ">=0.3.0,<0.4")
    settings = upstream.settings()
    t3 = str(prepare_tree(settings, "0.3.0", dest=tmp_path / "t3").path)
    upstream.share(CHUNKED, ["v0.2", "v0.3"])          # v0.2's text
    with pytest.raises(StaleExportError, match=f"stale: common/{CHUNKED}"):
        export_series(settings, "v0.3", t3, check=True)
    t2 = str(prepare_tree(settings, "0.2.0", dest=tmp_path / "t2").path)
    jobs = [("v0.2", t2), ("v0.3", t3)]
    export_many(settings, jobs)
    # v0.3's text, which gives the commit of both trees, is the one written
    text = (upstream.patches_dir / "common" / CHUNKED).read_text()
    assert "\n@@ -3,7 +3,7 @@ attention_line_16 = 16;\n" in text
    assert all(r.clean for r in export_many(settings, jobs, check=True))


def test_tree_of_one_target_exports_the_series_files(upstream, tmp_path):
    """A cpu tree lacks the metal patch before 0010, so git exports 0010 with
    other blob ids; the series' file still gives its commit and is kept."""
    upstream.add_series("mixed", "v0.1.0", ">=0.1.5,<0.1.6", [
        PatchSpec("0001-metal-side.patch", "metal", "metal side",
                  {"mlx/attention.cpp": ("attention_line_5 = 5;",
                                         "attention_line_5 = metal(5);")}),
        PatchSpec("0010-all-side.patch", "all", "all side",
                  {"mlx/attention.cpp": ("attention_line_30 = 30;",
                                         "attention_line_30 = all(30);")})])
    tree = prepare_tree(upstream.settings(), "v0.1.0", series_name="mixed",
                        target="cpu", dest=tmp_path / "cpu")
    own = (upstream.patches_dir / "mixed" / "0010-all-side.patch").read_text()
    exported = strip_applies_to(format_patch(gitpython.Repo(tree.path), "HEAD")[1])
    assert exported != own and without_offsets(exported) == without_offsets(own)
    before = tree_digest(upstream.patches_dir)
    assert export_series(upstream.settings(), "mixed", str(tree.path),
                         check=True).clean
    assert export_series(upstream.settings(), "mixed", str(tree.path)).written == ()
    assert tree_digest(upstream.patches_dir) == before
