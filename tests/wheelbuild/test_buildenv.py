"""The registry build environment: platforms, pins, the choice of toolchain,
the assembled toolkit root, and provisioning from a local wheelhouse."""

from __future__ import annotations

import json
import os
import sys
import zipfile
from pathlib import Path

import pytest

from mlx_builder.errors import ToolchainError
from mlx_builder.process import StepRunner
from mlx_builder.wheelbuild import buildenv as be

X86, ARM = be.PLATFORMS["linux-x86_64"], be.PLATFORMS["linux-aarch64"]


def test_platform_names_and_aliases():
    assert be.parse_platform("arm64") is ARM and be.parse_platform("linux-aarch64") is ARM
    assert be.parse_platform("amd64") is X86 and be.parse_platform(None) is None
    with pytest.raises(ToolchainError, match="unknown platform 'riscv'") as exc:
        be.parse_platform("riscv")
    assert exc.value.exit_code == 15 and "linux-aarch64" in exc.value.next_step
    assert be.host_platform("aarch64", "Linux") is ARM and be.host_platform("x86_64", "Linux") is X86
    assert be.host_platform("arm64", "Darwin") is None
    assert ARM.wheel_tag == "linux_aarch64" and ARM.triple == "aarch64-linux-gnu"
    assert "manylinux_2_18_aarch64" in ARM.pip_platforms()     # NCCL's wheels carry 2_18
    assert all(p.endswith("_aarch64") for p in ARM.pip_platforms())


def test_default_cuda_major_follows_the_target():
    assert be.default_cuda_major((12, 9)) == 13          # sm_121
    assert be.default_cuda_major((12, 0), min_arch=70) == 12   # CUDA 13 has no sm_70
    assert be.cuda_release(13) == (13, 0) and be.cuda_release(12) == (12, 9)
    with pytest.raises(ToolchainError, match=r"no pinned registry CUDA release is >= 14.0"):
        be.default_cuda_major((14, 0))


def test_every_pin_is_exact_and_each_major_has_the_whole_toolkit():
    for major, pins in be.CUDA_PINS.items():
        every = pins["host"] + pins["target"]
        assert all("==" in p for p in every), every
        names = " ".join(every)
        for piece in ("nvcc", "runtime", "nvrtc", "cublas", "cufft", "cudnn", "nccl", "cccl"):
            assert piece in names, (major, piece)
    assert all("==" in p for p in be.TOOL_PINS)


def test_python_pins_pin_what_the_tree_requires():
    got = be.python_pins(["setuptools>=80", "cmake>=3.25", "typing_extensions", "foo>=2"])
    assert got == ("foo>=2", "setuptools==80.9.0", "typing_extensions==4.15.0")


def spec(tmp_path: Path, target=X86, **kw) -> be.EnvSpec:
    base = dict(cuda_major=13, host=X86, target=target, python=sys.executable,
                python_version="3.11.2", tools=("mlxb-fake-tool==1.0",), python_reqs=(),
                cuda_host=("mlxb-fake-nvcc==13.0",), cuda_target=("mlxb-fake-cudart==13.0",))
    base.update(kw)
    return be.EnvSpec(**base)


def test_the_key_changes_with_any_pin_or_platform(tmp_path):
    a = spec(tmp_path)
    assert a.key == spec(tmp_path).key and a.name.startswith("cu13-x86_64-py3.11.2-")
    assert spec(tmp_path, cuda_target=("mlxb-fake-cudart==13.1",)).key != a.key
    assert spec(tmp_path, target=ARM).key != a.key and spec(tmp_path, target=ARM).cross
    assert not a.cross


@pytest.mark.parametrize("mode,kw,want", [
    ("system", {}, ("system", "--toolchain system")),
    ("auto", {"cached": True}, ("pypi", "cached")),
    ("auto", {"wheelhouse": True, "offline": True}, ("pypi", "bundle")),
    ("auto", {}, ("pypi", "default")),
    ("pypi", {}, ("pypi", "--toolchain pypi")),
    ("auto", {"offline": True, "system_nvcc": "/opt/cuda/bin/nvcc"}, ("system", "only one")),
])
def test_choose(mode, kw, want):
    args = dict(offline=False, cached=False, wheelhouse=False, system_nvcc=None, cross=False)
    args.update(kw)
    which, why = be.choose(mode, **args)
    assert which == want[0] and want[1] in why


def test_choose_refuses_what_cannot_work():
    args = dict(offline=True, cached=False, wheelhouse=False, system_nvcc=None, cross=False)
    with pytest.raises(ToolchainError, match="no CUDA toolchain is available offline"):
        be.choose("auto", **args)
    with pytest.raises(ToolchainError, match="no CUDA toolchain is available offline"):
        be.choose("pypi", **{**args, "system_nvcc": "/usr/bin/nvcc"})   # asked for pypi
    with pytest.raises(ToolchainError, match="cross build cannot use the system"):
        be.choose("system", **{**args, "cross": True})
    with pytest.raises(ToolchainError, match="unknown toolchain"):
        be.choose("conda", **args)


def write(path: Path, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_assemble_root_takes_tools_from_the_host_and_libraries_from_the_target(tmp_path):
    host, target = tmp_path / "host" / "nvidia", tmp_path / "target" / "nvidia"
    write(host / "cu13/bin/nvcc", "host nvcc")
    write(host / "cu13/nvvm/bin/cicc", "host cicc")
    write(host / "cu13/include/fatbinary_section.h", "host only")
    write(host / "cu13/include/cuda_runtime.h", "host header")
    write(host / "cu13/lib/libcudart.so.13", "host lib")
    write(target / "cu13/include/cuda_runtime.h", "target header")
    write(target / "cu13/lib/libcudart.so.13", "target lib")
    write(target / "cu13/lib/libcublasLt.so.13.1.0", "target lib")
    write(target / "cudnn/include/cudnn_version.h")
    root = tmp_path / "root"
    be.assemble_root(root, host, target)
    assert (root / "bin/nvcc").read_text() == "host nvcc"
    assert os.stat(root / "bin/nvcc").st_ino == os.stat(host / "cu13/bin/nvcc").st_ino
    assert (root / "nvvm/bin/cicc").read_text() == "host cicc"
    assert (root / "include/cuda_runtime.h").read_text() == "target header"
    assert (root / "include/fatbinary_section.h").read_text() == "host only"
    assert (root / "lib/libcudart.so").resolve().read_text() == "target lib"
    assert os.readlink(root / "lib/libcublasLt.so") == "libcublasLt.so.13.1.0"
    assert os.readlink(root / "lib64") == "lib"
    assert not (root / "include/cudnn_version.h").exists()     # cuDNN stays in its package


def test_assemble_root_without_nvcc_says_so(tmp_path):
    host = tmp_path / "h" / "nvidia"
    write(host / "cu13/include/a.h")
    with pytest.raises(ToolchainError, match="gave no nvcc"):
        be.assemble_root(tmp_path / "root", host, host)


def fake_pkg(dest: Path, name: str, version: str, files: dict[str, str]) -> Path:
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    path = dest / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
        zf.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        zf.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                     "Tag: py3-none-any\n")
        zf.writestr(f"{dist}/RECORD", "")
    return path


@pytest.fixture
def wheelhouse(tmp_path):
    wh = tmp_path / "wh"
    fake_pkg(wh, "mlxb-fake-tool", "1.0", {"mlxb_fake_tool/__init__.py": ""})
    fake_pkg(wh, "mlxb-fake-nvcc", "13.0", {"nvidia/cu13/bin/nvcc": "#!/bin/sh\n",
                                            "nvidia/cu13/nvvm/bin/cicc": ""})
    fake_pkg(wh, "mlxb-fake-cudart", "13.0", {
        "nvidia/cu13/include/cuda_runtime.h": "", "nvidia/cu13/lib/libcudart.so.13": "",
        "nvidia/cudnn/include/cudnn_version.h": "#define CUDNN_MAJOR 9\n",
        "nvidia/cudnn/lib/libcudnn.so.9": "",
        "nvidia/nccl/include/nccl.h": "", "nvidia/nccl/lib/libnccl.so.2": ""})
    return wh


# Provisioning makes a virtual environment and runs pip (seconds each).
@pytest.mark.integration
@pytest.mark.parametrize("target", [X86, ARM], ids=["native", "cross"])
def test_provision_makes_caches_and_reuses_the_environment(tmp_path, wheelhouse, target):
    s = spec(tmp_path, target=target)
    runner = StepRunner(tmp_path / "logs")
    said: list[str] = []
    env = be.provision(tmp_path / "cache", s, runner, offline=True, wheelhouse=wheelhouse,
                       say=said.append)
    assert env.root == tmp_path / "cache" / "buildenv" / s.name
    assert "once; cached by its pins" in said[0]
    meta = json.loads((env.root / "buildenv.json").read_text())
    assert meta["pins"] == list(s.pins) and meta["cross"] == (target.name != "linux-x86_64")
    assert env.nvcc.is_file() and (env.cuda_root / "lib/libcudart.so").is_symlink()
    assert Path(env.python).exists()
    if env.cross:       # the target's packages live apart from the build Python's
        assert env.target_nvidia == env.root / "target" / "nvidia"
    inc, lib = env.cudnn_dirs()
    assert inc.name == "include" and lib.name == "lib"
    e = env.env("/usr/bin")
    assert e["CUDACXX"] == str(env.nvcc) and e["PATH"].endswith(":/usr/bin")
    assert e["CUDNN_LIBRARY_PATH"] == str(lib)
    args = env.cmake_args()
    assert f"-DCUDAToolkit_ROOT={env.cuda_root}" in args
    assert any(a.startswith("-DNCCL_LIBRARIES=") and a.endswith("libnccl.so.2") for a in args)
    steps = len(list((tmp_path / "logs").glob("*.log")))
    again = be.provision(tmp_path / "cache", s, runner, offline=True, wheelhouse=None)
    assert again.root == env.root and len(list((tmp_path / "logs").glob("*.log"))) == steps
    assert be.cached_env(tmp_path / "cache", s) is not None


# Provisioning makes a virtual environment and runs pip (seconds each).
@pytest.mark.integration
def test_an_incomplete_environment_is_made_again(tmp_path, wheelhouse):
    s = spec(tmp_path)
    half = tmp_path / "cache" / "buildenv" / s.name
    write(half / "venv" / "leftover", "from a run that was cut off")
    env = be.provision(tmp_path / "cache", s, StepRunner(tmp_path / "logs"), offline=True,
                       wheelhouse=wheelhouse, say=lambda m: None)
    assert not (half / "venv" / "leftover").exists() and env.nvcc.is_file()


# Provisioning makes a virtual environment and runs pip (seconds each).
@pytest.mark.integration
def test_offline_without_the_packages_fails_and_leaves_nothing(tmp_path):
    s = spec(tmp_path)
    with pytest.raises(ToolchainError, match="not cached and this run is offline") as exc:
        be.provision(tmp_path / "cache", s, StepRunner(tmp_path / "logs"), offline=True,
                     say=lambda m: None)
    assert "--toolchain system" in exc.value.next_step
    assert not (tmp_path / "cache" / "buildenv" / s.name).exists()


# Provisioning makes a virtual environment and runs pip (seconds each).
@pytest.mark.integration
def test_a_missing_package_fails_and_leaves_nothing(tmp_path, wheelhouse):
    s = spec(tmp_path, cuda_target=("mlxb-fake-cudart==99.0",))
    with pytest.raises(ToolchainError, match="buildenv-cuda-libs"):
        be.provision(tmp_path / "cache", s, StepRunner(tmp_path / "logs"), offline=True,
                     wheelhouse=wheelhouse, say=lambda m: None)
    assert not (tmp_path / "cache" / "buildenv" / s.name).exists()


def test_an_arm_only_gpu_target_for_x86_64_is_warned_about():
    x86, arm = be.PLATFORMS["linux-x86_64"], be.PLATFORMS["linux-aarch64"]
    warning = be.platform_warning("cuda-sm121", x86)
    assert warning and "GB10" in warning and "--platform linux-aarch64" in warning
    assert "x86_64 wheel" in warning
    assert be.platform_warning("cuda-sm90,cuda-sm121", x86)
    assert be.platform_warning("cuda-sm121", arm) is None
    assert be.platform_warning("cuda-sm90", x86) is None
    assert be.platform_warning("cuda-sm121", None, machine="aarch64") is None
    assert be.platform_warning("cuda-sm121", None, machine="x86_64")
