"""Host detection and wheel choice; `install --dry-run` on faked hosts; real pip."""

from __future__ import annotations

import json
import os
import platform
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from fakes import make_wheel, manifest_for
from packaging import tags as ptags

from mlx_builder.cli import cli, main
from mlx_builder.errors import ConflictingPackageError, DriverTooOldError, FetchError, WheelError
from mlx_builder.prebuilt.install import (
    FAKE_DRIVER_ENV,
    FAKE_GPU_ENV,
    FAKE_PLATFORM_ENV,
    choose_wheel,
    cuda_driver_gpus,
    cuda_driver_version,
    detect_host,
    driver_error,
    installed_backends,
    interpreter_tags,
    parse_arch,
    pip_command,
)
from mlx_builder.prebuilt.wheelindex import load_listing, write_index
from mlx_builder.settings import DEFAULT_INDEX

_T = next(iter(ptags.sys_tags()))
MAC_TAG = f"{_T.interpreter}-{_T.abi}-macosx_14_0_arm64"


@pytest.mark.parametrize("arch, cc, rank", [
    ("90a", (9, 0), 0),            # an H200 runs sm_90a
    ("90a", (10, 0), None),        # arch-specific: not forward compatible
    ("121a", (12, 1), 0),
    ("120a-real", (12, 1), None),  # sm_120a does not run on a GB10
    ("120f", (12, 1), 1),          # family code does
    ("120-real", (12, 1), 1),      # plain SASS runs on later minors
    ("120-virtual", (12, 1), 2),   # PTX JIT
    ("80-real", (8, 6), 1),
    ("80-real", (9, 0), None),     # SASS never crosses a major
    ("compute_80", (9, 0), 2),
    ("sm_90a", (9, 0), 0),
])
def test_arch_rank(arch, cc, rank):
    assert parse_arch(arch).rank_on(cc) == rank


def test_parse_arch_rejects_garbage():
    with pytest.raises(WheelError):
        parse_arch("hopper")


@pytest.fixture()
def house(tmp_path):
    """A wheelhouse like the release matrix makes, plus one foreign wheel."""
    h = tmp_path / "house"
    make_wheel(h, "0.32.1+mlxb.s90", manifest=manifest_for("cuda-sm90"))
    make_wheel(h, "0.32.1+mlxb.s121", manifest=manifest_for("cuda-sm121"))
    make_wheel(h, "0.32.1+mlxb.s120", manifest=manifest_for("cuda-sm120"))
    # upstream's set without the Linux extras: 75, 80, 120a SASS + 120 PTX
    make_wheel(h, "0.32.1+mlxb.cuda", manifest=manifest_for("cuda", system="Windows"))
    make_wheel(h, "0.32.1+mlxb.cpu", manifest=manifest_for("cpu"))
    make_wheel(h, "0.32.1+mlxb.metal", tag=MAC_TAG,
               manifest=manifest_for("metal", system="Darwin"))
    make_wheel(h, "0.32.1")  # no manifest: not ours
    write_index(h)
    return h


def _choose(house: Path, env: dict, **kw):
    listing = load_listing(str(house))
    host = detect_host(env=env)
    return choose_wheel(((e, listing.locate(e)) for e in listing.wheels), host, **kw)


def _reasons(choice) -> dict[str, str]:
    return {c.filename.split("-")[1]: c.reason for c in choice.candidates
            if not c.accepted}


def test_sm90_host_picks_90a(house):
    choice = _choose(house, {FAKE_GPU_ENV: "sm_90"})
    assert choice.chosen.filename.startswith("mlx-0.32.1+mlxb.s90-")
    assert "exact SASS" in choice.chosen.reason
    rejected = _reasons(choice)
    assert "none runs" in rejected["0.32.1+mlxb.s121"]
    assert "want cuda" in rejected["0.32.1+mlxb.cpu"]
    assert "do not fit" in rejected["0.32.1+mlxb.metal"]
    assert "no mlx-builder manifest" in rejected["0.32.1"]


def test_sm121_host_needs_121a_or_120_family(house):
    choice = _choose(house, {FAKE_GPU_ENV: "sm_121"})
    assert choice.chosen.filename.startswith("mlx-0.32.1+mlxb.s121-")
    rejected = _reasons(choice)
    assert "sm_120a" in rejected["0.32.1+mlxb.s120"]
    assert "sm_90a" in rejected["0.32.1+mlxb.s90"]
    ok = {c.filename.split("-")[1]: c.reason for c in choice.candidates if c.accepted}
    assert "PTX" in ok["0.32.1+mlxb.cuda"]      # 120-virtual JITs on 12.1


def test_ptx_is_the_fallback_and_newer_version_wins(house):
    (next(house.glob("*s121*.whl"))).unlink()
    write_index(house)
    choice = _choose(house, {FAKE_GPU_ENV: "12.1"})
    assert choice.chosen.filename.startswith("mlx-0.32.1+mlxb.cuda-")
    assert "PTX" in choice.chosen.reason
    make_wheel(house, "0.32.2+mlxb.f", manifest=manifest_for("cuda-sm120f"))
    write_index(house)
    newer = _choose(house, {FAKE_GPU_ENV: "12.1"})
    assert newer.chosen.filename.startswith("mlx-0.32.2+mlxb.f-")
    older = _choose(house, {FAKE_GPU_ENV: "12.1"}, mlx="0.32.1")
    assert older.chosen.filename.startswith("mlx-0.32.1+mlxb.cuda-")


def test_every_gpu_must_be_covered(house):
    mixed = {FAKE_GPU_ENV: "sm_90,sm_121"}
    assert _choose(house, mixed).chosen is None
    make_wheel(house, "0.32.1+mlxb.both",
               manifest=manifest_for("cuda-sm90,cuda-sm121"))
    write_index(house)
    choice = _choose(house, mixed)
    assert choice.chosen.filename.startswith("mlx-0.32.1+mlxb.both-")
    assert "CC 9.0" in choice.chosen.reason and "CC 12.1" in choice.chosen.reason


def test_macos_host_picks_metal(house):
    choice = _choose(house, {FAKE_GPU_ENV: "metal"})
    assert choice.host.system == "Darwin" and choice.backend == "metal"
    assert choice.chosen.filename.startswith("mlx-0.32.1+mlxb.metal-")
    assert all("do not fit" in c.reason for c in choice.candidates if not c.accepted
               and c.filename != choice.chosen.filename
               and "metal" not in c.filename)


def test_cpu_host_and_commit_filter(house):
    choice = _choose(house, {FAKE_GPU_ENV: "none"})
    assert choice.chosen.filename.startswith("mlx-0.32.1+mlxb.cpu-")
    none = _choose(house, {FAKE_GPU_ENV: "none"}, mlx="deadbeef")
    assert none.chosen is None
    assert _choose(house, {FAKE_GPU_ENV: "none"}, mlx="846d17").chosen is not None


def _cli_dry_run(house: Path, env: dict) -> str:
    res = CliRunner().invoke(cli, ["install", "--index", house.as_uri(), "--dry-run"],
                             env=env, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return " ".join(res.output.split())


@pytest.mark.parametrize("fake, chosen", [
    ({FAKE_GPU_ENV: "sm_90"}, "mlx-0.32.1+mlxb.s90-"),
    ({FAKE_GPU_ENV: "sm_121"}, "mlx-0.32.1+mlxb.s121-"),
    ({FAKE_GPU_ENV: "metal", FAKE_PLATFORM_ENV: "macosx_15_0_arm64"},
     "mlx-0.32.1+mlxb.metal-"),
])
def test_install_dry_run_on_faked_hosts(house, fake, chosen):
    out = _cli_dry_run(house, fake)
    assert f"choice: {chosen}" in out
    assert "faked by" in out
    assert out.count("rejected") >= 4          # every other wheel, with a reason


def test_install_json_and_no_match_exit_code(house, monkeypatch, capsys):
    monkeypatch.setenv(FAKE_GPU_ENV, "sm_100")
    monkeypatch.setenv("MLX_BUILDER_CACHE", str(house.parent / "cache"))
    with pytest.raises(SystemExit) as exc:
        main(["install", "--index", str(house), "--json", "--dry-run"])
    assert exc.value.code == WheelError.exit_code
    data = json.loads(capsys.readouterr().out)
    assert data["chosen"] is None and data["host"]["gpus"][0]["cc"] == "10.0"
    assert not any(c["accepted"] for c in data["candidates"])
    assert len(data["candidates"]) == 7 and all(c["reason"] for c in data["candidates"])


def test_install_with_pip_offline_into_target(house, tmp_path):
    target = tmp_path / "site"
    res = CliRunner().invoke(cli, [
        "--offline", "--cache-dir", str(tmp_path / "cache"), "install",
        "--index", (house / "cpu" / "simple").as_uri(), "--backend", "cpu",
        f"--pip-arg=--target={target}"], env={"PIP_CONFIG_FILE": os.devnull},
        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "installed mlx-0.32.1+mlxb.cpu-" in " ".join(res.output.split())
    assert any(target.glob("mlx-0.32.1+mlxb.cpu.dist-info"))
    assert (target / "mlx" / "_mlx_builder_manifest.json").is_file()


def test_pip_command_offline_uses_wheel_dir():
    cmd = pip_command("py", "/w/mlx.whl", ["--no-deps"], offline=True)
    assert cmd[:3] == ["py", "-m", "pip"]
    assert cmd[-1] == "/w/mlx.whl" and "--no-index" in cmd
    assert cmd[cmd.index("--find-links") + 1] == "/w"


@pytest.mark.skipif(platform.system() != "Linux", reason="nvidia-smi path is Linux")
def test_detect_with_nvidia_smi(tmp_path):
    smi = tmp_path / "nvidia-smi"
    # one query: name, compute capability and driver version
    smi.write_text("#!/bin/sh\ncase \"$1\" in *name,compute_cap,driver_version*) "
                   "echo 'NVIDIA GB10, 12.1, 580.95.05';; *) exit 9;; esac\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    host = detect_host(env={"PATH": str(tmp_path)})
    assert host.backend == "cuda" and host.source == "nvidia-smi"
    assert host.gpus[0].cc == (12, 1) and host.gpus[0].name == "NVIDIA GB10"
    assert host.driver == "580.95.05" and "driver 580.95.05" in host.describe()
    assert host.tags[0] == _T


FAKE_DRIVER = r"""
#include <string.h>
int cuInit(unsigned f) { return 0; }
int cuDeviceGetCount(int *c) { *c = 2; return 0; }
int cuDeviceGet(int *d, int i) { *d = i; return 0; }
int cuDeviceGetAttribute(int *v, int attr, int d) {
  if (attr == 75) { *v = d ? 12 : 9; return 0; }
  if (attr == 76) { *v = d ? 1 : 0; return 0; }
  return 1;
}
int cuDeviceGetName(char *n, int len, int d) {
  strncpy(n, d ? "Fake GB10" : "Fake H200", len); return 0;
}
int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
"""


@pytest.mark.skipif(not shutil.which("cc") or sys.platform != "linux",
                    reason="needs a C compiler to build a fake libcuda")
def test_cuda_driver_detection_through_ctypes(tmp_path):
    src = tmp_path / "fakecuda.c"
    src.write_text(FAKE_DRIVER)
    lib = tmp_path / "libfakecuda.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    gpus = cuda_driver_gpus(str(lib))
    assert [(g.name, g.cc) for g in gpus] == [("Fake H200", (9, 0)),
                                              ("Fake GB10", (12, 1))]
    assert cuda_driver_gpus(str(tmp_path / "absent.so")) == ()
    assert cuda_driver_version(str(lib)) == "13.0"
    assert cuda_driver_version(str(tmp_path / "absent.so")) is None


@pytest.fixture()
def majors(tmp_path):
    """The same sm_90 build with CUDA 12 and with CUDA 13."""
    h = tmp_path / "majors"
    make_wheel(h, "0.32.1+mlxb.a.cu12.90a", manifest=manifest_for("cuda-sm90", cuda_major=12))
    make_wheel(h, "0.32.1+mlxb.a.cu13.90a", manifest=manifest_for("cuda-sm90", cuda_major=13))
    write_index(h)
    return h


@pytest.mark.parametrize("driver, chosen", [
    ("580.82.07", "cu13.90a"),       # both run: the newer CUDA
    ("575.57.08", "cu12.90a"),       # CUDA 13 needs 580.65.06
    (None, "cu12.90a"),              # unknown driver: the CUDA the most drivers run
])
def test_the_driver_decides_between_cuda_majors(majors, driver, chosen):
    env = {FAKE_GPU_ENV: "sm_90", **({FAKE_DRIVER_ENV: driver} if driver else {})}
    choice = _choose(majors, env)
    assert choice.chosen is not None and chosen in choice.chosen.filename, \
        [(c.filename, c.reason) for c in choice.candidates]
    if driver == "575.57.08":
        assert "needs NVIDIA driver >= 580.65.06; this host has 575.57.08" in \
            _reasons(choice)["0.32.1+mlxb.a.cu13.90a"]


def test_a_driver_too_old_for_every_fitting_wheel_exits_40(majors, tmp_path):
    choice = _choose(majors, {FAKE_GPU_ENV: "sm_90", FAKE_DRIVER_ENV: "520.61.05"})
    assert choice.chosen is None and isinstance(driver_error(choice), DriverTooOldError)
    res = CliRunner().invoke(cli, ["--cache-dir", str(tmp_path / "c"), "install", "--index",
                                   str(majors), "--dry-run"],
                             env={FAKE_GPU_ENV: "sm_90", FAKE_DRIVER_ENV: "520.61.05"})
    assert isinstance(res.exception, DriverTooOldError), res.output
    assert DriverTooOldError.exit_code == 40
    with pytest.raises(Exception, match="cannot parse"):
        detect_host(env={FAKE_DRIVER_ENV: "new"})


def _python_with(site: Path, tmp_path: Path) -> str:
    """An interpreter whose packages include those under ``site``."""
    wrapper = tmp_path / "python-with-site"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def _fake_dist(site: Path, name: str, version: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text("")


def test_install_refuses_to_overlay_upstream_backends(house, tmp_path):
    site = tmp_path / "site"
    _fake_dist(site, "mlx-cuda-13", "0.32.4")
    _fake_dist(site, "mlx", "0.32.4")
    python = _python_with(site, tmp_path)
    assert installed_backends(python) == [("mlx-cuda-13", "0.32.4")]
    assert installed_backends(sys.executable) == []
    res = CliRunner().invoke(cli, ["--cache-dir", str(tmp_path / "c"), "install", "--index",
                                   str(house), "--python", python, "--dry-run"],
                             env={FAKE_GPU_ENV: "sm_90"})
    assert isinstance(res.exception, ConflictingPackageError), res.output
    assert "mlx-cuda-13 0.32.4" in str(res.exception) and ConflictingPackageError.exit_code == 41
    ok = CliRunner().invoke(cli, ["--cache-dir", str(tmp_path / "c"), "install", "--index",
                                  str(house), "--python", python, "--dry-run",
                                  "--replace-upstream"], env={FAKE_GPU_ENV: "sm_90"})
    assert ok.exit_code == 0, ok.output


def test_install_reads_its_index_from_env_config_or_the_default(house, tmp_path):
    cache = ["--cache-dir", str(tmp_path / "c")]
    env = {FAKE_GPU_ENV: "sm_90", "MLX_BUILDER_CONFIG": None}
    res = CliRunner().invoke(cli, [*cache, "install", "--dry-run"],
                             env={**env, "MLX_BUILDER_INDEX": str(house)})
    assert res.exit_code == 0 and f"index:  {house} " in res.output, res.output
    config = tmp_path / "config.toml"
    config.write_text(f'index = "{house.as_uri()}"\n')
    res = CliRunner().invoke(cli, [*cache, "--config", str(config), "install", "--dry-run"],
                             env={**env, "MLX_BUILDER_INDEX": None})
    assert res.exit_code == 0 and f"index:  {house.as_uri()} " in res.output, res.output
    res = CliRunner().invoke(cli, [*cache, "--offline", "install", "--dry-run"],
                             env={**env, "MLX_BUILDER_INDEX": None,
                                  "XDG_CONFIG_HOME": str(tmp_path / "none")})
    assert isinstance(res.exception, FetchError)
    assert f"cannot read the index {DEFAULT_INDEX} offline" in str(res.exception)


def test_dry_run_prints_the_pip_command_of_the_variant(house):
    out = _cli_dry_run(house, {FAKE_GPU_ENV: "sm_121"})
    root = house.as_uri()
    assert (f"pip: pip install -c {root}/cuda-sm121/constraints.txt "
            f"--extra-index-url {root}/cuda-sm121/simple/ mlx") in out


def test_tags_of_another_interpreter_and_faked_platforms():
    assert interpreter_tags(sys.executable) == tuple(ptags.sys_tags())
    mac = interpreter_tags(sys.executable, ["macosx_14_0_arm64"])
    assert str(mac[0]) == MAC_TAG
    host = detect_host(env={FAKE_GPU_ENV: "sm_90",
                            FAKE_PLATFORM_ENV: "manylinux_2_28_aarch64"})
    plats = {t.platform for t in host.tags}
    assert {"manylinux_2_28_aarch64", "manylinux_2_17_aarch64", "linux_aarch64"} <= plats
    assert host.machine == "aarch64" and host.system == "Linux"


# --- hash checking -----------------------------------------------------------

def _swap(house: Path, version: str) -> Path:
    """Replace the indexed wheel ``version`` by another file of the same name."""
    wheel = next(house.glob(f"mlx-{version}-*.whl"))
    other = make_wheel(house.parent / "elsewhere", version, manifest=manifest_for("cpu"),
                       marker="swapped")
    shutil.copy(other, wheel)
    return wheel


def test_install_refuses_a_wheel_swapped_after_index(house, tmp_path, capsys):
    _swap(house, "0.32.1+mlxb.cpu")
    target = tmp_path / "site"
    with pytest.raises(SystemExit) as exc:
        main(["--offline", "--cache-dir", str(tmp_path / "cache"), "install", "--index",
              str(house), "--backend", "cpu", f"--pip-arg=--target={target}"])
    from mlx_builder.errors import HashMismatchError
    assert exc.value.code == HashMismatchError.exit_code == 31
    assert "does not match the sha256 the index lists" in " ".join(capsys.readouterr().err.split())
    assert not target.exists()


def test_pip_runs_in_hash_checking_mode(house, tmp_path):
    from mlx_builder.prebuilt.install import hashed_pip_commands
    wheel = next(house.glob("mlx-0.32.1+mlxb.cpu-*.whl"))
    req = tmp_path / "req.txt"
    cmds = hashed_pip_commands("py", str(wheel), "ab" * 32, "mlx", req, ["--no-cache-dir"])
    assert len(cmds) == 1 and cmds[0][-4:] == ["--require-hashes", "--no-deps", "-r", str(req)]
    assert req.read_text() == f"mlx @ {wheel.resolve().as_uri()} --hash=sha256:{'ab' * 32}\n"
    # a wheel with runtime requirements gets a second call for them
    from mlx_builder.wheelbuild.manifest import inject
    dep = inject(wheel, tmp_path / "d" / wheel.name, manifest=manifest_for("cpu"),
                 requires=["nvidia-cudnn-cu13==9.*", "pytest; extra == 'dev'"])
    cmds = hashed_pip_commands("py", str(dep), "ab" * 32, "mlx", req)
    assert cmds[1][-1] == "nvidia-cudnn-cu13==9.*" and "--require-hashes" not in cmds[1]
    assert len(hashed_pip_commands("py", str(dep), "ab" * 32, "mlx", req, ["--no-deps"])) == 1


def test_pip_itself_refuses_a_hash_mismatch(house, tmp_path):
    """The file changes between our check and pip's: pip's hash check stops it."""
    from mlx_builder.prebuilt.install import hashed_pip_commands
    wheel = next(house.glob("mlx-0.32.1+mlxb.cpu-*.whl"))
    cmd = hashed_pip_commands(sys.executable, str(wheel), "0" * 64, "mlx", tmp_path / "r.txt",
                              [f"--target={tmp_path / 'site'}"], offline=True)[0]
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
    from mlx_builder.prebuilt.install import PIP_HASH_MISMATCH
    assert proc.returncode != 0 and PIP_HASH_MISMATCH in proc.stdout + proc.stderr


def test_index_refuses_a_wheel_whose_record_or_manifest_does_not_match(tmp_path):
    import zipfile
    good = make_wheel(tmp_path / "h", "0.32.1+mlxb.cpu", manifest=manifest_for("cpu"))
    with zipfile.ZipFile(good, "a") as zf:
        zf.writestr("mlx/evil.py", "print('evil')\n")
    with pytest.raises(WheelError, match="does not match its RECORD"):
        write_index(tmp_path / "h")
    assert not (tmp_path / "h" / "index.json").exists()
    other = tmp_path / "h2"
    wheel = make_wheel(other, "0.32.1+mlxb.cpu", manifest=manifest_for("cpu"))
    renamed = wheel.with_name(wheel.name.replace("mlxb.cpu", "mlxb.cu90a"))
    wheel.rename(renamed)
    with pytest.raises(WheelError, match="its manifest says version"):
        write_index(other)


def test_an_aarch64_gb10_host_gets_the_aarch64_sm121_wheel(tmp_path):
    """A DGX Spark (GB10: sm_121 on a Grace CPU) takes the manylinux aarch64
    sm_121 wheel; the x86_64 build of the same target is refused for its tag,
    the aarch64 sm_90 (GH200) wheel for its GPU code."""
    py = f"{_T.interpreter}-{_T.abi}"
    h = tmp_path / "house"
    make_wheel(h, "0.32.2+mlxb.a121", tag=f"{py}-manylinux_2_35_aarch64",
               manifest=manifest_for("cuda-sm121"))
    make_wheel(h, "0.32.2+mlxb.a90", tag=f"{py}-manylinux_2_35_aarch64",
               manifest=manifest_for("cuda-sm90"))
    make_wheel(h, "0.32.2+mlxb.x121", tag=f"{py}-manylinux_2_35_x86_64",
               manifest=manifest_for("cuda-sm121"))
    write_index(h)
    env = {FAKE_GPU_ENV: "sm_121", FAKE_PLATFORM_ENV: "manylinux_2_39_aarch64"}
    choice = _choose(h, env)
    assert choice.chosen is not None and "a121" in choice.chosen.filename
    assert choice.chosen.filename.endswith("manylinux_2_35_aarch64.whl")
    why = _reasons(choice)
    assert "0.32.2+mlxb.x121" in why and "0.32.2+mlxb.a90" in why
    # an older glibc than the wheel's floor takes none of them
    old = _choose(h, {FAKE_GPU_ENV: "sm_121", FAKE_PLATFORM_ENV: "manylinux_2_31_aarch64"})
    assert old.chosen is None


# ---------------------------------------------------------------- what the index may claim

def test_an_entry_whose_tags_contradict_its_file_name_is_not_chosen(house):
    listing = json.loads((house / "index.json").read_text())
    cpu = next(w for w in listing["wheels"] if "+mlxb.cpu-" in w["filename"])
    liar = {**cpu, "filename": cpu["filename"].replace("+mlxb.cpu-", "+mlxb.cpux-")
            .rsplit("-", 3)[0] + "-cp20-cp20-win32.whl"}
    liar["url"] = liar["filename"]
    liar["manifest"] = {**cpu["manifest"], "version": "0.32.2+mlxb.cpux"}
    liar["version"] = "0.32.2+mlxb.cpux"              # newer: chosen were it believed
    host = detect_host(env={FAKE_GPU_ENV: "none"})
    choice = choose_wheel([(cpu, "a"), (liar, "b")], host)
    assert choice.chosen.filename == cpu["filename"]
    assert "file name contradicts" in next(c.reason for c in choice.candidates
                                           if c.filename == liar["filename"])


def test_a_renamed_wheel_is_refused_before_install(tmp_path):
    from mlx_builder.prebuilt.install import fetch_verified, file_sha256
    wheel = make_wheel(tmp_path / "h", "0.32.1+mlxb.cpu", manifest=manifest_for("cpu"))
    renamed = wheel.with_name(wheel.name.rsplit("-", 3)[0] + "-py3-none-any.whl")
    wheel.rename(renamed)
    with pytest.raises(WheelError, match="file name's tags contradict") as exc:
        fetch_verified(str(renamed), file_sha256(renamed), tmp_path / "dl")
    assert "WHEEL file declares" in exc.value.why


def test_a_download_cut_short_is_a_fetch_error_not_tampering(tmp_path):
    import socket
    import threading

    from mlx_builder.errors import FetchError
    from mlx_builder.prebuilt.install import fetch_verified
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 5000\r\n\r\n" + b"PK" * 100)
    threading.Thread(target=serve, daemon=True).start()
    url = f"http://127.0.0.1:{server.getsockname()[1]}/mlx-1-py3-none-any.whl"
    with pytest.raises(FetchError, match="cannot download") as exc:
        fetch_verified(url, "0" * 64, tmp_path / "dl")
    assert "IncompleteRead" in exc.value.why
    server.close()


def test_an_index_link_must_name_the_wheel_it_lists(house):
    listing = load_listing(str(house))
    entry = {**listing.wheels[0], "url": "../../elsewhere/evil.whl"}
    with pytest.raises(WheelError, match="the index links") as exc:
        listing.locate(entry)
    assert "does not name the wheel" in exc.value.why
