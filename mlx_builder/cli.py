"""The ``mlx-builder`` command line.

Each command lives in its own module under ``mlx_builder.commands`` and
exposes a click command named ``command``; this module finds them, so adding a
command never means editing a shared list.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

import click

from mlx_builder import __version__, commands
from mlx_builder.console import err_console
from mlx_builder.errors import MlxBuilderError
from mlx_builder.settings import load_settings


def _discover() -> list[click.Command]:
    found = []
    for info in sorted(pkgutil.iter_modules(commands.__path__),
                       key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        cmd = getattr(module, "command", None)
        if isinstance(cmd, click.Command):
            found.append(cmd)
    return found


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mlx-builder")
@click.option("--mlx-repo", envvar=None, default=None,
              help="Upstream MLX: URL or local path "
                   "(env MLX_BUILDER_MLX_REPO, config mlx_repo).")
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None,
              help="Mirrors, dependency cache and logs (env MLX_BUILDER_CACHE).")
@click.option("--work-dir", type=click.Path(path_type=Path), default=None,
              help="Where work trees are created (env MLX_BUILDER_WORK).")
@click.option("--patches-dir", type=click.Path(path_type=Path), default=None,
              help="Patch series root (env MLX_BUILDER_PATCHES).")
@click.option("--config", "config_path", type=click.Path(path_type=Path),
              default=None, help="Config file (env MLX_BUILDER_CONFIG).")
@click.option("--offline", is_flag=True, default=None,
              help="Never touch the network (env MLX_BUILDER_OFFLINE=1).")
@click.option("-j", "--jobs", type=int, default=None,
              help="Parallel build jobs (default: core count).")
@click.pass_context
def cli(ctx: click.Context, mlx_repo, cache_dir, work_dir, patches_dir,
        config_path, offline, jobs) -> None:
    """Fork-and-patch builds of Apple MLX for long-context attention."""
    ctx.obj = load_settings(
        config_path=config_path, mlx_repo=mlx_repo, cache_dir=cache_dir,
        work_dir=work_dir, patches_dir=patches_dir, offline=offline, jobs=jobs)


for _cmd in _discover():
    cli.add_command(_cmd)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="mlx-builder", standalone_mode=False)
    except MlxBuilderError as exc:
        err_console.print(exc.render(), markup=False)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        err_console.print("aborted")
        sys.exit(130)
    sys.exit(0)
