"""The PEP 503 index and JSON listing over a wheelhouse, checked with real pip."""

from __future__ import annotations

import hashlib
import html.parser
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest
from click.testing import CliRunner
from fakes import HERE_TAG, make_wheel, manifest_for

from mlx_builder.cli import cli
from mlx_builder.errors import WheelError
from mlx_builder.prebuilt.wheelindex import load_listing, write_index
from mlx_builder.wheelbuild.manifest import verify_record


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.links.append(dict(attrs))


def _links(page: Path) -> list[dict]:
    parser = _Links()
    parser.feed(page.read_text())
    return parser.links


def test_index_pages_and_listing(tmp_path):
    house = tmp_path / "house"
    cuda = make_wheel(house, "0.32.1+mlxb.aa", manifest=manifest_for("cuda-sm90", cuda_major=13))
    bare = make_wheel(house, "0.32.0", name="other")
    result = write_index(house)
    assert sorted(result.variants) == ["cu13-sm90", "other"]

    assert [p["href"] for p in _links(house / "cu13-sm90" / "simple" / "index.html")] == ["mlx/"]
    assert [p["href"] for p in _links(house / "other" / "simple" / "index.html")] == ["other/"]
    page = house / "cu13-sm90" / "simple" / "mlx"
    links = _links(page / "index.html")
    assert len(links) == 1
    href = links[0]["href"]
    path, digest = href.split("#sha256=")
    assert (page / unquote(path)).resolve() == cuda.resolve()
    assert digest == hashlib.sha256(cuda.read_bytes()).hexdigest()
    assert links[0]["data-requires-python"] == ">=3.10"

    data = json.loads(result.listing.read_text())
    by_name = {w["filename"]: w for w in data["wheels"]}
    assert by_name[cuda.name]["variant"] == "cu13-sm90"
    assert data["variants"]["cu13-sm90"] == {"simple": "cu13-sm90/simple/",
                                             "constraints": "cu13-sm90/constraints.txt"}
    assert (house / "cu13-sm90" / "constraints.txt").read_text().splitlines()[-1] == \
        "mlx==0.32.1+mlxb.aa"
    assert by_name[cuda.name]["manifest"]["archs"] == ["90a"]
    assert by_name[cuda.name]["manifest"]["backend"] == "cuda"
    assert verify_record(cuda) == []
    assert by_name[cuda.name]["tags"] == [HERE_TAG]
    assert by_name[bare.name]["manifest"] is None
    assert "manifest" in by_name[bare.name]["manifest_error"]


def test_index_is_deterministic_and_base_url(tmp_path):
    house = tmp_path / "house"
    make_wheel(house, manifest=manifest_for("cpu"))
    first = write_index(house, tmp_path / "a")
    write_index(house, tmp_path / "b")
    assert first.listing.read_bytes() != b""
    for rel in ("index.json", "index.html", "cpu/simple/index.html", "cpu/simple/mlx/index.html",
                "cpu/constraints.txt", "cpu/index.json"):
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
    write_index(house, tmp_path / "c", base_url="https://example.org/wheels/")
    link = _links(tmp_path / "c" / "cpu" / "simple" / "mlx" / "index.html")[0]["href"]
    assert link.startswith("https://example.org/wheels/mlx-0.32.1%2Bmlxb.x-")


def test_empty_wheelhouse_is_an_error(tmp_path):
    with pytest.raises(WheelError, match="no wheels"):
        write_index(tmp_path)


def test_load_listing_from_dir_simple_url_and_bare_house(tmp_path):
    house = tmp_path / "house"
    wheel = make_wheel(house, manifest=manifest_for("cpu"))
    bare = load_listing(str(house))          # no index.json yet: scanned
    assert [w["filename"] for w in bare.wheels] == [wheel.name]
    write_index(house, tmp_path / "idx")
    for where in (str(tmp_path / "idx"), str(tmp_path / "idx" / "cpu"),
                  (tmp_path / "idx" / "cpu" / "simple").as_uri() + "/"):
        listing = load_listing(where)
        assert listing.local
        assert Path(listing.locate(listing.wheels[0])).resolve() == wheel.resolve()
    root, one = load_listing(str(tmp_path / "idx")), load_listing(str(tmp_path / "idx" / "cpu"))
    assert root.nested and not one.nested
    assert root.pip_sources("cpu") == one.pip_sources("cpu") == (
        (tmp_path / "idx" / "cpu" / "simple").as_uri() + "/",
        (tmp_path / "idx" / "cpu" / "constraints.txt").as_uri())
    with pytest.raises(WheelError, match="no wheel index"):
        load_listing(str(tmp_path / "missing"))


def _pip(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PIP_NO_INPUT="1", PIP_CONFIG_FILE=os.devnull)
    return subprocess.run([sys.executable, "-m", "pip", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _import_marker(target: Path) -> str:
    out = subprocess.run([sys.executable, "-c", "import mlx; print(mlx.MARKER)"],
                         env=dict(os.environ, PYTHONPATH=str(target)),
                         capture_output=True, text=True, check=True, cwd=target)
    return out.stdout.strip()


def test_pip_installs_from_generated_file_index(tmp_path):
    """`mlx-builder index`, then plain pip against file://ROOT/simple/, offline."""
    house = tmp_path / "house"
    make_wheel(house, "0.32.0+mlxb.old", manifest=manifest_for("cpu"), marker="old")
    make_wheel(house, "0.32.1+mlxb.x", manifest=manifest_for("cpu"), marker="new")
    res = CliRunner().invoke(cli, ["index", str(house)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "mlx-0.32.1+mlxb.x" in res.output
    target = tmp_path / "site"
    proc = _pip("install", "--disable-pip-version-check", "--no-deps",
                "--index-url", (house / "cpu" / "simple").as_uri() + "/",
                "--target", str(target), "mlx==0.32.1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _import_marker(target) == "new"


def test_keep_adds_to_the_earlier_index_and_refuses_lost_files(tmp_path):
    """A release indexes its wheels beside those published before."""
    site = tmp_path / "site"
    first, second = tmp_path / "r1", tmp_path / "r2"
    make_wheel(first, "0.32.0+mlxb.a", manifest=manifest_for("cpu"))
    write_index(first, site, base_url="https://example.org/r1/")
    make_wheel(second, "0.32.1+mlxb.b", manifest=manifest_for("cpu"))
    replaced = write_index(second, tmp_path / "fresh", base_url="https://example.org/r2/")
    assert [e.version for e in replaced.entries] == ["0.32.1+mlxb.b"]
    kept = write_index(second, site, base_url="https://example.org/r2/", keep=True)
    assert kept.kept == 1
    assert [e.version for e in kept.entries] == ["0.32.0+mlxb.a", "0.32.1+mlxb.b"]
    hrefs = [a["href"] for a in _links(site / "cpu" / "simple" / "mlx" / "index.html")]
    assert [h.split("#")[0].rsplit("/", 2)[1] for h in hrefs] == ["r1", "r2"]
    assert (site / "cpu" / "constraints.txt").read_text().endswith("mlx==0.32.1+mlxb.b\n")

    local = tmp_path / "local"
    make_wheel(first, "0.31.0+mlxb.c", manifest=manifest_for("cpu"))
    write_index(first, local)                     # relative links into r1
    (first / "mlx-0.31.0+mlxb.c-" f"{HERE_TAG}.whl").unlink()
    with pytest.raises(WheelError, match="which is gone"):
        write_index(second, local, keep=True)


def test_variants_keep_cuda_majors_and_targets_apart(tmp_path):
    house = tmp_path / "house"
    make_wheel(house, "0.32.1+mlxb.a.cu13.90a", manifest=manifest_for("cuda-sm90", cuda_major=13))
    make_wheel(house, "0.32.1+mlxb.a.cu12.90a", manifest=manifest_for("cuda-sm90", cuda_major=12))
    make_wheel(house, "0.32.1+mlxb.a.cu13.121a", manifest=manifest_for("cuda-sm121", cuda_major=13))
    make_wheel(house, "0.32.1+mlxb.a.cu13.all", manifest=manifest_for("cuda", cuda_major=13))
    result = write_index(house)
    assert sorted(result.variants) == ["cu12-sm90", "cu13-all", "cu13-sm121", "cu13-sm90"]
    for name, simple in result.variants.items():
        hrefs = [a["href"] for a in _links(simple / "mlx" / "index.html")]
        assert len(hrefs) == 1, (name, hrefs)


def test_index_folder_is_locked(tmp_path, held):
    from mlx_builder.errors import LockError
    house = tmp_path / "house"
    make_wheel(house, manifest=manifest_for("cpu"))
    held(house / ".index.json.lock")
    with pytest.raises(LockError, match="index folder"):
        write_index(house, no_wait=True)
    assert not (house / "index.json").exists()


def test_a_failed_index_write_keeps_the_old_index(tmp_path, monkeypatch):
    import errno

    from mlx_builder.errors import FileSystemError
    house = tmp_path / "house"
    make_wheel(house, manifest=manifest_for("cpu"))
    write_index(house)
    before = {p: p.read_bytes() for p in house.rglob("*.html")} | \
        {house / "index.json": (house / "index.json").read_bytes()}
    make_wheel(house, "0.32.2+mlxb.cpu", manifest=manifest_for("cpu"))
    real = Path.write_bytes

    def full(self, data):
        if self.name.startswith(".index.json"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, data)
    monkeypatch.setattr(Path, "write_bytes", full)
    monkeypatch.setattr(Path, "write_text", lambda self, text, **k: full(self, text.encode()))
    with pytest.raises(FileSystemError, match="cannot write") as exc:
        write_index(house)
    assert "disk is full" in exc.value.why
    assert {p: p.read_bytes() for p in before} == before
    assert not [p for p in house.rglob(".*part-*")]
