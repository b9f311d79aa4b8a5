"""``mlx-builder nightly``: the series against upstream main, as CI runs it."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from mlx_builder.commands.options import cuda_option, mlx_ref_option, platform_option, toolchain_option
from mlx_builder.console import console, err_console, print_table
from mlx_builder.errors import RegressionError
from mlx_builder.lists import comma_list
from mlx_builder.settings import Settings
from mlx_builder.verify.nightly import (
    REPORT_JSON,
    REPORT_MD,
    BuildOptions,
    compile_available,
    run_nightly,
)
from mlx_builder.wheelbuild.buildenv import Platform, platform_warning


@click.command("nightly")
@mlx_ref_option(default="main", show_default=True,
                help="Upstream ref to check (fetched first unless --offline).")
@click.option("--targets", default="cuda-sm90,cuda-sm121", show_default=True,
              help="Comma-separated build targets, one wheel each.")
@click.option("--compile/--no-compile", "do_compile", default=None,
              help="Build wheels when the series applies (default: when the toolchain "
                   "exists: Linux for cuda targets with --toolchain pypi/auto, nvcc on "
                   "PATH with system; macOS for metal).")
@toolchain_option(help="CUDA toolchain of the builds, as for `mlx-builder build`: pypi "
                       "(registry packages), system, or auto.")
@cuda_option(help="CUDA major of the registry toolchain (default: what the target needs).")
@platform_option(help="Target platform of the builds: linux-x86_64 or linux-aarch64.")
@click.option("--report-dir", type=click.Path(path_type=Path, file_okay=False),
              default=Path("nightly-report"), show_default=True,
              help=f"Where {REPORT_JSON}, {REPORT_MD} and wheels go.")
@click.option("--previous", type=click.Path(path_type=Path, dir_okay=False),
              default=None,
              help=f"Previous {REPORT_JSON} to compare with (default: the one "
                   "already in --report-dir).")
@click.option("--fail-on-conflict", is_flag=True,
              help="Exit non-zero on any conflict, not only on regressions.")
@click.pass_obj
def command(settings: Settings, mlx_ref: str, targets: str,
            do_compile: bool | None, toolchain: str, cuda_major: int | None,
            platform: Platform | None, report_dir: Path, previous: Path | None,
            fail_on_conflict: bool) -> None:
    """Check, 3-way-probe and (optionally) build the series for upstream main.

    Writes nightly.json and nightly.md; exits 24 on a regression (a patch
    that applied in the previous report now conflicts, or a failed build or
    test), and with --fail-on-conflict on any conflict.
    """
    wanted = list(comma_list(targets))
    options = BuildOptions(toolchain, cuda_major, platform)
    if do_compile is None:
        do_compile = compile_available(wanted, toolchain)
    if do_compile:
        for target in wanted:
            warning = platform_warning(target, options.platform)
            if warning:
                err_console.print(f"warning: {warning}", markup=False)
    report = run_nightly(settings, mlx_ref, wanted, do_compile, report_dir,
                         previous, options)
    table = Table("patch", "state", "where", "refresh", "commits",
                  title=f"nightly: series {report.series} on {report.ref} "
                        f"({report.commit[:9]})")
    for p in report.patches:
        where = ", ".join(f"{c['file']}:{c['line']}" if c["line"] else c["file"]
                          for c in p.conflicts) or p.detail
        table.add_row(Text(p.patch), Text(p.state), Text(where), Text(p.refresh),
                      str(len(p.touched_by)))
    print_table(table)
    for b in report.builds:
        console.print(f"build {b.target}: {b.status} {b.detail}; tests: {b.tests}",
                      markup=False)
    console.print(f"reports: {report_dir / REPORT_JSON}, {report_dir / REPORT_MD}",
                  markup=False)
    if report.regressions:
        failed_builds = [b for b in report.builds if b.status == "failed"]
        raise RegressionError(
            f"{len(report.regressions)} regression(s): "
            + "; ".join(report.regressions),
            f"compared with {report.previous or 'no previous report'}",
            f"read {report_dir / REPORT_MD}; "
            + ("a failed build is not a patch problem until `mlx-builder build` with the "
               "same --toolchain fails too: its log is named above"
               if failed_builds and len(failed_builds) == len(report.regressions)
               else "refresh the patches named there"))
    conflicts = [p for p in report.patches if p.state == "conflicts"]
    if fail_on_conflict and (conflicts or report.error):
        raise RegressionError(
            f"{len(conflicts)} patch(es) conflict with {report.ref}"
            + (f"; {report.error.splitlines()[0]}" if report.error else ""),
            "--fail-on-conflict", f"read {report_dir / REPORT_MD}")
