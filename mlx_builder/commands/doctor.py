"""`mlx-builder doctor`: can this host build the target? (the build checks the same)."""

from __future__ import annotations

import dataclasses
import json
import platform
import shutil
import sys

import click
from rich.table import Table

from mlx_builder.console import console
from mlx_builder.targets import parse_targets
from mlx_builder.toolchain import DEFAULT_BUILD_REQUIRES, check_toolchain, find_nvcc


def default_target() -> str:
    if platform.system() == "Darwin":
        return "metal"
    import os
    return "cuda" if find_nvcc(os.environ) or shutil.which("nvcc") else "cpu"


@click.command("doctor")
@click.option("--target", "target_spec", default=None,
              help="Target to check (default: metal on macOS, cuda where nvcc is, else cpu).")
@click.option("--python", "python", default=None,
              help="Build Python (default: the one running mlx-builder).")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@click.pass_obj
def command(settings, target_spec, python, as_json) -> None:
    """Check compilers, CUDA/cuDNN or Xcode, CMake, Ninja and the build Python."""
    targets = parse_targets(target_spec or default_target())
    tc = check_toolchain(targets, python=python or sys.executable,
                         build_requires=DEFAULT_BUILD_REQUIRES)
    checks = [c if c.name != "build-python" or settings.offline
              else dataclasses.replace(c, required=False) for c in tc.checks]
    tc = dataclasses.replace(tc, checks=tuple(checks))
    if as_json:
        click.echo(json.dumps({"target": targets.spec, "ok": tc.ok,
                               "checks": [dataclasses.asdict(c) for c in checks],
                               "env": dict(tc.env), "cmake_args": list(tc.cmake_args)},
                              indent=2))
    else:
        table = Table("check", "status", "version", "detail", title=f"toolchain for {targets.spec}")
        style = {"ok": "green", "warn": "yellow", "FAIL": "bold red"}
        for c in checks:
            detail = c.detail + (f"\n→ {c.fix}" if c.fix and not c.ok else "")
            table.add_row(c.name, f"[{style[c.status]}]{c.status}[/]", c.version or "", detail)
        console.print(table)
        if not settings.offline:
            console.print("build-python is required only for offline builds "
                          "(--offline or --from-bundle use --no-build-isolation)", markup=False)
    tc.require()
