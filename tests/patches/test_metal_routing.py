"""The head dim 192/256 routing decision of the Metal patches, compiled on the
host: mlx/backend/metal/sdpa_routing.h is taken out of each series' patch,
built with tests/patches/metal_routing_driver.cpp and checked against a table of
cases. No Metal is involved; the header has no Metal dependency by design.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_metal_patches import load_index, metal_entries, new_file_from_patch, patch_path

HEADER = "mlx/backend/metal/sdpa_routing.h"
CALLER = "mlx/backend/metal/scaled_dot_product_attention.cpp"
DRIVER = Path(__file__).with_name("metal_routing_driver.cpp")

GIB = 1 << 30
MAXBUF = 64 * GIB  # an M-series Mac's maxBufferLength ballpark
DEFAULT_MIN_KL = 16385  # kL > 16384 takes the fused kernel


def _carriers() -> dict[str, tuple[Path, str]]:
    """series name -> (patch, header text) for each series carrying it."""
    found = {}
    for series, patch in metal_entries():
        path = patch_path(series, patch)
        if not path.is_file():
            continue
        header = new_file_from_patch(path.read_text(), HEADER)
        if header is not None:
            found[series["name"]] = (path, header)
    return found


CARRIERS = _carriers()
SERIES = sorted(CARRIERS)


def _compiler() -> str | None:
    for candidate in (os.environ.get("CXX"), "g++", "clang++", "c++"):
        if candidate and shutil.which(candidate):
            return candidate
    return None


@pytest.fixture(scope="module")
def driver_for(tmp_path_factory):
    """Compiles the driver against one series' header (once per content)."""
    cxx = _compiler()
    if cxx is None:
        pytest.skip("no C++ compiler (set CXX, or install g++ or clang++)")
    built: dict[str, Path] = {}

    def build(series: str) -> Path:
        header = CARRIERS[series][1]
        key = hashlib.sha256(header.encode()).hexdigest()[:16]
        if key not in built:
            root = tmp_path_factory.mktemp(f"routing-{key}")
            (root / HEADER).parent.mkdir(parents=True)
            (root / HEADER).write_text(header)
            exe = root / "driver"
            res = subprocess.run(
                [cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic",
                 f"-I{root}", str(DRIVER), "-o", str(exe)],
                capture_output=True, text=True,
            )
            assert res.returncode == 0, f"{series}: compile failed:\n{res.stderr}"
            built[key] = exe
        return built[key]

    return build


def run_driver(exe: Path, requests: list[str], env: dict | None = None) -> list[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MLX_SDPA_")}
    res = subprocess.run(
        [str(exe)], input="".join(r + "\n" for r in requests),
        capture_output=True, text=True, env={**base, **(env or {})}, check=True,
    )
    out = res.stdout.splitlines()
    assert len(out) == len(requests), res.stderr
    return out


def route(hq, hv=None, b=1, h=8, ql=2048, kl=4096, nbytes=2, maxbuf=MAXBUF,
          minkl=DEFAULT_MIN_KL, force="none"):
    hv = hq if hv is None else hv
    return f"route {hq} {hv} {b} {h} {ql} {kl} {nbytes} {maxbuf} {minkl} {force}"


# Score bytes of the unfused path: B * Hq * qL * kL * itemsize.
EDGE_SCORE = 1 * 64 * 16384 * 16384 * 2  # 32 GiB, kL at the default threshold

ROUTE_CASES = [
    # key length threshold, both head dims
    ("256 kL 16384", route(256, kl=16384), "unfused"),
    ("256 kL 16385", route(256, kl=16385), "fused"),
    ("192 kL 16384", route(192, kl=16384), "unfused"),
    ("192 kL 16385", route(192, kl=16385), "fused"),
    ("256 short", route(256, ql=128, kl=128), "unfused"),
    # other head dims keep upstream routing
    ("128 long", route(128, kl=100_000), "not_routed"),
    ("64 long", route(64, kl=100_000), "not_routed"),
    ("96 forced", route(96, kl=100_000, force="unfused"), "not_routed"),
    ("192/128 qk/v", route(192, 128, kl=100_000), "not_routed"),
    ("192/256 qk/v", route(192, 256, kl=100_000), "not_routed"),
    # the score budget is half the maximum buffer length
    ("budget equal", route(256, h=64, ql=16384, kl=16384, maxbuf=2 * EDGE_SCORE),
     "unfused"),
    ("budget one byte over", route(256, h=64, ql=16384, kl=16384,
                                   maxbuf=2 * (EDGE_SCORE - 1)), "fused"),
    ("budget one byte under", route(256, h=64, ql=16384, kl=16384,
                                    maxbuf=2 * (EDGE_SCORE + 1)), "unfused"),
    ("budget odd maxbuf", route(256, h=64, ql=16384, kl=16384,
                                maxbuf=2 * EDGE_SCORE - 1), "fused"),
    ("no maxbuf, no budget", route(256, b=64, h=64, ql=16384, kl=16384, maxbuf=0),
     "unfused"),
    ("batch counts", route(192, b=3, h=64, ql=16384, kl=16384,
                           maxbuf=2 * EDGE_SCORE), "fused"),
    ("saturating product", route(256, b=1 << 20, h=1 << 20, ql=1 << 20, kl=4096),
     "fused"),
    # GQA: the unfused scores have one row block per query head
    ("gqa 32 q heads over", route(256, h=32, ql=8192, kl=16384, maxbuf=8 * GIB),
     "fused"),
    ("gqa 4 kv heads would fit", route(256, h=4, ql=8192, kl=16384, maxbuf=8 * GIB),
     "unfused"),
    # chunked prefill: qL = 2048 against a long cache
    ("chunk kL 16384", route(256, h=32, ql=2048, kl=16384), "unfused"),
    ("chunk kL 65536", route(256, h=32, ql=2048, kl=65536), "fused"),
    ("chunk 192 kL 131072", route(192, h=16, ql=2048, kl=131072), "fused"),
    # overrides
    ("min kL 4096 below", route(256, kl=4095, minkl=4096), "unfused"),
    ("min kL 4096 at", route(256, kl=4096, minkl=4096), "fused"),
    ("min kL 0", route(256, ql=9, kl=9, minkl=0), "fused"),
    ("min kL raised", route(256, kl=32768, minkl=65536), "unfused"),
    ("force fused short", route(256, ql=16, kl=16, force="fused"), "fused"),
    ("force unfused long", route(192, kl=1 << 20, force="unfused"), "unfused"),
    ("force unfused over budget", route(256, b=64, h=64, ql=16384, kl=16384,
                                        force="unfused"), "unfused"),
    # decode (vector kernel) is not routed here, forced or not
    ("decode qL 1", route(256, ql=1, kl=1 << 20), "not_routed"),
    ("decode qL 8 forced", route(256, ql=8, kl=1 << 20, force="fused"), "not_routed"),
    ("full qL 9", route(256, ql=9, kl=1 << 20), "fused"),
    # only 2-byte types have bd=192/256 kernels that fit threadgroup memory
    ("float32", route(256, kl=1 << 20, nbytes=4), "not_routed"),
    ("float32 forced", route(256, kl=16, nbytes=4, force="fused"), "not_routed"),
]


def test_every_series_carries_the_header():
    index_names = {series["name"] for series in load_index()["series"]}
    assert set(SERIES) == index_names, "the routing patch belongs on every line"
    assert len({header for _, header in CARRIERS.values()}) == 1, (
        "the series carry different sdpa_routing.h versions"
    )


@pytest.mark.parametrize("series", SERIES)
def test_route_table(series, driver_for):
    exe = driver_for(series)
    got = run_driver(exe, [request for _, request, _ in ROUTE_CASES])
    mismatches = [
        (name, want, have)
        for (name, _, want), have in zip(ROUTE_CASES, got)
        if want != have
    ]
    assert not mismatches


@pytest.mark.parametrize("series", SERIES)
def test_score_bytes_and_budget(series, driver_for):
    exe = driver_for(series)
    got = run_driver(exe, [
        "score 1 64 16384 16384 2",
        "score 2 3 5 7 2",
        "score 0 8 2048 2048 2",
        f"score {1 << 31} {1 << 31} {1 << 31} 2 2",
        f"budget {MAXBUF}",
        f"budget {MAXBUF + 1}",
        "budget 0",
        "budget -5",
    ])
    assert got == [str(EDGE_SCORE), str(2 * 2 * 3 * 5 * 7), "0",
                   str(2**63 - 1), str(MAXBUF // 2), str(MAXBUF // 2), "0", "0"]


@pytest.mark.parametrize("series", SERIES)
def test_override_parsing(series, driver_for):
    exe = driver_for(series)
    cases = {
        "force fused": "fused", "force unfused": "unfused", "force auto": "none",
        "force <empty>": "none", "force <unset>": "none",
        "force Fused": "invalid", "force fast": "invalid",
        "minkl <unset>": str(DEFAULT_MIN_KL), "minkl <empty>": str(DEFAULT_MIN_KL),
        "minkl 0": "0", "minkl 4096": "4096",
        "minkl 9223372036854775807": str(2**63 - 1),
        "minkl 9223372036854775808": "-1", "minkl -1": "-1", "minkl 16k": "-1",
        "minkl 1e4": "-1",
    }
    assert dict(zip(cases, run_driver(exe, list(cases)))) == cases


@pytest.mark.parametrize("series", SERIES)
def test_overrides_from_environment(series, driver_for):
    exe = driver_for(series)
    assert run_driver(exe, ["env"]) == [f"minkl={DEFAULT_MIN_KL} force=none"]
    env = {"MLX_SDPA_FUSED_MIN_KL": "8192", "MLX_SDPA_FORCE_PATH": "unfused"}
    assert run_driver(exe, ["env"], env) == ["minkl=8192 force=unfused"]
    for name, value in (("MLX_SDPA_FORCE_PATH", "always"),
                        ("MLX_SDPA_FUSED_MIN_KL", "lots")):
        (line,) = run_driver(exe, ["env"], {name: value})
        assert line.startswith("error: ") and name in line and value in line


def _route_call_args(patch_text: str) -> list[str]:
    """Arguments of the sdpa_full_route(...) call the patch adds to the caller."""
    start = patch_text.index(f"diff --git a/{CALLER} b/{CALLER}")
    end = patch_text.find("\ndiff --git ", start + 1)
    added = "".join(
        line[1:] for line in patch_text[start:end].splitlines(keepends=True)
        if line.startswith("+") and not line.startswith("+++")
    )
    call = added[added.index("metal::sdpa_full_route(") + len("metal::sdpa_full_route("):]
    args, depth, current = [], 0, ""
    for ch in call:
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            args.append(current.strip())
            current = ""
        else:
            current += ch
    args.append(current.strip())
    return [re.sub(r"\s+", "", arg) for arg in args]


@pytest.mark.parametrize("series", SERIES)
def test_caller_passes_query_heads_itemsize_and_device_limit(series):
    """The numbers the table assumes are the ones MLX passes in: query heads
    (not KV heads, for GQA), the query dtype's size and maxBufferLength."""
    patch, _ = CARRIERS[series]
    args = _route_call_args(patch.read_text())
    assert len(args) == 9, args
    assert args[3] in ("num_query_heads", "q.shape(1)")
    assert args[6] == "q.itemsize()"
    assert args[7].endswith("mtl_device()->maxBufferLength()")
    assert args[8] == "metal::sdpa_routing_overrides_from_env()"
