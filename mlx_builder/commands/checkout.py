"""`mlx-builder checkout`: fetch the mirror; optionally a clean work tree."""

from __future__ import annotations

from pathlib import Path

import click

from mlx_builder.commands.options import mlx_ref_option
from mlx_builder.console import console
from mlx_builder.settings import Settings
from mlx_builder.source import gitops
from mlx_builder.source.apply import checkout_clean


@click.command("checkout")
@mlx_ref_option(default=None, help="Create a clean work tree (no patches) at this ref.")
@click.option("--dest", type=click.Path(path_type=Path), default=None,
              help="Work tree directory (default: <work dir>/<ref>-clean).")
@click.pass_obj
def command(settings: Settings, mlx_ref: str | None, dest: Path | None) -> None:
    """Clone or fetch the cached MLX mirror; with --mlx, a clean work tree."""
    repo = gitops.ensure_mirror(settings)
    console.print(f"mirror: {repo.common_dir}"
                  + (" (offline: not fetched)" if settings.offline else ""))
    if "main" in gitops.branch_names(repo):
        main = gitops.resolve_ref(repo, "main")
        console.print(f"main:   {main.commit} (version {main.version or '?'})")
    tags = gitops.tag_names(repo)
    console.print(f"tags:   {len(tags)}")
    if mlx_ref is None:
        return
    path, resolved = checkout_clean(settings, mlx_ref, dest)
    console.print(f"work tree: {path}")
    console.print(f"at:        {resolved.label()} {resolved.commit} "
                  f"(version {resolved.version or '?'})")
