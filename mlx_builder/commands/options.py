"""Options shared by the commands: ``--mlx``, ``--series``, ``--target``,
``--python``, ``--json`` and the toolchain's ``--toolchain``, ``--cuda`` and
``--platform``, each declared once here with the parameter
name every command receives it under; a command passes its own help. Comma
lists (``--targets a,b``, ``--dims 256,512``) are parsed by
``mlx_builder.lists``, which the library modules use too.

Two options keep their own declaration because they take something else
under the same name: ``routes --json FILE`` (it writes the routes beside the
printed table) and ``install --mlx`` (a wheel version or specifier, not a git
ref)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from mlx_builder.source.series import BUILD_TARGETS
from mlx_builder.wheelbuild.buildenv import TOOLCHAIN_MODES, Platform, parse_platform

MLX_REF_HELP = "MLX version (0.32.1), main, a tag or a commit."
SERIES_HELP = "Force a patch series."


def mlx_ref_option(help: str = MLX_REF_HELP, **kw: Any) -> Callable:
    """``--mlx REF`` into the ``mlx_ref`` parameter."""
    return click.option("--mlx", "mlx_ref", help=help, **kw)


def series_option(help: str = SERIES_HELP, param: str = "series_name", **kw: Any) -> Callable:
    """``--series NAME`` (a name from patches/index.toml), default none."""
    kw.setdefault("default", None)
    return click.option("--series", param, help=help, **kw)


def target_spec_option(help: str, **kw: Any) -> Callable:
    """``--target SPEC`` (cuda-sm121, cuda, metal, cpu ...) into ``target_spec``."""
    return click.option("--target", "target_spec", help=help, **kw)


def patch_target_option(help: str | None = None) -> Callable:
    """``--target cuda|metal|cpu|all``: which patches of a series (``target``)."""
    return click.option("--target", type=click.Choice(BUILD_TARGETS), default="all",
                        show_default=True, help=help)


def python_option(help: str, **kw: Any) -> Callable:
    """``--python PATH``: the interpreter a command builds for, tests or probes."""
    kw.setdefault("default", None)
    return click.option("--python", "python", help=help, **kw)


def json_flag(help: str = "Print the result as JSON.") -> Callable:
    """``--json``: print the command's result as JSON (``as_json``)."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def toolchain_option(help: str) -> Callable:
    """``--toolchain pypi|system|auto`` (default auto) into ``toolchain``."""
    return click.option("--toolchain", type=click.Choice(TOOLCHAIN_MODES), default="auto",
                        show_default=True, help=help)


def _int_or_none(_ctx: click.Context, _param: click.Parameter, value: str | None) -> int | None:
    return int(value) if value else None


def _platform(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Platform | None:
    return parse_platform(value)


def cuda_option(help: str) -> Callable:
    """``--cuda 12|13``: the registry toolchain's CUDA major, an int or None
    (``cuda_major``)."""
    return click.option("--cuda", "cuda_major", type=click.Choice(["12", "13"]), default=None,
                        callback=_int_or_none, help=help)


def platform_option(help: str) -> Callable:
    """``--platform linux-x86_64|linux-aarch64`` as a Platform, None for the
    host's (``platform``); an unknown name is a ToolchainError."""
    return click.option("--platform", "platform", default=None, callback=_platform, help=help)
