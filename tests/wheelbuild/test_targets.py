"""Targets -> MLX CMake arguments."""

from __future__ import annotations

import pytest

from mlx_builder.errors import TargetError
from mlx_builder.wheelbuild.targets import UPSTREAM_DEFAULT, ArchEntry, parse_targets, upstream_cuda_archs

NAMED = [("cuda-sm80", "80", "sm_80"), ("cuda-sm86", "86", "sm_86"),
         ("cuda-sm89", "89", "sm_89"), ("cuda-sm90", "90a", "sm_90a"),
         ("cuda-sm100", "100a", "sm_100a"), ("cuda-sm120", "120a", "sm_120a"),
         ("cuda-sm121", "121a", "sm_121a")]


@pytest.mark.parametrize("spec,arch,sass", NAMED)
def test_single_cuda_target_maps_to_mlx_args(spec, arch, sass):
    t = parse_targets(spec, system="Linux")
    assert t.backend == "cuda" and t.patch_target == "cuda"
    assert t.cuda_archs == (arch,)
    assert t.sass_archs == (sass,)
    assert t.cmake_args() == ["-DMLX_BUILD_CUDA=ON", "-DMLX_BUILD_METAL=OFF",
                              f"-DMLX_CUDA_ARCHITECTURES={arch}",
                              "-DMLX_LOAD_CUDA_LIBS_FROM_PYTHON=ON"]
    assert t.tag == f"cu{arch}"


def test_combination_is_sorted_real_plus_last_plain():
    t = parse_targets("cuda-sm121, cuda-sm80,cuda-sm90", system="Linux")
    assert t.spec == "cuda-sm80,cuda-sm90,cuda-sm121"
    assert t.cuda_archs == ("80-real", "90a-real", "121a")
    assert t.sass_archs == ("sm_80", "sm_90a", "sm_121a")
    assert "-DMLX_CUDA_ARCHITECTURES=80-real;90a-real;121a" in t.cmake_args()
    assert t.tag == "cu80x90ax121a"


def test_minimum_cuda_follows_the_newest_arch():
    assert parse_targets("cuda-sm90").min_cuda == (12, 0)
    assert parse_targets("cuda-sm100").min_cuda == (12, 8)
    assert parse_targets("cuda-sm90,cuda-sm121").min_cuda == (12, 9)
    assert parse_targets("cuda-sm120f").min_cuda == (12, 9)


def test_explicit_suffixes():
    assert parse_targets("cuda-sm90a").spec == "cuda-sm90"
    assert parse_targets("cuda-sm120f").cuda_archs == ("120f",)
    with pytest.raises(TargetError, match="sm_80a does not exist"):
        parse_targets("cuda-sm80a")


def test_cpu_and_metal():
    cpu = parse_targets("cpu", system="Linux")
    assert cpu.backend == "cpu" and cpu.cuda_archs == () and cpu.tag == "cpu"
    assert cpu.cmake_args() == ["-DMLX_BUILD_CUDA=OFF", "-DMLX_BUILD_METAL=OFF"]
    metal = parse_targets("metal", system="Darwin")
    assert metal.cmake_args() == ["-DMLX_BUILD_METAL=ON", "-DMLX_BUILD_CUDA=OFF"]
    assert metal.patch_target == "metal"


def test_metal_off_macos_fails_before_work():
    with pytest.raises(TargetError, match="only on macOS") as exc:
        parse_targets("metal", system="Linux")
    assert exc.value.exit_code == 16


@pytest.mark.parametrize("spec,msg", [
    ("cuda-sm75", "unsupported CUDA architecture"), ("gpu", "unknown build target"),
    ("cpu,cuda-sm90", "cannot combine"), ("cuda-sm90,cuda-sm90", "twice"),
    ("cuda-sm90a,cuda-sm90f", "twice"), ("", "no build target")])
def test_bad_specs(spec, msg):
    with pytest.raises(TargetError, match=msg):
        parse_targets(spec, system="Linux")


SETUP = '''
import platform
def build():
    if build_backend and build_cuda:
        cuda_archs = ["70-real", "86-real", "{last}"]
        if platform.system() == "Linux":
            cuda_archs += ["90a-real"]
'''


def test_cuda_set_is_read_from_setup_py(tmp_path):
    (tmp_path / "setup.py").write_text(SETUP.replace("{last}", "120-virtual"))
    linux = parse_targets("cuda", source=tmp_path, system="Linux")
    assert linux.cuda_archs == ("70-real", "86-real", "120-virtual", "90a-real")
    assert linux.sass_archs == ("sm_70", "sm_86", "sm_90a")     # virtual: PTX only
    assert linux.tag == "cuda"
    darwin = upstream_cuda_archs(tmp_path, system="Darwin")
    assert darwin == ("70-real", "86-real", "120-virtual")


def test_cuda_set_without_tree_is_the_documented_default(tmp_path):
    assert upstream_cuda_archs(None, "Linux") == UPSTREAM_DEFAULT["all"] + UPSTREAM_DEFAULT["Linux"]
    assert upstream_cuda_archs(tmp_path, "Linux") == upstream_cuda_archs(None, "Linux")


def test_arch_entry_parse():
    e = ArchEntry.parse("121a-real")
    assert (e.number, e.suffix, e.kind, e.cmake, e.has_sass) == (121, "a", "real", "121a-real", True)
    assert not ArchEntry.parse("120-virtual").has_sass
    with pytest.raises(TargetError):
        ArchEntry.parse("sm90")
