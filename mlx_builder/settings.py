"""Frozen, typed settings.

Precedence: command-line option > environment variable > config file > default.
Nothing here names a path of any particular machine: mirrors, dependency
directories and caches come from the user.

Config file (TOML), default ``~/.config/mlx-builder/config.toml`` or
``$MLX_BUILDER_CONFIG`` (every key: docs/commands.md, Configuration)::

    mlx_repo = "/srv/mirrors/mlx.git"      # URL or local path
    index = "https://wheels.example.net/"  # `install`'s prebuilt wheel index
    cache_dir = "~/.cache/mlx-builder"
    work_dir = "~/mlx-builder/work"
    jobs = 16

    [dep_sources]                           # FetchContent name -> repo or dir
    nanobind = "/srv/mirrors/nanobind.git"
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from mlx_builder.errors import ConfigError

DEFAULT_MLX_REPO = "https://github.com/ml-explore/mlx"
# Where the release workflow publishes the prebuilt wheels (GitHub Pages of
# the project's repository): `mlx-builder install` reads it unless --index,
# MLX_BUILDER_INDEX or `index` in the config names another.
DEFAULT_INDEX = "https://mlx-builder.github.io/mlx-builder/"
ENV_PREFIX = "MLX_BUILDER_"
ENV_DEP_PREFIX = "MLX_BUILDER_DEP_"


def dep_env_var(name: str) -> str:
    """The environment variable that names a local source for dependency
    ``name`` (its FetchContent name, e.g. robin-map -> MLX_BUILDER_DEP_ROBIN_MAP)."""
    return ENV_DEP_PREFIX + name.upper().replace("-", "_")


def _package_patches_dir() -> Path:
    here = Path(__file__).resolve().parent
    bundled = here / "_patches"
    if bundled.is_dir():
        return bundled
    return here.parent / "patches"


def _default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mlx-builder"


def _default_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "mlx-builder" / "config.toml"


@dataclass(frozen=True)
class Settings:
    mlx_repo: str = DEFAULT_MLX_REPO
    index: str = DEFAULT_INDEX            # prebuilt wheels for `install`
    cache_dir: Path = field(default_factory=_default_cache)
    work_dir: Path | None = None
    patches_dir: Path = field(default_factory=_package_patches_dir)
    log_dir: Path | None = None
    jobs: int = field(default_factory=lambda: os.cpu_count() or 2)
    offline: bool = False
    no_wait: bool = False                 # fail at once on a lock another run holds
    dep_sources: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({}))
    config_path: Path | None = None

    # Derived locations. A field set explicitly wins over these.
    @property
    def mirror_dir(self) -> Path:
        return self.cache_dir / "mirrors" / "mlx.git"

    @property
    def deps_dir(self) -> Path:
        return self.cache_dir / "deps"

    @property
    def worktrees_dir(self) -> Path:
        return self.work_dir or (self.cache_dir / "work")

    @property
    def logs_dir(self) -> Path:
        return self.log_dir or (self.cache_dir / "logs")

    def with_overrides(self, **overrides: Any) -> Settings:
        """A copy with the given non-None values replaced."""
        clean = {k: v for k, v in overrides.items() if v is not None}
        return replace(self, **_coerce(clean))


# More compile jobs than any machine has cores for would only exhaust memory
# and process slots.
MAX_JOBS = 1024

_PATH_FIELDS = {"cache_dir", "work_dir", "patches_dir", "log_dir", "config_path"}
_BOOL_FIELDS = {"offline", "no_wait"}
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off", ""}


def _bad(key: str, value: Any, want: str) -> ConfigError:
    return ConfigError(f"setting {key} must be {want}, got {value!r}",
                       "from the config file, the environment or an option",
                       "fix the value (docs/commands.md, Configuration, gives "
                       "every setting's format)")


def _coerce(values: Mapping[str, Any]) -> dict[str, Any]:
    known = {f.name for f in fields(Settings)}
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(
                f"unknown setting {key!r}",
                f"known settings are: {', '.join(sorted(known))}",
                "fix the name in your config file or environment",
            )
        if key in _PATH_FIELDS and value is not None:
            if not isinstance(value, (str, os.PathLike)) or not str(value).strip():
                raise _bad(key, value, "a path (a non-empty string)")
            try:
                value = Path(str(value)).expanduser()
            except RuntimeError as exc:  # "~user" of a user that does not exist
                raise _bad(key, value, f"a path whose ~ expands ({exc})") from None
        elif key == "jobs":
            if isinstance(value, bool) or isinstance(value, (float, list, dict)):
                raise _bad(key, value, "an integer")
            try:
                value = int(value)
            except (TypeError, ValueError):
                raise _bad(key, value, "an integer") from None
            if not 1 <= value <= MAX_JOBS:
                raise _bad(key, value, f"from 1 to {MAX_JOBS}")
        elif key in _BOOL_FIELDS:
            if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
                value = value.strip().lower() in _TRUE
            elif not isinstance(value, bool):
                raise _bad(key, value, "true or false")
        elif key == "dep_sources":
            if not isinstance(value, Mapping) or not all(
                    isinstance(k, str) and isinstance(v, str) and v.strip()
                    for k, v in value.items()):
                raise _bad(key, value, "a table of name = \"repo or folder\" strings")
            value = MappingProxyType({str(k).lower(): str(v)
                                      for k, v in dict(value).items()})
        elif key in ("mlx_repo", "index"):
            if not isinstance(value, str) or not value.strip():
                raise _bad(key, value, "a URL or a path")
            value = str(value).strip()
        out[key] = value
    return out


def _from_file(path: Path) -> dict[str, Any]:
    try:
        # A UTF-8 byte order mark (some editors write one) is not TOML's.
        text = path.read_bytes().removeprefix(b"\xef\xbb\xbf").decode("utf-8")
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"cannot parse config file {path}", str(exc),
            "fix the TOML syntax or point MLX_BUILDER_CONFIG elsewhere",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}",
                          getattr(exc, "strerror", None) or str(exc),
                          "fix its permissions or point MLX_BUILDER_CONFIG elsewhere"
                          ) from None
    if "config_path" in data:
        raise ConfigError(f"config file {path} sets config_path",
                          "the config file cannot name another config file",
                          "remove the key")
    return data


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    simple = {
        "MLX_REPO": "mlx_repo",
        "INDEX": "index",
        "CACHE": "cache_dir",
        "WORK": "work_dir",
        "PATCHES": "patches_dir",
        "LOGS": "log_dir",
        "JOBS": "jobs",
        "OFFLINE": "offline",
        "NO_WAIT": "no_wait",
    }
    for suffix, key in simple.items():
        value = env.get(ENV_PREFIX + suffix)
        if value is None:
            continue
        if key not in _BOOL_FIELDS:
            _not_blank(ENV_PREFIX + suffix, value)
        out[key] = value
    deps = {name[len(ENV_DEP_PREFIX):].lower(): _not_blank(name, value)
            for name, value in env.items()
            if name.startswith(ENV_DEP_PREFIX)}
    if deps:
        out["dep_sources"] = deps
    return out


def _not_blank(name: str, value: str) -> str:
    """A set variable is a setting: empty or blank is an error, never a
    silent "unset" (a script's ``VAR=$UNSET_DIR`` would otherwise fall back
    to the default folder). Booleans are the exception: empty is false."""
    if not value.strip():
        raise ConfigError(f"{name} is set but {'empty' if not value else 'blank'}",
                          "an empty or blank variable names no value",
                          f"unset {name} to use the default, or give it a value")
    return value


def load_settings(env: Mapping[str, str] | None = None,
                  config_path: Path | None = None,
                  **overrides: Any) -> Settings:
    """Settings from defaults, then config file, then environment, then options."""
    env = os.environ if env is None else env
    explicit = config_path
    if explicit is None and "MLX_BUILDER_CONFIG" in env:
        _not_blank("MLX_BUILDER_CONFIG", env["MLX_BUILDER_CONFIG"])
        try:
            explicit = Path(env["MLX_BUILDER_CONFIG"]).expanduser()
        except RuntimeError as exc:  # "~user" of a user that does not exist
            raise ConfigError(
                f"MLX_BUILDER_CONFIG={env['MLX_BUILDER_CONFIG']!r}: its ~ does not expand",
                str(exc), "name the config file by a full path") from None
    path = explicit or _default_config_path()
    merged: dict[str, Any] = {}
    if path.exists() and not path.is_dir():
        merged.update(_coerce(_from_file(path)))      # the file's own values checked
        merged["config_path"] = path
    elif explicit is not None:
        raise ConfigError(
            f"config file {path} does not exist" if not path.exists()
            else f"config file {path} is not a file",
            "it was named by --config or MLX_BUILDER_CONFIG",
            "create it or unset MLX_BUILDER_CONFIG",
        )
    env_values = _from_env(env)
    if not isinstance(merged.get("dep_sources", {}), Mapping):
        raise _bad("dep_sources", merged["dep_sources"],
                   "a table of name = \"repo or folder\" strings")
    file_deps = dict(merged.get("dep_sources", {}))
    file_deps.update(env_values.pop("dep_sources", {}))
    merged.update(env_values)
    if file_deps:
        merged["dep_sources"] = file_deps
    merged.update({k: v for k, v in overrides.items() if v is not None})
    return Settings(**_coerce(merged))
