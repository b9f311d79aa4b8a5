"""`mlx-builder routes`: the CUDA SDPA routing table of an installed MLX."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from mlx_builder.commands.options import python_option
from mlx_builder.commands.test import parse_env
from mlx_builder.console import console, print_table, progress
from mlx_builder.lists import comma_ints, comma_list
from mlx_builder.process import StepRunner
from mlx_builder.settings import Settings
from mlx_builder.verify.routes import (
    CASE_TAG,
    DTYPES,
    PATH_ENV,
    PROBE_MASKS,
    TRACE_ENV,
    RouteGrid,
    render_table,
    run_probe,
)

_DEFAULT = RouteGrid()


def _joined(values: tuple) -> str:
    return ",".join(str(v) for v in values)


@click.command("routes")
@python_option(help="Interpreter whose MLX is probed (default: this one).")
@click.option("--env", "env_pairs", multiple=True, metavar="NAME=VALUE",
              help=f"Environment for the probe, e.g. {PATH_ENV}=fallback (repeatable); "
                   f"{TRACE_ENV}=1 is always set.")
@click.option("--json", "json_out", type=click.Path(path_type=Path, dir_okay=False),
              default=None, help="Also write the routes, probe errors and log path as JSON.")
@click.option("--dims", default=_joined(_DEFAULT.dims), show_default=True, help="Head dims D.")
@click.option("--dtypes", default=_joined(_DEFAULT.dtypes), show_default=True,
              help=f"Comma list of {', '.join(DTYPES)}.")
@click.option("--qlens", default=_joined(_DEFAULT.qlens), show_default=True,
              help="Query lengths qL (cases with qL > kL are left out).")
@click.option("--klens", default=_joined(_DEFAULT.klens), show_default=True,
              help="Key lengths kL.")
@click.option("--masks", default=_joined(_DEFAULT.masks), show_default=True,
              help=f"Comma list of {', '.join(PROBE_MASKS)} (bool and additive are "
                   "array masks).")
@click.pass_obj
def command(settings: Settings, python: str | None, env_pairs: tuple[str, ...],
            json_out: Path | None, dims: str, dtypes: str, qlens: str, klens: str,
            masks: str) -> None:
    """Run one SDPA call per case (head dim x dtype x qL x kL x mask) in
    --python's MLX with the routing trace on and print which path each case
    took (cudnn, tiled, decode, vector, fallback) and why. Needs a CUDA GPU
    and an MLX built with the routing trace."""
    grid = RouteGrid(dims=comma_ints(dims, "dims"), dtypes=comma_list(dtypes),
                     qlens=comma_ints(qlens, "qlens"), klens=comma_ints(klens, "klens"),
                     masks=comma_list(masks))
    runner = StepRunner(settings.logs_dir / f"routes-{time.strftime('%Y%m%d-%H%M%S')}")
    with progress("probing SDPA routes", total=grid.case_count()) as (prog, task):
        def seen(line: str) -> None:
            if line.startswith(CASE_TAG):
                prog.update(task, advance=1, description=line[len(CASE_TAG):].strip())
        report = run_probe(runner, python or sys.executable, grid, parse_env(env_pairs),
                           on_line=seen)
    print_table(render_table(report))
    for failure in report.output.errors:
        console.print(f"probe error: {failure.case}: {failure.error}", markup=False)
    console.print(f"{len(report.routes)} distinct routes from {len(report.output.routes)} "
                  f"routing lines, {len(report.output.cases)} cases, "
                  f"{len(report.output.errors)} probe errors; log: {report.log_path}",
                  markup=False)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
        console.print(f"json: {json_out}", markup=False)
