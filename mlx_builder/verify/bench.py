"""`mlx-builder bench`: SDPA throughput and memory, one framework per process.

Runs (each a worker subprocess, see workers/): the patched wheel, an
unpatched build of the same commit (``--baseline``), optional variants of
the patched wheel under other environment variables (``--variant``), and
PyTorch's SDPA backends when a Python with torch and CUDA is found. A worker
that dies (MLX aborts on some failures) is restarted after the case it was
running, which is recorded as ``crashed``.

Outputs in the out folder: ``bench.json`` (meta + every record), ``bench.md``
(tables) and, with matplotlib, PNG plots (see plots.py).
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from mlx_builder import process
from mlx_builder.errors import ConfigError
from mlx_builder.lists import comma_list
from mlx_builder.verify.benchdata import (
    column,
    device_and_versions,
    num,
    speedups,
    timing_note,
)
from mlx_builder.verify.workers._common import RESTART_EXIT

WORKERS = Path(__file__).resolve().parent / "workers"
TORCH_BACKENDS = ("flash", "cudnn", "efficient", "math")
TORCH_PROBE = ("import json, torch; print(json.dumps({'version': torch.__version__, "
               "'cuda': torch.cuda.is_available()}))")


@dataclass(frozen=True)
class BenchConfig:
    dims: tuple[int, ...] = (128, 256, 512)
    prefill_lengths: tuple[int, ...] = (2048, 4096, 8192, 16384, 32768)
    decode_lengths: tuple[int, ...] = (4096, 16384, 65536, 131072)
    heads: int = 32
    kv_heads: int = 16
    batch: int = 1
    decode_q: int = 1
    dtype: str = "bfloat16"
    warmup: int = 3
    iters: int = 10
    # Calls issued per wait: 1 times each call to its end (latency, the
    # framework's per-call cost included); N > 1 issues N calls back to back
    # and waits once (device throughput), and reports the time per call.
    queue: int = 1
    torch_backends: tuple[str, ...] = TORCH_BACKENDS
    # Linear layers (K, N): quantized_matmul beside the dense x @ W.T, at
    # each of qmm_rows rows of x. None by default.
    qmm_shapes: tuple[tuple[int, int], ...] = ()
    qmm_rows: tuple[int, ...] = (1, 2048)
    qmm_bits: int = 4
    qmm_group: int = 64
    # Mixture-of-experts layers (K, N): gather_qmm beside the dense
    # gather_mm over moe_experts experts, top moe_top_k, at each of
    # moe_tokens tokens (bits and group as the linear layers'). None by
    # default.
    moe_shapes: tuple[tuple[int, int], ...] = ()
    moe_tokens: tuple[int, ...] = (1, 8, 512, 2048)
    moe_experts: int = 128
    moe_top_k: int = 8

    def cases(self) -> list[list[Any]]:
        out: list[list[Any]] = []
        for D in self.dims:
            out += [["prefill", D, L, L] for L in self.prefill_lengths]
            out += [["decode", D, self.decode_q, L] for L in self.decode_lengths]
        for K, N in self.qmm_shapes:
            for M in self.qmm_rows:
                out += [["qmm", K, M, N], ["matmul", K, M, N]]
        for K, N in self.moe_shapes:
            for T in self.moe_tokens:
                out += [["gather_qmm", K, T, N], ["gather_mm", K, T, N]]
        return out

    def job(self, label: str, backends: Sequence[str] = ()) -> dict[str, Any]:
        return {"label": label, "cases": self.cases(), "heads": self.heads,
                "kv_heads": self.kv_heads, "batch": self.batch, "dtype": self.dtype,
                "warmup": self.warmup, "iters": self.iters, "queue": self.queue,
                "backends": list(backends), "qmm_bits": self.qmm_bits,
                "qmm_group": self.qmm_group, "moe_experts": self.moe_experts,
                "moe_top_k": self.moe_top_k}


@dataclass(frozen=True)
class Run:
    """One worker process: a label, the framework, its Python, its env."""

    label: str
    framework: str  # mlx | torch
    python: str
    env: Mapping[str, str] = field(default_factory=dict)
    backends: tuple[str, ...] = ()
    script_path: Path | None = None  # default: workers/<framework>_worker.py

    @property
    def script(self) -> Path:
        return self.script_path or WORKERS / f"{self.framework}_worker.py"

    def expected(self, config: BenchConfig) -> int:
        return len(config.cases()) * max(1, len(self.backends))


# ------------------------------------------------------------------ workers

def _crashed(run: Run, case: Sequence[Any], backend: str, why: str) -> dict:
    mode, D, qL, kL = case
    return {"type": "result", "label": run.label, "backend": backend, "mode": mode,
            "D": D, "qL": qL, "kL": kL, "status": "crashed", "ms": None,
            "tflops": None, "tbps": None, "peak_gib": None, "error": why}


def run_worker(run: Run, config: BenchConfig, log: Path, *,
               on_record: Callable[[dict], None] = lambda r: None,
               timeout: float = 3600) -> tuple[list[dict], dict]:
    """All records of one run, and its meta line. One worker process per
    torch backend; a worker that dies is restarted without the case it died
    on (recorded as crashed)."""
    records: list[dict] = []
    meta: dict = {}
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8", errors="replace") as fh:
        for backend in run.backends or ("mlx",):
            pending = config.cases()
            while pending:
                job = config.job(run.label, [backend] if run.backends else ())
                job["cases"] = pending
                job["oom_at"] = [[r["mode"], r["D"], r["kL"]] for r in records
                                 if r["status"] == "oom" and r["backend"] == backend]
                got, meta_now, in_flight, rc = _one_worker(run, job, fh, timeout,
                                                           on_record)
                meta = meta_now or meta
                records += got
                done = {(r["mode"], r["D"], r["qL"], r["kL"]) for r in got}
                pending = [c for c in pending if tuple(c) not in done]
                if rc == 0 or not pending:
                    break
                if rc == RESTART_EXIT and got:
                    continue  # stopped after an out-of-memory: a fresh process goes on
                why = f"worker exited with {rc} (log {log})"
                lost = [in_flight] if in_flight in pending else pending
                for case in lost:
                    rec = _crashed(run, case, backend, why)
                    records.append(rec)
                    on_record(rec)
                pending = [c for c in pending if c not in lost]
    return records, meta


def _one_worker(run: Run, job: dict, fh: TextIO, timeout: float,
                on_record: Callable[[dict], None]
                ) -> tuple[list[dict], dict, list | None, int]:
    """(records, meta, case in flight when it stopped, exit code)."""
    import os
    cmd = [run.python, str(run.script), json.dumps(job)]
    fh.write(f"$ {run.python} {run.script.name} <{len(job['cases'])} cases, "
             f"backends {job['backends'] or ['mlx']}>\n")
    fh.flush()
    records: list[dict] = []
    meta: dict = {}
    in_flight: list | None = None
    finished = False
    deadline = time.monotonic() + timeout

    def seen(line: str) -> bool:
        nonlocal meta, in_flight, finished
        fh.write(line)
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            msg = None
        kind = msg.get("type") if isinstance(msg, dict) else None
        if kind == "meta":
            meta = {k: v for k, v in msg.items() if k != "type"}
        elif kind == "start":
            in_flight = list(msg["case"])
        elif kind == "result":
            in_flight = None
            records.append(msg)
            on_record(msg)
        elif kind == "done":
            finished = True
        return time.monotonic() <= deadline     # past it: the worker is killed

    rc = process.stream(cmd, seen, env={**os.environ, **run.env}, stderr=fh)
    if rc == 0 and not finished:
        rc = -1  # exited cleanly without saying so: treat as a crash
    return records, meta, in_flight, rc


def find_torch_python(candidates: Iterable[str]) -> tuple[str | None, str]:
    """The first interpreter where torch imports and sees CUDA, or why none."""
    reasons = []
    for python in candidates:
        res = process.run([python, "-c", TORCH_PROBE], timeout=300, check=False)
        if res.failure:
            reasons.append(f"{python}: {res.failure}")
            continue
        if res.returncode != 0:
            reasons.append(f"{python}: torch does not import")
            continue
        info = json.loads(res.stdout.strip().splitlines()[-1])
        if not info.get("cuda"):
            reasons.append(f"{python}: torch {info.get('version')} sees no CUDA device")
            continue
        return python, f"torch {info.get('version')}"
    return None, "; ".join(reasons) or "no Python to look for torch in"


def collect(runs: Sequence[Run], config: BenchConfig, log_dir: Path,
            on_record: Callable[[dict], None] = lambda r: None) -> dict:
    """Run every worker in turn; one result document."""
    runs_out: list[dict] = []
    records_out: list[dict] = []
    result = {"config": asdict(config), "host": platform.node(),
              "date": time.strftime("%Y-%m-%d %H:%M:%S"), "runs": runs_out,
              "records": records_out}
    for i, run in enumerate(runs, 1):
        records, meta = run_worker(run, config, log_dir / f"{i:02d}-{run.label}.log",
                                   on_record=on_record)
        runs_out.append({"label": run.label, "framework": run.framework,
                         "env": dict(run.env), "meta": meta})
        records_out.extend(records)
    return result


# ------------------------------------------------------------------ reports

def _cell(rec: Mapping[str, Any] | None, metric: str) -> str:
    if rec is None:
        return ""
    if rec["status"] != "ok":
        return {"oom": "OOM", "unsupported": "n/a", "skipped": "(OOM)",
                "crashed": "crash"}.get(rec["status"], rec["status"])
    if metric == "prefill":
        return f"{num(rec['tflops'])} / {num(rec['peak_gib'])}"
    return f"{num(rec['tbps'])} / {num(rec['ms'])}"


def _layer_table(result: Mapping[str, Any], modes: tuple[str, str], title: str,
                 axis: str, shapes: Sequence[Sequence[int]],
                 counts: Sequence[int]) -> list[str]:
    """One table of layer timings: per (K → N, count) and run, each of
    ``modes`` as TFLOP/s / GB/s of weights read; runs without any result of
    these modes (torch's SDPA backends) are left out."""
    recs = [r for r in result["records"] if r["mode"] in modes]
    cols = list(dict.fromkeys(column(r) for r in recs if r["status"] == "ok"))
    if not cols:
        return []
    index = {(column(r), r["mode"], r["D"], r["qL"], r["kL"]): r for r in recs}

    def cell(rec: Mapping[str, Any] | None) -> str:
        if rec is None or rec["status"] != "ok":
            return _cell(rec, "layer")
        return f"{num(rec['tflops'])} / {num(rec['tbps'] * 1e3)}"

    lines = [title, "",
             "| " + " | ".join(["K → N", axis, *(f"{c} {m}" for c in cols
                                                 for m in modes)]) + " |",
             "|" + "---|" * (2 * len(cols) + 2)]
    for K, N in shapes:
        for count in counts:
            cells = [cell(index.get((c, m, K, count, N))) for c in cols for m in modes]
            lines.append("| " + " | ".join([f"{K} → {N}", str(count), *cells]) + " |")
    lines.append("")
    return lines


def linear_section(result: Mapping[str, Any]) -> list[str]:
    """The linear-layer table: quantized_matmul and x @ W.T per (K → N, M)."""
    cfg = result["config"]
    return _layer_table(result, ("qmm", "matmul"),
                        f"## Linear layers, {cfg['qmm_bits']}-bit group {cfg['qmm_group']}: "
                        "TFLOP/s (2·M·N·K) / GB/s of weights read",
                        "M", cfg["qmm_shapes"], cfg["qmm_rows"])


def experts_section(result: Mapping[str, Any]) -> list[str]:
    """The mixture-of-experts table: gather_qmm and the dense gather_mm per
    (K → N, tokens), GB/s counting each expert read once."""
    cfg = result["config"]
    if not cfg.get("moe_shapes"):
        return []  # a bench.json from before the expert layers
    return _layer_table(result, ("gather_qmm", "gather_mm"),
                        f"## Mixture-of-experts layers, {cfg['moe_experts']} experts, top "
                        f"{cfg['moe_top_k']}, {cfg['qmm_bits']}-bit group "
                        f"{cfg['qmm_group']}: TFLOP/s (2·tokens·k·N·K) / GB/s of the "
                        "experts' weights read", "tokens", cfg["moe_shapes"],
                        cfg["moe_tokens"])


def markdown_report(result: Mapping[str, Any]) -> str:
    device, versions = device_and_versions(result)
    cfg = result["config"]
    lines = [f"# SDPA benchmark on {device}", "",
             f"{versions}. {cfg['dtype']}, B={cfg['batch']}, {cfg['heads']} query / "
             f"{cfg['kv_heads']} KV heads; {timing_note(cfg)}; {result['date']}.", ""]
    cols = list(dict.fromkeys(column(r) for r in result["records"]))
    index = {(column(r), r["mode"], r["D"], r["kL"]): r for r in result["records"]}
    sections = (("prefill", "Prefill, causal: TFLOP/s (4·H·L²·D/2) / peak extra GiB",
                 "L", cfg["prefill_lengths"]),
                ("decode", f"Decode, qL={cfg['decode_q']}: TB/s of K+V read / ms",
                 "kL", cfg["decode_lengths"]))
    for mode, title, axis, lengths in sections:
        for D in cfg["dims"]:
            if not any((c, mode, D, L) in index for c in cols for L in lengths):
                continue
            lines += [f"## {title}, head_dim {D}", "",
                      "| " + " | ".join([axis, *cols]) + " |",
                      "|" + "---|" * (len(cols) + 1)]
            for L in lengths:
                cells = [_cell(index.get((c, mode, D, L)), mode) for c in cols]
                lines.append("| " + " | ".join([f"{L:,}".replace(",", " "), *cells]) + " |")
            lines.append("")
    for D in cfg["dims"]:
        ratios = speedups(result, D)
        if not ratios:
            continue
        reference = result["runs"][0]["label"]
        by = {(c, L): x for c, pts in ratios.items() for L, x in pts}
        lines += [f"## Prefill speed-up of {reference} over each other run, "
                  f"head_dim {D} (×, from TFLOP/s)", "",
                  "| " + " | ".join(["L", *ratios]) + " |",
                  "|" + "---|" * (len(ratios) + 1)]
        for L in cfg["prefill_lengths"]:
            cells = [f"{by[(c, L)]:.2f}" if (c, L) in by else "—" for c in ratios]
            lines.append("| " + " | ".join([f"{L:,}".replace(",", " "), *cells]) + " |")
        lines.append("")
    lines += linear_section(result)
    lines += experts_section(result)
    lines += ["OOM: out of memory (longer lengths then skipped: (OOM)); n/a: the "
              "backend has no kernel for the shape; crash: the worker died. Torch "
              "rows that could not use GQA read expanded K/V (see kv_heads_read in "
              "bench.json).", ""]
    return "\n".join(lines)


def write_outputs(result: Mapping[str, Any], out_dir: Path) -> dict[str, Any]:
    """bench.json, bench.md and the plots (or why there are none)."""
    from mlx_builder.verify.plots import PlotsUnavailable, make_plots
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Any] = {"json": out_dir / "bench.json", "markdown": out_dir / "bench.md"}
    paths["json"].write_text(json.dumps(result, indent=2))
    paths["markdown"].write_text(markdown_report(result))
    try:
        paths["plots"] = make_plots(result, out_dir)
    except PlotsUnavailable as exc:
        paths["plots"] = []
        paths["plots_skipped"] = str(exc)
    return paths


# ------------------------------------------------------------------ command

@dataclass(frozen=True)
class BenchOptions:
    out_dir: Path
    venv_root: Path
    config: BenchConfig = BenchConfig()
    # upstream's build: one wheel, or a release's wheels installed together
    baseline: tuple[Path, ...] = ()
    variants: tuple[tuple[str, Mapping[str, str]], ...] = ()
    torch_python: str | None = "auto"  # a path, "auto", or None for no torch
    python: str = ""
    wheelhouse: Path | None = None
    offline: bool = False
    system_site_packages: bool = False
    no_deps: bool = False
    reuse_venv: bool = False
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MoeLayers:
    """A mixture-of-experts layer's linear shapes (K, N) and its routing."""

    shapes: tuple[tuple[int, int], ...]
    experts: int
    top_k: int


# gemma-4 31B's linear layers (K, N): q (sliding, global), kv (sliding),
# o, MLP gate+up and down.
QMM_PRESETS = {"gemma4-31b": ((5376, 8192), (5376, 16384), (5376, 4096),
                              (8192, 5376), (5376, 43008), (21504, 5376))}

# Qwen3-30B-A3B's expert layers (K, N): gate and up (each 2048 → 768) and
# down (768 → 2048), 128 experts, top 8.
MOE_PRESETS = {"qwen3-30b-a3b": MoeLayers(((2048, 768), (768, 2048)), 128, 8)}


def _parse_shapes(text: str, what: str, presets: Iterable[str]) -> tuple[tuple[int, int], ...]:
    shapes = []
    for item in comma_list(text):
        k, sep, n = item.partition(":")
        if not sep or not k.strip().isdigit() or not n.strip().isdigit():
            raise ValueError(f"{what} shape {item!r} is not K:N (or one of "
                             f"{', '.join(presets)})")
        if int(k) == 0 or int(n) == 0:
            raise ValueError(f"{what} shape {item!r} has a zero dimension")
        shapes.append((int(k), int(n)))
    return tuple(shapes)


def parse_qmm_shapes(text: str) -> tuple[tuple[int, int], ...]:
    """``K:N[,K:N...]`` or a preset name (QMM_PRESETS); empty: none."""
    text = text.strip()
    if text in QMM_PRESETS:
        return QMM_PRESETS[text]
    return _parse_shapes(text, "qmm", QMM_PRESETS)


def parse_moe(text: str, experts: int | None = None,
              top_k: int | None = None) -> MoeLayers:
    """``K:N[,K:N...]`` with experts and top_k (128 and 8 unless given), or
    a preset name (MOE_PRESETS), whose experts and top-k the arguments
    override; empty: none."""
    text = text.strip()
    if text in MOE_PRESETS:
        preset = MOE_PRESETS[text]
    else:
        default = BenchConfig()
        preset = MoeLayers(_parse_shapes(text, "moe", MOE_PRESETS),
                           default.moe_experts, default.moe_top_k)
    layers = MoeLayers(preset.shapes, preset.experts if experts is None else experts,
                       preset.top_k if top_k is None else top_k)
    if layers.experts < 1 or not 1 <= layers.top_k <= layers.experts:
        raise ValueError(f"top-k {layers.top_k} of {layers.experts} experts: it takes "
                         "1 <= top-k <= experts")
    return layers


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    """'NAME:A=1,B=2' -> ('NAME', {'A': '1', 'B': '2'})."""
    name, sep, spec = text.partition(":")
    env = {}
    for item in comma_list(spec) or ("",):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ValueError(f"variant {text!r}: {item!r} is not NAME=VALUE")
        env[key] = value
    if not sep or not name:
        raise ValueError(f"variant {text!r} is not NAME:VAR=VALUE[,VAR=VALUE]")
    return name, env


def venv_name(wheels: Sequence[Path]) -> str:
    """The venv folder for a set of wheels: the first wheel's name, and for
    several a digest of them all, so that another set never reuses it."""
    name = wheels[0].name.removesuffix(".whl")
    if len(wheels) == 1:
        return name
    digest = hashlib.sha256("\n".join(sorted(w.name for w in wheels)).encode()).hexdigest()
    return f"{name}+{len(wheels) - 1}-{digest[:10]}"


def wheel_python(runner: Any, wheels: Sequence[Path], opts: BenchOptions) -> str:
    """A venv with ``wheels`` installed together; its Python."""
    import sys

    from mlx_builder.verify.testing import install_wheel, make_venv
    venv = opts.venv_root / venv_name(wheels)
    vpy = make_venv(runner, opts.python or sys.executable, venv,
                    system_site_packages=opts.system_site_packages,
                    reuse=opts.reuse_venv)
    install_wheel(runner, vpy, wheels, wheelhouse=opts.wheelhouse, offline=opts.offline,
                  no_deps=opts.no_deps)
    return str(vpy)


def baseline_names(opts: BenchOptions) -> str | list[str] | None:
    """What bench.json records for --baseline: a name, or the names of a
    release's wheels installed together."""
    names = [w.name for w in opts.baseline]
    return None if not names else names[0] if len(names) == 1 else names


def plan_runs(runner: Any, wheel: Path, opts: BenchOptions) -> tuple[list[Run], str]:
    """The runs to make, and a note on torch."""
    import shutil
    import sys
    patched = wheel_python(runner, (wheel,), opts)
    runs = [Run("patched", "mlx", patched, dict(opts.env))]
    if opts.baseline:
        runs.append(Run("upstream", "mlx", wheel_python(runner, opts.baseline, opts),
                        dict(opts.env)))
    runs += [Run(name, "mlx", patched, {**opts.env, **env}) for name, env in opts.variants]
    if opts.torch_python is None:
        return runs, "PyTorch skipped (--no-torch)"
    candidates = ([opts.torch_python] if opts.torch_python != "auto" else
                  list(dict.fromkeys(p for p in (sys.executable, shutil.which("python3"))
                                     if p)))
    torch_py, why = find_torch_python(candidates)
    if torch_py is None:
        return runs, f"PyTorch skipped: {why}"
    runs.append(Run("torch", "torch", torch_py, {}, tuple(opts.config.torch_backends)))
    return runs, f"PyTorch from {torch_py} ({why})"


def run_bench(wheel: Path, opts: BenchOptions) -> dict[str, Any]:
    from mlx_builder.console import console, progress
    from mlx_builder.process import StepRunner
    out_dir = opts.out_dir.resolve()
    runner = StepRunner(out_dir / "logs")
    runs, torch_note = plan_runs(runner, Path(wheel), opts)
    console.print(torch_note)
    total = sum(r.expected(opts.config) for r in runs)
    with progress("benchmarking", total=total) as (prog, task):
        def seen(rec: dict) -> None:
            prog.update(task, advance=1, description=(
                f"bench {column(rec)} {rec['mode']} D={rec['D']} kL={rec['kL']}: "
                f"{rec['status']}"))
        result = collect(runs, opts.config, out_dir / "logs", on_record=seen)
    result["torch_note"] = torch_note
    result["wheels"] = {"patched": Path(wheel).name, "upstream": baseline_names(opts)}
    report(result, out_dir)
    return result


def report(result: Mapping[str, Any], out_dir: Path) -> dict[str, Any]:
    """Write and print bench.json, bench.md and the plots of ``result``."""
    from mlx_builder.console import console
    paths = write_outputs(result, out_dir)
    console.print(paths["markdown"].read_text(), markup=False)
    for key in ("json", "markdown"):
        console.print(f"{key}: {paths[key]}")
    for png in paths["plots"]:
        console.print(f"plot: {png}")
    if paths.get("plots_skipped"):
        console.print(f"plots skipped: {paths['plots_skipped']}", markup=False)
    return paths


def load_result(path: Path) -> dict[str, Any]:
    """A bench.json written earlier (for `bench --report`)."""
    try:
        result = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path} as a bench result: {exc}",
                          "pass the bench.json an earlier `mlx-builder bench` wrote") from None
    missing = [k for k in ("config", "runs", "records") if k not in result]
    if missing:
        raise ConfigError(f"{path} is not a bench result: no {', '.join(missing)}",
                          "pass the bench.json an earlier `mlx-builder bench` wrote")
    return result
