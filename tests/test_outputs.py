"""outputs: checks of an output folder before the work, staged writes
renamed together, and the leftovers of killed runs."""

from __future__ import annotations

import os
from collections import namedtuple

import pytest

from mlx_builder import outputs
from mlx_builder.errors import FileSystemError


def test_check_out_dir_creates_nothing_and_names_what_is_wrong(tmp_path, monkeypatch):
    assert outputs.check_out_dir(tmp_path / "new" / "dist", "--out") == tmp_path / "new" / "dist"
    assert not (tmp_path / "new").exists()
    (tmp_path / "f").write_text("x")
    with pytest.raises(FileSystemError, match="is not a folder"):
        outputs.check_out_dir(tmp_path / "f", "--out")
    with pytest.raises(FileSystemError, match="cannot create --out") as exc:
        outputs.check_out_dir(tmp_path / "f" / "dist", "--out")
    assert "is a file" in exc.value.why and exc.value.exit_code == 33
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(outputs.shutil, "disk_usage", lambda p: usage(0, 0, 5 * 2**20))
    with pytest.raises(FileSystemError, match="has 5 MiB free"):
        outputs.check_out_dir(tmp_path, "--out", need_bytes=50 * 2**20)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_check_out_dir_refuses_a_read_only_folder(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    with pytest.raises(FileSystemError, match="cannot write into --out"):
        outputs.check_out_dir(ro, "--out")
    with pytest.raises(FileSystemError, match="cannot create --out"):
        outputs.check_out_dir(ro / "sub", "--out")


def test_staged_files_replace_theirs_only_at_commit(tmp_path):
    a, side = tmp_path / "a.tar.gz", tmp_path / "a.tar.gz.sha256"
    a.write_text("old")
    side.write_text("old hash")
    staged = [(outputs.stage_bytes(a, b"new"), a), (outputs.stage_bytes(side, b"new hash"), side)]
    assert a.read_text() == "old" and side.read_text() == "old hash"
    outputs.commit(staged, remove_first=[side])
    assert a.read_text() == "new" and side.read_text() == "new hash"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar.gz", "a.tar.gz.sha256"]


def test_a_described_file_never_sits_beside_its_old_description(tmp_path, monkeypatch):
    a, side = tmp_path / "a", tmp_path / "a.sha256"
    a.write_text("old")
    side.write_text("old hash")
    staged = [(outputs.stage_bytes(a, b"new"), a), (outputs.stage_bytes(side, b"new hash"), side)]
    real = os.replace

    def stop_after_the_first(src, dst):
        real(src, dst)
        raise KeyboardInterrupt
    monkeypatch.setattr(os, "replace", stop_after_the_first)
    with pytest.raises(KeyboardInterrupt):
        outputs.commit(staged, remove_first=[side])
    assert a.read_text() == "new" and not side.exists()


def test_leftovers_are_the_staged_files_of_that_output_only(tmp_path):
    dest = tmp_path / "b.tar.gz"
    (tmp_path / ".b.tar.gz.part-1").write_text("x")
    (tmp_path / ".b.tar.gz.part-2").mkdir()
    (tmp_path / ".b.tar.gz.sha256.part-3").write_text("x")
    (tmp_path / ".b.tar.gz.lock").write_text("")
    removed = outputs.remove_leftovers(dest)
    assert sorted(p.name for p in removed) == [".b.tar.gz.part-1", ".b.tar.gz.part-2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".b.tar.gz.lock",
                                                           ".b.tar.gz.sha256.part-3"]
