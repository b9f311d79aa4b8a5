"""Lists written as text, parsed one way everywhere: the commands' comma
options (``--targets a,b``, ``--dims 256,512``), target specs, variant and
environment values, and the looser lists a manifest may hold.

Neutral ground: library modules and the commands both use it (the CLI
layer, ``commands/``, is never imported by the library).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from mlx_builder.errors import ConfigError

_LOOSE = re.compile(r"[,;\s]+")


def comma_list(text: str | None) -> tuple[str, ...]:
    """``"a, b,,c"`` -> ``("a", "b", "c")``; None or blank -> ``()``."""
    return tuple(x.strip() for x in (text or "").split(",") if x.strip())


def loose_list(text: str | None) -> tuple[str, ...]:
    """Items between commas, semicolons (CMake lists) or whitespace:
    ``"90a;121a, 80"`` -> ``("90a", "121a", "80")``."""
    return tuple(x for x in _LOOSE.split(text or "") if x)


def comma_ints(text: str | None, what: str = "sizes") -> tuple[int, ...]:
    """A non-empty comma list of integers; anything else is a ConfigError
    (``what`` names the option: ``--dims``)."""
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
