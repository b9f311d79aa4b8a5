"""Time a mixture-of-experts model through mlx-lm's own model code.

mlx-lm's qwen3_moe Model at Qwen3-30B-A3B's configuration (48 layers,
hidden 2048, 128 experts of intermediate 768, top-8; shapes.MOE_SHAPES),
random weights quantized to --bits bits (4 or 8, group 64) one layer at a
time. It
prefills a random prompt of --length tokens in mlx-lm's chunks of 2048 (its
SwitchGLU sorts each chunk's 2048 * 8 rows by expert and calls gather_qmm
with one row per product), then decodes --decode greedy tokens (8 products,
unsorted). One process per MLX build or path:

    python moe_model.py --json ours.json
    MLX_CUDA_QMM_PATH=upstream python moe_model.py --json upstream.json

Prints one JSON line: prefill and decode tokens/s and the peak memory.
"""

import argparse
import json
import time

CONFIG = dict(
    model_type="qwen3_moe",
    hidden_size=2048,
    num_hidden_layers=48,
    intermediate_size=6144,
    num_attention_heads=32,
    num_experts=128,
    num_experts_per_tok=8,
    decoder_sparse_step=1,
    mlp_only_layers=[],
    moe_intermediate_size=768,
    rms_norm_eps=1e-6,
    vocab_size=151936,
    num_key_value_heads=4,
    head_dim=128,
    rope_theta=1e6,
    tie_word_embeddings=False,
    max_position_embeddings=40960,
    norm_topk_prob=True,
)
STEP = 2048  # mlx-lm generate's default prefill_step_size


def build(mx, layers, bits):
    import mlx.nn as nn
    from mlx_lm.models import qwen3_moe

    mx.random.seed(3030)
    model = qwen3_moe.Model(qwen3_moe.ModelArgs.from_dict(
        dict(CONFIG, num_hidden_layers=layers)))
    model.set_dtype(mx.bfloat16)
    for layer in model.layers:
        nn.quantize(layer, group_size=64, bits=bits)
        mx.eval(layer.parameters())
        mx.clear_cache()
    nn.quantize(model, group_size=64, bits=bits)
    mx.eval(model.parameters())
    mx.clear_cache()
    return model


def accept_global_scale(mx):
    """mlx-lm passes gather_qmm a global_scale (None for affine weights)
    that MLX builds older than the mlx-lm release may not take: drop it
    there."""
    gather_qmm = mx.gather_qmm
    try:
        gather_qmm(mx.zeros((1, 1, 64), mx.bfloat16),
                   *mx.quantize(mx.zeros((1, 64, 64), mx.bfloat16), 64, 4),
                   transpose=True, group_size=64, bits=4, global_scale=None)
        return
    except TypeError:
        pass

    def without_global_scale(*args, global_scale=None, **kwargs):
        return gather_qmm(*args, **kwargs)

    mx.gather_qmm = without_global_scale


def run(args):
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    accept_global_scale(mx)

    model = build(mx, args.layers, args.bits)
    tokens = mx.random.randint(0, CONFIG["vocab_size"], (args.length,),
                               key=mx.random.key(args.length))
    mx.eval(tokens)

    def prefill(cache):
        done = 0
        while args.length - done > STEP:
            model(tokens[done:done + STEP][None], cache=cache)
            mx.eval([c.state for c in cache])
            done += STEP
        return model(tokens[done:][None], cache=cache)[:, -1, :]

    # One untimed prefill of a chunk compiles and warms the kernels.
    warm = make_prompt_cache(model)
    mx.eval(model(tokens[:STEP][None], cache=warm))
    del warm
    mx.synchronize()
    mx.clear_cache()
    mx.reset_peak_memory()

    cache = make_prompt_cache(model)
    t = time.perf_counter()
    logits = prefill(cache)
    y = mx.argmax(logits, axis=-1)
    mx.eval(y)
    prefill_s = time.perf_counter() - t

    def step(y):
        logits = model(y[:, None], cache=cache)[:, -1, :]
        return mx.argmax(logits, axis=-1)

    for _ in range(4):  # untimed
        y = step(y)
        mx.eval(y)
    t = time.perf_counter()
    for _ in range(args.decode):
        y = step(y)
        mx.async_eval(y)
    mx.eval(y)
    decode_s = time.perf_counter() - t
    return {"model": f"qwen3_moe 30B-A3B config, {args.bits}-bit", "mlx": mx.__version__,
            "layers": args.layers, "length": args.length,
            "prefill_tok_s": args.length / prefill_s,
            "decode_tok_s": args.decode / decode_s,
            "peak_gib": mx.get_peak_memory() / 2 ** 30}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--length", type=int, default=8192)
    p.add_argument("--decode", type=int, default=32)
    p.add_argument("--layers", type=int, default=CONFIG["num_hidden_layers"])
    p.add_argument("--bits", type=int, choices=(4, 8), default=4)
    p.add_argument("--json")
    a = p.parse_args()
    r = run(a)
    print(json.dumps(r), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f)


if __name__ == "__main__":
    main()
