"""Against a real MLX checkout: every series applies to its base and its
versions, its common patches without a 3-way merge, each target's tree
exports back to the files on disk, and the status table prints.

Needs MLX_BUILDER_MLX_REPO (a local MLX clone or bare mirror); skipped with
a reason otherwise. Uses the project's own patches/index.toml.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import git as gitpython
import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from mlx_builder.settings import Settings
from mlx_builder.source import gitops
from mlx_builder.source.apply import prepare_tree
from mlx_builder.source.export import export_series
from mlx_builder.source.series import load_index
from mlx_builder.source.status import check_patches

pytestmark = pytest.mark.real_mlx
PATCHES = Path(__file__).resolve().parents[2] / "patches"
MLX_REPO = os.environ.get("MLX_BUILDER_MLX_REPO", "")
try:
    SERIES = load_index(PATCHES)
except Exception:  # reported by tests/source/test_series.py::test_project_index_is_valid
    SERIES = ()


@pytest.fixture(scope="module")
def mlx() -> gitpython.Repo:
    if not MLX_REPO or gitops.is_local_repo(MLX_REPO) is None:
        pytest.skip("real-MLX tests skipped: set MLX_BUILDER_MLX_REPO to a local "
                    "MLX clone or bare mirror to run them")
    return gitpython.Repo(gitops.is_local_repo(MLX_REPO))


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(mlx_repo=MLX_REPO, cache_dir=tmp_path / "cache",
                    work_dir=tmp_path / "work", patches_dir=PATCHES,
                    offline=True)


def _release_tags(repo, spec: str) -> list[str]:
    out = []
    for tag in gitops.tag_names(repo):
        try:
            version = Version(tag.lstrip("v"))
        except InvalidVersion:
            continue
        if version in SpecifierSet(spec):
            out.append(tag)
    return out


def _refs(repo, series) -> list[str]:
    if series.is_main:
        return [series.base, "main"]
    return [series.base, *_release_tags(repo, series.versions)]


@pytest.mark.parametrize("series", SERIES, ids=[s.name for s in SERIES])
def test_series_applies_to_base_and_versions(mlx, series):
    failures = []
    for ref in dict.fromkeys(_refs(mlx, series)):
        resolved = gitops.resolve_ref(mlx, ref)
        if series.is_main:
            assert gitops.is_ancestor(mlx, gitops.rev_commit(mlx, series.base),
                                      resolved.commit), ref
        for st in check_patches(mlx, resolved.commit, series.patches):
            if st.state == "conflicts":
                failures.append(f"{ref}: {st.detail}")
            elif st.state == "upstream" and st.patch.merged_commit is None:
                failures.append(f"{ref}: {st.patch.file} already upstream "
                                f"({st.detail}) but not marked merged")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("series", SERIES, ids=[s.name for s in SERIES])
def test_apply_at_base_shows_series_in_git_log(mlx, series, settings):
    tree = prepare_tree(settings, series.base, series_name=series.name)
    log = gitops.run_git(tree.path, "log", "--format=%s",
                         f"{gitops.BASE_REF}..HEAD").out.splitlines()
    assert len(log) == len(tree.applied)
    assert len(tree.applied) + len(tree.skipped) == len(series.patches)
    assert gitops.dirty_paths(tree.path) == []
    assert gitops.rev_commit(gitpython.Repo(tree.path), gitops.BASE_REF) == \
        gitops.resolve_ref(mlx, series.base).commit


def test_status_prints_every_series(mlx, settings):
    env = {**os.environ, "MLX_BUILDER_MLX_REPO": MLX_REPO,
           "MLX_BUILDER_PATCHES": str(PATCHES),
           "MLX_BUILDER_CACHE": str(settings.cache_dir)}
    res = subprocess.run(["mlx-builder", "status"], env=env, text=True,
                         capture_output=True)
    assert res.returncode == 0, res.stderr
    for series in SERIES:
        assert series.name in res.stdout
    res = subprocess.run(["mlx-builder", "status", "--json"], env=env, text=True,
                         capture_output=True)
    data = json.loads(res.stdout)
    assert {r["series"] for r in data["reports"]} == {s.name for s in SERIES}


@pytest.mark.parametrize("series", SERIES, ids=[s.name for s in SERIES])
def test_common_patches_apply_as_they_are_at_the_base(mlx, series):
    """A patch shared at other lines applies at an offset, never through a
    3-way merge, at the base of every series that lists it."""
    base = gitops.resolve_ref(mlx, series.base).commit
    merged = [st.patch.label for st in check_patches(mlx, base, series.patches)
              if st.patch.is_common and st.three_way]
    assert merged == []


@pytest.mark.parametrize("target", ["cuda", "metal", "cpu"])
@pytest.mark.parametrize("series", SERIES, ids=[s.name for s in SERIES])
def test_each_target_tree_exports_the_files_on_disk(mlx, series, target, settings):
    """Applied for one target at its base, a series exports back to exactly
    the files in patches/ (export --check), common ones included."""
    tree = prepare_tree(settings, series.base, series_name=series.name,
                        target=target)
    result = export_series(settings, series.name, str(tree.path), check=True)
    assert result.clean and result.written == ()
