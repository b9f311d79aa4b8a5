"""Bundles: deterministic tarballs of patched MLX + dependencies + settings."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from fakes import dep_repo, fake_mlx
from gitfixture import git

from mlx_builder.errors import BundleError, FileSystemError, LockError, TargetError
from mlx_builder.settings import Settings
from mlx_builder.source.series import PatchEntry
from mlx_builder.wheelbuild.bundle import (
    BUNDLE_JSON,
    _verify,
    file_sha256,
    open_bundle,
    plan_from_tree,
    read_bundle_json,
    tree_files,
    write_bundle,
)
from mlx_builder.wheelbuild.targets import parse_targets


def make_settings(tmp_path: Path, name: str = "cache", **sources) -> Settings:
    return Settings(cache_dir=tmp_path / name, offline=True,
                    dep_sources={k: str(v) for k, v in sources.items()})


@pytest.fixture
def world(tmp_path):
    mlx = fake_mlx(tmp_path / "mlx")
    (mlx / "build").mkdir()
    (mlx / "build" / "junk.o").write_text("ignored by .gitignore")
    (mlx / "untracked.txt").write_text("new file from a patch, not yet added\n")
    fmt = dep_repo(tmp_path / "fmt", "12.1.0", {"include/fmt/core.h": "// fmt\n",
                                                "support/build.py": "#!/bin/sh\n"},
                   executable=("support/build.py",))
    cutlass = dep_repo(tmp_path / "cutlass", "v4.4.2", {"include/cute/tensor.hpp": "//\n",
                                                        "media/big.png": "x" * 1000})
    return SimpleNamespace(mlx=mlx, fmt=fmt, cutlass=cutlass, tmp=tmp_path)


def test_tree_files_follow_git(world):
    files = tree_files(world.mlx)
    assert "untracked.txt" in files and "build/junk.o" not in files
    assert not any(f.startswith(".git/") for f in files)


def test_bundle_is_deterministic_and_self_describing(world):
    s = make_settings(world.tmp, fmt=world.fmt)
    targets = parse_targets("cpu")
    first = write_bundle(s, world.mlx, targets, world.tmp / "out")
    again = write_bundle(make_settings(world.tmp, "cache2", fmt=world.fmt), world.mlx, targets,
                         world.tmp / "other" / first.name)
    assert first.read_bytes() == again.read_bytes()
    assert first.name.startswith("mlx-0.1.0_mlxb.") and first.name.endswith(".cpu.tar.gz")
    with tarfile.open(first) as tf:
        members = tf.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 and m.uname == "" for m in members)
    top = names[0].split("/")[0]
    assert f"{top}/{BUNDLE_JSON}" in names and f"{top}/mlx/untracked.txt" in names
    assert f"{top}/deps/fmt/include/fmt/core.h" in names
    assert not any("cutlass" in n for n in names)          # cpu does not need it
    modes = {m.name.split("/", 1)[1]: m.mode for m in members}
    assert modes["deps/fmt/support/build.py"] == 0o755 and modes["mlx/setup.py"] == 0o644
    meta = read_bundle_json(first)
    assert meta["target"]["spec"] == "cpu" and meta["dependencies"][0]["path"] == "deps/fmt"
    assert meta["provenance"]["upstream_version"] == "0.1.0"


def test_open_bundle_round_trip(world):
    s = make_settings(world.tmp, fmt=world.fmt, cutlass=world.cutlass)
    targets = parse_targets("cuda-sm90")
    plan = plan_from_tree(s, world.mlx, targets)
    path = write_bundle(s, world.mlx, targets, world.tmp / "b.tar.gz", plan=plan)
    offline = make_settings(world.tmp, "elsewhere")           # no sources, empty cache
    opened = open_bundle(offline, path)
    assert opened.label == plan.label and opened.provenance == plan.provenance
    assert opened.targets.spec == "cuda-sm90" and opened.bundle_sha256 == file_sha256(path)
    assert [d.name for d in opened.deps.deps] == ["fmt", "cutlass"]
    for d in opened.deps.deps:
        assert d.path.is_dir() and d.via == "bundle"
        assert str(d.path).startswith(str(offline.worktrees_dir / "bundles"))
    assert sorted(p.name for p in (opened.src).iterdir())[:2] == [".gitignore", "CMakeLists.txt"]
    assert (next(d for d in opened.deps.deps if d.name == "cutlass").path / "media").exists() is False
    combo = open_bundle(offline, path, parse_targets("cuda-sm90,cuda-sm121"))
    assert combo.label.endswith(".cu90ax121a") and combo.deps == opened.deps
    with pytest.raises(TargetError, match="made for cuda-sm90"):
        open_bundle(offline, path, parse_targets("cpu"))


def test_bundle_for_cpu_cannot_build_cuda(world):
    s = make_settings(world.tmp, fmt=world.fmt)
    path = write_bundle(s, world.mlx, parse_targets("cpu"), world.tmp / "cpu.tar.gz")
    with pytest.raises(TargetError):
        open_bundle(s, path, parse_targets("cuda-sm90"))


def test_tampered_dependency_is_detected(world):
    s = make_settings(world.tmp, fmt=world.fmt)
    path = write_bundle(s, world.mlx, parse_targets("cpu"), world.tmp / "cpu.tar.gz")
    plan = open_bundle(s, path)
    top = plan.src.parent
    (top / "deps/fmt/include/fmt/core.h").write_text("// changed\n")
    with pytest.raises(BundleError, match=r"does not match its bundle.json"):
        _verify(top)


def test_series_provenance_goes_into_the_bundle(world):
    s = make_settings(world.tmp, fmt=world.fmt)
    commit = git(world.mlx, "rev-parse", "HEAD")
    patch = PatchEntry("0021-x.patch", Path("/p/0021-x.patch"), "all", "not-forwarded", "c" * 64)
    tree = SimpleNamespace(path=world.mlx, upstream_url=str(world.mlx), base_commit=commit,
                           applied=(patch,), skipped=(),
                           ref=SimpleNamespace(ref="main", commit=commit, kind="branch",
                                               version="0.1.0"),
                           series=SimpleNamespace(name="main", base=commit))
    path = write_bundle(s, tree, parse_targets("cpu"), world.tmp / "s.tar.gz")
    prov = json.loads(json.dumps(read_bundle_json(path)["provenance"]))
    assert prov["series"] == "main" and prov["patches"][0]["sha256"] == "c" * 64
    assert prov["upstream_commit"] == commit
    assert prov["upstream_url"] == "https://github.com/ml-explore/mlx"   # a local mirror path is not provenance


def test_bundle_and_inspect_commands(world):
    from click.testing import CliRunner

    from mlx_builder.cli import cli
    env = {"MLX_BUILDER_DEP_FMT": str(world.fmt)}
    base = ["--cache-dir", str(world.tmp / "c"), "--offline"]
    made = CliRunner(env=env).invoke(cli, [*base, "bundle", "--source", str(world.mlx),
                                           "--target", "cpu", "--out", str(world.tmp / "dist")])
    assert made.exit_code == 0, made.output
    path = next((world.tmp / "dist").glob("*.tar.gz"))
    assert f"bundle:  {path}" in made.output and "MiB" in made.output
    shown = CliRunner().invoke(cli, ["inspect", str(path)])
    assert shown.exit_code == 0 and "fmt 12.1.0" in shown.output and "target:    cpu" in shown.output


# ----------------------------------------------------------------- verification

def _rewrite(src: Path, dst: Path, edit) -> Path:
    """A copy of bundle ``src`` with members changed by ``edit(name, data)``
    (return None to drop a member, or (name, data) pairs via a list to add)."""
    import gzip
    import io
    with tarfile.open(src) as tf:
        members = [(m, tf.extractfile(m).read() if m.isfile() else None) for m in tf.getmembers()]
    with open(dst, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as out:
        for m, data in members:
            for name, new in edit(m.name, data):
                info = tarfile.TarInfo(name)
                info.mode, info.type = m.mode, m.type
                info.size = len(new) if new is not None else 0
                out.addfile(info, io.BytesIO(new) if new is not None else None)
    return dst


def _changed(suffix: str, new: bytes):
    return lambda name, data: [(name, new if name.endswith(suffix) else data)]


@pytest.fixture
def made(world):
    s = make_settings(world.tmp, fmt=world.fmt)
    path = write_bundle(s, world.mlx, parse_targets("cpu"), world.tmp / "out" / "b.tar.gz")
    return SimpleNamespace(path=path, node=make_settings(world.tmp, "node"), tmp=world.tmp)


def test_bundle_json_hashes_every_file_and_the_archive_hash_lies_beside(made):
    meta = read_bundle_json(made.path)
    assert meta["schema"] == 2
    assert {"mlx/setup.py", "mlx/untracked.txt", "deps/fmt/include/fmt/core.h"} <= set(meta["files"])
    assert meta["files"]["deps/fmt/support/build.py"]["exec"] is True
    side = made.path.with_name(made.path.name + ".sha256")
    assert side.read_text() == f"{file_sha256(made.path)}  {made.path.name}\n"


@pytest.mark.parametrize("edit, why", [
    (_changed("/mlx/setup.py", b"print('evil')\n"), "mlx/setup.py: sha256 differs"),
    (_changed("deps/fmt/include/fmt/core.h", b"// bad\n"), "core.h: sha256 differs"),
    (_changed("deps/fmt/include/fmt/core.h", b"// larger\n"), "core.h: 10 bytes, bundle.json lists 7"),
    (lambda n, d: [] if n.endswith("/mlx/CMakeLists.txt") else [(n, d)], "CMakeLists.txt: missing"),
    (lambda n, d: [(n, d)] + ([(n.rsplit("/", 1)[0] + "/mlx/extra.py", b"x")]
                              if n.endswith("/mlx/setup.py") else []), "extra.py: not in bundle.json"),
    (lambda n, d: [(n, d)] + ([(n.split("/")[0] + "/wheels/evil-1.0-py3-none-any.whl", b"w")]
                              if n.endswith("/mlx/setup.py") else []), "evil-1.0"),
])
def test_a_tampered_bundle_never_builds_not_even_on_a_second_try(made, edit, why):
    bad = _rewrite(made.path, made.tmp / "bad.tar.gz", edit)
    for _ in range(2):
        with pytest.raises(BundleError, match=r"does not match its bundle.json") as exc:
            open_bundle(made.node, bad)
        assert why in exc.value.why and exc.value.exit_code == 34
    bundles = made.node.worktrees_dir / "bundles"
    assert not bundles.exists() or [p.name for p in bundles.iterdir()
                                    if not p.name.endswith(".lock")] == []


def test_a_corrupt_gzip_stream_is_detected(made):
    data = bytearray(made.path.read_bytes())
    data[-6] ^= 0xFF                                   # the CRC in the gzip trailer
    bad = made.tmp / "crc.tar.gz"
    bad.write_bytes(bytes(data))
    with pytest.raises(BundleError, match="is corrupt"):
        open_bundle(made.node, bad)
    truncated = made.tmp / "short.tar.gz"
    truncated.write_bytes(made.path.read_bytes()[:-100])
    with pytest.raises(BundleError):
        open_bundle(made.node, truncated)


def test_sha256_pin_and_the_file_beside(made):
    from mlx_builder.errors import HashMismatchError
    sha = file_sha256(made.path)
    assert open_bundle(made.node, made.path, expect_sha256="sha256:" + sha.upper()).bundle_sha256 == sha
    with pytest.raises(HashMismatchError, match=r"\(--sha256\)"):
        open_bundle(made.node, made.path, expect_sha256="0" * 64)
    with pytest.raises(BundleError, match="is not a sha256"):
        open_bundle(made.node, made.path, expect_sha256="abc")
    side = made.path.with_name(made.path.name + ".sha256")
    side.write_text("1" * 64 + "  b.tar.gz\n")
    with pytest.raises(HashMismatchError, match=r"\(b.tar.gz.sha256\)"):
        open_bundle(make_settings(made.tmp, "node2"), made.path)


def test_a_bundle_without_per_file_hashes_needs_a_pin(made):
    def old(name, data):
        if name.endswith("/bundle.json"):
            meta = json.loads(data)
            meta["schema"] = 1
            del meta["files"]
            data = json.dumps(meta).encode()
        return [(name, data)]
    legacy = _rewrite(made.path, made.tmp / "legacy.tar.gz", old)
    with pytest.raises(BundleError, match="no per-file hashes"):
        open_bundle(made.node, legacy)
    plan = open_bundle(made.node, legacy, expect_sha256=file_sha256(legacy))
    assert plan.src.is_dir()


@pytest.mark.parametrize("meta", [[1, 2], {"format": "other"}, "text",
                                  {"format": "mlx-builder-bundle", "schema": 2, "target": "cpu"}])
def test_bundle_json_of_the_wrong_shape(made, meta):
    bad = _rewrite(made.path, made.tmp / "shape.tar.gz",
                   lambda n, d: [(n, json.dumps(meta).encode() if n.endswith("/bundle.json") else d)])
    with pytest.raises(BundleError, match="wrong shape"):
        read_bundle_json(bad)
    with pytest.raises(BundleError, match="wrong shape"):
        open_bundle(made.node, bad)


def test_bundle_out_naming_a_file_is_refused(world):
    from mlx_builder.errors import BuildError
    s = make_settings(world.tmp, fmt=world.fmt)
    (world.tmp / "taken").write_text("x")
    with pytest.raises(BuildError, match="is a file"):
        write_bundle(s, world.mlx, parse_targets("cpu"), world.tmp / "taken")
    assert (world.tmp / "taken").read_text() == "x"


def test_a_bundle_with_toolchain_carries_the_build_environment_wheels(world, monkeypatch):
    """--with-toolchain: the registry wheels go into toolchain/, bundle.json
    lists them with the pins, and the unpacked bundle names the folder the
    build provisions from (no network on the node)."""
    import sys

    from mlx_builder.wheelbuild import buildenv as be
    spec = be.EnvSpec(13, be.PLATFORMS["linux-aarch64"], be.PLATFORMS["linux-aarch64"],
                      sys.executable, "3.12.3", ("ninja==1.13.0",), (),
                      ("nvidia-cuda-nvcc==13.0.88",), ("nvidia-cuda-runtime==13.0.96",))
    asked = []

    def download(s, dest, runner):
        asked.append(s)
        dest.mkdir(parents=True, exist_ok=True)
        for pin in s.pins:
            name, ver = pin.split("==")
            (dest / f"{name.replace('-', '_')}-{ver}-py3-none-manylinux_2_27_aarch64.whl"
             ).write_bytes(b"wheel")
        return sorted(dest.glob("*.whl"))
    monkeypatch.setattr(be, "download_wheels", download)
    s = make_settings(world.tmp, fmt=world.fmt, cutlass=world.cutlass)
    targets = parse_targets("cuda-sm121")
    path = write_bundle(s, world.mlx, targets, world.tmp / "tc.tar.gz", toolchain=spec)
    assert asked == [spec]
    with tarfile.open(path) as tf:
        meta = json.loads(tf.extractfile(next(m for m in tf.getmembers()
                                              if m.name.endswith(BUNDLE_JSON))).read())
    assert meta["toolchain"]["platform"] == "linux-aarch64"
    assert meta["toolchain"]["pins"] == list(spec.pins) and len(meta["toolchain"]["wheels"]) == 3
    opened = open_bundle(make_settings(world.tmp, "node"), path)
    assert opened.toolchain_dir is not None
    assert sorted(p.name.split("-")[0] for p in opened.toolchain_dir.glob("*.whl")) == [
        "ninja", "nvidia_cuda_nvcc", "nvidia_cuda_runtime"]
    plain = open_bundle(make_settings(world.tmp, "node2"),
                        write_bundle(s, world.mlx, targets, world.tmp / "plain.tar.gz"))
    assert plain.toolchain_dir is None


# ----------------------------------------------------------------- writing safely

def test_a_second_bundle_to_the_same_out_waits_for_the_first(world, held):
    out = world.tmp / "dist" / "b.tar.gz"
    out.parent.mkdir()
    held(out.parent / ".b.tar.gz.lock")
    s = Settings(cache_dir=world.tmp / "cache", offline=True, no_wait=True,
                 dep_sources={"fmt": str(world.fmt)})
    with pytest.raises(LockError, match="in use by another mlx-builder run"):
        write_bundle(s, world.mlx, parse_targets("cpu"), out)
    assert list(out.parent.iterdir()) == [out.parent / ".b.tar.gz.lock"]


def test_a_run_stopped_between_bundle_and_hash_leaves_no_stale_hash(world, monkeypatch):
    s = make_settings(world.tmp, fmt=world.fmt)
    out = world.tmp / "dist" / "b.tar.gz"
    write_bundle(s, world.mlx, parse_targets("cpu"), out)
    (world.mlx / "untracked.txt").write_text("changed since the first bundle\n")
    real = os.replace

    def stop_at_the_hash(src, dst):
        if str(dst).endswith(".sha256"):
            raise KeyboardInterrupt              # as if stopped right here
        real(src, dst)

    monkeypatch.setattr(os, "replace", stop_at_the_hash)
    monkeypatch.setattr(Path, "replace", lambda self, dst: stop_at_the_hash(self, dst))
    with pytest.raises(KeyboardInterrupt):
        write_bundle(s, world.mlx, parse_targets("cpu"), out)
    monkeypatch.undo()
    plan = open_bundle(make_settings(world.tmp, "node"), out)     # no HashMismatchError
    assert (plan.src / "untracked.txt").read_text() == "changed since the first bundle\n"
    assert [p.name for p in out.parent.iterdir() if ".part" in p.name] == []


def test_the_leftovers_of_a_killed_bundle_run_are_removed(world):
    out = world.tmp / "dist" / "b.tar.gz"
    out.parent.mkdir()
    for name in ("b.tar.gz.part", ".b.tar.gz.part-x1", ".b.tar.gz.sha256.part-x2"):
        (out.parent / name).write_bytes(b"half")
    write_bundle(make_settings(world.tmp, fmt=world.fmt), world.mlx, parse_targets("cpu"), out)
    assert sorted(p.name for p in out.parent.iterdir()) == [
        ".b.tar.gz.lock", "b.tar.gz", "b.tar.gz.sha256"]


def test_bundle_out_that_cannot_be_written_fails_before_any_work(world, monkeypatch):
    (world.tmp / "afile").write_text("x")
    called = []
    monkeypatch.setattr("mlx_builder.wheelbuild.bundle.tree_files",
                        lambda root: called.append(root) or [])
    with pytest.raises(FileSystemError, match="cannot create --out"):
        write_bundle(make_settings(world.tmp, fmt=world.fmt), world.mlx, parse_targets("cpu"),
                     world.tmp / "afile" / "sub" / "b.tar.gz")
    assert called == []


# ----------------------------------------------------------------- unpacking safely

def _craft(made, extra=(), files=None, meta_text=None, drop=()) -> Path:
    """A copy of the made bundle (no .sha256 beside it) with ``extra``
    members (name, type, data or link target) added, ``files`` entries added
    to bundle.json, or bundle.json replaced by ``meta_text``."""
    import gzip
    import io
    with tarfile.open(made.path) as tf:
        members = [(m, tf.extractfile(m).read() if m.isfile() else None) for m in tf.getmembers()]
    top = members[0][0].name.split("/")[0]
    dst = made.tmp / "crafted.tar.gz"
    with open(dst, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as out:
        def add(name, kind, data):
            info = tarfile.TarInfo(name)
            info.type, info.mode = kind, 0o644
            if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                info.linkname = data
                out.addfile(info)
            else:
                info.size = len(data or b"")
                out.addfile(info, io.BytesIO(data or b""))
        for m, data in members:
            if m.name.endswith("/" + BUNDLE_JSON):
                meta = json.loads(data)
                meta["files"].update(files or {})
                data = (meta_text(top) if meta_text else json.dumps(meta)).encode()
            if m.name.split("/", 1)[1] not in drop:
                add(m.name, m.type, data)
        for name, kind, data in extra:
            add(name.replace("TOP", top), kind, data)
    return dst


REG, SYM, LNK = tarfile.REGTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE


@pytest.mark.parametrize("extra, files, why", [
    ([("TOP/bundle.json", REG, b"{}")], {}, "bundle.json twice"),
    ([("TOP/mlx/setup.py", REG, b"print('second')\n")], {}, "twice"),
    # a -> b/../../.. looks inside while b does not exist yet; b -> ../.. then
    # makes a point three levels above the unpack folder
    ([("TOP/mlx/a", SYM, "b/../../.."), ("TOP/mlx/b", SYM, "../..")],
     {"mlx/a": {"link": "b/../../.."}, "mlx/b": {"link": "../.."}}, "another link"),
    ([("TOP/mlx/out", SYM, "../../x")], {"mlx/out": {"link": "../../x"}}, "outside the bundle"),
    ([("TOP/mlx/abs", SYM, "/etc/passwd")], {"mlx/abs": {"link": "/etc/passwd"}}, "absolute"),
    ([("TOP/mlx/d", SYM, "."), ("TOP/mlx/d/x", REG, b"x")],
     {"mlx/d": {"link": "."}, "mlx/d/x": {"sha256": "0" * 64}}, "below a symbolic link"),
    ([("TOP/mlx/hard", LNK, "TOP/mlx/setup.py")], {"mlx/hard": {"sha256": "0" * 64}}, "hard link"),
    ([("evil.txt", REG, b"x")], {}, "top-level entries"),
    ([("TOP/notes.txt", REG, b"x")], {}, "beside bundle.json"),
], ids=["two bundle.json", "a member twice", "link chain", "link out", "absolute link",
        "below a link", "hard link", "file beside the top folder", "file beside bundle.json"])
def test_an_unsafe_member_is_refused_with_34_before_anything_is_unpacked(made, extra, files, why):
    bad = _craft(made, extra, files)
    with pytest.raises(BundleError) as exc:
        open_bundle(made.node, bad)
    assert why in exc.value.what + exc.value.why and exc.value.exit_code == 34
    assert exc.value.why and exc.value.next_step
    bundles = made.node.worktrees_dir / "bundles"
    assert [p.name for p in bundles.iterdir() if not p.name.endswith(".lock")] == []
    assert not (made.tmp / "x").exists()


def test_bundle_json_with_a_key_twice_is_refused(made):
    def twice(top):
        meta = read_bundle_json(made.path)
        text = json.dumps(meta)
        return text[:-1] + ', "target": {"spec": "cuda-sm90", "backend": "cuda", "archs": []}}'
    bad = _craft(made, meta_text=twice)
    for opener in (read_bundle_json, lambda p: open_bundle(made.node, p)):
        with pytest.raises(BundleError) as exc:
            opener(bad)
        assert "'target' appears twice" in exc.value.why


def test_an_unlisted_member_is_refused_before_it_is_written(made, monkeypatch):
    written = []
    real = shutil.copyfileobj
    monkeypatch.setattr(shutil, "copyfileobj",
                        lambda src, dst, *a: (written.append(dst.name), real(src, dst, *a)))
    bad = _craft(made, [("TOP/mlx/big.bin", REG, b"\0" * 300_000)])
    with pytest.raises(BundleError, match=r"does not match its bundle\.json") as exc:
        open_bundle(made.node, bad)
    assert "big.bin: not in bundle.json" in exc.value.why
    assert not any(name.endswith("big.bin") for name in written)


def test_a_full_disk_while_unpacking_is_33_not_a_bad_bundle(made, monkeypatch):
    import errno

    from mlx_builder.errors import FileSystemError

    def full(src, dst, *a):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(shutil, "copyfileobj", full)
    with pytest.raises(FileSystemError) as exc:
        open_bundle(made.node, made.path)
    assert exc.value.exit_code == 33 and "disk is full" in exc.value.why


def test_a_killed_unpack_of_another_bundle_is_cleaned_up(made):
    bundles = made.node.worktrees_dir / "bundles"
    (bundles / ".unpack-0123456789abcdef-k1ll3d").mkdir(parents=True)
    open_bundle(made.node, made.path)
    assert not (bundles / ".unpack-0123456789abcdef-k1ll3d").exists()


# ----------------------------------------------------------------- runs at once, runs killed

def _cli(world, *args: str, kill_at: str | None = None, cache: str = "cache"):
    """``mlx-builder ARGS`` as its own process (offline; fmt from the world)."""
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLX_BUILDER_")}
    env.update(XDG_CONFIG_HOME=str(world.tmp / "xdg"), MLX_BUILDER_DEP_FMT=str(world.fmt))
    if kill_at:
        env["MLX_BUILDER_KILL_AT"] = kill_at
    return subprocess.Popen([sys.executable, "-m", "mlx_builder", "--cache-dir",
                             str(world.tmp / cache), "--offline", *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.integration
def test_three_bundle_runs_to_one_out_all_end_with_a_matching_hash(world):
    out = world.tmp / "dist" / "b.tar.gz"
    runs = [_cli(world, "bundle", "--source", str(world.mlx), "--target", "cpu",
                 "--out", str(out), cache=f"cache{n}") for n in range(3)]
    results = [(run.wait(timeout=120), run.communicate()) for run in runs]
    assert all(rc == 0 for rc, _ in results), results
    side = out.with_name(out.name + ".sha256").read_text().split()[0]
    assert side == file_sha256(out)
    assert open_bundle(make_settings(world.tmp, "node"), out).label


@pytest.mark.integration
def test_a_bundle_run_killed_between_its_renames_leaves_a_bundle_that_opens(world):
    out = world.tmp / "dist" / "b.tar.gz"
    first = _cli(world, "bundle", "--source", str(world.mlx), "--target", "cpu", "--out", str(out))
    assert first.wait(timeout=120) == 0, first.communicate()
    (world.mlx / "untracked.txt").write_text("changed since the first bundle\n")
    killed = _cli(world, "bundle", "--source", str(world.mlx), "--target", "cpu", "--out",
                  str(out), kill_at="between-renames")
    assert killed.wait(timeout=120) == -9
    plan = open_bundle(make_settings(world.tmp, "node"), out)
    assert (plan.src / "untracked.txt").read_text() == "changed since the first bundle\n"


@pytest.mark.integration
def test_a_killed_unpack_is_removed_by_the_next_run(world):
    s = make_settings(world.tmp, fmt=world.fmt)
    path = write_bundle(s, world.mlx, parse_targets("cpu"), world.tmp / "b.tar.gz")
    killed = _cli(world, "build", "--from-bundle", str(path), "--configure-only",
                  kill_at="bundle-unpacked", cache="node")
    assert killed.wait(timeout=120) == -9
    bundles = make_settings(world.tmp, "node").worktrees_dir / "bundles"
    assert [p for p in bundles.iterdir() if p.name.startswith(".unpack-")]
    (world.mlx / "untracked.txt").write_text("another bundle\n")
    other = write_bundle(s, world.mlx, parse_targets("cpu"), world.tmp / "c.tar.gz")
    open_bundle(make_settings(world.tmp, "node"), other)
    assert not [p for p in bundles.iterdir() if p.name.startswith(".unpack-")]


def test_a_cache_entry_changed_after_planning_is_not_packed(world):
    from mlx_builder.errors import DepsError
    s = make_settings(world.tmp, fmt=world.fmt)
    plan = plan_from_tree(s, world.mlx, parse_targets("cpu"))
    fmt = next(d for d in plan.deps.deps if d.name == "fmt")
    (fmt.path / "include/fmt/core.h").write_text("// changed in the cache\n")
    out = world.tmp / "dist" / "b.tar.gz"
    with pytest.raises(DepsError, match="changed after it was checked"):
        write_bundle(s, world.mlx, parse_targets("cpu"), out, plan=plan)
    assert not out.exists()


def test_only_an_unpinned_bundle_has_its_gzip_stream_read_twice(made, monkeypatch):
    from mlx_builder.wheelbuild import bundle as bundle_mod
    reads = []
    real = bundle_mod._read_whole_gzip
    monkeypatch.setattr(bundle_mod, "_read_whole_gzip", lambda p: reads.append(p) or real(p))
    open_bundle(made.node, made.path)                  # the .sha256 beside it pins it
    assert reads == []
    shutil.rmtree(made.node.worktrees_dir / "bundles")
    loose = made.tmp / "elsewhere" / made.path.name
    loose.parent.mkdir()
    shutil.copyfile(made.path, loose)                  # no .sha256 beside this copy
    open_bundle(made.node, loose)
    assert reads == [loose]
