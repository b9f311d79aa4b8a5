"""The shared command options (commands/options.py)."""

from __future__ import annotations

from pathlib import Path

import click
from click.testing import CliRunner

from mlx_builder.commands.options import (
    MLX_REF_HELP,
    cuda_option,
    json_flag,
    mlx_ref_option,
    patch_target_option,
    platform_option,
    python_option,
    series_option,
)
from mlx_builder.errors import ToolchainError
from mlx_builder.wheelbuild.buildenv import PLATFORMS


def test_mlx_ref_option_fills_mlx_ref():
    @click.command()
    @mlx_ref_option(default="main", show_default=True)
    def cmd(mlx_ref):
        click.echo(f"ref={mlx_ref}")

    runner = CliRunner()
    assert runner.invoke(cmd, ["--mlx", "v0.32.1"]).output == "ref=v0.32.1\n"
    assert runner.invoke(cmd, []).output == "ref=main\n"
    assert MLX_REF_HELP in runner.invoke(cmd, ["--help"]).output


def test_shared_options_fill_their_parameters():
    @click.command()
    @series_option()
    @patch_target_option()
    @python_option(help="py")
    @json_flag()
    def cmd(series_name, target, python, as_json):
        click.echo(f"{series_name} {target} {python} {as_json}")

    runner = CliRunner()
    assert runner.invoke(cmd, []).output == "None all None False\n"
    out = runner.invoke(cmd, ["--series", "main", "--target", "cuda", "--python", "/p", "--json"])
    assert out.output == "main cuda /p True\n"
    bad = runner.invoke(cmd, ["--target", "rocm"])
    assert bad.exit_code == 2 and "'rocm' is not one of" in bad.output


def test_export_takes_several_series_under_its_own_name():
    @click.command()
    @series_option(param="series_names", multiple=True, required=True)
    def cmd(series_names):
        click.echo(",".join(series_names))

    runner = CliRunner()
    assert runner.invoke(cmd, ["--series", "main", "--series", "v0.32"]).output == "main,v0.32\n"
    assert runner.invoke(cmd, []).exit_code == 2


def test_no_command_declares_a_shared_option_itself():
    """--mlx, --series, --target, --python and the --json flag come from
    options.py. The exceptions take something else under the same name:
    routes' --json FILE (a path, not a flag) and install's --mlx (a wheel
    version or specifier, not a git ref)."""
    commands = Path(__file__).resolve().parents[1] / "mlx_builder" / "commands"
    for path in commands.glob("*.py"):
        if path.name == "options.py":
            continue
        text = path.read_text()
        for name in ("--series", "--target", "--python", "--mlx"):
            if (path.name, name) == ("install.py", "--mlx"):
                continue
            assert f'click.option("{name}"' not in text, (path.name, name)
        if path.name != "routes.py":
            assert 'click.option("--json"' not in text, path.name


def test_cuda_and_platform_arrive_converted():
    seen = {}

    @click.command()
    @cuda_option(help="cuda")
    @platform_option(help="platform")
    def cmd(cuda_major, platform):
        seen.update(cuda=cuda_major, platform=platform)

    runner = CliRunner()
    assert runner.invoke(cmd, ["--cuda", "13", "--platform", "arm64"]).exit_code == 0
    assert seen == {"cuda": 13, "platform": PLATFORMS["linux-aarch64"]}
    assert runner.invoke(cmd, []).exit_code == 0
    assert seen == {"cuda": None, "platform": None}
    bad = runner.invoke(cmd, ["--platform", "sparc"])
    assert isinstance(bad.exception, ToolchainError) and "sparc" in bad.exception.what
    assert runner.invoke(cmd, ["--cuda", "11"]).exit_code == 2  # click's Choice
