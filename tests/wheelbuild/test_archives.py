"""Safe extraction and content hashes of source trees."""

from __future__ import annotations

import io
import os
import tarfile
import zipfile

import pytest

from mlx_builder.errors import DepsError
from mlx_builder.wheelbuild.archives import META, content_sha256, extract_archive, safe_extract


def test_content_hash_sees_content_and_exec_bit_but_not_the_record(tmp_path):
    (tmp_path / "a").write_text("x")
    h1 = content_sha256(tmp_path)
    (tmp_path / META).write_text("{}")
    assert content_sha256(tmp_path) == h1
    os.chmod(tmp_path / "a", 0o755)
    h2 = content_sha256(tmp_path)
    (tmp_path / "a").write_text("y")
    os.symlink("a", tmp_path / "link")
    assert len({h1, h2, content_sha256(tmp_path)}) == 3


def tar_with(path, name: str, data: bytes = b"x", link: str | None = None):
    with tarfile.open(path, "w:gz") as tf:
        info = tarfile.TarInfo(name)
        if link is not None:
            info.type, info.linkname = tarfile.SYMTYPE, link
            tf.addfile(info)
        else:
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize("name,link", [("../evil", None), ("/abs/evil", None),
                                       ("top/ok", "../../outside")])
def test_unsafe_members_are_refused(tmp_path, name, link):
    archive = tar_with(tmp_path / "a.tar.gz", name, link=link)
    with tarfile.open(archive) as tf, pytest.raises(DepsError, match="unsafe"):
        safe_extract(tf, tmp_path / "out")
    assert not (tmp_path / "evil").exists()


def test_extract_archive_strips_one_common_top_dir(tmp_path):
    z = tmp_path / "x.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("cccl/include/cuda/std/version", "v")
        zf.writestr("cccl/LICENSE", "L")
    extract_archive(z, tmp_path / "zout")
    assert sorted(p.name for p in (tmp_path / "zout").iterdir()) == ["LICENSE", "include"]
    t = tar_with(tmp_path / "flat.tar.gz", "single.h", b"// one file")
    extract_archive(t, tmp_path / "tout")
    assert (tmp_path / "tout" / "single.h").read_bytes() == b"// one file"
