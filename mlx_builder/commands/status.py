"""`mlx-builder status`: which patches apply to which MLX, and why not."""

from __future__ import annotations

import json

import click

from mlx_builder.commands.options import json_flag, mlx_ref_option, patch_target_option, series_option
from mlx_builder.console import print_table
from mlx_builder.errors import PatchConflictError
from mlx_builder.settings import Settings
from mlx_builder.source.status import render_table, status_report, to_json


@click.command("status")
@mlx_ref_option(default=None,
                help="One MLX ref (default: every series at its base, and main).")
@series_option(help="Only this series (or force it for --mlx).")
@patch_target_option()
@json_flag(help="Machine-readable output.")
@click.pass_obj
def command(settings: Settings, mlx_ref: str | None, series_name: str | None, target: str,
            as_json: bool) -> None:
    """Per patch: applies / conflicts (file:line) / already upstream.

    Exits non-zero (code 13) when any patch conflicts.
    """
    reports = status_report(settings, mlx_ref, series_name=series_name,
                            target=target)
    if as_json:
        click.echo(json.dumps(to_json(reports, settings.mlx_repo), indent=2))
    else:
        print_table(render_table(reports))
    bad = [(r, s) for r in reports for s in r.statuses if s.state == "conflicts"]
    if bad:
        raise PatchConflictError(
            f"{len(bad)} patch(es) conflict: " + "; ".join(
                f"{r.series.name}@{r.ref.ref}: {s.detail}" for r, s in bad),
            "see the table above",
            "rebase those patches and re-export the series",
            conflicts=[c for _, s in bad for c in s.conflicts])
