"""``mlx-builder install``: pick the prebuilt wheel that fits this host, pip it."""

from __future__ import annotations

import json
import sys
import tempfile
import time

import click
from rich.table import Table
from rich.text import Text

from mlx_builder.commands.options import json_flag, python_option
from mlx_builder.console import console, print_table
from mlx_builder.errors import ConflictingPackageError, HashMismatchError, WheelError
from mlx_builder.prebuilt.install import (
    PIP_HASH_MISMATCH,
    choose_wheel,
    detect_host,
    driver_error,
    expected_sha256,
    fetch_verified,
    hashed_pip_commands,
    installed_backends,
)
from mlx_builder.prebuilt.variants import variant
from mlx_builder.prebuilt.wheelindex import load_listing
from mlx_builder.process import StepRunner, first_error_line
from mlx_builder.settings import Settings


@click.command("install")
@click.option("--index", "index", default=None, metavar="URL|DIR",
              help="Index root written by `mlx-builder index` (directory, file:// or "
                   "http(s) URL; a variant's URL also works). Default: MLX_BUILDER_INDEX, "
                   "`index` in the config, else the project's published index.")
@click.option("--mlx", default=None,
              help="Version (0.32.1), specifier (>=0.32), upstream commit "
                   "prefix or series name; default: the newest that fits.")
@click.option("--backend", type=click.Choice(["auto", "cuda", "metal", "cpu"]),
              default="auto", show_default=True,
              help="Which kind of wheel; auto follows the detected GPU.")
@python_option(help="Interpreter to install into (default: this one).")
@click.option("--pip-arg", "pip_args", multiple=True,
              help="Extra argument for pip (repeatable), e.g. --pip-arg=--no-deps.")
@click.option("--replace-upstream", is_flag=True,
              help="Uninstall upstream's mlx-cuda-*, mlx-cpu or mlx-metal first (they own "
                   "the files our wheel writes; without this flag install refuses, exit 41).")
@click.option("--dry-run", is_flag=True,
              help="Show the host, the choice and why, and every rejected wheel.")
@json_flag(help="Print the choice as JSON.")
@click.pass_obj
def command(settings: Settings, index: str | None, mlx: str | None, backend: str,
            python: str | None, pip_args: tuple[str, ...], replace_upstream: bool,
            dry_run: bool, as_json: bool) -> None:
    """Detect platform, GPU and driver, choose the matching wheel and pip install it.

    Refuses to install over upstream's split backend packages (exit 41) and
    wheels whose CUDA major the driver cannot run (exit 40).
    """
    index = index or settings.index
    host = detect_host(python=python)
    listing = load_listing(index, offline=settings.offline)
    choice = choose_wheel(((e, listing.locate(e)) for e in listing.wheels), host,
                          None if backend == "auto" else backend, mlx)
    if as_json:
        print(json.dumps(choice.to_json(), indent=2))
    else:
        console.print(f"host:   {host.describe()}", markup=False)
        console.print(f"index:  {listing.source} ({len(listing.wheels)} wheels)",
                      markup=False)
        table = Table("wheel", "verdict", "reason", title="candidates")
        # whole names: cu13.90a and cu13.121a must not look alike (the reason folds)
        table.columns[0].no_wrap = True
        table.columns[0].min_width = max((len(c.filename) for c in choice.candidates), default=0)
        table.columns[2].overflow = "fold"
        for cand in choice.candidates:
            verdict = ("chosen" if cand is choice.chosen
                       else "ok" if cand.accepted else "rejected")
            table.add_row(Text(cand.filename), verdict, Text(cand.reason))
        print_table(table)
    driver = driver_error(choice)
    if driver is not None:
        raise driver
    if choice.chosen is None:
        raise WheelError(f"no wheel in {index} fits this host ({choice.backend})",
                         f"host: {host.describe()}",
                         "see the reasons above; build one with `mlx-builder "
                         "build`, or pass --backend/--mlx")
    name = variant(choice.chosen.entry.get("manifest"))
    simple, pins = listing.pip_sources(name)
    if not as_json:
        console.print(f"choice: {choice.chosen.filename}\n  why:  {choice.chosen.reason}\n"
                      f"  pip:  pip install -c {pins} --extra-index-url {simple} mlx",
                      markup=False)
    target = python or sys.executable  # the interpreter pip installs into
    upstream = installed_backends(target)
    if upstream and not replace_upstream:
        names = ", ".join(f"{n} {v}" for n, v in upstream)
        raise ConflictingPackageError(
            f"upstream's {names} is installed in {target}",
            "it owns mlx/lib/libmlx.so (or mlx.metallib), which our wheel writes too: "
            "the two would overwrite each other",
            "pass --replace-upstream to uninstall it first, or use a fresh venv")
    if dry_run:
        return
    entry = choice.chosen.entry
    sha256 = expected_sha256(entry)
    runner = StepRunner(settings.logs_dir / f"install-{time.strftime('%Y%m%d-%H%M%S')}")
    if upstream:
        gone = [n for n, _ in upstream]
        runner.run("pip-uninstall-upstream", [target, "-m", "pip", "uninstall",
                                              "-y", *gone], error_cls=WheelError)
        console.print(f"uninstalled {', '.join(gone)}", markup=False)
    with tempfile.TemporaryDirectory(prefix="mlxb-install-") as tmp:
        wheel = fetch_verified(choice.chosen.location, sha256, tmp)
        project = entry.get("project") or choice.chosen.filename.split("-")[0]
        commands = hashed_pip_commands(target, wheel, sha256, project,
                                       f"{tmp}/requirements.txt", pip_args, settings.offline)
        for step, cmd in zip(("pip-install", "pip-install-requires"), commands):
            result = runner.run(step, cmd, error_cls=WheelError, check=False)
            log = result.log_path.read_text(errors="replace")
            if result.returncode != 0 and PIP_HASH_MISMATCH in log:
                raise HashMismatchError(
                    f"pip refused {choice.chosen.filename}: its sha256 is not {sha256}",
                    f"log: {result.log_path}",
                    "the wheel changed while it was installed; run the command again")
            if result.returncode != 0:
                raise WheelError(f"step '{step}' failed with exit code {result.returncode}: "
                                 f"{first_error_line(log)}", f"full log: {result.log_path}",
                                 "check the pip log; --pip-arg passes options to pip")
    console.print(f"installed {choice.chosen.filename} (sha256 {sha256[:16]}… checked; "
                  f"log: {result.log_path})", markup=False)
    console.print(f"to keep it through `pip install -U`, pass `-c {pins}` "
                  f"(or set PIP_CONSTRAINT={pins})", markup=False)
