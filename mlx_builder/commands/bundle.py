"""`mlx-builder bundle`: one self-contained source tarball for offline builds."""

from __future__ import annotations

from pathlib import Path

import click

from mlx_builder.commands.options import cuda_option, mlx_ref_option, platform_option, series_option, target_spec_option
from mlx_builder.console import console
from mlx_builder.errors import BuildError
from mlx_builder.settings import Settings
from mlx_builder.wheelbuild.buildenv import Platform
from mlx_builder.wheelbuild.bundle import file_sha256, plan_from_tree, prepare, write_bundle
from mlx_builder.wheelbuild.targets import parse_targets


@click.command("bundle")
@target_spec_option(required=True,
                    help="Target the bundle is for (its patches and dependencies).")
@mlx_ref_option(default=None)
@series_option()
@click.option("--source", "source_dir", type=click.Path(path_type=Path, file_okay=False),
              default=None, help="Bundle this MLX source directory as it is (no series).")
@click.option("--out", type=click.Path(path_type=Path), default=Path("dist/"),
              show_default=True,
              help="Bundle file (*.tar.gz), or a directory for the default name.")
@click.option("--refresh", is_flag=True, help="Refill the dependency cache first.")
@click.option("--with-toolchain", is_flag=True,
              help="Carry the CUDA build environment's registry wheels (nvcc, CUDA "
                   "libraries, cuDNN, NCCL, CMake, Ninja): the node needs no network.")
@platform_option(help="With --with-toolchain: the node's platform (linux-x86_64, "
                      "linux-aarch64); default this host's.")
@cuda_option(help="With --with-toolchain: the CUDA major (default: what the target needs).")
@click.option("--python-version", "python_version", default=None,
              help="With --with-toolchain: the node's Python X.Y.Z (default: this one's).")
@click.pass_obj
def command(settings: Settings, target_spec: str, mlx_ref: str | None, series_name: str | None,
            source_dir: Path | None, out: Path, refresh: bool, with_toolchain: bool,
            platform: Platform | None, cuda_major: int | None,
            python_version: str | None) -> None:
    """Write patched MLX + every FetchContent dependency the target needs +
    build settings into one deterministic .tar.gz; build it anywhere with
    `mlx-builder build --from-bundle FILE` (no network needed)."""
    if bool(mlx_ref) == bool(source_dir):
        raise BuildError("name exactly one source: --mlx REF or --source DIR")
    if source_dir:
        tree, targets = source_dir, parse_targets(target_spec, source=source_dir)
    else:
        assert mlx_ref is not None  # exactly one source, checked above
        tree, targets = prepare(settings, mlx_ref, target_spec, series_name=series_name)
    plan = plan_from_tree(settings, tree, targets, refresh=refresh)
    spec = None
    if with_toolchain:
        if targets.backend != "cuda":
            raise BuildError("--with-toolchain is for CUDA targets",
                             f"target {targets.spec} needs no CUDA toolchain")
        import dataclasses

        from mlx_builder.source.tree import read_build_requires
        from mlx_builder.wheelbuild import buildenv as be
        plat = platform or be.host_platform()
        if plat is None:
            raise BuildError("--with-toolchain needs a Linux target platform",
                             "registry CUDA toolchains exist for linux-x86_64 and "
                             "linux-aarch64 only", "pass --platform linux-aarch64 or "
                             "linux-x86_64")
        major = cuda_major or be.default_cuda_major(
            targets.min_cuda, min(e.number for e in targets.arch_entries))
        spec = be.make_spec(major, plat, read_build_requires(plan.src), host=plat)
        if python_version:
            spec = dataclasses.replace(spec, python_version=python_version)
    path = write_bundle(settings, tree, targets, out, plan=plan, toolchain=spec)
    size = path.stat().st_size
    lines = [f"bundle:  {path}",
             f"size:    {size / 2**20:.1f} MiB ({size} bytes)",
             f"sha256:  {file_sha256(path)}",
             f"label:   {plan.label}  target {targets.spec}",
             f"patches: {len(plan.provenance.patches)} "
             f"(series {plan.provenance.series or '-'}, hash {plan.provenance.patch_set_hash or '-'})",
             "deps:    " + ", ".join(f"{d.name} {d.pin}" for d in plan.deps.deps)]
    if plan.deps.disabled:
        lines.append("off:     " + ", ".join(plan.deps.disabled))
    if spec is not None:
        lines.append(f"toolchain: CUDA {spec.cuda_major} for {spec.target.name} "
                     f"({len(spec.pins)} registry wheels)")
    lines.append(f"pinned:  {path.name}.sha256 beside it")
    lines.append(f"build:   mlx-builder build --from-bundle {path.name} "
                 f"--sha256 {file_sha256(path)}")
    console.print("\n".join(lines), markup=False)
