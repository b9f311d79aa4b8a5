"""`mlx-builder deps`: MLX's FetchContent dependencies and the local cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from mlx_builder.commands.options import json_flag, mlx_ref_option, series_option, target_spec_option
from mlx_builder.console import console, print_table
from mlx_builder.errors import DepsError
from mlx_builder.settings import Settings
from mlx_builder.wheelbuild.bundle import prepare
from mlx_builder.wheelbuild.deps import cache_path, needed, pin, resolve
from mlx_builder.wheelbuild.targets import parse_targets


@click.command("deps")
@mlx_ref_option(default=None)
@series_option()
@click.option("--source", "source_dir", type=click.Path(path_type=Path, file_okay=False),
              default=None, help="Read this MLX source directory instead.")
@target_spec_option(default="cuda", show_default=True,
                    help="Which build's dependencies (cuda needs the most).")
@click.option("--list", "list_only", is_flag=True, help="Only show them; fill nothing.")
@click.option("--refresh", is_flag=True, help="Refill cache entries that exist.")
@json_flag()
@click.pass_obj
def command(settings: Settings, mlx_ref: str | None, series_name: str | None,
            source_dir: Path | None, target_spec: str, list_only: bool, refresh: bool,
            as_json: bool) -> None:
    """Read FetchContent_Declare from the tree's CMake files and fill the cache
    (<cache>/deps) from the upstream URLs, or from local sources named with
    MLX_BUILDER_DEP_<NAME>=PATH[@REF] / config [dep_sources]."""
    if bool(mlx_ref) == bool(source_dir):
        raise DepsError("name exactly one source: --mlx REF or --source DIR")
    if source_dir:
        path, targets = Path(source_dir), parse_targets(target_spec, source=source_dir)
    else:
        assert mlx_ref is not None  # exactly one source, checked above
        tree, targets = prepare(settings, mlx_ref, target_spec, series_name=series_name)
        path = Path(tree.path)
    decls, _, _ = needed(path, targets)
    if list_only:
        rows: list[dict[str, Any]] = [{"name": d.name, "pin": pin(d), "needed": need,
                 "source": d.git_repository or d.url, "declared_in": f"{d.file}:{d.line}",
                 "condition": d.condition_text(), "cache": str(cache_path(settings, d))}
                for d, need in decls]
        if as_json:
            click.echo(json.dumps(rows, indent=2))
            return
        table = Table("name", "pin", "needed", "declared in", "condition")
        for r in rows:
            need = {True: "yes", False: "no", None: "maybe"}[r["needed"]]
            table.add_row(r["name"], r["pin"], need, r["declared_in"], r["condition"])
        print_table(table)
        return
    plan = resolve(settings, path, targets, refresh=refresh)
    if as_json:
        click.echo(json.dumps({"target": targets.spec, "deps_dir": str(settings.deps_dir),
                               "deps": [{**d.to_json(), "path": str(d.path)} for d in plan.deps],
                               "disabled": list(plan.disabled),
                               "skipped": list(plan.skipped)}, indent=2))
        return
    table = Table("name", "pin", "from", "ref", "path", title=f"dependencies for {targets.spec}")
    for d in plan.deps:
        table.add_row(d.name, d.pin, d.via, (d.ref or "") + (f" {d.commit[:12]}" if d.commit else ""),
                      str(d.path))
    print_table(table)
    for line in plan.skipped:
        console.print(f"  skipped {line}", markup=False)
    for opt in plan.disabled:
        console.print(f"  a build would pass -D{opt}=OFF (its dependency is unavailable)",
                      markup=False)
