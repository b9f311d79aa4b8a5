"""gitops: mirror, ref resolution, work trees, dirty checks, scratch checks."""

from __future__ import annotations

import git as gitpython
import pytest
from gitfixture import git

from mlx_builder.errors import DirtyTreeError, FetchError, GitError, RefError
from mlx_builder.source import gitops


@pytest.fixture
def repo(upstream):
    return gitpython.Repo(upstream.path)


def test_resolve_version_to_tag(repo, upstream):
    ref = gitops.resolve_ref(repo, "0.2.0")
    assert ref == gitops.ResolvedRef("v0.2.0", upstream.commits["v0.2.0"],
                                     "version", "0.2.0")


def test_resolve_tag_branch_and_commits(repo, upstream):
    tag = gitops.resolve_ref(repo, "v0.1.0")
    assert (tag.kind, tag.version, tag.commit) == (
        "tag", "0.1.0", upstream.commits["v0.1.0"])
    main = gitops.resolve_ref(repo, "main")
    assert (main.kind, main.commit, main.version) == (
        "branch", upstream.commits["main"], "0.2.1")
    base = upstream.commits["main_base"]
    short = gitops.resolve_ref(repo, base[:8])
    assert (short.kind, short.commit, short.ref) == ("commit", base, base)
    assert gitops.resolve_ref(repo, "main~1").commit == base


def test_resolve_unknown_lists_near_matches(repo):
    with pytest.raises(RefError) as info:
        gitops.resolve_ref(repo, "0.2.9")
    assert "v0.2.0" in info.value.why
    with pytest.raises(RefError) as info:
        gitops.resolve_ref(repo, "mian")
    assert "main" in info.value.why
    assert info.value.exit_code == 11


def test_read_version_falls_back_to_cmake(upstream):
    upstream.commit({"CMakeLists.txt": (None, "set(MLX_VERSION 0.9.1)\n")},
                    "cmake version", branch="old-style")
    git(upstream.path, "checkout", "-q", "old-style")
    git(upstream.path, "rm", "-q", "mlx/version.h")
    git(upstream.path, "commit", "-q", "-m", "drop version.h")
    git(upstream.path, "checkout", "-q", "main")
    repo = gitpython.Repo(upstream.path)
    assert gitops.read_version(repo, "old-style~1") == "0.2.1"  # version.h wins
    assert gitops.read_version(repo, "old-style") == "0.9.1"
    assert gitops.resolve_ref(repo, "old-style").version == "0.9.1"


def test_local_path_is_used_directly(upstream):
    repo = gitops.ensure_mirror(upstream.settings())
    assert gitops.objects_dir(repo) == (upstream.path / ".git" / "objects").resolve()
    assert not upstream.settings().mirror_dir.exists()


def test_local_path_must_be_a_repo(upstream, tmp_path):
    with pytest.raises(FetchError, match="is not a git repository"):
        gitops.ensure_mirror(upstream.settings(mlx_repo=str(tmp_path)))


def test_url_mirror_clone_fetch_and_offline(upstream):
    url = upstream.path.as_uri()
    settings = upstream.settings(mlx_repo=url)
    with pytest.raises(FetchError):
        gitops.ensure_mirror(upstream.settings(mlx_repo=url, offline=True))
    mirror = gitops.ensure_mirror(settings)
    assert settings.mirror_dir.is_dir()
    assert gitops.resolve_ref(mirror, "0.1.0").commit == upstream.commits["v0.1.0"]
    new = upstream.commit({"README.md": ("more", "more and more")}, "newer")
    offline = gitops.ensure_mirror(upstream.settings(mlx_repo=url, offline=True))
    assert gitops.resolve_ref(offline, "main").commit == upstream.commits["main"]
    fetched = gitops.ensure_mirror(settings)
    assert gitops.resolve_ref(fetched, "main").commit == new
    assert not list(settings.mirror_dir.parent.glob("*.partial"))


def test_clone_failure_leaves_no_mirror(upstream, tmp_path):
    settings = upstream.settings(mlx_repo=(tmp_path / "nope").as_uri())
    with pytest.raises(FetchError):
        gitops.ensure_mirror(settings)
    assert not settings.mirror_dir.exists()
    assert not list(settings.mirror_dir.parent.glob("*"))


def test_dirty_detection(upstream):
    assert gitops.dirty_paths(upstream.path) == []
    gitops.ensure_clean(upstream.path)
    (upstream.path / "README.md").write_text("changed\n")
    (upstream.path / "new.txt").write_text("untracked\n")
    assert sorted(gitops.dirty_paths(upstream.path)) == ["README.md", "new.txt"]
    with pytest.raises(DirtyTreeError) as info:
        gitops.ensure_clean(upstream.path)
    assert "README.md" in info.value.why and info.value.exit_code == 14


def test_work_tree_borrows_objects(upstream, tmp_path):
    mirror = gitpython.Repo(upstream.path)
    tree = gitops.init_work_tree(tmp_path / "wt", mirror, str(upstream.path))
    gitops.link_objects(tree, mirror)  # idempotent
    alternates = (tmp_path / "wt/.git/objects/info/alternates").read_text()
    assert alternates.count("\n") == 1
    assert gitops.checkout_branch(tree, "b", upstream.commits["v0.1.0"]) is None
    assert gitops.rev_commit(tree, gitops.BASE_REF) == upstream.commits["v0.1.0"]
    assert (tmp_path / "wt/mlx/attention.cpp").is_file()
    previous = gitops.checkout_branch(tree, "b", upstream.commits["v0.2.0"])
    assert previous == upstream.commits["v0.1.0"]
    assert gitops.rev_commit(tree, gitops.PREVIOUS_REF) == previous


def test_scratch_index_checks_without_touching_repo(upstream):
    repo = gitpython.Repo(upstream.path)
    patch = upstream.patches_dir / "v0.1" / "0010-chunked-sdpa-fallback.patch"
    before = git(upstream.path, "count-objects", "-v")
    with gitops.ScratchIndex(repo, upstream.commits["v0.1.0"]) as idx:
        start = idx.tree()
        assert idx.apply(patch).ok
        assert idx.tree() != start
        assert not idx.apply(patch).ok  # already applied: forward fails
        assert idx.apply(patch, check=True, reverse=True).ok
        idx.reset(start)
        assert idx.tree() == start
    assert git(upstream.path, "count-objects", "-v") == before
    assert git(upstream.path, "status", "--porcelain") == ""


def test_format_patch_is_stable(upstream):
    repo = gitpython.Repo(upstream.path)
    name, text = gitops.format_patch(repo, upstream.commits["v0.2.0"])
    assert name == "0001-release-0.2.0.patch"
    assert text.startswith("From 0000000000000000000000000000000000000000 ")
    assert "Subject: [PATCH] release 0.2.0" in text
    assert "\n-- \n" not in text and " files changed" not in text
    assert gitops.format_patch(repo, upstream.commits["v0.2.0"])[1] == text
    assert gitops.format_patch(repo, "v0.2.0", number=7)[0].startswith("0007-")


def test_a_failed_git_command_is_a_git_error_with_its_own_exit_code(tmp_path):
    """run_git names the command, the directory and git's last error line,
    and exits with GitError's code, not the catch-all 1."""
    with pytest.raises(GitError) as info:
        gitops.run_git(tmp_path, "rev-parse", "--verify", "no-such-ref")
    err = info.value
    assert err.exit_code == GitError.exit_code != 1
    assert "git rev-parse --verify no-such-ref failed" in err.what and str(tmp_path) in err.what
    assert err.why     # git's own message
    assert gitops.run_git(tmp_path, "rev-parse", "--verify", "x", check=False).rc != 0
