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

from mlx_builder import __version__, commands, logs, signals
from mlx_builder.console import err_console
from mlx_builder.errors import ConfigError, FileSystemError, MlxBuilderError, Terminated
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


def _takes_value(opt: click.Parameter) -> bool:
    return isinstance(opt, click.Option) and not opt.is_flag and not opt.count


def _option_map(cmd: click.Command) -> dict[str, click.Parameter]:
    return {name: p for p in cmd.params if isinstance(p, click.Option)
            for name in (*p.opts, *p.secondary_opts)}


def _split(token: str, known: dict[str, click.Parameter]) -> tuple[str | None, bool]:
    """(option name, whether its value is attached) of ``token`` if it is one
    of ``known`` (``--jobs=4``, ``-j4``, ``-vv``), else (None, False)."""
    if token in known:
        return token, False
    name, eq, _ = token.partition("=")
    if eq and name.startswith("--") and name in known:
        return name, True
    if len(token) > 2 and token[0] == "-" and token[1] != "-":
        short = token[:2]
        if short in known and (_takes_value(known[short]) or set(token[1:]) == {token[1]}):
            return short, _takes_value(known[short])
    return None, False


def hoist_global_options(group: click.Group, args: list[str]) -> list[str]:
    """Move the group's own options that follow the command in front of it, so
    that `mlx-builder build ... -v` means `mlx-builder -v build ...`. Values
    of the command's own options and everything after ``--`` stay where they are."""
    own = _option_map(group)
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        name, attached = _split(args[i], own)
        i += 2 if name and _takes_value(own[name]) and not attached else 1
    if i >= len(args) or args[i] not in group.commands:
        return args
    sub = _option_map(group.commands[args[i]])
    front, rest, j = list(args[:i]), [args[i]], i + 1
    while j < len(args):
        token = args[j]
        if token == "--":
            rest += args[j:]
            break
        name, attached = _split(token, own)
        if name and name not in sub:
            width = 2 if _takes_value(own[name]) and not attached and j + 1 < len(args) else 1
            front += args[j:j + width]
            j += width
            continue
        name, attached = _split(token, sub)
        width = 2 if name and _takes_value(sub[name]) and not attached else 1
        rest += args[j:j + width]
        j += width
    return front + rest


class _Cli(click.Group):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_options(self, list(args)))


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
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
@click.option("--no-wait", is_flag=True, default=None,
              help="Fail at once (exit 30) when another run holds the work tree, "
                   "build folder or mirror, instead of waiting (env MLX_BUILDER_NO_WAIT=1).")
@click.option("-v", "--verbose", count=True,
              help="Log each step and git command (-v), everything (-vv).")
@click.option("-q", "--quiet", is_flag=True, default=False,
              help="Print errors only.")
@click.option("--log-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Also write the whole log, with times, to this file.")
@click.pass_context
def cli(ctx: click.Context, mlx_repo: str | None, cache_dir: Path | None,
        work_dir: Path | None, patches_dir: Path | None, config_path: Path | None,
        offline: bool | None, jobs: int | None, no_wait: bool | None, verbose: int,
        quiet: bool, log_file: Path | None) -> None:
    """Fork-and-patch builds of Apple MLX for long-context attention."""
    if verbose and quiet:
        raise ConfigError("-v and -q together", "they ask for more and less output at once",
                          "pass one of them")
    logs.configure(verbose, quiet, log_file)
    ctx.obj = load_settings(
        config_path=config_path, mlx_repo=mlx_repo, cache_dir=cache_dir,
        work_dir=work_dir, patches_dir=patches_dir, offline=offline, jobs=jobs,
        no_wait=no_wait)


for _cmd in _discover():
    cli.add_command(_cmd)


def _os_error(exc: OSError) -> FileSystemError:
    where = exc.filename if exc.filename is not None else "a file"
    return FileSystemError(
        f"cannot use {where}: {exc.strerror or exc}",
        f"{type(exc).__name__} (errno {exc.errno})" if exc.errno else type(exc).__name__,
        "check that the path is a writable folder where one is expected (cache, "
        "work and output folders; --cache-dir, --work-dir, --out) and that the "
        "disk has space")


def main(argv: list[str] | None = None) -> None:
    signals.install()
    try:
        try:
            cli.main(args=argv, prog_name="mlx-builder", standalone_mode=False)
        except OSError as exc:
            raise _os_error(exc) from exc
    except MlxBuilderError as exc:
        err_console.print(exc.render(), markup=False)
        sys.exit(exc.exit_code)
    except Terminated as exc:
        err_console.print(f"terminated by signal {exc.signum}")
        sys.exit(128 + exc.signum)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        err_console.print("aborted")
        sys.exit(130)
    sys.exit(0)
