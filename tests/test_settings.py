"""settings: defaults < config file < environment < options."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlx_builder.errors import ConfigError
from mlx_builder.settings import DEFAULT_MLX_REPO, Settings, load_settings


def _config(tmp_path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_defaults(isolated_env, tmp_path):
    s = load_settings(env={})
    assert s.mlx_repo == DEFAULT_MLX_REPO
    assert s.cache_dir == tmp_path / "xdg-cache" / "mlx-builder"
    assert s.mirror_dir == s.cache_dir / "mirrors" / "mlx.git"
    assert s.worktrees_dir == s.cache_dir / "work"
    assert s.logs_dir == s.cache_dir / "logs"
    assert (s.patches_dir / "index.toml").is_file()
    assert s.offline is False and s.config_path is None


def test_precedence(isolated_env, tmp_path):
    cfg = _config(tmp_path, 'mlx_repo = "/from/file"\njobs = 3\n'
                            'work_dir = "~/wt"\n[dep_sources]\nFmt = "/file/fmt"\n')
    env = {"MLX_BUILDER_CONFIG": str(cfg), "MLX_BUILDER_MLX_REPO": "/from/env",
           "MLX_BUILDER_DEP_NANOBIND": "/env/nb", "MLX_BUILDER_OFFLINE": "yes"}
    s = load_settings(env=env)
    assert (s.mlx_repo, s.jobs, s.offline) == ("/from/env", 3, True)
    assert s.work_dir == Path("~/wt").expanduser()
    assert dict(s.dep_sources) == {"fmt": "/file/fmt", "nanobind": "/env/nb"}
    assert s.config_path == cfg
    s = load_settings(env=env, mlx_repo="/from/option", jobs=None)
    assert s.mlx_repo == "/from/option" and s.jobs == 3


def test_default_config_location(isolated_env, tmp_path):
    path = tmp_path / "xdg-config" / "mlx-builder" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text('cache_dir = "/c"\n')
    assert load_settings(env={}).cache_dir == Path("/c")


@pytest.mark.parametrize("text, message", [
    ('mlx_rep = "x"\n', "unknown setting 'mlx_rep'"),
    ("jobs = 0\n", "from 1 to 1024"),
    ("jobs = 5000\n", "from 1 to 1024"),
    ('jobs = "many"\n', "must be an integer"),
    ("mlx_repo = \n", "cannot parse"),
])
def test_config_errors(isolated_env, tmp_path, text, message):
    with pytest.raises(ConfigError) as info:
        load_settings(env={}, config_path=_config(tmp_path, text))
    assert message in info.value.what and info.value.exit_code == 10


def test_explicit_missing_config(isolated_env, tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(env={"MLX_BUILDER_CONFIG": str(tmp_path / "nope.toml")})


def test_with_overrides_is_a_copy():
    base = Settings(cache_dir=Path("/a"))
    other = base.with_overrides(cache_dir="/b", work_dir=None)
    assert base.cache_dir == Path("/a") and other.cache_dir == Path("/b")
    assert other.work_dir is None
    with pytest.raises(ConfigError):
        base.with_overrides(colour="red")


def test_dep_env_var_is_what_load_settings_reads(tmp_path):
    from mlx_builder.settings import dep_env_var, load_settings
    name = dep_env_var("robin-map")
    assert name == "MLX_BUILDER_DEP_ROBIN_MAP"
    s = load_settings(env={name: "/src/robin-map.git"},
                      config_path=None)
    assert dict(s.dep_sources) == {"robin_map": "/src/robin-map.git"}


def test_a_config_path_whose_tilde_does_not_expand_is_a_config_error():
    with pytest.raises(ConfigError, match="does not expand") as exc:
        load_settings(env={"MLX_BUILDER_CONFIG": "~no-such-user-mlxb/config.toml"})
    assert exc.value.next_step and exc.value.exit_code == 10


def test_a_config_file_with_a_utf8_byte_order_mark_is_read(isolated_env, tmp_path):
    config = tmp_path / "c.toml"
    config.write_bytes(b"\xef\xbb\xbfjobs = 3\n")
    assert load_settings(env={}, config_path=config).jobs == 3


@pytest.mark.parametrize("name", ["MLX_BUILDER_CACHE", "MLX_BUILDER_WORK", "MLX_BUILDER_JOBS",
                                  "MLX_BUILDER_MLX_REPO", "MLX_BUILDER_DEP_FMT",
                                  "MLX_BUILDER_CONFIG"])
@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_or_blank_variable_is_an_error_not_the_default(isolated_env, name, value):
    with pytest.raises(ConfigError, match=f"{name} is set but") as exc:
        load_settings(env={name: value})
    assert f"unset {name}" in exc.value.next_step


def test_an_empty_boolean_variable_is_false(isolated_env):
    assert load_settings(env={"MLX_BUILDER_OFFLINE": ""}).offline is False
