"""``mlx-builder index``: a PEP 503 simple index and JSON listing of a wheelhouse."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from mlx_builder.console import console
from mlx_builder.prebuilt.wheelindex import write_index
from mlx_builder.settings import Settings


@click.command("index")
@click.argument("wheelhouse", type=click.Path(path_type=Path, file_okay=False))
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False),
              default=None, help="Index root (default: the wheelhouse itself).")
@click.option("--base-url", default=None,
              help="Absolute URL the wheels are served from (default: links "
                   "relative to the index pages).")
@click.pass_obj
def command(settings: Settings, wheelhouse: Path, out_dir: Path | None,
            base_url: str | None) -> None:
    """Write simple/ (PEP 503) and index.json over the wheels in WHEELHOUSE.

    Serve the root over HTTP, or use it as a file:// URL:
    `pip install --index-url file:///ROOT/simple/ mlx` or
    `mlx-builder install --index ROOT`.
    """
    result = write_index(wheelhouse, out_dir, base_url, no_wait=settings.no_wait)
    table = Table("target", "archs", "upstream", title="indexed wheels")
    table.add_column("wheel", overflow="fold")
    for entry in result.entries:
        man = entry.manifest or {}
        archs = man.get("archs") or []
        table.add_row(str(man.get("target", "(no manifest)")),
                      ",".join(archs) if isinstance(archs, list) else str(archs),
                      str(man.get("upstream_commit", ""))[:12], entry.filename)
    console.print(table)
    console.print(f"simple index: {result.simple}/")
    console.print(f"listing:      {result.listing}")
