"""manylinux repair: real ELF files through auditwheel and patchelf."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from mlx_builder.errors import WheelError
from mlx_builder.process import StepRunner
from mlx_builder.wheelbuild.buildenv import PLATFORMS, host_platform
from mlx_builder.wheelbuild.manifest import record_hash
from mlx_builder.wheelbuild.manylinux import CUDA_EXCLUDES, elf_machine, elf_rpaths, floor_tag, parse_tag, repair

pytestmark = pytest.mark.skipif(host_platform() is None or not shutil.which("cc"),
                                reason="needs Linux and a C compiler")


def cc(out: Path, src: str, *args: str) -> Path:
    c = out.with_suffix(".c")
    c.write_text(src)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(out), str(c), *args], check=True)
    return out


def wheel_with(tmp: Path, libmlx: Path, tag: str) -> Path:
    name = "mlx-0.32.2+mlxb.t"
    path = tmp / f"{name}-cp311-cp311-{tag}.whl"
    files = {"mlx/__init__.py": b"", "mlx/lib/libmlx.so": libmlx.read_bytes(),
             f"{name}.dist-info/METADATA":
                 b"Metadata-Version: 2.1\nName: mlx\nVersion: 0.32.2+mlxb.t\n",
             f"{name}.dist-info/WHEEL": ("Wheel-Version: 1.0\nGenerator: t\n"
                                         "Root-Is-Purelib: false\n"
                                         f"Tag: cp311-cp311-{tag}\n").encode()}
    record = "".join(f"{n},{record_hash(d)},{len(d)}\n" for n, d in files.items())
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
        zf.writestr(f"{name}.dist-info/RECORD", record + f"{name}.dist-info/RECORD,,\n")
    return path


def test_parse_tag():
    assert parse_tag("mlx-1-cp311-cp311-manylinux_2_35_aarch64.whl") == (
        "manylinux_2_35_aarch64", "2.35")
    assert parse_tag("mlx-1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl") == (
        "manylinux_2_17_x86_64", "2.17")
    assert parse_tag("mlx-1-cp311-cp311-linux_x86_64.whl") is None


def test_the_cuda_libraries_are_never_grafted():
    for soname in ("libcudart.so.13", "libcublasLt.so.13", "libcudnn.so.9",
                   "libcudnn_graph.so.9", "libnccl.so.2", "libcuda.so.1", "libnvrtc.so.13",
                   "libcusolver.so.12", "libcusolver.so.11"):
        import fnmatch
        assert any(fnmatch.fnmatch(soname, p) for p in CUDA_EXCLUDES), soname


def test_repair_grafts_the_rest_and_keeps_the_nvidia_rpath(tmp_path):
    plat = host_platform()
    deps = tmp_path / "deps"
    deps.mkdir()
    cc(deps / "libmlxbdep.so", "int dep(void) { return 1; }\n", "-Wl,-soname,libmlxbdep.so")
    cuda = tmp_path / "cuda"
    cuda.mkdir()
    cc(cuda / "libcudart.so.13", "int cudart(void) { return 2; }\n",
       "-Wl,-soname,libcudart.so.13")
    lib = cc(tmp_path / "libmlx.so",
             "#include <stdio.h>\nint dep(void); int cudart(void);\n"
             "int f(void) { puts(\"f\"); return dep() + cudart(); }\n",
             f"-L{deps}", "-lmlxbdep", str(cuda / "libcudart.so.13"),
             "-Wl,--enable-new-dtags,-rpath,$ORIGIN:$ORIGIN/../../nvidia/cu13/lib")
    raw = wheel_with(tmp_path, lib, plat.wheel_tag)
    assert elf_rpaths(lib.read_bytes()) == ["$ORIGIN", "$ORIGIN/../../nvidia/cu13/lib"]
    assert elf_machine(lib.read_bytes()) == plat.machine
    fixed = repair(raw, tmp_path / "out", plat, StepRunner(tmp_path / "logs"),
                   ldpaths=[str(deps)])
    assert fixed.tag.startswith("manylinux_2_") and fixed.tag.endswith(plat.machine)
    assert fixed.wheel.name.endswith(".whl") and fixed.glibc.startswith("2.")
    assert [g for g in fixed.grafted if g.startswith("libmlxbdep")]
    assert not [g for g in fixed.grafted if "cudart" in g]
    with zipfile.ZipFile(fixed.wheel) as zf:
        rp = elf_rpaths(zf.read("mlx/lib/libmlx.so"))
    assert "$ORIGIN/../../nvidia/cu13/lib" in rp           # put back after auditwheel
    assert any(".libs" in p for p in rp)                   # auditwheel's own entry
    meta = fixed.to_json(plat)
    assert meta["glibc_min"] == fixed.glibc and meta["name"] == plat.name


def test_a_missing_library_fails_with_the_log(tmp_path):
    plat = host_platform()
    deps = tmp_path / "deps"
    deps.mkdir()
    cc(deps / "libmlxbgone.so", "int gone(void) { return 1; }\n", "-Wl,-soname,libmlxbgone.so")
    lib = cc(tmp_path / "libmlx.so", "#include <stdio.h>\nint gone(void);\n"
             "int f(void) { puts(\"f\"); return gone(); }\n",
             f"-L{deps}", "-lmlxbgone")
    raw = wheel_with(tmp_path, lib, plat.wheel_tag)
    with pytest.raises(WheelError, match="auditwheel-repair") as exc:
        repair(raw, tmp_path / "out", plat, StepRunner(tmp_path / "logs"))
    assert "full log" in exc.value.why
    assert not list((tmp_path / "out").glob("*.whl"))


def test_elf_readers_on_other_bytes():
    assert elf_rpaths(b"not an elf") is None and elf_machine(b"#!/bin/sh") is None
    assert PLATFORMS["linux-aarch64"].wheel_tag == "linux_aarch64"


def test_grafted_names_skip_the_folder_entry(tmp_path):
    """auditwheel's wheel lists `mlx.libs/` itself: the grafted names are
    the files in it, no empty name for the folder."""
    from mlx_builder.wheelbuild.manylinux import _restore_rpaths
    wheel = tmp_path / "w-1.0-cp312-cp312-manylinux_2_35_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(zipfile.ZipInfo("mlx.libs/"), b"")
        zf.writestr("mlx.libs/libopenblas-1234.so", b"\x7fELF not really")
        zf.writestr("mlx/__init__.py", b"")
    assert _restore_rpaths(wheel, {}) == ["libopenblas-1234.so"]


def test_floor_tag_forms():
    plat = host_platform()
    for text in ("2.28", "2_28", "manylinux_2_28"):
        assert floor_tag(text, plat) == f"manylinux_2_28_{plat.machine}"
    with pytest.raises(WheelError, match="not a glibc version"):
        floor_tag("rhel8", plat)


def test_a_floor_tags_the_wheel_and_refuses_what_needs_a_newer_glibc(tmp_path):
    plat = host_platform()
    old = cc(tmp_path / "libmlx.so", "#include <stdio.h>\nint f(void) { return puts(\"f\"); }\n")
    fixed = repair(wheel_with(tmp_path, old, plat.wheel_tag), tmp_path / "out", plat,
                   StepRunner(tmp_path / "logs"), floor="2.28")
    assert fixed.tag == f"manylinux_2_28_{plat.machine}"
    # getrandom() came with glibc 2.25: a 2.17 floor cannot hold it
    new_dir = tmp_path / "new"
    new_dir.mkdir()
    new = cc(new_dir / "libmlx.so", "#include <sys/random.h>\n"
             "int f(void) { char b[4]; return (int)getrandom(b, 4, 0); }\n")
    with pytest.raises(WheelError, match="auditwheel-repair"):
        repair(wheel_with(new_dir, new, plat.wheel_tag), tmp_path / "out2", plat,
               StepRunner(tmp_path / "logs2"), floor="2.17")
