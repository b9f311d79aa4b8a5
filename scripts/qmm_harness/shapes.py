"""The shapes run.py and mlx_qmm.py time.

SHAPES: gemma-4 31B's linear layers (name, K, N). MOE_SHAPES: a
Qwen3-30B-A3B-like mixture-of-experts layer (hidden 2048, expert
intermediate 768, 128 experts, top-8), one expert's (name, K, N): gate and
up project 2048 -> 768, down 768 -> 2048; each token multiplies by
MOE_TOP_K of the MOE_EXPERTS experts through gather_qmm. MOE_DENSE_SHAPES:
the same model's dense quantized layers (attention, router, output), which
a decode step calls beside the experts.
"""

SHAPES = [
    ("q_sliding", 5376, 8192),
    ("q_global", 5376, 16384),
    ("kv_sliding", 5376, 4096),
    ("o_sliding", 8192, 5376),
    ("mlp_gate_up", 5376, 43008),
    ("mlp_down", 21504, 5376),
]

MOE_EXPERTS = 128
MOE_TOP_K = 8
MOE_SHAPES = [
    ("moe_gate_up", 2048, 768),
    ("moe_down", 768, 2048),
]

MOE_DENSE_SHAPES = [
    ("moe_q", 2048, 4096),
    ("moe_kv", 2048, 512),
    ("moe_o", 4096, 2048),
    ("moe_router", 2048, 128),
    ("moe_lm_head", 2048, 151936),
]
