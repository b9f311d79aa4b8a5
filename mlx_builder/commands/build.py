"""`mlx-builder build`: one verified, labelled wheel for one target."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from mlx_builder import outputs
from mlx_builder.commands.options import (
    cuda_option,
    mlx_ref_option,
    platform_option,
    python_option,
    series_option,
    target_spec_option,
    toolchain_option,
)
from mlx_builder.console import err_console
from mlx_builder.errors import BuildError, BundleError, ConfigError
from mlx_builder.settings import Settings
from mlx_builder.verify.routes import resolve_interpreter
from mlx_builder.wheelbuild.buildenv import Platform, platform_warning
from mlx_builder.wheelbuild.bundle import normalize_sha256, prepare
from mlx_builder.wheelbuild.targets import parse_targets
from mlx_builder.wheelbuild.wheel import build_wheel
from mlx_builder.wheelbuild.wheel import configure_only as configure


@click.command("build")
@target_spec_option(
    default=None,
    help="cuda-sm80/86/89/90/100/120/121 (comma-combined), cuda "
         "(upstream's set), cpu or metal. With --from-bundle: the bundle's own.")
@mlx_ref_option(default=None)
@series_option()
@click.option("--source", "source_dir", type=click.Path(path_type=Path, file_okay=False),
              default=None, help="Build this MLX source directory as it is (no series).")
@click.option("--from-bundle", "bundle", type=click.Path(path_type=Path, dir_okay=False,
                                                          exists=True),
              default=None, help="Build a bundle from `mlx-builder bundle`, with no network.")
@click.option("--sha256", "bundle_sha256", default=None, metavar="HASH",
              help="With --from-bundle: the bundle's sha256 (as `mlx-builder bundle` "
                   "printed it); any other file is refused (exit 31).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False),
              default=Path("dist"), show_default=True, help="Where the wheel goes.")
@python_option(help="Python to build for (default: the one running mlx-builder).")
@click.option("--isolation/--no-isolation", default=None,
              help="pip build isolation (default: on when online, off offline/bundle).")
@click.option("--cmake-arg", "cmake_args", multiple=True,
              help="Extra CMake argument, e.g. -DMLX_BUILD_GGUF=OFF (repeatable).")
@click.option("--configure-only", is_flag=True,
              help="Run only CMake's configure step (an offline check of the sources).")
@toolchain_option(help="CUDA toolchain: pypi (registry packages, cached by their pins), system "
                       "(the toolkit on this machine); auto = pypi unless offline without it.")
@cuda_option(help="CUDA major of the registry toolchain (default: what the target needs).")
@platform_option(help="Target platform: linux-x86_64 or linux-aarch64 (cross-built on x86_64). "
                      "Default: this host's.")
@click.option("--manylinux/--no-manylinux", default=True, show_default=True,
              help="Repair a Linux wheel to its manylinux_2_X tag with auditwheel "
                   "(the nvidia-* CUDA libraries are not grafted).")
@click.option("--manylinux-floor", default=None, metavar="GLIBC",
              help="Tag the wheel manylinux_<GLIBC> (e.g. 2.28) and fail if it needs a "
                   "newer glibc (default: the oldest tag the wheel qualifies for).")
@click.pass_obj
def command(settings: Settings, target_spec: str | None, mlx_ref: str | None,
            series_name: str | None, source_dir: Path | None, bundle: Path | None,
            bundle_sha256: str | None, out_dir: Path, python: str | None,
            isolation: bool | None, cmake_args: tuple[str, ...], configure_only: bool,
            toolchain: str, cuda_major: int | None, platform: Platform | None,
            manylinux: bool, manylinux_floor: str | None) -> None:
    """Build MLX with the patch series into a wheel, check its GPU code and
    write its provenance manifest into it (see `mlx-builder inspect`)."""
    kw: dict[str, Any] = dict(toolchain=toolchain, cuda_major=cuda_major,
                              target_platform=platform)
    warning = platform_warning(target_spec, kw["target_platform"])
    if warning:
        err_console.print(f"warning: {warning}", markup=False)
    chosen = [x for x in (mlx_ref, source_dir, bundle) if x]
    if len(chosen) != 1:
        raise BuildError("name exactly one source: --mlx REF, --source DIR or --from-bundle FILE")
    if bundle_sha256:
        try:
            normalize_sha256(bundle_sha256)
        except BundleError:
            raise ConfigError(f"--sha256 {bundle_sha256!r} is not a sha256",
                              "expected 64 hex digits, optionally after sha256:",
                              "pass the hash `mlx-builder bundle` printed beside the "
                              "bundle (or sha256sum's)") from None
    if bundle_sha256 and not bundle:
        raise BuildError("--sha256 pins a bundle", "it was given without --from-bundle FILE",
                         "add --from-bundle FILE, or drop --sha256")
    if python:
        python = resolve_interpreter(python)      # InterpreterError (25), as documented
    if not configure_only:
        outputs.check_out_dir(out_dir, "--out")     # before any long work
    if bundle:
        targets = parse_targets(target_spec) if target_spec else None
        if configure_only:
            configure(settings, bundle, targets, from_bundle=True, python=python,
                      extra_cmake_args=cmake_args, bundle_sha256=bundle_sha256, **kw)
            return
        build_wheel(settings, bundle, targets, out_dir, from_bundle=True, python=python,
                    isolation=isolation, extra_cmake_args=cmake_args, manylinux=manylinux,
                    manylinux_floor=manylinux_floor,
                    bundle_sha256=bundle_sha256, **kw)
        return
    if not target_spec:
        raise BuildError("no build target given", "", "pass --target, e.g. --target cuda-sm90")
    if source_dir:
        targets = parse_targets(target_spec, source=source_dir)
        source = source_dir
    else:
        assert mlx_ref is not None  # exactly one source, checked above
        source, targets = prepare(settings, mlx_ref, target_spec, series_name=series_name)
    if configure_only:
        configure(settings, source, targets, python=python, extra_cmake_args=cmake_args, **kw)
        return
    build_wheel(settings, source, targets, out_dir, python=python, isolation=isolation,
                extra_cmake_args=cmake_args, manylinux=manylinux,
                manylinux_floor=manylinux_floor, **kw)
