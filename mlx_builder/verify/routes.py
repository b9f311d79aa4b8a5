"""The CUDA SDPA routing table of an installed MLX: which attention path
(cudnn, tiled, decode, vector or the unfused fallback) MLX takes for each
head dim, dtype, length and mask, and why.

With ``MLX_CUDA_SDPA_TRACE=1`` an MLX built with the routing trace prints one
line to stderr per routing decision::

    [mlx-sdpa-route] path=tiled arch=sm_90 dtype=bfloat16 D=256 Dv=256 qL=512 kL=4096 mask=causal training=0 reason=""

``reason`` is empty when the first-choice path was taken, otherwise it says
why the faster paths were not used; ``MLX_CUDA_SDPA_PATH=<path>`` forces a
path where that path supports the call.

The probe (``probe_source``) runs in the target interpreter and makes one SDPA
call per case of a ``RouteGrid``; its own lines start with
``[mlx-sdpa-probe-…]``. ``run_probe`` runs it as a logged step, parses what
it printed and turns every way it can go wrong into its own error.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rich.table import Table
from rich.text import Text

from mlx_builder.errors import (
    ConfigError,
    InterpreterError,
    MlxImportError,
    NoGpuError,
    RouteParseError,
    RouteProbeError,
    UnpatchedMlxError,
)
from mlx_builder.process import StepRunner, first_error_line

TRACE_ENV = "MLX_CUDA_SDPA_TRACE"
PATH_ENV = "MLX_CUDA_SDPA_PATH"
PATHS = ("cudnn", "tiled", "decode", "vector", "fallback")
DTYPES = ("bfloat16", "float16", "float32")
TRACE_MASKS = ("none", "causal", "array")          # what a route line says
PROBE_MASKS = ("none", "causal", "bool", "additive")  # what the probe passes
ROUTE_FIELDS = ("path", "arch", "dtype", "D", "Dv", "qL", "kL", "mask", "training",
                "reason")
ROUTE_FORMAT = ('[mlx-sdpa-route] path=<' + "|".join(PATHS) + '> arch=sm_<NN> dtype=<'
                + "|".join(DTYPES) + '> D=<int> Dv=<int> qL=<int> kL=<int> mask=<'
                + "|".join(TRACE_MASKS) + '> training=<0|1> reason="<text>"')

ROUTE_TAG = "[mlx-sdpa-route]"
CASE_TAG = "[mlx-sdpa-probe-case]"
ERROR_TAG = "[mlx-sdpa-probe-error]"
FATAL_TAG = "[mlx-sdpa-probe-fatal]"
INFO_TAG = "[mlx-sdpa-probe-info]"

PROBE_TEMPLATE = r'''"""SDPA route probe of `mlx-builder routes`: one SDPA call per case of
GRID. With MLX_CUDA_SDPA_TRACE=1 a routing-patched MLX prints [mlx-sdpa-route] lines."""
import faulthandler
import sys

GRID = __GRID__
BATCH, HEADS, KV_HEADS = 1, 4, 2


def cases():
    return [(dtype, D, qL, kL, mask)
            for dtype in GRID["dtypes"] for D in GRID["dims"]
            for qL in GRID["qlens"] for kL in GRID["klens"] if qL <= kL
            for mask in GRID["masks"]]


def case_name(case):
    return "%s-D%d-qL%d-kL%d-%s" % case


def quoted(text):
    return '"' + " ".join(str(text).split()).replace('"', "'") + '"'


def say(line):
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def make_mask(mx, kind, qL, kL, dtype):
    if kind == "none":
        return None
    if kind == "causal":
        return "causal"
    # Causal aligned to the last key, as an array: no row is fully masked.
    keep = mx.arange(kL)[None, :] <= mx.arange(kL - qL, kL)[:, None]
    if kind == "bool":
        return keep
    return mx.where(keep, 0.0, float("-inf")).astype(dtype)


def run_case(mx, case):
    dtype_name, D, qL, kL, mask_kind = case
    dtype = getattr(mx, dtype_name)
    q = mx.random.normal((BATCH, HEADS, qL, D)).astype(dtype)
    k = mx.random.normal((BATCH, KV_HEADS, kL, D)).astype(dtype)
    v = mx.random.normal((BATCH, KV_HEADS, kL, D)).astype(dtype)
    out = mx.fast.scaled_dot_product_attention(
        q, k, v, scale=D ** -0.5, mask=make_mask(mx, mask_kind, qL, kL, dtype))
    mx.eval(out)


def main():
    faulthandler.enable()  # a crash inside MLX names itself in the log
    try:
        import mlx.core as mx
    except Exception as exc:
        say("[mlx-sdpa-probe-fatal] kind=import error="
            + quoted("%s: %s" % (type(exc).__name__, exc)))
        return 3
    version = quoted(getattr(mx, "__version__", "unknown"))
    device = mx.default_device()
    cuda = getattr(mx, "cuda", None)
    has_cuda = bool(cuda is not None and cuda.is_available())
    if device.type != mx.gpu or not has_cuda:
        say("[mlx-sdpa-probe-fatal] kind=no-gpu version=%s device=%s cuda=%d"
            % (version, quoted(device), has_cuda))
        return 4
    try:
        name = mx.device_info().get("device_name", "")
    except Exception:
        name = ""
    todo = cases()
    say("[mlx-sdpa-probe-info] version=%s device=%s cases=%d"
        % (version, quoted(name), len(todo)))
    mx.random.seed(0)
    for case in todo:
        say("[mlx-sdpa-probe-case] case=" + case_name(case))
        try:
            run_case(mx, case)
        except Exception as exc:
            say("[mlx-sdpa-probe-error] case=%s error=%s"
                % (case_name(case), quoted("%s: %s" % (type(exc).__name__, exc))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


# ------------------------------------------------------------------ the grid

@dataclass(frozen=True)
class RouteGrid:
    """The cases the probe runs: every combination with qL <= kL."""

    dims: tuple[int, ...] = (64, 128, 192, 256, 512)
    dtypes: tuple[str, ...] = DTYPES
    qlens: tuple[int, ...] = (1, 3, 512)
    klens: tuple[int, ...] = (512, 4096)
    masks: tuple[str, ...] = PROBE_MASKS

    def __post_init__(self) -> None:
        for name, known in (("dtypes", DTYPES), ("masks", PROBE_MASKS)):
            values = getattr(self, name)
            unknown = [v for v in values if v not in known]
            if not values or unknown:
                raise ConfigError(f"--{name}: unknown or no value(s): {', '.join(unknown)}",
                                  f"known: {', '.join(known)}")
        for name in ("dims", "qlens", "klens"):
            values = getattr(self, name)
            if not values or min(values) < 1:
                raise ConfigError(f"--{name} needs positive sizes, got {values}")
        if not self.case_count():
            raise ConfigError("the grid has no case with qL <= kL",
                              f"qlens {self.qlens}, klens {self.klens}",
                              "pass a --qlens value no larger than one of --klens")

    def case_count(self) -> int:
        pairs = sum(1 for q in self.qlens for k in self.klens if q <= k)
        return pairs * len(self.dims) * len(self.dtypes) * len(self.masks)

    def to_json(self) -> dict[str, list]:
        return {f.name: list(getattr(self, f.name)) for f in dataclasses.fields(self)}


def probe_source(grid: RouteGrid) -> str:
    """The probe program for ``grid``, to run in the target interpreter."""
    return PROBE_TEMPLATE.replace("__GRID__", repr(grid.to_json()))


# ------------------------------------------------------------------ parsing

_VALUE = r'(?:"[^"]*"|[^\s"]*)'
_PAIR = re.compile(rf'(\w+)=({_VALUE})')
_PAIRS = re.compile(rf'\w+={_VALUE}(?: \w+={_VALUE})*')
_ARCH = re.compile(r"sm_\d+[a-z]?")
_INT = re.compile(r"[0-9]+")


def _pairs(body: str) -> list[tuple[str, str]] | None:
    """``key=value key="quoted text"`` as raw (key, value) pairs, or None."""
    if not _PAIRS.fullmatch(body):
        return None
    return _PAIR.findall(body)


def _unquote(value: str) -> str:
    return value[1:-1] if value.startswith('"') else value


@dataclass(frozen=True)
class RouteRecord:
    """One routing decision, with the trace's field names."""

    path: str
    arch: str
    dtype: str
    D: int
    Dv: int
    qL: int
    kL: int
    mask: str
    training: bool
    reason: str

    def sort_key(self) -> tuple:
        return (self.arch, DTYPES.index(self.dtype), self.D, self.Dv, self.qL, self.kL,
                TRACE_MASKS.index(self.mask), self.training, PATHS.index(self.path),
                self.reason)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _malformed(line: str, problem: str) -> RouteParseError:
    return RouteParseError(
        f"malformed SDPA routing line from MLX: {line.strip()}",
        f"{problem}; the format is: {ROUTE_FORMAT}",
        "this MLX prints a trace format mlx-builder does not know: use an mlx-builder "
        "and an MLX wheel built from the same patch series")


def _check_field(key: str, value: str) -> str:
    """Why ``value`` is wrong for ``key``, or ""."""
    choices = {"path": PATHS, "dtype": DTYPES, "mask": TRACE_MASKS, "training": ("0", "1")}
    if key in choices and value not in choices[key]:
        return f"{key}={value} is not one of {'|'.join(choices[key])}"
    if key == "arch" and not _ARCH.fullmatch(value):
        return f"arch={value} is not sm_<NN>"
    if key in ("D", "Dv", "qL", "kL") and not _INT.fullmatch(value):
        return f"{key}={value} is not an integer"
    return ""


def parse_route_line(line: str) -> RouteRecord | None:
    """The record of a ``[mlx-sdpa-route]`` line, None for any other line. The
    tag may follow unrelated text (output that lacked a newline); what follows
    it must be the exact trace format, or RouteParseError says what is not."""
    at = line.find(ROUTE_TAG)
    if at < 0:
        return None
    pairs = _pairs(line[at + len(ROUTE_TAG):].strip())
    if pairs is None:
        raise _malformed(line, "it is not key=value pairs separated by single spaces "
                               "(with the reason in double quotes)")
    keys = tuple(k for k, _ in pairs)
    if keys != ROUTE_FIELDS:
        raise _malformed(line, f"its keys are '{' '.join(keys)}', "
                               f"expected '{' '.join(ROUTE_FIELDS)}'")
    raw = dict(pairs)
    if not raw["reason"].startswith('"'):
        raise _malformed(line, "the reason is not in double quotes")
    for key in ROUTE_FIELDS[:-1]:
        problem = _check_field(key, raw[key])
        if problem:
            raise _malformed(line, problem)
    return RouteRecord(path=raw["path"], arch=raw["arch"], dtype=raw["dtype"],
                       D=int(raw["D"]), Dv=int(raw["Dv"]), qL=int(raw["qL"]),
                       kL=int(raw["kL"]), mask=raw["mask"], training=raw["training"] == "1",
                       reason=_unquote(raw["reason"]))


@dataclass(frozen=True)
class ProbeFailure:
    """A probe case whose SDPA call raised."""

    case: str
    error: str


@dataclass(frozen=True)
class ProbeOutput:
    """What the probe printed: every route line in order, the cases it
    started, the cases that raised, its info or fatal marker, and every
    other line (Python's or MLX's own messages)."""

    routes: tuple[RouteRecord, ...] = ()
    cases: tuple[str, ...] = ()
    errors: tuple[ProbeFailure, ...] = ()
    info: Mapping[str, str] | None = None
    fatal: Mapping[str, str] | None = None
    other: tuple[str, ...] = ()


def _marker(text: str, tag: str) -> Mapping[str, str]:
    body = text[len(tag):].strip()
    pairs = _pairs(body)
    if pairs is None:
        return MappingProxyType({"raw": body})
    return MappingProxyType({k: _unquote(v) for k, v in pairs})


def parse_probe_output(lines: Iterable[str]) -> ProbeOutput:
    """Sort the probe's output into its parts; other lines are ignored."""
    routes: list[RouteRecord] = []
    cases: list[str] = []
    errors: list[ProbeFailure] = []
    other: list[str] = []
    info = fatal = None
    for line in lines:
        text = line.strip()
        if text.startswith(CASE_TAG):
            cases.append(_marker(text, CASE_TAG).get("case", "?"))
        elif text.startswith(ERROR_TAG):
            fields = _marker(text, ERROR_TAG)
            errors.append(ProbeFailure(fields.get("case", "?"),
                                       fields.get("error", fields.get("raw", ""))))
        elif text.startswith(INFO_TAG):
            info = _marker(text, INFO_TAG)
        elif text.startswith(FATAL_TAG):
            fatal = _marker(text, FATAL_TAG)
        else:
            record = parse_route_line(text)
            if record is not None:
                routes.append(record)
            elif text:
                other.append(text)
    return ProbeOutput(tuple(routes), tuple(cases), tuple(errors), info, fatal,
                       tuple(other))


def unique_routes(records: Iterable[RouteRecord]) -> tuple[RouteRecord, ...]:
    """Each distinct decision once, sorted by arch, dtype, D, qL, kL, mask."""
    return tuple(sorted(set(records), key=RouteRecord.sort_key))


# ------------------------------------------------------------------ running

@dataclass(frozen=True)
class RouteReport:
    python: str
    env: Mapping[str, str]   # the shell's MLX_* variables and the --env values
    grid: RouteGrid
    output: ProbeOutput
    log_path: Path

    @property
    def routes(self) -> tuple[RouteRecord, ...]:
        return unique_routes(self.output.routes)

    def title(self) -> str:
        info = self.output.info or {}
        where = info.get("device") or ", ".join(sorted({r.arch for r in self.routes}))
        env = " ".join(f"{k}={v}" for k, v in sorted(self.env.items()) if k != TRACE_ENV)
        return (f"CUDA SDPA routes: MLX {info.get('version', '?')} on {where or '?'}"
                + (f" with {env}" if env else ""))

    def to_json(self) -> dict[str, Any]:
        info = self.output.info or {}
        return {"python": self.python, "mlx_version": info.get("version"),
                "device": info.get("device"), "env": dict(self.env),
                "grid": self.grid.to_json(), "cases": len(self.output.cases),
                "route_lines": len(self.output.routes),
                "routes": [r.to_json() for r in self.routes],
                "probe_errors": [dataclasses.asdict(e) for e in self.output.errors],
                "log": str(self.log_path)}


def render_table(report: RouteReport) -> Table:
    table = Table("arch", "dtype", "D", "qL", "kL", "mask", "path", "reason",
                  title=report.title())
    for r in report.routes:
        table.add_row(r.arch, r.dtype, str(r.D), str(r.qL), str(r.kL), r.mask,
                      r.path, Text(r.reason or "(first choice)"))
    return table


def resolve_interpreter(python: str) -> str:
    """``python`` as a path that exists and can run, or InterpreterError."""
    if os.sep in python or (os.altsep and os.altsep in python):
        path = Path(python).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        why = "no such file" if not path.exists() else "it is not an executable file"
    else:
        found = shutil.which(python)
        if found:
            return found
        why = "no program of that name on PATH"
    raise InterpreterError(f"Python interpreter {python} not found", why,
                           "pass --python with the Python that has the MLX wheel, "
                           "e.g. --python ~/venvs/mlx/bin/python")


def routing_env(extra: Mapping[str, str], base: Mapping[str, str]) -> dict[str, str]:
    """The MLX variables the probe sees: MLX_* of ``base`` (not mlx-builder's
    own), then ``extra``, then the trace switch."""
    env = {k: v for k, v in base.items()
           if k.startswith("MLX_") and not k.startswith("MLX_BUILDER_")}
    env.update(extra)
    env[TRACE_ENV] = "1"
    return env


def _exit_text(rc: int) -> str:
    if rc < 0:
        try:
            return f"signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"signal {-rc}"
    return f"exit code {rc}"


def check_output(output: ProbeOutput, returncode: int, python: str, grid: RouteGrid,
                 log_path: Path) -> None:
    """Raise the error that explains a probe run without a routing table."""
    log = f"full log: {log_path}"
    fatal = output.fatal or {}
    if fatal.get("kind") == "import":
        raise MlxImportError(
            f"`import mlx.core` fails in {python}", fatal.get("error", ""),
            f"install the MLX wheel into that interpreter (`{python} -m pip install "
            f"dist/mlx-….whl`) or pass --python with the one that has it; {log}")
    if fatal.get("kind") == "no-gpu":
        raise NoGpuError(
            f"MLX {fatal.get('version', '?')} in {python} sees no CUDA GPU",
            f"default device {fatal.get('device', '?')}, mx.cuda.is_available() "
            f"{fatal.get('cuda') == '1'}; the routing table is that of the CUDA SDPA and "
            "needs a CUDA GPU",
            "run it on a machine with an NVIDIA GPU and a CUDA build of MLX "
            "(`mlx-builder build --target cuda-smXX`)")
    if returncode != 0:
        last = f" during case {output.cases[-1]}" if output.cases else ""
        raise RouteProbeError(
            f"the SDPA route probe died with {_exit_text(returncode)}{last} "
            f"({len(output.routes)} routing lines before)",
            first_error_line("\n".join(output.other)) or "it printed no message of its own",
            f"narrow the grid (--dims, --dtypes, --qlens, --klens, --masks) or force "
            f"another path (--env {PATH_ENV}=fallback) to skip the case; {log}")
    if output.routes:
        return
    if output.info is None:
        raise RouteProbeError(
            f"the SDPA route probe did not run in {python}",
            f"it exited with {_exit_text(returncode)} without printing {INFO_TAG}",
            f"check that --python names a Python interpreter; {log}")
    if len(output.cases) <= len(output.errors):
        first = output.errors[0] if output.errors else None
        raise RouteProbeError(
            f"none of the {grid.case_count()} SDPA probe cases ran in {python}",
            f"first: {first.case}: {first.error}" if first else "the probe started no case",
            f"read the errors in the log; {log}")
    raise UnpatchedMlxError(
        f"MLX {output.info.get('version', '?')} in {python} printed no SDPA routing lines",
        f"{TRACE_ENV}=1 was set and {len(output.cases) - len(output.errors)} SDPA calls "
        f"ran, but none printed {ROUTE_TAG}: this MLX build is not patched with the "
        f"routing patch ({TRACE_ENV} unsupported)",
        f"install an MLX wheel built with the routing patch, or pass --python with the "
        f"interpreter that has one; {log}")


def run_probe(runner: StepRunner, python: str, grid: RouteGrid, env: Mapping[str, str],
              on_line: Callable[[str], None] | None = None) -> RouteReport:
    """Run the probe with ``python`` (as step 'sdpa-route-probe', the probe
    saved beside its log) and return its routes; raise on any other outcome."""
    interpreter = resolve_interpreter(python)
    script = runner.log_dir / "routes_probe.py"
    script.write_text(probe_source(grid), encoding="utf-8")
    probe_env = routing_env(env, os.environ)
    lines: list[str] = []

    def seen(line: str) -> None:
        lines.append(line)
        if on_line is not None:
            on_line(line)
    result = runner.run("sdpa-route-probe", [interpreter, "-u", script],
                        env={**env, TRACE_ENV: "1"}, on_line=seen, check=False,
                        error_cls=InterpreterError,
                        hint="pass --python with a Python interpreter that runs")
    try:
        output = parse_probe_output(lines)
    except RouteParseError as exc:
        raise RouteParseError(exc.what, exc.why,
                              f"{exc.next_step}; full log: {result.log_path}") from None
    check_output(output, result.returncode, interpreter, grid, result.log_path)
    return RouteReport(interpreter, MappingProxyType(probe_env), grid, output,
                       result.log_path)
