"""Speed of each session-8 kernel variant relative to the session-7 kernel
(final.so) measured in the same device call: harness/call*_decomp_*.jsonl ->
variants.png. Run from this folder: python plot_variants.py"""
import json
import statistics
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).parent
# (file, label in the file, legend)
VARIANTS = [
    ("call2_decomp_snake.jsonl", "pers", "persistent, static snake order"),
    ("call3_decomp_queue.jsonl", "dyn", "persistent, tile queue + prefetch"),
    ("call3_decomp_queue.jsonl", "nopf", "persistent, tile queue, no prefetch"),
    ("call4_decomp_half.jsonl", "half", "half the K/V bytes loaded (wrong result)"),
]


def case(r):
    kind = "causal" if r["causal"] else "full"
    return f"B{r['B']} {r['qL'] // 1024}k×{r['kL'] // 1024 if r['kL'] >= 1024 else r['kL']}{'k' if r['kL'] >= 1024 else ''} {kind}"


def medians(path):
    runs = defaultdict(list)
    order = []
    for line in (HERE / "harness" / path).read_text().splitlines():
        r = json.loads(line)
        key = (r["lib"], case(r))
        runs[key].append(r["tflops"])
        if case(r) not in order:
            order.append(case(r))
    return {k: statistics.median(v) for k, v in runs.items()}, order


def main():
    fig, ax = plt.subplots(figsize=(12, 4.8))
    order = None
    width = 0.8 / len(VARIANTS)
    for n, (path, lib, legend) in enumerate(VARIANTS):
        med, cases = medians(path)
        order = order or cases
        ratios = [med[(lib, c)] / med[("final", c)] for c in order]
        xs = [i + (n - (len(VARIANTS) - 1) / 2) * width for i in range(len(order))]
        ax.bar(xs, ratios, width, label=legend)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(order)))
    ax.set_xticklabels(order, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0.75, 1.1)
    ax.set_ylabel("TFLOP/s ÷ session-7 kernel, same call")
    ax.set_title("Head dim 512 (sm_90a, bf16, 32 q / 16 KV heads): session-8 variants in the harness")
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(HERE / "variants.png", dpi=120)


if __name__ == "__main__":
    main()
