"""`mlx-builder doctor`: can this host build the target? (the build checks the same)."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import shutil
import sys

import click
from rich.table import Table

from mlx_builder.commands.options import (
    cuda_option,
    json_flag,
    platform_option,
    python_option,
    target_spec_option,
    toolchain_option,
)
from mlx_builder.console import console, print_table
from mlx_builder.errors import ToolchainError
from mlx_builder.settings import Settings
from mlx_builder.wheelbuild import buildenv as benv_mod
from mlx_builder.wheelbuild.buildenv import Platform, cross_target, host_platform
from mlx_builder.wheelbuild.probe import Check
from mlx_builder.wheelbuild.targets import TargetSet, parse_targets
from mlx_builder.wheelbuild.toolchain import DEFAULT_BUILD_REQUIRES, Toolchain, check_toolchain, find_nvcc

# what a registry environment supplies itself (not looked for on the host
# before it is made)
_SUPPLIED = {"cmake", "ninja", "ccache", "compiler-cache", "build-python"}


def default_target() -> str:
    if platform.system() == "Darwin":
        return "metal"
    return "cuda" if find_nvcc(os.environ) or shutil.which("nvcc") else "cpu"


def plan_checks(settings: Settings, targets: TargetSet, python: str | None, mode: str,
                cuda_major: int | None, plat: Platform | None) -> Toolchain:
    """The checks a build of ``targets`` would make, with the toolchain line first."""
    cross = cross_target(plat) is not None
    if targets.backend != "cuda":
        return check_toolchain(targets, python=python, build_requires=DEFAULT_BUILD_REQUIRES,
                               platform_=plat)
    system_nvcc = find_nvcc(os.environ)
    spec = None
    try:
        if mode == "system" and not cross:
            which, why = "system", "--toolchain system"
        else:
            if plat is None:
                raise ToolchainError("registry CUDA toolchains exist for Linux hosts only")
            major = cuda_major or benv_mod.default_cuda_major(
                targets.min_cuda, min(e.number for e in targets.arch_entries))
            spec = benv_mod.make_spec(major, plat, DEFAULT_BUILD_REQUIRES, python=python)
            cached = benv_mod.cached_env(settings.cache_dir, spec)
            which, why = benv_mod.choose(mode, offline=settings.offline,
                                         cached=cached is not None, wheelhouse=False,
                                         system_nvcc=system_nvcc, cross=cross)
    except ToolchainError as exc:
        choice = Check("toolchain", False, True, detail=f"{exc.what} ({exc.why})"
                       if exc.why else exc.what, fix=exc.next_step or "")
        return _host_checks(python, plat, choice)
    if which == "system":
        choice = Check("toolchain", True, True, "system",
                       detail=f"system CUDA toolkit ({system_nvcc or 'no nvcc found'}): {why}")
        return check_toolchain(targets, python=python, build_requires=DEFAULT_BUILD_REQUIRES,
                               choice=choice)
    assert spec is not None  # set on every path that reaches the registry choice
    pins = ", ".join(spec.cuda_host + spec.cuda_target)
    cached = benv_mod.cached_env(settings.cache_dir, spec)
    if cached is not None:
        choice = Check("toolchain", True, True, "pypi",
                       detail=f"registry packages for {spec.target.name} ({why}): "
                              f"{cached.root}; {pins}")
        return check_toolchain(targets, python=python, build_requires=DEFAULT_BUILD_REQUIRES,
                               buildenv=cached, platform_=plat, choice=choice)
    choice = Check("toolchain", True, True, "pypi",
                   detail=f"registry packages for {spec.target.name} ({why}); not made yet: "
                          f"the first build makes {settings.cache_dir}/buildenv/{spec.name} "
                          f"from {pins}, {', '.join(spec.tools)}")
    return _host_checks(python, plat, choice)


def _host_checks(python: str | None, plat: Platform | None, choice: Check) -> Toolchain:
    """The choice line and what the host itself must have (compilers, BLAS,
    the target's Python headers); the rest comes with the registry environment."""
    host_only = check_toolchain(parse_targets("cpu"), python=python, platform_=plat,
                                choice=choice)
    kept = tuple(c for c in host_only.checks if c.name not in _SUPPLIED)
    return dataclasses.replace(host_only, checks=kept)


@click.command("doctor")
@target_spec_option(
    default=None,
    help="Target to check (default: metal on macOS, cuda where nvcc is, else cpu).")
@python_option(help="Build Python (default: the one running mlx-builder).")
@toolchain_option(help="As for `build`: pypi, system or auto.")
@cuda_option(help="CUDA major of the registry toolchain.")
@platform_option(help="Target platform (linux-x86_64, linux-aarch64); default this host's.")
@json_flag(help="Print the checks as JSON.")
@click.pass_obj
def command(settings: Settings, target_spec: str | None, python: str | None, toolchain: str,
            cuda_major: int | None, platform: Platform | None, as_json: bool) -> None:
    """Check compilers, CUDA/cuDNN or Xcode, CMake, Ninja and the build Python,
    and say which CUDA toolchain a build will use and why."""
    targets = parse_targets(target_spec or ("cuda" if platform else default_target()))
    plat = platform or host_platform()
    tc = plan_checks(settings, targets, python or sys.executable, toolchain, cuda_major, plat)
    registry = any(c.name == "toolchain" and c.version == "pypi" for c in tc.checks)
    checks = [c if c.name != "build-python" or settings.offline or registry
              else dataclasses.replace(c, required=False) for c in tc.checks]
    tc = dataclasses.replace(tc, checks=tuple(checks))
    title = f"toolchain for {targets.spec}" + (f" on {plat.name}" if plat else "")
    if as_json:
        click.echo(json.dumps({"target": targets.spec, "platform": plat.name if plat else None,
                               "ok": tc.ok,
                               "checks": [dataclasses.asdict(c) for c in checks],
                               "env": dict(tc.env), "cmake_args": list(tc.cmake_args)},
                              indent=2))
    else:
        table = Table("check", "status", "version", "detail", title=title)
        style = {"ok": "green", "warn": "yellow", "FAIL": "bold red"}
        for c in checks:
            detail = c.detail + (f"\n→ {c.fix}" if c.fix and not c.ok else "")
            table.add_row(c.name, f"[{style[c.status]}]{c.status}[/]", c.version or "", detail)
        print_table(table)
        if not settings.offline and not registry:
            console.print("build-python is required only for offline builds "
                          "(--offline or --from-bundle use --no-build-isolation)", markup=False)
    tc.require()
