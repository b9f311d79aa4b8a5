"""Bench results as data: the column an implementation goes by, the speed-up
ratios, the device and versions line and how times were taken. bench.py's
tables and plots.py's figures both read these (no import between them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def column(record: Mapping[str, Any]) -> str:
    """The name an implementation goes by in tables and plots."""
    if record.get("backend") in (None, "mlx"):
        return str(record["label"])
    return f"torch-{record['backend']}"


def speedups(result: Mapping[str, Any], D: int) -> dict[str, list[tuple[int, float]]]:
    """How many times faster the first run (the wheel under test) is than each
    other implementation at prefill, per length where both measured TFLOP/s:
    column -> [(L, ×)]."""
    if not result.get("runs"):
        return {}
    reference = str(result["runs"][0]["label"])
    value = {(column(r), r["kL"]): r["tflops"] for r in result["records"]
             if r["mode"] == "prefill" and r["D"] == D and r["status"] == "ok"
             and r.get("tflops")}
    out: dict[str, list[tuple[int, float]]] = {}
    for (col, kL), v in value.items():
        ref = value.get((reference, kL))
        if col != reference and ref is not None:
            out.setdefault(col, []).append((kL, ref / v))
    return {c: sorted(points) for c, points in out.items()}


def device_and_versions(result: Mapping[str, Any]) -> tuple[str, str]:
    devices = sorted({r["meta"].get("device", "?") for r in result["runs"] if r["meta"]})
    versions = []
    for r in result["runs"]:
        m = r["meta"]
        if r["framework"] == "mlx" and m:
            versions.append(f"{r['label']}: mlx {m.get('version', '?')}")
        elif m:
            versions.append(f"torch {m.get('version', '?')} (cuDNN {m.get('cudnn', '?')})")
    return ", ".join(devices) or "unknown device", "; ".join(dict.fromkeys(versions))


def timing_note(cfg: Mapping[str, Any]) -> str:
    """How the times were taken, for report headers."""
    queue = cfg.get("queue", 1)
    rounds = f"median of {cfg['iters']} after {cfg['warmup']} warm-up rounds"
    if queue > 1:
        return (f"{queue} calls queued per wait (time per call: device throughput), "
                f"{rounds}")
    return f"each call waited for (latency), {rounds}"


def length_label(n: int) -> str:
    """A sequence length as the tables and plots write it: 8k, 1536."""
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def num(x: float | None, digits: int = 3) -> str:
    """``digits`` significant digits, no exponent for the usual ranges; "—"
    when the value was not measured."""
    if x is None or x != x:
        return "—"
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.{digits}g}"
