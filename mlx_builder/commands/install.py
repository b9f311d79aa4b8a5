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
from mlx_builder.console import console
from mlx_builder.errors import HashMismatchError, WheelError
from mlx_builder.prebuilt.install import (
    PIP_HASH_MISMATCH,
    choose_wheel,
    detect_host,
    expected_sha256,
    fetch_verified,
    hashed_pip_commands,
)
from mlx_builder.prebuilt.wheelindex import load_listing
from mlx_builder.process import StepRunner, first_error_line
from mlx_builder.settings import Settings


@click.command("install")
@click.option("--index", "index", required=True, metavar="URL|DIR",
              help="Index root written by `mlx-builder index` (directory, "
                   "file:// or http(s) URL; its simple/ URL also works).")
@click.option("--mlx", default=None,
              help="Version (0.32.1), specifier (>=0.32), upstream commit "
                   "prefix or series name; default: the newest that fits.")
@click.option("--backend", type=click.Choice(["auto", "cuda", "metal", "cpu"]),
              default="auto", show_default=True,
              help="Which kind of wheel; auto follows the detected GPU.")
@python_option(help="Interpreter to install into (default: this one).")
@click.option("--pip-arg", "pip_args", multiple=True,
              help="Extra argument for pip (repeatable), e.g. --pip-arg=--no-deps.")
@click.option("--dry-run", is_flag=True,
              help="Show the host, the choice and why, and every rejected wheel.")
@json_flag(help="Print the choice as JSON.")
@click.pass_obj
def command(settings: Settings, index: str, mlx: str | None, backend: str,
            python: str | None, pip_args: tuple[str, ...], dry_run: bool,
            as_json: bool) -> None:
    """Detect platform and GPU, choose the matching wheel and pip install it."""
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
        for cand in choice.candidates:
            verdict = ("chosen" if cand is choice.chosen
                       else "ok" if cand.accepted else "rejected")
            table.add_row(Text(cand.filename), verdict, Text(cand.reason))
        console.print(table)
    if choice.chosen is None:
        raise WheelError(f"no wheel in {index} fits this host ({choice.backend})",
                         f"host: {host.describe()}",
                         "see the reasons above; build one with `mlx-builder "
                         "build`, or pass --backend/--mlx")
    if not as_json:
        console.print(f"choice: {choice.chosen.filename}\n  why:  {choice.chosen.reason}",
                      markup=False)
    if dry_run:
        return
    entry = choice.chosen.entry
    sha256 = expected_sha256(entry)
    runner = StepRunner(settings.logs_dir / f"install-{time.strftime('%Y%m%d-%H%M%S')}")
    with tempfile.TemporaryDirectory(prefix="mlxb-install-") as tmp:
        wheel = fetch_verified(choice.chosen.location, sha256, tmp)
        project = entry.get("project") or choice.chosen.filename.split("-")[0]
        commands = hashed_pip_commands(python or sys.executable, wheel, sha256, project,
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
