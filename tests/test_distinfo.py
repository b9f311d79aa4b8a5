"""distinfo: the top-level .dist-info member is the one read, a missing one
is None or a WheelError as asked, and a file that is not a zip is a
WheelError (exit 23), never a StopIteration or BadZipFile."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from mlx_builder import distinfo
from mlx_builder.errors import WheelError


def wheel(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return path


def test_top_level_member_wins_over_a_vendored_one(tmp_path: Path) -> None:
    w = wheel(tmp_path / "mlx-1.0-py3-none-any.whl", {
        "mlx/_vendor/dep-9.dist-info/METADATA": "Name: dep\nVersion: 9\n",
        "mlx-1.0.dist-info/METADATA": "Name: mlx\nVersion: 1.0\nRequires-Python: >=3.10\n",
    })
    with zipfile.ZipFile(w) as zf:
        assert distinfo.member(zf, "METADATA") == "mlx-1.0.dist-info/METADATA"
        assert distinfo.member(zf, "RECORD") is None
    headers = distinfo.metadata(w)
    assert headers is not None
    assert headers["Version"] == "1.0" and headers["Requires-Python"] == ">=3.10"


def test_missing_member_is_none_or_an_error(tmp_path: Path) -> None:
    w = wheel(tmp_path / "x-1-py3-none-any.whl", {"x/__init__.py": ""})
    assert distinfo.read_text(w, "WHEEL", required=False) is None
    assert distinfo.metadata(w, required=False) is None
    with pytest.raises(WheelError) as err:
        distinfo.metadata(w)
    assert "no .dist-info/METADATA" in err.value.what and err.value.exit_code == 23


def test_not_a_zip_is_a_wheel_error(tmp_path: Path) -> None:
    bad = tmp_path / "y-1-py3-none-any.whl"
    bad.write_bytes(b"not a zip")
    with pytest.raises(WheelError) as err:
        distinfo.read_text(bad, "WHEEL", required=False)
    assert "not a readable wheel" in err.value.what and err.value.next_step
