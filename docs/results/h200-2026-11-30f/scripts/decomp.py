# Per-CTA overhead of the D512 hopper kernel: time vs key length at a fixed grid (non-causal), and the causal cases.
import json, math, sys
sys.path.insert(0, "scripts/attn_harness")
import torch
from run import Kernel
kern = Kernel(sys.argv[1]); label = sys.argv[2]
def t(fn, n=10, reps=5):
    fn(); torch.cuda.synchronize(); best = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(n): fn()
        b.record(); torch.cuda.synchronize(); best.append(a.elapsed_time(b) / n)
    best.sort(); return best[len(best) // 2]
D, H, Hkv = 512, 32, 16
cases = [(1, 2048, kL, 0) for kL in (64, 128, 256, 512, 1024, 2048)]
cases += [(1, 2048, 2048, 1), (4, 2048, 2048, 1), (1, 4096, 4096, 1), (1, 8192, 8192, 1), (1, 16384, 16384, 1)]
for B, qL, kL, mk in cases:
    g = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(B, H, qL, D, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(B, Hkv, kL, D, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(B, Hkv, kL, D, device="cuda", dtype=torch.bfloat16, generator=g)
    o = torch.empty_like(q)
    ms = t(lambda: kern(q, k, v, o, scale=D ** -0.5, mask_kind=mk, config="hopper"))
    fl = 4 * B * H * qL * kL * D * (0.5 if mk else 1.0)
    print(json.dumps(dict(lib=label, B=B, qL=qL, kL=kL, causal=mk, ms=round(ms, 4), tflops=round(fl / ms / 1e9, 1))), flush=True)
