"""gemma-4 31B's linear layers (name, K, N), which run.py and mlx_qmm.py time."""

SHAPES = [
    ("q_sliding", 5376, 8192),
    ("q_global", 5376, 16384),
    ("kv_sliding", 5376, 4096),
    ("o_sliding", 8192, 5376),
    ("mlp_gate_up", 5376, 43008),
    ("mlp_down", 21504, 5376),
]
