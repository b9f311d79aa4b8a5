#!/usr/bin/env python3
"""Per tiled kernel of a cuobjdump -sass listing: STL / LDL between a backward
branch and its target, CALL.ABS count, instruction count.

    cuobjdump -sass probe.cubin > probe.sass && python loopspills.py probe.sass
"""

import re
import sys

TRAITS = re.compile(
    r"TiledTraitsILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+).*?MmaKindE(\d)ELNS\d_8PipelineE(\d)")
INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")
BRANCH = re.compile(r"\bBRA\b.*?(0x[0-9a-f]+)")


def main(path: str) -> None:
    for function in re.split(r"\n\s*Function : ", open(path).read())[1:]:
        m = TRAITS.search(function.split("\n", 1)[0])
        if not m:
            continue
        ins = [(int(a, 16), i) for a, i in INSTRUCTION.findall(function)]
        loops = []
        for addr, text in ins:
            b = BRANCH.search(text)
            if b and int(b.group(1), 16) < addr:
                loops.append((int(b.group(1), 16), addr))

        def in_loop(addr: int, loops: list = loops) -> bool:
            return any(start <= addr <= end for start, end in loops)

        stores = sum(1 for a, i in ins if re.search(r"\bSTL", i) and in_loop(a))
        loads = sum(1 for a, i in ins if re.search(r"\bLDL", i) and in_loop(a))
        calls = sum(1 for _, i in ins if "CALL.ABS" in i)
        # D, BM, BN, WARPS_DV, STAGES, MMA kind, pipeline
        print(m.groups(), f"in-loop STL {stores} LDL {loads}, calls {calls}, instructions {len(ins)}")


if __name__ == "__main__":
    main(sys.argv[1])
