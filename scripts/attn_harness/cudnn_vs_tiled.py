#!/usr/bin/env python3
"""Time MLX's cuDNN SDPA against the tiled kernel at head dims 192 and 256.

    python scripts/attn_harness/cudnn_vs_tiled.py [--json OUT] [--iters N]

Run it with the Python of a wheel of the patch series, on the GPU whose
routing it decides. MLX reads its MLX_CUDA_SDPA_* variables once, so each
path is timed in a child process of its own: `tiled`
(MLX_CUDA_SDPA_PATH=tiled), `cudnn` (MLX_CUDA_SDPA_PATH=cudnn with
MLX_CUDA_SDPA_CUDNN_MAX_HEAD_DIM=256) and `default` (the wheel's own
routing). MLX_CUDA_SDPA_TRACE=1 shows which path each call took; a time
counts only for the path asked for.

Shapes (bf16, batch 1, 32 query / 16 KV heads): causal prefill at 2k, 8k,
16k and 32k tokens; mlx-lm's chunked step, 2048 queries against 32768 keys
(bottom-right causal); a boolean sliding-window mask (1024 keys) at 32k.
Each call is waited for; the median of --iters calls after --warmup.
TFLOP/s count the visible (query, key) pairs: 4 * H * pairs * D.

It prints one table row per (head dim, shape) and the kCudnnWins entries
(scaled_dot_product_attention.cpp) the measurement supports: for each kind
of call (array mask or not), the largest head dim at which cuDNN beat the
tiles on every shape of that kind.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

HEADS, KV_HEADS = 32, 16
WINDOW = 1024
HEAD_DIMS = (192, 256)
PATHS = {
    "tiled": {"MLX_CUDA_SDPA_PATH": "tiled"},
    "cudnn": {"MLX_CUDA_SDPA_PATH": "cudnn",
              "MLX_CUDA_SDPA_CUDNN_MAX_HEAD_DIM": "256"},
    "default": {},
}


@dataclass(frozen=True)
class Shape:
    name: str
    q_len: int
    k_len: int
    mask: str  # "causal" or "window"

    @property
    def array_mask(self) -> bool:
        return self.mask == "window"

    def pairs(self) -> int:
        """Visible (query, key) pairs, causal bottom-right aligned."""
        offset = self.k_len - self.q_len
        total = 0
        for i in range(self.q_len):
            visible = offset + i + 1
            total += min(visible, WINDOW) if self.mask == "window" else visible
        return total


SHAPES = (
    Shape("causal 2k", 2048, 2048, "causal"),
    Shape("causal 8k", 8192, 8192, "causal"),
    Shape("causal 16k", 16384, 16384, "causal"),
    Shape("causal 32k", 32768, 32768, "causal"),
    Shape("chunked 2k x 32k", 2048, 32768, "causal"),
    Shape("window 32k", 32768, 32768, "window"),
)


@dataclass(frozen=True)
class Result:
    path: str
    head_dim: int
    shape: str
    ms: float | None       # None: the path did not take the call
    tflops: float | None
    routed: str            # the path MLX's trace reported
    error: str = ""


def tflops(shape: Shape, head_dim: int, ms: float) -> float:
    return 4 * HEADS * shape.pairs() * head_dim / (ms * 1e-3) / 1e12


def child(path: str, warmup: int, iters: int) -> None:
    """Times every (head dim, shape) in this process; one JSON line each."""
    import mlx.core as mx

    for head_dim in HEAD_DIMS:
        for shape in SHAPES:
            q = mx.random.normal((1, HEADS, shape.q_len, head_dim)).astype(mx.bfloat16)
            k = mx.random.normal((1, KV_HEADS, shape.k_len, head_dim)).astype(mx.bfloat16)
            v = mx.random.normal((1, KV_HEADS, shape.k_len, head_dim)).astype(mx.bfloat16)
            if shape.mask == "window":
                rows = mx.arange(shape.q_len)[:, None] + (shape.k_len - shape.q_len)
                cols = mx.arange(shape.k_len)[None, :]
                mask = (cols <= rows) & (cols > rows - WINDOW)
            else:
                mask = "causal"
            mx.eval(q, k, v, mask if shape.mask == "window" else q)
            scale = head_dim ** -0.5
            record = {"path": path, "head_dim": head_dim, "shape": shape.name}
            try:
                times = []
                for i in range(warmup + iters):
                    start = time.perf_counter()
                    out = mx.fast.scaled_dot_product_attention(
                        q, k, v, scale=scale, mask=mask)
                    mx.eval(out)
                    mx.synchronize()
                    if i >= warmup:
                        times.append((time.perf_counter() - start) * 1e3)
                record["ms"] = statistics.median(times)
            except Exception as e:  # a path that cannot take the call
                record["error"] = f"{type(e).__name__}: {e}"[:300]
            print("@@" + json.dumps(record), flush=True)
            sys.stderr.write(f"@@end {head_dim} {shape.name}\n")
            sys.stderr.flush()


def routed_paths(stderr: str) -> dict[tuple[int, str], str]:
    """The path the trace reported for each case (its last call's line)."""
    routed: dict[tuple[int, str], str] = {}
    seen: list[str] = []
    for line in stderr.splitlines():
        if line.startswith("[mlx-sdpa-route]"):
            seen.append(line.split("path=", 1)[1].split()[0])
        elif line.startswith("@@end "):
            _, dim, name = line.split(" ", 2)
            routed[(int(dim), name)] = seen[-1] if seen else "?"
            seen = []
    return routed


def run_path(path: str, warmup: int, iters: int, timeout: float) -> list[Result]:
    env = dict(os.environ, MLX_CUDA_SDPA_TRACE="1", **PATHS[path])
    proc = subprocess.run(
        [sys.executable, __file__, "--child", path, "--warmup", str(warmup),
         "--iters", str(iters)],
        env=env, capture_output=True, text=True, timeout=timeout)
    routed = routed_paths(proc.stderr)
    by_shape = {s.name: s for s in SHAPES}
    results = []
    for line in proc.stdout.splitlines():
        if not line.startswith("@@"):
            continue
        r = json.loads(line[2:])
        took = routed.get((r["head_dim"], r["shape"]), "?")
        ms = r.get("ms")
        # A forced path that did not take the call timed another one.
        if ms is not None and path != "default" and took != path:
            ms = None
        results.append(Result(
            path=path, head_dim=r["head_dim"], shape=r["shape"], ms=ms,
            tflops=(tflops(by_shape[r["shape"]], r["head_dim"], ms)
                    if ms is not None else None),
            routed=took, error=r.get("error", "")))
    if proc.returncode != 0 and not results:
        raise RuntimeError(f"{path}: child exited {proc.returncode}: "
                           f"{proc.stderr[-2000:]}")
    return results


def cudnn_wins(results: list[Result]) -> dict[bool, int]:
    """{array mask: the largest head dim at which cuDNN beat the tiles on
    every shape of that kind}; kinds where it lost somewhere are absent."""
    best = {}
    for array_mask in (False, True):
        shapes = [s for s in SHAPES if s.array_mask == array_mask]
        for head_dim in sorted(HEAD_DIMS):
            wins = True
            for shape in shapes:
                ms = {r.path: r.ms for r in results
                      if r.head_dim == head_dim and r.shape == shape.name}
                if ms.get("cudnn") is None or ms.get("tiled") is None or \
                        ms["cudnn"] >= ms["tiled"]:
                    wins = False
            if not wins:
                break
            best[array_mask] = head_dim
    return best


def fmt(x: float | None, digits: int = 0) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def table(results: list[Result]) -> str:
    rows = ["| D | shape | tiled ms | cuDNN ms | cuDNN / tiled | tiled TFLOP/s "
            "| cuDNN TFLOP/s | default path |", "|" + "---|" * 8]
    for head_dim in HEAD_DIMS:
        for shape in SHAPES:
            got = {r.path: r for r in results
                   if r.head_dim == head_dim and r.shape == shape.name}
            t, c, d = got.get("tiled"), got.get("cudnn"), got.get("default")
            ratio = (c.ms / t.ms if t and c and t.ms and c.ms is not None
                     else None)
            rows.append(
                f"| {head_dim} | {shape.name} | {fmt(t and t.ms, 2)} | "
                f"{fmt(c and c.ms, 2)} | {fmt(ratio, 2)} | "
                f"{fmt(t and t.tflops)} | {fmt(c and c.tflops)} | "
                f"{d.routed if d else '—'} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", choices=sorted(PATHS), help=argparse.SUPPRESS)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=150.0,
                    help="seconds per path's child process")
    ap.add_argument("--json", help="write every result here")
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.warmup, args.iters)
        return 0
    import mlx.core as mx
    info = mx.device_info() if hasattr(mx, "device_info") else {}
    print(f"mlx {mx.__version__}; {info.get('device_name', '?')}", flush=True)
    results: list[Result] = []
    for path in PATHS:
        results += run_path(path, args.warmup, args.iters, args.timeout)
    print(table(results))
    wins = cudnn_wins(results)
    print("\nkCudnnWins entries this run supports (arch = compute capability * 10):")
    if not wins:
        print("  none: the tiles were faster somewhere for every kind of call")
    for array_mask, head_dim in sorted(wins.items()):
        print(f"  {{arch, {'true' if array_mask else 'false'}, {head_dim}}}")
    errors = [r for r in results if r.error]
    for r in errors:
        print(f"error: {r.path} D={r.head_dim} {r.shape}: {r.error}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"mlx": mx.__version__, "device": info.get("device_name"),
                       "results": [asdict(r) for r in results],
                       "cudnn_wins": {str(k): v for k, v in wins.items()}},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
