"""The shared command options (commands/options.py)."""

from __future__ import annotations

import click
from click.testing import CliRunner

from mlx_builder.commands.options import MLX_REF_HELP, mlx_ref_option


def test_mlx_ref_option_fills_mlx_ref():
    @click.command()
    @mlx_ref_option(default="main", show_default=True)
    def cmd(mlx_ref):
        click.echo(f"ref={mlx_ref}")

    runner = CliRunner()
    assert runner.invoke(cmd, ["--mlx", "v0.32.1"]).output == "ref=v0.32.1\n"
    assert runner.invoke(cmd, []).output == "ref=main\n"
    assert MLX_REF_HELP in runner.invoke(cmd, ["--help"]).output
