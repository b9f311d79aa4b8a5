#!/usr/bin/env python3
"""ptxas -v of ptxas_probe.cu per architecture as a markdown table.

    python ptxas_table.py --mlx-src TREE [--arch 80 86 89 90a 100a 120a 121a]

One row per architecture; per kernel: registers, spill stores / loads in
bytes, and whether the SASS calls a driver routine (CALL.ABS, needs
cuobjdump on PATH).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
# attn::Pipeline's enumerators, in order.
PIPELINES = ("stages", "ring", "ring-smem-q", "ring-half-q", "ring-quarter-q")
ENTRY = re.compile(r"Compiling entry function '(\S+)' for 'sm_(\w+)'")
SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
REGS = re.compile(r"Used (\d+) registers")
TRAITS = re.compile(
    r"(TiledTraits|WarpSpecializedTraits)ILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)(?:ELi(\d+))?")


def label(mangled: str) -> str:
    m = TRAITS.search(mangled)
    if not m:
        return mangled[:40]
    if m.group(1).startswith("Warp"):  # D, BN, K slots, V slots
        return f"D{m.group(2)} ws BN{m.group(3)}"
    # D, BM, BN, WARPS_DV, STAGES; the MMA kind and the pipeline
    mma = re.search(r"MmaKindE(\d)ELNS\d_8PipelineE(\d)", mangled)
    kind = ""
    if mma:
        kind = " wgmma" if mma.group(1) == "1" else f" {PIPELINES[int(mma.group(2))]}"
    return (f"D{m.group(2)} {m.group(3)}x{m.group(4)}"
            f" {m.group(5)}x{m.group(6)}{kind}")


def probe(mlx_src: Path, arch: str, work: Path) -> list[tuple[str, str]]:
    cubin = work / f"probe_{arch}.cubin"
    out = subprocess.run(
        ["nvcc", "-std=c++17", "-O3", "-DNDEBUG", f"-arch=sm_{arch}", "-cubin",
         "-Xptxas", "-v", f"-I{mlx_src}", str(HERE / "ptxas_probe.cu"),
         "-o", str(cubin)],
        check=True, capture_output=True, text=True).stderr
    calls: dict[str, int] = {}
    if shutil.which("cuobjdump"):
        sass = subprocess.run(["cuobjdump", "-sass", str(cubin)], check=True,
                              capture_output=True, text=True).stdout
        for chunk in sass.split("Function : ")[1:]:
            calls[chunk.split("\n", 1)[0].strip()] = chunk.count("CALL.ABS")
    rows, name = [], None
    for line in out.splitlines():
        if m := ENTRY.search(line):
            name = m.group(1)
        elif (m := SPILL.search(line)) and name:
            spill = f"{m.group(1)}/{m.group(2)}"
        elif (m := REGS.search(line)) and name:
            call = calls.get(name)
            extra = f", {call} calls" if call else ""
            rows.append((label(name), f"{m.group(1)}, {spill}{extra}"))
            name = None
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mlx-src", type=Path, required=True)
    ap.add_argument("--arch", nargs="+",
                    default=["80", "86", "89", "90a", "100a", "120a", "121a"])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        table = {arch: probe(args.mlx_src, arch, Path(tmp)) for arch in args.arch}
    kernels = sorted({k for rows in table.values() for k, _ in rows})
    print("| arch | " + " | ".join(kernels) + " |")
    print("|---" * (len(kernels) + 1) + "|")
    for arch, rows in table.items():
        cells = dict(rows)
        print(f"| sm_{arch} | " + " | ".join(cells.get(k, "—") for k in kernels) + " |")


if __name__ == "__main__":
    main()
