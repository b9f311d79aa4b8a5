"""What plain pip and uv resolve from the index `mlx-builder index` writes.

Offline: the wheels are tiny ones built here, served on 127.0.0.1 beside a
stand-in for PyPI that holds what matters on the real one: a newer upstream
``mlx`` (0.32.4, with its ``cuda13`` extra pulling ``mlx-cuda-13``) and
``mlx-lm`` whose ``cuda13`` extra asks for ``mlx[cuda13]>=0.32.2``. Each
faked host (platform tags through ``--platform``/``--python-platform``; the
GPU through the variant its user picks, which `install --dry-run` names)
must get our wheel for its GPU with the README's command, with and without
the stand-in PyPI, and keep it through ``pip install -U mlx-lm``.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import make_wheel, manifest_for

from mlx_builder.prebuilt.wheelindex import write_index

pytestmark = pytest.mark.integration

OURS = "0.32.2+mlxb.846d176227a0.1f3a9c0e"
X86, ARM = "manylinux_2_28_x86_64", "manylinux_2_28_aarch64"
# variant -> (wheel version, platforms it is built for)
BUILDS = {
    "cu13-sm90": (f"{OURS}.cu13.90a", (X86, ARM)),      # H100/H200, GH200
    "cu13-sm121": (f"{OURS}.cu13.121a", (ARM,)),        # GB10 is Arm only
    "cu12-sm80": (f"{OURS}.cu12.80", (X86,)),           # A100 with a CUDA 12 driver
    "cpu": (f"{OURS}.cpu", (X86, ARM)),
}
HOSTS = [  # faked GPU, platform, the variant the README's table gives
    ("sm_90", X86, "cu13-sm90"),
    ("sm_121", ARM, "cu13-sm121"),
    ("sm_80", X86, "cu12-sm80"),
    ("none", X86, "cpu"),
]


def _serve(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _spec(variant: str) -> str:
    return "cpu" if variant == "cpu" else "cuda-" + variant.split("-", 1)[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[dict[str, str]]:
    tmp = tmp_path_factory.mktemp("resolution")
    house = tmp / "house"
    for variant, (version, plats) in BUILDS.items():
        major = int(variant[2:4]) if variant.startswith("cu") else None
        for plat in plats:
            make_wheel(house, version, tag=f"py3-none-{plat}", marker=variant,
                       manifest=manifest_for(_spec(variant), cuda_major=major))
    write_index(house)
    pypi = tmp / "pypi"
    for version in ("0.32.2", "0.32.4"):
        make_wheel(pypi, version, tag="py3-none-any", marker="upstream",
                   extras=("cuda13",), requires=(f'mlx-cuda-13=={version}; extra == "cuda13"',))
        make_wheel(pypi, version, name="mlx-cuda-13", tag="py3-none-any", marker="upstream")
    for version, floor in (("0.32.2", "0.32.2"), ("0.32.3", "0.32.2"), ("0.33.0", "0.32.4")):
        make_wheel(pypi, version, name="mlx-lm", tag="py3-none-any", marker="lm",
                   extras=("cuda13",),
                   requires=(f'mlx>={floor}; platform_system == "Darwin"',
                             f'mlx[cuda13]>={floor}; extra == "cuda13"'))
    write_index(pypi)           # not ours (no manifest): all in the variant "other"
    servers = [_serve(house), _serve(pypi)]
    yield {"ours": servers[0][1], "pypi": servers[1][1] + "other/simple/", "tmp": str(tmp)}
    for server, _ in servers:
        server.shutdown()


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "UV_")) and k != "VIRTUAL_ENV"}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1", "UV_NO_CONFIG": "1", "UV_OFFLINE": "0"}


def _readme_args(ours: str, variant: str, pypi: str | None = None) -> list[str]:
    """The README's command: PyPI stays the index, ours is an extra one, the
    variant's constraints pin our build. Without PyPI, ours is the only index."""
    where = (["--index-url", pypi, "--extra-index-url", f"{ours}{variant}/simple/"] if pypi
             else ["--index-url", f"{ours}{variant}/simple/"])
    return ["-c", f"{ours}{variant}/constraints.txt", *where]


def pip_resolves(served: dict, variant: str, plat: str, *reqs: str,
                 pypi: bool = True) -> dict[str, str]:
    """name -> version pip would install for ``plat`` (a dry run with a report)."""
    args = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
            "--quiet", "--report", "-", "--only-binary=:all:", "--platform", plat,
            "--python-version", "3.12", "--target", str(Path(served["tmp"]) / "never-written"),
            *_readme_args(served["ours"], variant, served["pypi"] if pypi else None), *reqs]
    proc = subprocess.run(args, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    return {i["metadata"]["name"]: i["metadata"]["version"] for i in report["install"]}


def _uv() -> str:
    exe = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    if not Path(exe).exists():
        pytest.skip("uv is not installed (`pip install uv`)")
    return exe


def uv_resolves(served: dict, variant: str, plat: str, *reqs: str,
                pypi: bool = True) -> dict[str, str]:
    machine = plat.split("_2_28_")[1]
    proc = subprocess.run(
        [_uv(), "pip", "compile", "-", "--quiet", "--no-header", "--no-annotate",
         "--python-version", "3.12", "--python-platform", f"{machine}-manylinux_2_28",
         "--cache-dir", str(Path(served["tmp"]) / "uv-cache"),
         *_readme_args(served["ours"], variant, served["pypi"] if pypi else None)],
        input="\n".join(reqs) + "\n", env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pins = [ln.split("==", 1) for ln in proc.stdout.splitlines() if "==" in ln]
    return {name.split("[")[0]: version for name, version in pins}


@pytest.mark.parametrize("gpu, plat, variant", HOSTS)
@pytest.mark.parametrize("resolver", ["pip", "uv"])
@pytest.mark.parametrize("pypi", [True, False], ids=["with-pypi", "ours-only"])
def test_the_readme_command_takes_our_wheel_for_each_host(served, gpu, plat, variant,
                                                          resolver, pypi):
    resolve = pip_resolves if resolver == "pip" else uv_resolves
    got = resolve(served, variant, plat, "mlx", pypi=pypi)
    assert got["mlx"] == BUILDS[variant][0]
    if pypi:   # mlx-lm from PyPI, its cuda13 extra answered by our wheel alone; the
        # newest mlx-lm (0.33.0) wants mlx>=0.32.4, so the pin keeps 0.32.3
        got = resolve(served, variant, plat, "mlx-lm[cuda13]", pypi=pypi)
        assert got["mlx"] == BUILDS[variant][0] and "mlx-cuda-13" not in got
        assert got["mlx-lm"] == "0.32.3"


@pytest.mark.parametrize("gpu, plat, variant", HOSTS)
def test_install_dry_run_names_the_same_variant(served, gpu, plat, variant, tmp_path):
    env = {**_env(), "MLX_BUILDER_FAKE_GPU": gpu, "MLX_BUILDER_FAKE_PLATFORM": plat,
           "MLX_BUILDER_INDEX": served["ours"], "MLX_BUILDER_CACHE": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "mlx_builder", "install", "--dry-run",
                           "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert data["variant"] == variant and BUILDS[variant][0] in data["chosen"]


def test_without_the_constraints_pip_takes_the_newer_pypi_mlx(served):
    """Why the README's command carries -c: pip merges the indexes and the
    highest version wins, whichever index it comes from."""
    args = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
            "--quiet", "--report", "-", "--only-binary=:all:", "--platform", X86,
            "--python-version", "3.12", "--target", str(Path(served["tmp"]) / "never-written"),
            "--index-url", served["pypi"],
            "--extra-index-url", f"{served['ours']}cu13-sm90/simple/", "mlx"]
    proc = subprocess.run(args, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [i["metadata"]["version"] for i in report["install"]] == ["0.32.4"]


def test_an_x86_64_host_on_the_gb10_index_gets_nothing(served):
    """A GB10 wheel is Arm only: the wrong variant fails loudly, never quietly."""
    args = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
            "--quiet", "--only-binary=:all:", "--platform", X86, "--python-version", "3.12",
            "--target", str(Path(served["tmp"]) / "never-written"),
            *_readme_args(served["ours"], "cu13-sm121", served["pypi"]), "mlx"]
    proc = subprocess.run(args, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "Cannot install mlx" in proc.stderr, proc.stderr


def _venv_with_our_mlx(served: dict, tmp_path: Path, variant: str) -> str:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = str(venv / "bin" / "python")
    first = [py, "-m", "pip", "install", "--quiet",
             *_readme_args(served["ours"], variant, served["pypi"]), "mlx", "mlx-lm[cuda13]"]
    proc = subprocess.run(first, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert _installed(py) == {"mlx": BUILDS[variant][0], "mlx-lm": "0.32.3"}
    return py


def _installed(py: str) -> dict[str, str]:
    code = ("import importlib.metadata as m, json; print(json.dumps("
            "{n: m.version(n) for n in ('mlx', 'mlx-lm')}))")
    return json.loads(subprocess.run([py, "-c", code], capture_output=True, text=True,
                                     check=True).stdout)


@pytest.mark.parametrize("upgrade, keeps", [
    # pip upgrades only what is named; mlx-lm alone does not need mlx on Linux
    (["install", "-U", "mlx-lm"], {"mlx-lm": "0.33.0"}),
    # with the constraints, the newest mlx-lm that accepts our mlx
    (["install", "-U", "-c", "{pins}", "mlx-lm[cuda13]"], {"mlx-lm": "0.32.3"}),
])
def test_pip_install_upgrade_mlx_lm_keeps_our_mlx(served, tmp_path, upgrade, keeps):
    variant = "cu13-sm90"
    py = _venv_with_our_mlx(served, tmp_path, variant)
    pins = f"{served['ours']}{variant}/constraints.txt"
    then = [py, "-m", "pip", *[a.replace("{pins}", pins) for a in upgrade], "--quiet",
            "--index-url", served["pypi"], "--extra-index-url", f"{served['ours']}{variant}/simple/"]
    proc = subprocess.run(then, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert _installed(py) == {"mlx": BUILDS[variant][0], **keeps}
    marker = subprocess.run([py, "-c", "import mlx; print(mlx.MARKER)"], capture_output=True,
                            text=True, check=True).stdout.strip()
    assert marker == variant


def test_upgrading_the_cuda_extra_without_the_constraints_swaps_our_mlx(served, tmp_path):
    """What the README's `-c` guards against: mlx-lm 0.33.0 needs mlx>=0.32.4."""
    variant = "cu13-sm90"
    py = _venv_with_our_mlx(served, tmp_path, variant)
    proc = subprocess.run([py, "-m", "pip", "install", "-U", "--quiet", "--index-url",
                           served["pypi"], "--extra-index-url",
                           f"{served['ours']}{variant}/simple/", "mlx-lm[cuda13]"],
                          env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert _installed(py) == {"mlx": "0.32.4", "mlx-lm": "0.33.0"}
