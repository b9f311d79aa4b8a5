"""`mlx-builder export`: regenerate patches/<series>/ from a work-tree branch."""

from __future__ import annotations

import click

from mlx_builder.console import console, err_console
from mlx_builder.export import export_series


@click.command("export")
@click.option("--series", "series_name", required=True,
              help="Series to regenerate (a name from patches/index.toml).")
@click.option("--from", "source", required=True,
              help="Work tree path, or a branch of a work tree made by apply.")
@click.option("--check", is_flag=True,
              help="Write nothing; exit non-zero (20) if disk and branch differ.")
@click.pass_obj
def command(settings, series_name, source, check) -> None:
    """Write one `git format-patch` file per commit since the recorded base.

    Output is deterministic: no commit hashes, stats, signatures or numbering
    that change between exports. index.toml is never rewritten; entries for
    new patches are printed for you to add.
    """
    result = export_series(settings, series_name, source, check=check)
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
