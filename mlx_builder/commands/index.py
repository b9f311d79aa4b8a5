"""``mlx-builder index``: a PEP 503 simple index and JSON listing of a wheelhouse."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from mlx_builder.console import console, print_table
from mlx_builder.prebuilt.wheelindex import write_index
from mlx_builder.settings import Settings


@click.command("index")
@click.argument("wheelhouse", type=click.Path(path_type=Path, file_okay=False))
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False),
              default=None, help="Index root (default: the wheelhouse itself).")
@click.option("--base-url", default=None,
              help="Absolute URL the wheels are served from (default: links "
                   "relative to the index pages).")
@click.option("--keep", is_flag=True,
              help="Keep the wheels the existing index.json under the root lists "
                   "(a release adds to the index instead of replacing it).")
@click.pass_obj
def command(settings: Settings, wheelhouse: Path, out_dir: Path | None,
            base_url: str | None, keep: bool) -> None:
    """Write one PEP 503 index per variant (ROOT/<variant>/simple/, with a
    constraints.txt that pins its newest mlx) and index.json over the wheels
    in WHEELHOUSE.

    Serve the root over HTTP, or use it as a file:// URL:
    `pip install -c ROOT/cu13-sm121/constraints.txt --extra-index-url
    ROOT/cu13-sm121/simple/ mlx` or `mlx-builder install --index ROOT`.
    """
    result = write_index(wheelhouse, out_dir, base_url, keep=keep, no_wait=settings.no_wait)
    table = Table("variant", "target", "upstream", "wheel", title="indexed wheels")
    for entry in result.entries:
        man = entry.manifest or {}
        table.add_row(entry.variant, str(man.get("target", "(no manifest)")),
                      str(man.get("upstream_commit", ""))[:12], Text(entry.filename))
    print_table(table)
    for name, simple in result.variants.items():
        console.print(f"{name}: {simple}/", markup=False)
    console.print(f"listing: {result.listing}"
                  + (f" ({result.kept} wheel(s) kept from the earlier listing)" if keep else ""),
                  markup=False)
