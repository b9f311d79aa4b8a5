"""Every error a user can cause ends as an MlxBuilderError: its exit code and
an `error:` message, never a traceback. Each row makes one malformed input and
runs the CLI on it in-process (an exception that escapes main() fails the
test with its traceback)."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from fakes import dep_repo, fake_mlx, make_wheel, manifest_for

from mlx_builder.cli import main


def _config(text: str | bytes) -> Callable[[Path, object], list[str]]:
    def make(tmp: Path, up) -> list[str]:
        data = text if isinstance(text, bytes) else text.encode()
        (tmp / "c.toml").write_bytes(data)
        return ["--config", str(tmp / "c.toml"), "status", "--mlx", "0.1.0"]
    return make


def _env(name: str, value: str) -> Callable[[Path, object], list[str]]:
    def make(tmp: Path, up) -> list[str]:
        os.environ[name] = value          # restored by the fixture
        return ["status", "--mlx", "0.1.0"]
    return make


def _bundle(tmp: Path, meta=None, garbage: bool = False) -> Path:
    path = tmp / "b.tar.gz"
    if garbage:
        path.write_bytes(b"\x1f\x8b not really gzip")
        return path
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw) as gz, \
            tarfile.open(fileobj=gz, mode="w") as tf:
        for name, data in (("mlx-x/bundle.json", json.dumps(meta).encode()),
                           ("mlx-x/mlx/setup.py", b"")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def _bundle_with_link(tmp: Path, up) -> list[str]:
    """A bundle whose bundle.json lists a link to an absolute path."""
    import hashlib
    meta = {"format": "mlx-builder-bundle", "schema": 2,
            "target": {"spec": "cpu", "backend": "cpu"},
            "provenance": {"upstream_commit": "0" * 40},
            "files": {"mlx/setup.py": {"sha256": hashlib.sha256(b"").hexdigest()},
                      "mlx/evil": {"link": "/etc/passwd"}}}
    path = _bundle(tmp, meta)
    with gzip.open(path) as gz:
        data = gz.read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        members = [(m, tf.extractfile(m).read()) for m in tf.getmembers()]
    with gzip.open(path, "wb") as gz, tarfile.open(fileobj=gz, mode="w") as tf:
        for m, blob in members:
            tf.addfile(m, io.BytesIO(blob))
        link = tarfile.TarInfo("mlx-x/mlx/evil")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tf.addfile(link)
    return ["--offline", "build", "--from-bundle", str(path), "--configure-only"]


def _cache_under_a_file(tmp: Path, up) -> list[str]:
    (tmp / "afile").write_text("x")
    return ["--cache-dir", str(tmp / "afile" / "cache"), "--mlx-repo",
            "https://example.invalid/mlx", "status"]


def _cache_is_a_file(tmp: Path, up) -> list[str]:
    (tmp / "afile").write_text("x")
    mlx = fake_mlx(tmp / "mlx")
    os.environ["MLX_BUILDER_DEP_FMT"] = str(dep_repo(tmp / "fmt", "12.1.0", {"a.h": ""}))
    return ["--cache-dir", str(tmp / "afile"), "--offline", "bundle", "--source", str(mlx),
            "--target", "cpu", "--out", str(tmp / "dist")]


def _read_only_cache(tmp: Path, up) -> list[str]:
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    ro = tmp / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    return ["--cache-dir", str(ro), "--mlx-repo", "https://example.invalid/mlx", "status"]


def _work_dir_is_a_file(tmp: Path, up) -> list[str]:
    (tmp / "work").write_text("x")
    return ["--work-dir", str(tmp / "work"), "apply", "--mlx", "0.1.0"]


def _dest_is_a_file(tmp: Path, up) -> list[str]:
    (tmp / "dest").write_text("x")
    return ["apply", "--mlx", "0.1.0", "--dest", str(tmp / "dest")]


def _inspect_bundle(meta=None, garbage=False):
    return lambda tmp, up: ["inspect", str(_bundle(tmp, meta, garbage))]


def _build_bundle(meta):
    return lambda tmp, up: ["--offline", "build", "--from-bundle", str(_bundle(tmp, meta)),
                            "--configure-only"]


def _wheel_manifest(manifest):
    def make(tmp: Path, up) -> list[str]:
        from mlx_builder.wheelbuild.manifest import inject
        wheel = make_wheel(tmp / "h", "0.32.1+mlxb.cpu")
        inject(wheel, wheel, manifest=manifest)
        return ["inspect", str(wheel)]
    return make


def _listing(data: str | bytes):
    """``install --dry-run`` against an index whose index.json holds ``data``."""
    def make(tmp: Path, up) -> list[str]:
        (tmp / "idx").mkdir()
        raw = data.encode() if isinstance(data, str) else data
        (tmp / "idx" / "index.json").write_bytes(raw)
        os.environ["MLX_BUILDER_FAKE_GPU"] = "none"
        return ["install", "--index", str(tmp / "idx"), "--dry-run"]
    return make


def _bundle_out_file(tmp: Path, up) -> list[str]:
    (tmp / "taken").write_text("x")
    mlx = fake_mlx(tmp / "mlx")
    os.environ["MLX_BUILDER_DEP_FMT"] = str(dep_repo(tmp / "fmt", "12.1.0", {"a.h": ""}))
    return ["--offline", "bundle", "--source", str(mlx), "--target", "cpu", "--out",
            str(tmp / "taken")]


def _file(tmp: Path) -> Path:
    (tmp / "afile").write_text("x")
    return tmp / "afile"


def _build_source(*args: str):
    """``build --source`` of a fake MLX tree (offline, fmt from a local repo)."""
    def make(tmp: Path, up) -> list[str]:
        mlx = fake_mlx(tmp / "mlx")
        os.environ["MLX_BUILDER_DEP_FMT"] = str(dep_repo(tmp / "fmt", "12.1.0", {"a.h": ""}))
        return ["--offline", "build", "--source", str(mlx), "--target", "cpu", *args]
    return make


def _sha256_arg(value: str, bundle: bool = True):
    def make(tmp: Path, up) -> list[str]:
        src = ["--from-bundle", str(_bundle(tmp, {}))] if bundle else ["--mlx", "0.1.0",
                                                                       "--target", "cpu"]
        return ["--offline", "build", *src, "--sha256", value]
    return make


def _http_index(reply: bytes):
    """An index URL whose server answers every request with ``reply``."""
    def make(tmp: Path, up) -> list[str]:
        import socket
        import threading
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(4)

        def serve() -> None:
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                with conn:
                    conn.recv(65536)
                    conn.sendall(reply)
        threading.Thread(target=serve, daemon=True).start()
        os.environ["MLX_BUILDER_FAKE_GPU"] = "none"
        return ["install", "--index", f"http://127.0.0.1:{server.getsockname()[1]}/",
                "--dry-run"]
    return make


def _wheelhouse_record(record: bytes):
    def make(tmp: Path, up) -> list[str]:
        import zipfile
        wheel = make_wheel(tmp / "wh", "0.32.1+mlxb.cpu", manifest=manifest_for("cpu"))
        with zipfile.ZipFile(wheel) as zf:
            items = [(i, zf.read(i)) for i in zf.infolist()]
        with zipfile.ZipFile(wheel, "w") as zf:
            for info, data in items:
                zf.writestr(info, record if info.filename.endswith("/RECORD") else data)
        return ["index", str(tmp / "wh")]
    return make


def _wheel_name_not_utf8(tmp: Path, up) -> list[str]:
    wheel = make_wheel(tmp / "wh", "0.32.1+mlxb.cpu", manifest=manifest_for("cpu"))
    os.rename(bytes(wheel), bytes(wheel.parent) + b"/mlx-0.32.1+mlxb.cpu\xff-py3-none-any.whl")
    return ["index", str(tmp / "wh")]


def _empty_mirror_dir(tmp: Path, up) -> list[str]:
    from mlx_builder.settings import Settings
    settings = Settings(cache_dir=tmp / "cache", mlx_repo="https://example.invalid/mlx")
    settings.mirror_dir.mkdir(parents=True)
    return ["--cache-dir", str(tmp / "cache"), "--mlx-repo", "https://example.invalid/mlx",
            "--offline", "status", "--mlx", "0.1.0"]


def _long_work_dir(command: str):
    def make(tmp: Path, up) -> list[str]:
        deep = tmp.joinpath(*(["d" * 200] * 19))
        deep = deep / ("e" * (4040 - len(str(deep)) - 1))   # 4 040 characters
        return ["--work-dir", str(deep), command, "--mlx", "0.1.0"]
    return make


LISTING_ENTRY = {"filename": "mlx-1-py3-none-any.whl", "url": "mlx-1-py3-none-any.whl",
                 "tags": ["py3-none-any"], "version": "1"}

def _bench(*options: str) -> Callable[[Path, object], list[str]]:
    def make(tmp: Path, up) -> list[str]:
        wheel = make_wheel(tmp)
        return ["bench", str(wheel), *options, "--out", str(tmp / "out")]
    return make


CASES = [
    ("config: dep_sources = 3", _config("dep_sources = 3\n"), 10),
    ("config: offline = [1]", _config("offline = [1]\n"), 10),
    ("config: offline = 'maybe'", _config("offline = 'maybe'\n"), 10),
    ("config: jobs = 'many'", _config("jobs = 'many'\n"), 10),
    ("config: jobs = true", _config("jobs = true\n"), 10),
    ("config: cache_dir = 5", _config("cache_dir = 5\n"), 10),
    ("config: mlx_repo = []", _config("mlx_repo = []\n"), 10),
    ("config: dep_sources.fmt = 1", _config("[dep_sources]\nfmt = 1\n"), 10),
    ("config: unknown key", _config("colour = 'blue'\n"), 10),
    ("config: not TOML", _config("this is = = not toml\n"), 10),
    ("config: not UTF-8", _config(b"mlx_repo = '\xff\xfe'\n"), 10),
    ("env: MLX_BUILDER_JOBS=abc", _env("MLX_BUILDER_JOBS", "abc"), 10),
    ("env: MLX_BUILDER_OFFLINE=maybe", _env("MLX_BUILDER_OFFLINE", "maybe"), 10),
    ("cache dir under a file", _cache_under_a_file, 33),
    ("cache dir is a file", _cache_is_a_file, 33),
    ("read-only cache dir", _read_only_cache, 33),
    ("work dir is a file", _work_dir_is_a_file, 33),
    ("apply --dest names a file", _dest_is_a_file, 32),
    ("bundle.json is a list (inspect)", _inspect_bundle([1, 2]), 34),
    ("bundle.json without target (inspect)",
     _inspect_bundle({"format": "mlx-builder-bundle", "schema": 2}), 34),
    ("bundle.json is a list (build)", _build_bundle([1, 2]), 34),
    ("bundle.json with a dependency outside deps/ (build)", _build_bundle(
        {"format": "mlx-builder-bundle", "schema": 2, "target": {"spec": "cpu", "backend": "cpu"},
         "provenance": {"upstream_commit": "0" * 40}, "files": {},
         "dependencies": [{"name": "x", "pin": "1", "path": "../../etc"}]}), 34),
    ("a bundle that is not gzip (inspect)", _inspect_bundle(garbage=True), 34),
    ("a bundle with a link to an absolute path (build)", _bundle_with_link, 34),
    ("wheel manifest is a list", _wheel_manifest(["a"]), 23),
    ("wheel manifest archs is a number", _wheel_manifest({**manifest_for("cpu"), "archs": 5}), 23),
    ("wheel manifest patches without file", _wheel_manifest({"patches": [{"x": 1}]}), 23),
    ("index.json is a list", _listing("[]"), 23),
    ("index.json manifest is a list", _listing(json.dumps(
        {"wheels": [{**LISTING_ENTRY, "manifest": [1]}]})), 23),
    ("index.json filename is a number", _listing(json.dumps(
        {"wheels": [{**LISTING_ENTRY, "filename": 5}]})), 23),
    ("bundle --out names a file", _bundle_out_file, 17),
    ("build --sha256 that is not a hash", _sha256_arg("abc"), 10),
    ("build --sha256 deadbeef", _sha256_arg("deadbeef"), 10),
    ("build --python that does not exist", _build_source("--python", "/nonexistent/python"), 25),
    ("build --out below a file", lambda tmp, up: _build_source(
        "--out", str(_file(tmp) / "dist"))(tmp, up), 33),
    ("env: MLX_BUILDER_CACHE empty", _env("MLX_BUILDER_CACHE", ""), 10),
    ("env: MLX_BUILDER_MLX_REPO empty", _env("MLX_BUILDER_MLX_REPO", ""), 10),
    ("env: MLX_BUILDER_DEP_FMT empty", _env("MLX_BUILDER_DEP_FMT", ""), 10),
    ("config: jobs = 100000", _config("jobs = 100000\n"), 10),
    ("-j 100000", lambda tmp, up: ["-j", "100000", "status", "--mlx", "0.1.0"], 10),
    ("build --sha256 without --from-bundle", _sha256_arg("0" * 64, bundle=False), 17),
    ("index.json is not UTF-8", _listing(b'{"wheels": ["\xff"]}'), 23),
    ("index.json wheels holds a number", _listing(json.dumps({"wheels": [5]})), 23),
    ("index.json tags hold a number", _listing(json.dumps(
        {"wheels": [{**LISTING_ENTRY, "tags": [5]}]})), 23),
    ("index.json version is a number", _listing(json.dumps(
        {"wheels": [{**LISTING_ENTRY, "version": 5}]})), 23),
    ("index.json sha256 is a list", _listing(json.dumps(
        {"wheels": [{**LISTING_ENTRY, "sha256": [1]}]})), 23),
    ("index URL: reply is not HTTP", _http_index(b"HELLO THERE\r\n\r\n"), 18),
    ("index URL: reply cut short", _http_index(
        b"HTTP/1.0 200 OK\r\nContent-Length: 1000\r\n\r\n{\"wheels\": ["), 18),
    ("RECORD row with one column", _wheelhouse_record(b"mlx/__init__.py\n"), 23),
    ("RECORD not UTF-8", _wheelhouse_record(b"\xff\xfe,\n"), 23),
    ("wheel file name not UTF-8", _wheel_name_not_utf8, 23),
    ("an empty folder where the mirror should be", _empty_mirror_dir, 18),
    ("--mlx-repo with git's ext:: transport", lambda tmp, up: [
        "--mlx-repo", "ext::sh -c touch% pwned", "--cache-dir", str(tmp / "c"), "status",
        "--mlx", "0.1.0"], 10),
    ("apply in a work path of 4 040 characters", _long_work_dir("apply"), 33),
    ("checkout in a work path of 4 040 characters", _long_work_dir("checkout"), 33),
    ("bench --qmm-shapes that is not K:N", _bench("--qmm-shapes", "5376"), 10),
    ("bench --moe-shapes that is not K:N", _bench("--moe-shapes", "2048"), 10),
    ("bench --moe-top-k above --moe-experts",
     _bench("--moe-shapes", "2048:768", "--moe-experts", "8", "--moe-top-k", "9"), 10),
    ("bench --moe-shapes with K off the group size", _bench("--moe-shapes", "96:256"), 10),
    ("bench --qmm-shapes with K off the group size", _bench("--qmm-shapes", "100:64"), 10),
    ("bench --moe-tokens of 0",
     _bench("--moe-shapes", "qwen3-30b-a3b", "--moe-tokens", "0,8"), 10),
]


@pytest.fixture
def clean_env(upstream, monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith("MLX_BUILDER_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("MLX_BUILDER_MLX_REPO", str(upstream.path))
    monkeypatch.setenv("MLX_BUILDER_PATCHES", str(upstream.patches_dir))
    monkeypatch.setenv("MLX_BUILDER_CACHE", str(tmp_path / "cache"))
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.mark.parametrize("name, make, code", CASES, ids=[c[0] for c in CASES])
def test_malformed_input_ends_in_its_error(name, make, code, upstream, clean_env, tmp_path,
                                           capsys):
    case = tmp_path / "case"
    case.mkdir()
    argv = make(case, upstream)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert exc.value.code == code, err
    lines = err.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("error: "))
    assert any(line.startswith("  next: ") for line in lines[first:]), err
