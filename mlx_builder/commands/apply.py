"""`mlx-builder apply`: a work tree of MLX with the patch series applied."""

from __future__ import annotations

import json
from pathlib import Path

import click

from mlx_builder.commands.options import json_flag, mlx_ref_option, patch_target_option, series_option
from mlx_builder.console import console
from mlx_builder.settings import Settings
from mlx_builder.source.apply import prepare_tree


@click.command("apply")
@mlx_ref_option(required=True)
@series_option(help="Force a series (default: chosen from patches/index.toml).")
@patch_target_option(help="Which patches: cuda, metal, cpu (common only) or all.")
@click.option("--dest", type=click.Path(path_type=Path), default=None,
              help="Work tree directory (default: <work dir>/<ref>-<target>).")
@json_flag()
@click.pass_obj
def command(settings: Settings, mlx_ref: str, series_name: str | None, target: str,
            dest: Path | None, as_json: bool) -> None:
    """Check every patch, then create a work tree with the series as commits.

    Nothing is written when any patch fails to apply; an existing work tree
    with uncommitted changes is never touched.
    """
    tree = prepare_tree(settings, mlx_ref, series_name=series_name,
                        target=target, dest=dest)
    if as_json:
        click.echo(json.dumps({
            "path": str(tree.path), "upstream": tree.upstream_url,
            "ref": tree.ref.ref, "kind": tree.ref.kind,
            "version": tree.ref.version, "base": tree.base_commit,
            "head": tree.head, "branch": tree.branch,
            "series": tree.series.name, "target": tree.target,
            "applied": [p.file for p in tree.applied],
            "skipped": [p.file for p in tree.skipped],
            "previous": tree.previous}, indent=2))
        return
    lines = [
        f"work tree: {tree.path}",
        f"upstream:  {tree.upstream_url}",
        f"base:      {tree.ref.label()} {tree.base_commit} "
        f"(version {tree.ref.version or '?'}; refs/mlx-builder/base)",
        f"series:    {tree.series.name} [{tree.target}] on branch "
        f"{tree.branch}, head {tree.head[:12]}"]
    if not tree.applied:
        lines.append("applied:   (no patches for this target)")
    lines += [f"  applied  {p.label}  [{p.target}]" for p in tree.applied]
    lines += [f"  skipped  {p.label}  ({p.upstream})" for p in tree.skipped]
    if tree.previous:
        lines.append(f"note: the tree's previous commit {tree.previous[:12]} is "
                     f"kept as refs/mlx-builder/kept/{tree.previous} (and "
                     "refs/mlx-builder/previous); every earlier one stays under "
                     "refs/mlx-builder/kept/")
    console.print("\n".join(lines), markup=False)
