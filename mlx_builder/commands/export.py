"""`mlx-builder export`: regenerate patches/<series>/ from a work-tree branch."""

from __future__ import annotations

import click

from mlx_builder.commands.options import series_option
from mlx_builder.console import console, err_console
from mlx_builder.settings import Settings
from mlx_builder.source.export import ExportResult, export_many


@click.command("export")
@series_option(
    param="series_names",
    required=True,
    multiple=True,
    help="Series to regenerate (a name from patches/index.toml); "
         "repeat with --from to export several series at once.")
@click.option("--from", "sources", required=True, multiple=True,
              help="Work tree path, or a branch of a work tree made by apply "
                   "(one per --series, in the same order).")
@click.option("--check", is_flag=True,
              help="Write nothing; exit non-zero (20) if disk and branch differ.")
@click.pass_obj
def command(settings: Settings, series_names: tuple[str, ...], sources: tuple[str, ...],
            check: bool) -> None:
    """Write one `git format-patch` file per commit since the recorded base.

    Output is deterministic: no commit hashes, stats, signatures or numbering
    that change between exports. Common patches (patches/common/) are
    written once; trees exported together must agree about them, and a
    changed one must still apply to the other series that list it.
    patches/SHA256SUMS is updated; index.toml is never rewritten: entries
    for new patches are printed for you to add.
    """
    if len(series_names) != len(sources):
        raise click.UsageError("give one --from per --series")
    results = export_many(settings, list(zip(series_names, sources)),
                          check=check)
    for result in results:
        _report(result, check)


def _report(result: ExportResult, check: bool) -> None:
    for warning in result.warnings:
        err_console.print(f"warning: {warning}")
    verb = "up to date" if check else "exported"
    console.print(f"{verb}: {len(result.patches)} patch(es) of series "
                  f"{result.series.name} from {result.tree} "
                  f"({result.base[:9]}..{result.head[:9]}, target {result.target})")
    if not check:
        for name in result.written:
            console.print(f"  wrote     {name}")
        for name in result.missing:
            console.print(f"  missing   {name} (in index.toml, not on the branch: "
                          "remove its entry and file if it was dropped)")
        if result.reordered:
            console.print("  note: branch order differs from index.toml; reorder "
                          "the entries")
        snippet = result.index_snippet()
        if snippet:
            console.print("add to patches/index.toml under the series:\n" + snippet,
                          markup=False)
