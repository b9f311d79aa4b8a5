"""`mlx-builder test`: the SDPA suites and memory checks against a wheel."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mlx_builder.commands.options import python_option
from mlx_builder.errors import ConfigError, WheelError
from mlx_builder.lists import comma_list, known_items
from mlx_builder.settings import Settings
from mlx_builder.verify.testing import DEFAULT_PARTS, PART_KEYS, PINNED_MLX_LM, WheelTestOptions, run_wheel_tests


def parse_env(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--env {pair!r} is not NAME=VALUE")
        out[key] = value
    return out


def parse_parts(text: str | None) -> tuple[str, ...]:
    if not text:
        return DEFAULT_PARTS
    return known_items(comma_list(text), PART_KEYS, "test part")


def newest_wheel(folder: Path) -> Path:
    wheels = sorted(folder.glob("mlx*.whl"), key=lambda p: p.stat().st_mtime)
    if not wheels:
        raise WheelError(f"no wheel given and none in {folder}/",
                         "", "pass the wheel: `mlx-builder test dist/mlx-….whl`")
    return wheels[-1]


@click.command("test")
@click.argument("wheel", required=False, type=click.Path(path_type=Path, dir_okay=False))
@python_option(default=sys.executable, show_default="this Python",
               help="Interpreter the test venv is made from (must match the wheel's tag).")
@click.option("--venv", "venv_dir", type=click.Path(path_type=Path, file_okay=False),
              default=None, help="Where the test venv goes (default: under the cache).")
@click.option("--reuse-venv", is_flag=True, help="Keep an existing venv instead of a fresh one.")
@click.option("--system-site-packages", is_flag=True,
              help="Let the venv see the interpreter's packages (pytest, numpy on a "
                   "machine without network).")
@click.option("--no-deps", is_flag=True,
              help="Install the wheel without its declared runtime packages (the "
                   "nvidia-* CUDA libraries), for machines that provide them otherwise.")
@click.option("--wheelhouse", type=click.Path(path_type=Path, file_okay=False, exists=True),
              default=None, help="Folder of wheels for pip (with --offline: the only source).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False),
              default=None, help="JUnit XML, logs, summary.json (default: test-results/<wheel>).")
@click.option("--parts", default=None,
              help=f"Comma list of parts to run: {', '.join(PART_KEYS)} (default: "
                   f"{', '.join(DEFAULT_PARTS)}; fullscale needs a >= 80 GB GPU).")
@click.option("--env", "env_pairs", multiple=True, metavar="NAME=VALUE",
              help="Environment for every test run, e.g. MLX_CUDA_USE_CUDNN_SDPA=0 (repeatable).")
@click.option("--long", "long_", is_flag=True,
              help="Also the long cases (16k/131k lengths): sets MLX_BUILDER_LONG=1.")
@click.option("--upstream-commit", default=None,
              help="Upstream commit for test_fast_sdpa.py (default: the wheel manifest's).")
@click.option("--upstream-tests", type=click.Path(path_type=Path, exists=True), default=None,
              help="Take test_fast_sdpa.py from this folder or mlx-builder bundle "
                   "instead of the MLX mirror (machines without the mirror).")
@click.option("--mlx-lm-version", default=PINNED_MLX_LM, show_default=True,
              help="mlx-lm release whose model code the end-to-end parts run.")
@click.option("--pytest-arg", "pytest_args", multiple=True,
              help="Extra argument for every pytest run, e.g. -x or -k EXPR (repeatable).")
@click.option("--jobs", "-j", type=click.IntRange(min=1, max=64), default=1, show_default=True,
              help="Run the sdpa part in this many pytest processes at once (each takes "
                   "every N-th test, with cores / N BLAS and OpenMP threads), then its "
                   "tests marked solo alone; the memory and model parts always run alone.")
@click.pass_obj
def command(settings: Settings, wheel: Path | None, python: str, venv_dir: Path | None,
            reuse_venv: bool, system_site_packages: bool, no_deps: bool,
            wheelhouse: Path | None, out_dir: Path | None, parts: str | None,
            env_pairs: tuple[str, ...], long_: bool, upstream_commit: str | None,
            upstream_tests: Path | None, mlx_lm_version: str,
            pytest_args: tuple[str, ...], jobs: int) -> None:
    """Install WHEEL in a fresh venv and run upstream's SDPA tests, our SDPA
    suite, the memory checks, the mlx-lm end-to-end prefill and the greedy
    identity check; JUnit XML per part and a summary. Exit 21 on any failure;
    GPU parts skip with a reason where the wheel sees no GPU. WHEEL defaults
    to the newest mlx wheel in dist/."""
    wheel = wheel or newest_wheel(Path("dist"))
    stem = wheel.name.removesuffix(".whl")
    opts = WheelTestOptions(
        out_dir=out_dir or Path("test-results") / stem,
        venv_dir=venv_dir or settings.cache_dir / "test-venvs" / stem,
        python=python, wheelhouse=wheelhouse, offline=settings.offline,
        system_site_packages=system_site_packages, no_deps=no_deps,
        reuse_venv=reuse_venv,
        parts=parse_parts(parts), env=parse_env(env_pairs), long=long_,
        upstream_commit=upstream_commit, upstream_tests=upstream_tests,
        mlx_lm_version=mlx_lm_version,
        pytest_args=tuple(pytest_args), jobs=jobs)
    run_wheel_tests(settings, wheel, opts)
