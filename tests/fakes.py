"""Fakes the stage folders share: an MLX tree with a stand-in build backend,
FetchContent dependency repositories, wheels named like ours and the
manifests `mlx-builder build` writes, and a setup.py shaped like MLX main's.

Imported like gitfixture (``from fakes import fake_mlx``): tests/ is on
sys.path through the top-level conftest.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from gitfixture import git
from packaging import tags as ptags

from mlx_builder.wheelbuild.manifest import BACKEND_EXTRAS, Provenance, build_manifest, inject
from mlx_builder.wheelbuild.targets import parse_targets

# Same shape as MLX main's setup.py where it matters.
MAIN_LIKE_SETUP = '''
import os, platform, subprocess

def get_version():
    with open("mlx/version.h") as fid:
        text = fid.read()
    return "0.0.0.dev1+" + "githash"

build_backend = int(os.environ.get("MLX_BUILD_BACKEND_PACKAGE", 0))

if __name__ == "__main__":
    version = get_version()
    install_requires = []
    if not build_backend:
        install_requires.append(f"mlx-metal=={version}")
    else:
        if build_macos:
            name = "mlx-metal"
        elif build_cuda:
            toolkit = 13
            install_requires += [f"nvidia-cudnn-cu{toolkit}==9.*"]
            if platform.system() == "Linux":
                install_requires += [f"nvidia-nccl-cu{toolkit}"]
            if toolkit == 12:
                install_requires += ["nvidia-cublas-cu12==12.9.*"]
            elif toolkit == 13:
                install_requires += ["nvidia-cublas==13.*", "nvidia-cuda-nvrtc==13.*"]
    print(version)
'''

FAKE_CMAKE = '''
option(MLX_BUILD_CUDA "cuda" OFF)
FetchContent_Declare(fmt GIT_REPOSITORY https://github.com/fmtlib/fmt.git GIT_TAG 12.1.0)
if(MLX_BUILD_CUDA)
  FetchContent_Declare(cutlass GIT_REPOSITORY https://github.com/NVIDIA/cutlass.git
                       GIT_TAG v4.4.2 SOURCE_SUBDIR include)
endif()
'''
FAKE_SETUP = '''def get_version():
    return "0.1.0.dev0"


cmake_args = ["-DMLX_BUILD_TESTS=OFF"]
'''
# A stand-in PEP 517 backend: builds a wheel named by setup.py's get_version()
# and prints Ninja-style progress, so pip-driven builds run without a compiler.
FAKE_BACKEND = '''import base64, hashlib, runpy, zipfile


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = runpy.run_path("setup.py", run_name="setup")["get_version"]()
    print("[1/2] Building CXX object fake.o", flush=True)
    print("[2/2] Linking CXX shared library libmlx.so", flush=True)
    dist = f"mlx-{version}.dist-info"
    files = {"mlx/__init__.py": open("python/mlx/__init__.py", "rb").read(),
             f"{dist}/METADATA": f"Metadata-Version: 2.1\\nName: mlx\\nVersion: {version}\\n".encode(),
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
    digest = lambda d: base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
    record = "".join(f"{n},sha256={digest(d)},{len(d)}\\n" for n, d in files.items())
    name = f"mlx-{version}-py3-none-any.whl"
    with zipfile.ZipFile(f"{wheel_directory}/{name}", "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
        zf.writestr(f"{dist}/RECORD", record + f"{dist}/RECORD,,\\n")
    return name
'''


def fake_mlx(root: Path, git_repo: bool = True) -> Path:
    files = {"CMakeLists.txt": FAKE_CMAKE, "setup.py": FAKE_SETUP, "mlxb_fake_backend.py": FAKE_BACKEND,
             "pyproject.toml": '[build-system]\nrequires = []\n'
                               'build-backend = "mlxb_fake_backend"\nbackend-path = ["."]\n',
             "mlx/version.h": "#define MLX_VERSION_MAJOR 0\n#define MLX_VERSION_MINOR 1\n"
                              "#define MLX_VERSION_PATCH 0\n",
             "python/mlx/__init__.py": "__all__ = []\n", ".gitignore": "build/\n"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    if git_repo:
        git(root, "init", "-q", "-b", "main")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "fake mlx")
    return root


def dep_repo(root: Path, tag: str, files: dict[str, str], executable: tuple[str, ...] = ()) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
        (root / rel).chmod(0o755 if rel in executable else 0o644)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "dep")
    git(root, "tag", tag)
    return root


HERE_TAG = str(next(iter(ptags.sys_tags())))


def make_wheel(directory: Path, version: str = "0.32.1+mlxb.x",
               tag: str = HERE_TAG, manifest: dict | None = None,
               name: str = "mlx", marker: str = "fake",
               requires: tuple[str, ...] = (), extras: tuple[str, ...] = ()) -> Path:
    """A tiny pure-Python wheel named like ours; the manifest goes in with
    the build's own writer (manifest.inject), which also declares upstream's
    backend extras as a build does. ``requires`` and ``extras`` make
    Requires-Dist and Provides-Extra lines (upstream-like wheels)."""
    dist = f"{name.replace('-', '_')}-{version}"
    package = name.replace("-", "_")
    meta = "".join(f"Provides-Extra: {e}\n" for e in extras)
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    files: dict[str, bytes] = {
        f"{package}/__init__.py": f"MARKER = {marker!r}\n".encode(),
        f"{dist}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            f"Requires-Python: >=3.10\n{meta}").encode(),
        f"{dist}.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
            f"Tag: {tag}\n").encode(),
        f"{dist}.dist-info/RECORD": b"",
    }
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / f"{dist}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    if manifest is not None:     # as `mlx-builder build` writes it: the wheel's version
        inject(wheel, wheel, manifest={**manifest, "version": version}, extras=BACKEND_EXTRAS)
    return wheel


def manifest_for(spec: str, system: str = "Linux",
                 commit: str = "846d176227a0ac13d2667e58d2bb68b322109ab0",
                 cuda_major: int | None = None) -> dict:
    """The manifest `mlx-builder build` writes for target ``spec``."""
    prov = Provenance(upstream_url="https://github.com/ml-explore/mlx",
                      upstream_ref="main", upstream_commit=commit,
                      upstream_version="0.32.1", series="main")
    return build_manifest(version="0.32.1", prov=prov,
                          targets=parse_targets(spec, system=system),
                          toolchain={}, dependencies=[], cuda_major=cuda_major)
