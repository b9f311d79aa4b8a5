"""export: deterministic regeneration of a series and --check."""

from __future__ import annotations

import pytest

from gitfixture import git
from mlx_builder.apply import prepare_tree
from mlx_builder.errors import SeriesError, StaleExportError
from mlx_builder.export import export_series


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
    with pytest.raises(StaleExportError, match="extra .*0021-sdpa-one-more-fix"):
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
