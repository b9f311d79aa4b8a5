"""Property tests (hypothesis): the config parser and the patch-file reader
either return a value or raise their own error, for any input; what they
accept, they read back faithfully. (The index parser's are with the index.)"""

from __future__ import annotations

from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from mlx_builder.errors import ConfigError, SeriesError
from mlx_builder.settings import Settings, load_settings
from mlx_builder.source.series import parse_patch, parse_patch_text

FAST = hsettings(max_examples=150, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])

KEYS = ["mlx_repo", "cache_dir", "work_dir", "patches_dir", "log_dir", "jobs", "offline",
        "no_wait", "dep_sources", "config_path", "colour"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**12), st.floats(allow_nan=False),
                    st.text(max_size=20), st.lists(st.integers(), max_size=3))
values = st.one_of(scalars, st.dictionaries(st.text(max_size=8), scalars, max_size=3))


def _toml_value(v) -> str | None:
    """A TOML rendering of ``v`` (None when TOML has no such value)."""
    import json
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v) if not isinstance(v, float) else f"{v!r}".replace("inf", "inf")
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    parts = [f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items() if x is not None]
    return "{" + ", ".join(parts) + "}"


@FAST
@given(st.dictionaries(st.sampled_from(KEYS), values, max_size=5))
def test_config_files_load_or_raise_config_error(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("cfg") / "config.toml"
    lines = [f"{k} = {_toml_value(v)}" for k, v in data.items() if _toml_value(v) is not None]
    path.write_text("\n".join(lines) + "\n")
    try:
        loaded = load_settings(env={}, config_path=path)
    except ConfigError as exc:
        assert exc.what and exc.exit_code == 10
        return
    assert isinstance(loaded, Settings)
    assert isinstance(loaded.offline, bool) and isinstance(loaded.no_wait, bool)
    assert isinstance(loaded.jobs, int) and not isinstance(loaded.jobs, bool) and loaded.jobs >= 1
    assert isinstance(loaded.mlx_repo, str) and loaded.mlx_repo
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in loaded.dep_sources.items())
    if isinstance(data.get("mlx_repo"), str):
        # The loader trims a URL's or path's surrounding whitespace.
        assert loaded.mlx_repo == data["mlx_repo"].strip()
    if isinstance(data.get("jobs"), int) and not isinstance(data["jobs"], bool):
        assert loaded.jobs == data["jobs"]


@FAST
@given(st.binary(max_size=300))
def test_config_bytes_never_crash(tmp_path_factory, blob):
    path = tmp_path_factory.mktemp("cfg") / "config.toml"
    path.write_bytes(blob)
    try:
        load_settings(env={}, config_path=path)
    except ConfigError:
        pass


@FAST
@given(st.dictionaries(st.sampled_from(["MLX_BUILDER_JOBS", "MLX_BUILDER_OFFLINE",
                                        "MLX_BUILDER_NO_WAIT", "MLX_BUILDER_CACHE",
                                        "MLX_BUILDER_DEP_FMT", "MLX_BUILDER_MLX_REPO"]),
                       st.text(alphabet=st.characters(blacklist_categories=["Cs"],
                                                      blacklist_characters="\0"),
                               max_size=12), max_size=4))
def test_environment_loads_or_raises_config_error(tmp_path_factory, env):
    env = {**env, "XDG_CONFIG_HOME": str(tmp_path_factory.mktemp("x"))}
    try:
        s = load_settings(env=env)
    except ConfigError:
        return
    if env.get("MLX_BUILDER_JOBS"):
        assert s.jobs == int(env["MLX_BUILDER_JOBS"])


# ---------------------------------------------------------------- patch files

names = st.text(alphabet=st.characters(whitelist_categories=["Lu", "Ll", "Nd"]),
                min_size=1, max_size=12)
subjects = st.text(alphabet=st.characters(whitelist_categories=["Lu", "Ll", "Nd", "Zs"],
                                          whitelist_characters=":-_.()"),
                   min_size=1, max_size=60).filter(lambda s: s.strip())
body_lines = st.lists(st.text(alphabet=st.characters(whitelist_categories=["Lu", "Ll", "Nd"],
                                                     whitelist_characters=" .,:"),
                              max_size=40), max_size=4)


def _patch(author: str, user: str, subject: str, body: list[str], diff: str) -> str:
    text = "\n".join(body)
    return (f"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
            f"From: {author} <{user}@example.com>\n"
            f"Date: Sat, 3 Feb 2024 10:00:00 +0000\n"
            f"Subject: [PATCH] {subject}\n\n{text}\n---\n{diff}")


DIFF = ("diff --git a/f.txt b/f.txt\nindex 0000000..1111111 100644\n--- a/f.txt\n"
        "+++ b/f.txt\n@@ -1 +1 @@\n-a\n+b\n")


@FAST
@given(names, names, subjects, body_lines)
def test_a_formatted_patch_reads_back(author, user, subject, body):
    patch = parse_patch_text(_patch(author, user, subject, body, DIFF))
    assert patch.author == author and patch.email == f"{user}@example.com"
    assert patch.subject == " ".join(subject.split())
    assert patch.diff == "---\n" + DIFF
    assert patch.body == "\n".join(line.rstrip() for line in "\n".join(body).strip("\n")
                                   .splitlines())


@FAST
@given(st.text(max_size=400))
def test_any_text_reads_as_a_patch_or_raises_series_error(text):
    try:
        parse_patch_text(text, "fuzz.patch")
    except SeriesError as exc:
        assert exc.what.startswith("fuzz.patch")


@FAST
@given(st.binary(max_size=400))
def test_any_bytes_in_a_file_read_or_raise_series_error(tmp_path_factory, blob):
    path = tmp_path_factory.mktemp("p") / "x.patch"
    path.write_bytes(blob)
    try:
        parse_patch(path)
    except SeriesError:
        pass


@FAST
@given(names, names, subjects, st.integers(0, len(DIFF)))
def test_a_truncated_patch_never_crashes_the_reader(author, user, subject, cut):
    text = _patch(author, user, subject, [], DIFF)
    head = text[: len(text) - len(DIFF) + cut]
    try:
        patch = parse_patch_text(head)
    except SeriesError:
        return
    assert ("---\n" + DIFF).startswith(patch.diff)
