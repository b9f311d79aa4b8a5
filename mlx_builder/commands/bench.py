"""`mlx-builder bench`: SDPA speed and memory of a wheel against baselines, and
optionally its quantized and dense linear layers."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mlx_builder.commands.options import python_option
from mlx_builder.commands.test import newest_wheel, parse_env
from mlx_builder.console import console
from mlx_builder.errors import ConfigError
from mlx_builder.lists import comma_ints, comma_list, known_items
from mlx_builder.settings import Settings
from mlx_builder.verify.bench import (
    TORCH_BACKENDS,
    BenchConfig,
    BenchOptions,
    load_result,
    parse_moe,
    parse_qmm_shapes,
    parse_variant,
    report,
    run_bench,
)
from mlx_builder.verify.perfpage import publish


@click.command("bench")
@click.argument("wheel", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--baseline", "baseline", multiple=True,
              type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="Upstream's build, labelled 'upstream': an unpatched wheel of the same "
                   "commit, or a release's wheels installed together (repeat it: the "
                   "mlx and mlx-cuda-13 wheels that `pip install mlx[cuda13]` takes).")
@click.option("--variant", "variants", multiple=True, metavar="NAME:VAR=VALUE[,...]",
              help="Also run the patched wheel under these variables, e.g. "
                   "fallback:MLX_CUDA_SDPA_TILED=0 (repeatable).")
@click.option("--torch-python", default="auto", show_default=True,
              help="Python with PyTorch+CUDA for its SDPA backends ('auto' looks for one).")
@click.option("--no-torch", is_flag=True, help="Leave PyTorch out.")
@click.option("--torch-backends", default=",".join(TORCH_BACKENDS), show_default=True)
@click.option("--dims", default="128,256,512", show_default=True, help="Head dims.")
@click.option("--lengths", default="2048,4096,8192,16384,32768", show_default=True,
              help="Prefill lengths L (qL = kL, causal).")
@click.option("--decode-lengths", default="4096,16384,65536,131072", show_default=True,
              help="Decode kv lengths (qL = 1).")
@click.option("--qmm-shapes", default="", metavar="K:N,...|gemma4-31b",
              help="Also time quantized_matmul (transpose=True) beside x @ W.T at these "
                   "linear shapes (gemma4-31b: its six).")
@click.option("--qmm-rows", default="1,2048", show_default=True,
              help="Rows of x for the linear shapes.")
@click.option("--qmm-bits", type=click.Choice(["4", "8"]), default="4", show_default=True,
              help="Bits of the quantized weights (linear and mixture-of-experts layers).")
@click.option("--moe-shapes", default="", metavar="K:N,...|qwen3-30b-a3b",
              help="Also time gather_qmm beside the dense gather_mm at these expert layer "
                   "shapes, in the layout mlx-lm's SwitchGLU passes (qwen3-30b-a3b: its "
                   "gate/up and down, 128 experts, top 8).")
@click.option("--moe-tokens", default="1,8,512,2048", show_default=True,
              help="Tokens per call for the expert layers (from 64 rows, tokens x top-k, "
                   "sorted by expert as mlx-lm's prefill).")
@click.option("--moe-experts", type=click.IntRange(min=1), default=None,
              help="Experts per layer [default: the preset's, else 128].")
@click.option("--moe-top-k", type=click.IntRange(min=1), default=None,
              help="Experts per token [default: the preset's, else 8].")
@click.option("--heads", type=int, default=32, show_default=True)
@click.option("--kv-heads", type=int, default=16, show_default=True)
@click.option("--dtype", type=click.Choice(["bfloat16", "float16"]), default="bfloat16",
              show_default=True)
@click.option("--warmup", type=int, default=3, show_default=True)
@click.option("--iters", type=int, default=10, show_default=True, help="Timed calls (median).")
@click.option("--queue", type=click.IntRange(min=1), default=1, show_default=True,
              help="Calls issued per wait. 1: each call is timed to its end (latency, "
                   "per-call framework cost included); N: N calls back to back, one "
                   "wait, time per call (device throughput).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False),
              default=Path("bench-results"), show_default=True)
@python_option(default=sys.executable, show_default="this Python",
               help="Interpreter the wheel venvs are made from.")
@click.option("--system-site-packages", is_flag=True)
@click.option("--no-deps", is_flag=True,
              help="Install the wheel without its declared runtime packages (the "
                   "nvidia-* CUDA libraries), for machines that provide them otherwise.")
@click.option("--reuse-venv", is_flag=True)
@click.option("--wheelhouse", type=click.Path(path_type=Path, file_okay=False, exists=True),
              default=None)
@click.option("--env", "env_pairs", multiple=True, metavar="NAME=VALUE",
              help="Environment for every MLX run (repeatable).")
@click.option("--report", "report_json", type=click.Path(path_type=Path, dir_okay=False,
                                                          exists=True),
              default=None, help="Run nothing: rewrite bench.md and the plots under --out "
                                 "from a bench.json made earlier (e.g. on a GPU node "
                                 "without matplotlib).")
@click.option("--publish", "publish_dir", type=click.Path(path_type=Path, file_okay=False),
              default=None, help="Also make these figures the GPU's entry of the performance "
                                 "page: write DIR/perf/<gpu>.json and .png and rewrite the "
                                 "generated part of DIR/performance.md (e.g. --publish docs/).")
@click.pass_obj
def command(settings: Settings, wheel: Path | None, baseline: tuple[Path, ...],
            variants: tuple[str, ...], torch_python: str, no_torch: bool, torch_backends: str,
            dims: str, lengths: str, decode_lengths: str, qmm_shapes: str, qmm_rows: str,
            qmm_bits: str, moe_shapes: str, moe_tokens: str, moe_experts: int | None,
            moe_top_k: int | None, heads: int, kv_heads: int,
            dtype: str, warmup: int, iters: int, queue: int, out_dir: Path, python: str,
            system_site_packages: bool, no_deps: bool, reuse_venv: bool,
            wheelhouse: Path | None, env_pairs: tuple[str, ...],
            report_json: Path | None, publish_dir: Path | None) -> None:
    """Prefill TFLOP/s and peak memory over L, decode TB/s over kL: WHEEL
    against --baseline and PyTorch's SDPA backends, each framework in its own
    process. Writes bench.json, bench.md and PNG plots (with matplotlib)."""
    if report_json is not None:
        result = load_result(report_json)
        report(result, out_dir)
        _publish(result, publish_dir)
        return
    wheel = wheel or newest_wheel(Path("dist"))
    backends = known_items(comma_list(torch_backends), TORCH_BACKENDS, "torch backend")
    try:
        parsed_variants = tuple(parse_variant(v) for v in variants)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    try:
        linear = parse_qmm_shapes(qmm_shapes)
    except ValueError as exc:
        raise ConfigError(str(exc), "--qmm-shapes takes K:N pairs of a linear layer",
                          "e.g. --qmm-shapes 5376:8192,21504:5376 or gemma4-31b") from None
    try:
        moe = parse_moe(moe_shapes, moe_experts, moe_top_k)
    except ValueError as exc:
        raise ConfigError(str(exc), "--moe-shapes takes K:N pairs of an expert layer, "
                          "with --moe-top-k at most --moe-experts",
                          "e.g. --moe-shapes 2048:768,768:2048 or qwen3-30b-a3b") from None
    group = BenchConfig().qmm_group
    ragged = [f"{k}:{n}" for k, n in (*linear, *moe.shapes) if k % group]
    if ragged:
        raise ConfigError(f"K of {', '.join(ragged)} is not a multiple of the group size "
                          f"{group}", f"the weights are quantized in groups of {group} along K",
                          f"use shapes whose K is a multiple of {group}")
    tokens = comma_ints(moe_tokens, "moe-tokens")
    if min(tokens) < 1:
        raise ConfigError(f"--moe-tokens {moe_tokens!r} has a count below 1",
                          "each expert-layer call takes at least one token",
                          "e.g. --moe-tokens 1,8,512,2048")
    # --dims "" with --qmm-shapes or --moe-shapes: those layers alone.
    only_layers = (linear or moe.shapes) and not dims.strip()
    sdpa_dims = () if only_layers else comma_ints(dims, "dims")
    config = BenchConfig(dims=sdpa_dims,
                         prefill_lengths=comma_ints(lengths, "lengths"),
                         decode_lengths=comma_ints(decode_lengths, "decode-lengths"), heads=heads,
                         kv_heads=kv_heads, dtype=dtype, warmup=warmup, iters=iters,
                         queue=queue, torch_backends=backends, qmm_shapes=linear,
                         qmm_rows=comma_ints(qmm_rows, "qmm-rows"), qmm_bits=int(qmm_bits),
                         moe_shapes=moe.shapes, moe_tokens=tokens,
                         moe_experts=moe.experts, moe_top_k=moe.top_k)
    opts = BenchOptions(
        out_dir=out_dir, venv_root=settings.cache_dir / "bench-venvs", config=config,
        baseline=baseline, variants=parsed_variants,
        torch_python=None if no_torch else torch_python, python=python,
        wheelhouse=wheelhouse, offline=settings.offline,
        system_site_packages=system_site_packages, no_deps=no_deps,
        reuse_venv=reuse_venv,
        env=parse_env(env_pairs))
    _publish(run_bench(wheel, opts), publish_dir)


def _publish(result: dict, docs: Path | None) -> None:
    if docs is None:
        return
    done = publish(result, docs)
    console.print(f"published: {done.data}, {done.page}"
                  + (f", {done.plot}" if done.plot else ""))
    if done.plot_skipped:
        console.print(f"no figure: {done.plot_skipped}", markup=False)
