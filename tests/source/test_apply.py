"""apply: check-everything-first, atomic, reproducible work trees."""

from __future__ import annotations

import pytest
from gitfixture import git, tree_digest

from mlx_builder.errors import DirtyTreeError, ForeignTreeError, PatchConflictError
from mlx_builder.source.apply import checkout_clean, prepare_tree


def _log(tree) -> list[str]:
    return git(tree, "log", "--format=%s", "refs/mlx-builder/base..HEAD").splitlines()


def test_apply_creates_series_commits_on_recorded_base(upstream):
    settings = upstream.settings()
    tree = prepare_tree(settings, "0.1.0")
    assert tree.path == (settings.worktrees_dir / "v0.1.0-all").resolve()
    assert (tree.series.name, tree.ref.kind, tree.target) == ("v0.1", "version", "all")
    assert tree.base_commit == upstream.commits["v0.1.0"]
    assert [p.file[:4] for p in tree.applied] == ["0001", "0010", "0020"]
    assert _log(tree.path) == [
        "cuda: tiled flash attention for head_dim 129-512",
        "sdpa: query-chunked fallback", "metal: steel attention for head_dim 256"]
    assert git(tree.path, "rev-parse", "refs/mlx-builder/base") == tree.base_commit
    assert git(tree.path, "rev-parse", "HEAD") == tree.head
    assert git(tree.path, "branch", "--show-current") == "mlx-builder/v0.1"
    assert git(tree.path, "config", "mlx-builder.series") == "v0.1"
    assert git(tree.path, "status", "--porcelain") == ""
    assert "tiled(10)" in (tree.path / "mlx/backend/cuda/sdpa.cu").read_text()
    assert (tree.path / "mlx/backend/cuda/tiled.cu").is_file()
    # the patch's author and date are kept
    assert git(tree.path, "log", "-1", "--format=%an|%aI|%cI", "HEAD") == (
        "Fixture Author|2024-02-03T10:00:00+00:00|2024-02-03T10:00:00+00:00")


def test_apply_is_reproducible(upstream, tmp_path):
    settings = upstream.settings()
    one = prepare_tree(settings, "main", dest=tmp_path / "one")
    two = prepare_tree(settings, "main", dest=tmp_path / "two")
    assert one.series.name == "main" and one.head == two.head
    assert len(_log(one.path)) == 3


@pytest.mark.parametrize("target, expected", [
    ("cuda", ["0010", "0020"]), ("metal", ["0001", "0010"]), ("cpu", ["0010"])])
def test_apply_target_subsets(upstream, target, expected):
    tree = prepare_tree(upstream.settings(), "0.2.0", target=target)
    assert [p.file[:4] for p in tree.applied] == expected
    assert tree.path.name == f"v0.2.0-{target}"
    assert len(_log(tree.path)) == len(expected)


def _conflict_on_main(upstream):
    """Upstream rewrites the line patch 0020 changes."""
    return upstream.commit({"mlx/backend/cuda/sdpa.cu":
                            ("cuda_line_10 = 10;", "cuda_line_10 = upstream(10);")},
                           "upstream touches cuda line 10")


def test_conflict_leaves_existing_tree_byte_identical(upstream, tmp_path):
    settings = upstream.settings()
    tree = prepare_tree(settings, "main", dest=tmp_path / "wt")
    (tree.path / "build").mkdir()
    (tree.path / "build" / "out.o").write_bytes(b"\x00obj")
    git(tree.path, "config", "core.excludesFile", str(tmp_path / "ignore"))
    (tmp_path / "ignore").write_text("build/\n")
    before = tree_digest(tree.path)
    _conflict_on_main(upstream)
    with pytest.raises(PatchConflictError) as info:
        prepare_tree(settings, "main", dest=tmp_path / "wt")
    err = info.value
    assert err.exit_code == 13
    assert "0020-cuda-tiled-flash-attention.patch" in err.what
    assert "mlx/backend/cuda/sdpa.cu:7" in err.what
    [conflict] = err.conflicts
    assert (conflict.file, conflict.line) == ("mlx/backend/cuda/sdpa.cu", 7)
    assert conflict.hunk.startswith("#1 @@ -7,7 +7,7 @@")
    assert tree_digest(tree.path) == before


def test_conflict_creates_no_tree(upstream, tmp_path):
    _conflict_on_main(upstream)
    with pytest.raises(PatchConflictError):
        prepare_tree(upstream.settings(), "main", dest=tmp_path / "new")
    assert not (tmp_path / "new").exists()
    # only the metal patch for a metal build: no conflict
    tree = prepare_tree(upstream.settings(), "main", target="metal",
                        dest=tmp_path / "new")
    assert len(tree.applied) == 2


def test_dirty_tree_is_refused(upstream, tmp_path):
    settings = upstream.settings()
    tree = prepare_tree(settings, "0.1.0", dest=tmp_path / "wt")
    (tree.path / "mlx/attention.cpp").write_text("my local edit\n")
    (tree.path / "notes.txt").write_text("untracked\n")
    before = tree_digest(tree.path)
    with pytest.raises(DirtyTreeError) as info:
        prepare_tree(settings, "0.2.0", dest=tmp_path / "wt")
    assert "mlx/attention.cpp" in info.value.why and info.value.exit_code == 14
    assert tree_digest(tree.path) == before


def test_clean_tree_is_repointed_and_old_tip_kept(upstream, tmp_path):
    settings = upstream.settings()
    first = prepare_tree(settings, "0.2.0", dest=tmp_path / "wt")
    git(first.path, "commit", "-q", "--allow-empty", "-m", "my work")
    mine = git(first.path, "rev-parse", "HEAD")
    second = prepare_tree(settings, "main", series_name="v0.2",
                          dest=tmp_path / "wt")
    assert second.base_commit == upstream.commits["main"]
    assert second.previous == mine
    assert git(first.path, "rev-parse", "refs/mlx-builder/previous") == mine
    assert len(_log(second.path)) == 3



def test_commits_on_a_detached_head_are_kept_and_named(upstream, tmp_path, capsys,
                                                     isolated_env):
    from mlx_builder.cli import main
    settings = upstream.settings()
    first = prepare_tree(settings, "0.2.0", dest=tmp_path / "wt")
    git(first.path, "checkout", "-q", "--detach")
    git(first.path, "commit", "-q", "--allow-empty", "-m", "work on a detached head")
    mine = git(first.path, "rev-parse", "HEAD")
    again = prepare_tree(settings, "0.2.0", dest=tmp_path / "wt")
    assert again.previous == mine
    assert git(first.path, "rev-parse", f"refs/mlx-builder/kept/{mine}") == mine
    assert git(first.path, "rev-parse", "refs/mlx-builder/previous") == mine
    git(first.path, "checkout", "-q", "--detach")
    git(first.path, "commit", "-q", "--allow-empty", "-m", "more")
    more = git(first.path, "rev-parse", "HEAD")
    with pytest.raises(SystemExit) as exit_:
        main(["--mlx-repo", str(upstream.path), "--patches-dir", str(upstream.patches_dir),
              "--cache-dir", str(settings.cache_dir), "apply", "--mlx", "0.2.0",
              "--dest", str(first.path)])
    assert exit_.value.code == 0
    assert f"previous commit {more[:12]} is kept as refs/mlx-builder/kept/{more}" in \
        capsys.readouterr().out.replace("\n", " ")


def test_non_git_dest_is_refused(upstream, tmp_path):
    dest = tmp_path / "stuff"
    dest.mkdir()
    (dest / "file").write_text("x")
    with pytest.raises(ForeignTreeError, match="not a git work tree"):
        prepare_tree(upstream.settings(), "0.1.0", dest=dest)
    assert (dest / "file").read_text() == "x" and len(list(dest.iterdir())) == 1


def test_already_upstream_patch_is_refused_unless_marked_merged(upstream, tmp_path):
    merged = upstream.commit({"mlx/backend/metal/sdpa.metal":
                              ("metal_line_10 = 10;",
                               "metal_line_10 = 256; // bd=256")},
                             "upstream merges bd256")
    with pytest.raises(PatchConflictError, match="already upstream"):
        prepare_tree(upstream.settings(), "main", dest=tmp_path / "a")
    assert not (tmp_path / "a").exists()
    index = upstream.patches_dir / "index.toml"
    text = index.read_text()
    head, main_part = text.split('name = "main"')
    index.write_text(head + 'name = "main"' + main_part.replace(
        'upstream = "not-forwarded"', f'upstream = "merged {merged[:10]}"', 1))
    tree = prepare_tree(upstream.settings(), "main", dest=tmp_path / "a")
    assert [p.file[:4] for p in tree.skipped] == ["0001"]
    assert [p.file[:4] for p in tree.applied] == ["0010", "0020"]
    # at the series base the merge commit is not reachable: the patch applies
    base = prepare_tree(upstream.settings(), upstream.commits["main_base"],
                        dest=tmp_path / "b")
    assert len(base.applied) == 3 and not base.skipped


def test_three_way_merge_applies(upstream, tmp_path):
    upstream.commit({"mlx/backend/cuda/sdpa.cu":
                     ("cuda_line_13 = 13;", "cuda_line_13 = 13; // moved on")},
                    "upstream edits patch context")
    tree = prepare_tree(upstream.settings(), "main", dest=tmp_path / "wt")
    text = (tree.path / "mlx/backend/cuda/sdpa.cu").read_text()
    assert "tiled(10)" in text and "moved on" in text
    assert git(tree.path, "status", "--porcelain") == ""


def test_checkout_clean(upstream, tmp_path):
    path, ref = checkout_clean(upstream.settings(), "0.2.0")
    assert path.name == "v0.2.0-clean" and ref.commit == upstream.commits["v0.2.0"]
    assert git(path, "rev-parse", "HEAD") == ref.commit
    assert git(path, "status", "--porcelain") == ""
    (path / "README.md").write_text("dirty")
    with pytest.raises(DirtyTreeError):
        checkout_clean(upstream.settings(), "main", dest=path)


def test_failure_while_writing_rolls_back(upstream, tmp_path, monkeypatch):
    from mlx_builder.source import apply as apply_mod

    settings = upstream.settings()
    tree = prepare_tree(settings, "0.1.0", dest=tmp_path / "wt")
    before = tree_digest(tree.path)
    real = apply_mod.commit_patch
    calls = []

    def flaky(*args, **kw):
        calls.append(args)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(*args, **kw)

    monkeypatch.setattr(apply_mod, "commit_patch", flaky)
    with pytest.raises(OSError):
        prepare_tree(settings, "main", dest=tmp_path / "wt")
    assert tree_digest(tree.path) == before
    calls.clear()
    with pytest.raises(OSError):
        prepare_tree(settings, "main", dest=tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()
