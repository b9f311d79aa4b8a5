"""Version labels, the manifest, and rewriting a wheel around it."""

from __future__ import annotations

import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from packaging.version import Version

from mlx_builder.errors import WheelError
from mlx_builder.source.series import PatchEntry, patch_set_hash
from mlx_builder.wheelbuild.manifest import (
    MANIFEST_PATH,
    Provenance,
    build_manifest,
    inject,
    make_label,
    parse_label,
    provenance_from_tree,
    read_manifest,
    record_hash,
    verify_record,
)
from mlx_builder.wheelbuild.targets import parse_targets

COMMIT = "846d176227a0ac13d2667e58d2bb68b322109ab0"


def patch(name: str, sha: str, target: str = "cuda") -> PatchEntry:
    return PatchEntry(file=name, path=Path("/p") / name, target=target,
                      upstream="not-forwarded", sha256=sha)


def prepared(patches) -> SimpleNamespace:
    return SimpleNamespace(path=Path("/tree"), upstream_url="https://github.com/ml-explore/mlx",
                           base_commit=COMMIT, applied=tuple(patches), skipped=(),
                           ref=SimpleNamespace(ref="main", commit=COMMIT, kind="branch",
                                               version="0.32.2"),
                           series=SimpleNamespace(name="main", base=COMMIT))


def test_label_names_commit_patch_set_and_target():
    patches = [patch("0020-a.patch", "1" * 64), patch("0021-b.patch", "2" * 64, "all")]
    prov = provenance_from_tree(prepared(patches), "0.32.2")
    label = make_label(prov, parse_targets("cuda-sm90").tag)
    psh = patch_set_hash(patches)
    assert label == f"0.32.2+mlxb.846d176227a0.{psh[:8]}.cu90a"
    assert Version(label).local == f"mlxb.846d176227a0.{psh[:8]}.cu90a"
    assert parse_label(label) == {"base": "0.32.2", "commit": "846d176227a0",
                                  "patches": psh[:8], "target": "cu90a"}
    other = make_label(provenance_from_tree(prepared(patches[:1]), "0.32.2"), "cu90a")
    assert other != label
    assert parse_label("0.32.2") is None


def test_a_cuda_label_names_its_cuda_major():
    """--cuda 12 and --cuda 13 builds of one source get different versions."""
    prov = provenance_from_tree(prepared([patch("0020-a.patch", "1" * 64)]), "0.32.2")
    cu12, cu13 = (make_label(prov, "cu90a", major) for major in (12, 13))
    assert cu12.endswith(".cu12.90a") and cu13.endswith(".cu13.90a") and cu12 != cu13
    assert parse_label(cu13)["target"] == "cu13.90a" and parse_label(cu13)["cuda_major"] == "13"
    assert make_label(prov, "cuda", 13).endswith(".cu13.all")
    assert make_label(prov, "cu80x121a", 12).endswith(".cu12.80x121a")
    assert make_label(prov, "cpu", 13).endswith(".cpu")        # no CUDA in a cpu wheel
    assert "cuda_major" not in parse_label(make_label(prov, "cu90a"))


def test_provenance_json_round_trip():
    prov = provenance_from_tree(prepared([patch("0020-a.patch", "a" * 64)]), "0.32.2")
    again = Provenance.from_json(prov.to_json())
    assert again == prov
    assert again.patches[0] == {"file": "0020-a.patch", "sha256": "a" * 64, "target": "cuda",
                                "upstream": "not-forwarded"}


def fake_wheel(path: Path, version: str, extra: dict[str, bytes] | None = None,
               name: str = "mlx") -> Path:
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    files = {"mlx/__init__.py": b"", "mlx/lib/libmlx.so": b"\x7fELF...",
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                 "Requires-Dist: numpy\n\nlong description\n\nmore\n".encode(),
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\n", **(extra or {})}
    record = "".join(f"{n},{record_hash(d)},{len(d)}\n" for n, d in files.items())
    record += f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
        zf.writestr(f"{dist}/RECORD", record)
    return path


def test_manifest_round_trip_through_a_wheel(tmp_path):
    prov = provenance_from_tree(prepared([patch("0020-a.patch", "a" * 64)]), "0.32.2")
    targets = parse_targets("cuda-sm90,cuda-sm121")
    label = make_label(prov, targets.tag)
    raw = fake_wheel(tmp_path / f"mlx-{label}-cp312-cp312-linux_x86_64.whl", label)
    with pytest.raises(WheelError, match="no mlx-builder manifest"):
        read_manifest(raw)
    manifest = build_manifest(
        version=label, prov=prov, targets=targets,
        toolchain={"nvcc": "13.0.88", "cudnn": "9.19.0", "cmake": "4.4.0", "c++": "g++ 13.3.0"},
        dependencies=[{"name": "nanobind", "pin": "v2.15.0"}],
        runtime_requires=["nvidia-cudnn-cu13==9.*"], gpu_code={"sass": ["sm_90a", "sm_121a"]},
        cmake_args=targets.cmake_args())
    out = inject(raw, tmp_path / "out" / raw.name, manifest=manifest,
                 requires=["nvidia-cudnn-cu13==9.*", "numpy"])
    got = read_manifest(out)
    assert got == manifest
    assert (got["target"], got["archs"], got["upstream_commit"], got["series"]) == \
        ("cuda-sm90,cuda-sm121", ["90a-real", "121a"], COMMIT, "main")
    assert verify_record(out) == []
    with zipfile.ZipFile(out) as zf:
        names = zf.namelist()
        meta = zf.read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert MANIFEST_PATH in names and names[-1].endswith("RECORD")
    assert names.index(MANIFEST_PATH) < min(i for i, n in enumerate(names) if ".dist-info/" in n)
    assert meta.count("Requires-Dist: numpy") == 1
    assert "Requires-Dist: nvidia-cudnn-cu13==9.*\n\nlong description\n\nmore\n" in meta
    again = inject(out, tmp_path / "again" / raw.name, manifest=manifest)
    assert verify_record(again) == [] and read_manifest(again) == manifest


def test_verify_record_catches_a_stale_record(tmp_path):
    raw = fake_wheel(tmp_path / "mlx-1.0-py3-none-any.whl", "1.0")
    assert verify_record(raw) == []
    with zipfile.ZipFile(raw, "a") as zf:
        zf.writestr("mlx/extra.py", b"x = 1\n")
    assert verify_record(raw) == ["mlx/extra.py"]


def test_unreadable_wheels(tmp_path):
    bad = tmp_path / "bad.whl"
    bad.write_bytes(b"not a zip")
    with pytest.raises(WheelError, match="cannot read"):
        read_manifest(bad)
    with pytest.raises(WheelError):
        inject(bad, tmp_path / "x.whl", manifest={})
