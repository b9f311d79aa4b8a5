"""Options and argument parsing shared by the commands: ``--mlx`` and comma
lists (``--targets a,b``, ``--dims 256,512``), parsed one way everywhere."""

from __future__ import annotations

from typing import Any, Callable, Iterable

import click

from mlx_builder.errors import ConfigError

MLX_REF_HELP = "MLX version (0.32.1), main, a tag or a commit."


def mlx_ref_option(help: str = MLX_REF_HELP, **kw: Any) -> Callable:
    """``--mlx REF`` into the ``mlx_ref`` parameter."""
    return click.option("--mlx", "mlx_ref", help=help, **kw)


def comma_list(text: str | None) -> tuple[str, ...]:
    """``"a, b,,c"`` -> ``("a", "b", "c")``; None or blank -> ``()``."""
    return tuple(x.strip() for x in (text or "").split(",") if x.strip())


def comma_ints(text: str | None, what: str = "sizes") -> tuple[int, ...]:
    """A non-empty comma list of integers; anything else is a ConfigError."""
    items = comma_list(text)
    try:
        values = tuple(int(x) for x in items)
    except ValueError:
        raise ConfigError(f"{text!r} is not a comma list of integers",
                          f"--{what} takes e.g. 256,512") from None
    if not values:
        raise ConfigError(f"an empty list of {what}", f"--{what} takes e.g. 256,512")
    return values


def known_items(items: Iterable[str], known: Iterable[str], what: str) -> tuple[str, ...]:
    """``items`` if each is one of ``known``, else a ConfigError naming them."""
    items, known = tuple(items), tuple(known)
    unknown = [x for x in items if x not in known]
    if unknown:
        raise ConfigError(f"unknown {what}(s): {', '.join(unknown)}",
                          f"known: {', '.join(known)}")
    return items
