"""Options shared by the commands: ``--mlx``. Comma lists (``--targets a,b``,
``--dims 256,512``) are parsed by ``mlx_builder.lists``, which the library
modules use too."""

from __future__ import annotations

from typing import Any, Callable

import click

MLX_REF_HELP = "MLX version (0.32.1), main, a tag or a commit."


def mlx_ref_option(help: str = MLX_REF_HELP, **kw: Any) -> Callable:
    """``--mlx REF`` into the ``mlx_ref`` parameter."""
    return click.option("--mlx", "mlx_ref", help=help, **kw)
