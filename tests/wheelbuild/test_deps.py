"""Filling the dependency cache from local repos, dirs, archives and (file://) URLs."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from gitfixture import git

from mlx_builder.errors import DepsError
from mlx_builder.settings import Settings
from mlx_builder.wheelbuild.cmakeparse import Arg, Declaration
from mlx_builder.wheelbuild.deps import (
    DepsPlan,
    ResolvedDep,
    cache_path,
    disable_switch,
    fill,
    keep_paths,
    needed,
    pin,
    resolve,
    setup_py_defines,
)
from mlx_builder.wheelbuild.targets import parse_targets


def make_repo(path: Path, files: dict[str, str], tags: tuple[str, ...] = ("v1.0",)) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "init")
    for tag in tags:
        git(path, "tag", tag)
    return path


def settings(tmp_path: Path, offline: bool = True, **sources: str) -> Settings:
    return Settings(cache_dir=tmp_path / "cache", offline=offline,
                    dep_sources={k: str(v) for k, v in sources.items()})


def decl(name: str, **kw) -> Declaration:
    return Declaration(name=name, file="CMakeLists.txt", line=1, **kw)


def test_pins():
    assert pin(decl("fmt", git_repository="https://github.com/fmtlib/fmt.git",
                    git_tag="12.1.0")) == "12.1.0"
    assert pin(decl("cccl", url="https://github.com/NVIDIA/cccl/releases/download/"
                                "v3.1.3/cccl-v3.1.3.zip")) == "v3.1.3"
    assert pin(decl("x", url="https://example.com/x.zip")).startswith("url-")


def test_local_git_repo_with_source_subdir_and_licence(tmp_path):
    repo = make_repo(tmp_path / "nvtx", {"c/CMakeLists.txt": "project(nvtx)\n",
                                         "c/include/nvtx3.hpp": "//\n", "LICENSE.txt": "L\n",
                                         "python/big.bin": "x" * 100}, tags=("v3.1.0",))
    d = decl("nvtx3", git_repository="https://github.com/NVIDIA/NVTX.git", git_tag="v3.1.1",
             source_subdir="c")
    with pytest.raises(DepsError, match=r"no ref 'v3.1.1'") as exc:
        fill(settings(tmp_path, nvtx3=repo), d)
    assert "v3.1.0" in exc.value.why and "MLX_BUILDER_DEP_NVTX3" in exc.value.next_step
    got = fill(settings(tmp_path, nvtx3=f"{repo}@v3.1.0"), d)
    files = sorted(p.relative_to(got.path).as_posix() for p in got.path.rglob("*") if p.is_file())
    assert files == [".mlxb-dep.json", "LICENSE.txt", "c/CMakeLists.txt", "c/include/nvtx3.hpp"]
    assert (got.via, got.ref, got.pin) == ("local git repo", "v3.1.0", "v3.1.1")
    assert got.commit == git(repo, "rev-parse", "v3.1.0")
    assert got.path == cache_path(settings(tmp_path), d)


def test_submodule_comes_from_its_own_named_source(tmp_path):
    sub = make_repo(tmp_path / "robin-map", {"include/tsl/robin_map.h": "// map\n"})
    parent = make_repo(tmp_path / "nanobind", {"CMakeLists.txt": "project(nb)\n"}, tags=())
    git(parent, "-c", "protocol.file.allow=always", "submodule", "add", "-q",
        "https://github.com/Tessil/robin-map", "ext/robin_map", check=False)
    # point the gitlink at the local commit without network
    sha = git(sub, "rev-parse", "HEAD")
    (parent / ".gitmodules").write_text('[submodule "ext/robin_map"]\n\tpath = ext/robin_map\n'
                                        "\turl = https://github.com/Tessil/robin-map\n")
    git(parent, "update-index", "--add", "--cacheinfo", f"160000,{sha},ext/robin_map")
    git(parent, "add", ".gitmodules")
    git(parent, "commit", "-q", "-m", "sub")
    git(parent, "tag", "v2.15.0")
    d = decl("nanobind", git_repository="https://github.com/wjakob/nanobind.git", git_tag="v2.15.0")
    with pytest.raises(DepsError, match="submodule ext/robin_map") as exc:
        fill(settings(tmp_path, nanobind=parent), d)
    assert "MLX_BUILDER_DEP_ROBIN_MAP" in exc.value.next_step
    got = fill(settings(tmp_path, nanobind=parent, robin_map=sub), d)
    assert (got.path / "ext/robin_map/include/tsl/robin_map.h").read_text() == "// map\n"


def test_cccl_git_tree_gets_the_release_layout(tmp_path):
    repo = make_repo(tmp_path / "cccl", {
        "CMakeLists.txt": "project(CCCL)\n", "LICENSE": "L\n",
        "libcudacxx/include/cuda/std/atomic": "//\n", "libcudacxx/include/nv/target": "//\n",
        "cub/cub/cub.cuh": "//\n", "cub/CMakeLists.txt": "#\n", "thrust/thrust/version.h": "//\n",
        "docs/index.md": "docs\n"}, tags=("v3.1.3",))
    d = decl("cccl", url="https://github.com/NVIDIA/cccl/releases/download/v3.1.3/cccl-v3.1.3.zip")
    got = fill(settings(tmp_path, cccl=repo), d)
    assert sorted(p.name for p in got.path.iterdir()) == [".mlxb-dep.json", "LICENSE", "include"]
    assert sorted(p.name for p in (got.path / "include").iterdir()) == ["cub", "cuda", "nv", "thrust"]
    assert (got.path / "include/cub/cub.cuh").is_file()


def test_directory_and_archive_sources(tmp_path):
    src = tmp_path / "fmt-src"
    (src / "include/fmt").mkdir(parents=True)
    (src / "include/fmt/core.h").write_text("// fmt\n")
    (src / ".git").mkdir()
    d = decl("fmt", git_repository="https://github.com/fmtlib/fmt.git", git_tag="12.1.0")
    got = fill(settings(tmp_path, fmt=src), d)
    assert got.via == "directory" and not (got.path / ".git").exists()
    archive = tmp_path / "json.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        data = b"// json\n"
        info = tarfile.TarInfo("json/single_include/nlohmann/json.hpp")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    dj = decl("json", url="https://github.com/nlohmann/json/releases/download/v3.11.3/json.tar.xz")
    got = fill(settings(tmp_path, json=archive), dj)
    assert got.via == "archive"
    assert (got.path / "single_include/nlohmann/json.hpp").read_bytes() == data


def test_online_download_and_clone_via_file_urls(tmp_path):
    archive = tmp_path / "dl.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        info = tarfile.TarInfo("top/include/a.h")
        info.size = 2
        tf.addfile(info, io.BytesIO(b"//"))
    s = settings(tmp_path, offline=False)
    got = fill(s, decl("dl", url=archive.as_uri()))
    assert got.via == "download" and (got.path / "include/a.h").is_file()
    repo = make_repo(tmp_path / "up", {"include/b.h": "// b\n"}, tags=("v9",))
    got = fill(s, decl("up", git_repository=str(repo), git_tag="v9"))
    assert got.via == "git clone" and got.commit == git(repo, "rev-parse", "v9")


def test_offline_without_a_source_says_what_to_set(tmp_path):
    with pytest.raises(DepsError, match="offline") as exc:
        fill(settings(tmp_path), decl("cutlass", git_repository="https://github.com/NVIDIA/cutlass.git",
                                      git_tag="v4.4.2"))
    assert "MLX_BUILDER_DEP_CUTLASS" in exc.value.next_step


def test_cache_is_reused_and_refresh_refills(tmp_path):
    repo = make_repo(tmp_path / "r", {"a.h": "1\n"})
    d = decl("r", git_repository="https://github.com/o/r.git", git_tag="v1.0")
    first = fill(settings(tmp_path, r=repo), d)
    second = fill(settings(tmp_path), d)              # offline, no source: cache
    assert second.path == first.path and second.sha256 == first.sha256
    (repo / "a.h").write_text("2\n")
    git(repo, "commit", "-qam", "two")
    git(repo, "tag", "-f", "v1.0")
    third = fill(settings(tmp_path, r=repo), d, refresh=True)
    assert third.sha256 != first.sha256



R = decl("r", git_repository="https://github.com/o/r.git", git_tag="v1.0")


@pytest.fixture
def cached(tmp_path):
    repo = make_repo(tmp_path / "r", {"a.h": "1\n"})
    return repo, fill(settings(tmp_path, r=repo), R)


def test_a_changed_cache_entry_is_fetched_again_with_a_note(tmp_path, cached, capsys):
    repo, first = cached
    (first.path / "a.h").write_text("edited in the cache\n")
    capsys.readouterr()
    again = fill(settings(tmp_path, r=repo), R)
    assert "cache entry of r v1.0 is damaged" in capsys.readouterr().err
    assert (again.path / "a.h").read_text() == "1\n" and again.sha256 == first.sha256


def test_a_changed_cache_entry_without_a_source_is_an_error_not_used(tmp_path, cached):
    _, first = cached
    (first.path / "a.h").write_text("edited in the cache\n")
    with pytest.raises(DepsError, match="offline") as exc:
        fill(settings(tmp_path), R)
    assert "is damaged and was not used" in exc.value.why


@pytest.mark.parametrize("record", [b"{not json", b"[1, 2]", b'{"pin": "v1.0"}', b"\xff\xfe"])
def test_a_damaged_cache_record_is_fetched_again(tmp_path, cached, capsys, record):
    repo, first = cached
    (first.path / ".mlxb-dep.json").write_bytes(record)
    again = fill(settings(tmp_path, r=repo), R)
    assert "is damaged" in capsys.readouterr().err and again.sha256 == first.sha256
    assert json.loads((again.path / ".mlxb-dep.json").read_text())["sha256"] == first.sha256


def test_a_cache_entry_is_filled_by_one_run_at_a_time(tmp_path, held):
    from mlx_builder.errors import LockError
    s = Settings(cache_dir=tmp_path / "cache", offline=True, no_wait=True,
                 dep_sources={"r": str(make_repo(tmp_path / "r", {"a.h": "1\n"}))})
    held(s.cache_dir / "locks" / f"dep-{cache_path(s, R).name}.lock")
    with pytest.raises(LockError, match="dependency cache entry"):
        fill(s, R)
    assert not cache_path(s, R).exists()


def test_a_killed_fill_leaves_nothing_after_the_next_run(tmp_path):
    s = settings(tmp_path, r=make_repo(tmp_path / "r", {"a.h": "1\n"}))
    deps = s.deps_dir
    deps.mkdir(parents=True)
    (deps / ".r-v1.0.part-abc").mkdir()
    (deps / ".r-k2j4h5g6").mkdir()                 # an earlier version's scratch name
    fill(s, R)
    assert sorted(p.name for p in deps.iterdir()) == ["r-v1.0"]


TREE_CMAKE = '''
option(MLX_BUILD_GGUF "gguf" ON)
option(MLX_BUILD_CUDA "cuda" OFF)
FetchContent_Declare(fmt GIT_REPOSITORY https://github.com/fmtlib/fmt.git GIT_TAG 12.1.0)
if(MLX_BUILD_GGUF)
  FetchContent_Declare(gguflib GIT_REPOSITORY https://github.com/antirez/gguf-tools/ GIT_TAG abc)
endif()
if(MLX_BUILD_CUDA)
  FetchContent_Declare(cutlass GIT_REPOSITORY https://github.com/NVIDIA/cutlass.git
                       GIT_TAG v4.4.2 SOURCE_SUBDIR include)
endif()
'''
SETUP = 'cmake_args = ["-DMLX_BUILD_TESTS=OFF", "-DBUILD_SHARED_LIBS=ON", f"-DX={y}"]\n'


def mlx_tree(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "CMakeLists.txt").write_text(TREE_CMAKE)
    (root / "setup.py").write_text(SETUP)
    return root


def test_needed_depends_on_the_target(tmp_path):
    tree = mlx_tree(tmp_path / "mlx")
    assert setup_py_defines(tree) == {"MLX_BUILD_TESTS": "OFF", "BUILD_SHARED_LIBS": "ON"}
    cpu = {d.name: n for d, n in needed(tree, parse_targets("cpu"))[0]}
    cuda = {d.name: n for d, n in needed(tree, parse_targets("cuda-sm90"))[0]}
    assert cpu == {"fmt": True, "gguflib": True, "cutlass": False}
    assert cuda == {"fmt": True, "gguflib": True, "cutlass": True}


def test_resolve_turns_off_an_optional_feature_but_not_a_required_dep(tmp_path, capsys):
    tree = mlx_tree(tmp_path / "mlx")
    fmt = make_repo(tmp_path / "fmt", {"include/fmt/core.h": "//\n"}, tags=("12.1.0",))
    plan = resolve(settings(tmp_path, fmt=fmt), tree, parse_targets("cpu"))
    assert [d.name for d in plan.deps] == ["fmt"] and plan.disabled == ("MLX_BUILD_GGUF",)
    args = plan.cmake_args()
    assert args[0] == "-DFETCHCONTENT_FULLY_DISCONNECTED=ON"
    assert f"-DFETCHCONTENT_SOURCE_DIR_FMT={plan.deps[0].path}" in args
    assert "-DMLX_BUILD_GGUF=OFF" in args
    assert any("cutlass: not needed" in s for s in plan.skipped)
    assert "building with -DMLX_BUILD_GGUF=OFF" in capsys.readouterr().err
    with pytest.raises(DepsError, match="fmt"):
        resolve(settings(tmp_path / "other"), tree, parse_targets("cpu"))


def test_disable_switch_rules():
    on = (False, (Arg("MLX_BUILD_GGUF"),))
    d = decl("g", conditions=(on,))
    assert disable_switch(d, {"MLX_BUILD_GGUF": "ON"}, set()) == "MLX_BUILD_GGUF"
    assert disable_switch(d, {"MLX_BUILD_GGUF": "ON"}, {"MLX_BUILD_GGUF"}) is None
    assert disable_switch(decl("f", conditions=((True, (Arg("USE_SYSTEM_FMT"),)),)),
                          {"USE_SYSTEM_FMT": "OFF"}, set()) is None


def test_keep_paths():
    assert keep_paths(decl("cutlass", git_repository="https://github.com/NVIDIA/cutlass.git",
                           source_subdir="include")) == ("include",)
    assert "cudnn_frontend-config.cmake.in" in keep_paths(
        decl("cudnn", git_repository="https://github.com/NVIDIA/cudnn-frontend.git"))
    assert keep_paths(decl("fmt", git_repository="https://github.com/fmtlib/fmt.git")) is None


def test_plan_json_round_trip_fields(tmp_path):
    dep = ResolvedDep("fmt", "12.1.0", tmp_path, "https://github.com/fmtlib/fmt.git",
                      "local git repo", "12.1.0", "a" * 40, "b" * 64)
    assert json.loads(json.dumps(dep.to_json()))["commit"] == "a" * 40
    assert DepsPlan((dep,), ("X",)).cmake_args()[-1] == "-DX=OFF"


def test_deps_command_lists_and_fills(tmp_path):
    from click.testing import CliRunner

    from mlx_builder.cli import cli
    tree = mlx_tree(tmp_path / "mlx")
    fmt = make_repo(tmp_path / "fmt", {"include/fmt/core.h": "//\n"}, tags=("12.1.0",))
    gguf = make_repo(tmp_path / "gguf", {"gguflib.c": "//\n"}, tags=("abc",))
    base = ["--cache-dir", str(tmp_path / "c"), "--offline"]
    listed = CliRunner().invoke(cli, [*base, "deps", "--source", str(tree), "--target", "cpu",
                                      "--list", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = {r["name"]: r for r in json.loads(listed.output)}
    assert rows["cutlass"]["needed"] is False and rows["fmt"]["needed"] is True
    filled = CliRunner(env={"MLX_BUILDER_DEP_FMT": str(fmt), "MLX_BUILDER_DEP_GGUF_TOOLS": str(gguf)}
                       ).invoke(cli, [*base, "deps", "--source", str(tree), "--target", "cpu",
                                      "--json"])
    assert filled.exit_code == 0, filled.output
    out = json.loads(filled.output[filled.output.index("{"):])
    assert [d["name"] for d in out["deps"]] == ["fmt", "gguflib"] and out["disabled"] == []
    assert all(Path(d["path"]).is_dir() for d in out["deps"])


def _deps_run(tmp_path, tree, fmt, gguf, kill_at=None):
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLX_BUILDER_")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "xdg"), MLX_BUILDER_DEP_FMT=str(fmt),
               MLX_BUILDER_DEP_GGUF_TOOLS=str(gguf))
    if kill_at:
        env["MLX_BUILDER_KILL_AT"] = kill_at
    return subprocess.Popen([sys.executable, "-m", "mlx_builder", "--cache-dir",
                             str(tmp_path / "c"), "--offline", "deps", "--source", str(tree),
                             "--target", "cpu"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.fixture
def cold(tmp_path):
    return (mlx_tree(tmp_path / "mlx"),
            make_repo(tmp_path / "fmt", {"include/fmt/core.h": "//\n"}, tags=("12.1.0",)),
            make_repo(tmp_path / "gguf", {"gguflib.c": "//\n"}, tags=("abc",)))


@pytest.mark.integration
def test_three_deps_runs_on_a_cold_cache_all_succeed(tmp_path, cold):
    runs = [_deps_run(tmp_path, *cold) for _ in range(3)]
    results = [(run.wait(timeout=120), run.communicate()[1]) for run in runs]
    assert all(rc == 0 for rc, _ in results), results
    deps = tmp_path / "c" / "deps"
    assert sorted(p.name for p in deps.iterdir()) == ["fmt-12.1.0", "gguflib-abc"]


@pytest.mark.integration
def test_a_deps_run_killed_mid_fill_leaves_nothing_after_the_next(tmp_path, cold):
    killed = _deps_run(tmp_path, *cold, kill_at="dep-fetched")
    assert killed.wait(timeout=120) == -9
    deps = tmp_path / "c" / "deps"
    assert [p for p in deps.iterdir() if p.name.startswith(".")]
    again = _deps_run(tmp_path, *cold)
    assert again.wait(timeout=120) == 0, again.communicate()
    assert sorted(p.name for p in deps.iterdir()) == ["fmt-12.1.0", "gguflib-abc"]
