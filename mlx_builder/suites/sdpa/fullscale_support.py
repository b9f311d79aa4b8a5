"""gemma-4 31B at full scale: its configuration, mlx-lm's prefill schedule,
random 4-bit weights built layer by layer, and the bounds the full-scale
part asserts.

The pure parts (configuration arithmetic, schedule, fits, bounds) import
neither MLX nor mlx-lm and have CPU tests in test_fullscale_support.py;
the functions that run a model take the imported ``mx``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from sdpa_support import GIB, fit_quadratic_coefficient

# gemma-4 31B's text model (the checkpoint's config.json values that matter
# here): 60 layers, five sliding (head_dim 256, 16 KV heads, window 1024)
# then one global (head_dim 512, 4 KV heads, K = V); tied embeddings.
GEMMA4_31B = dict(
    model_type="gemma4_text", hidden_size=5376, intermediate_size=21504,
    num_hidden_layers=60, num_attention_heads=32, head_dim=256,
    global_head_dim=512, num_key_value_heads=16,
    num_global_key_value_heads=4, attention_k_eq_v=True,
    sliding_window=1024, sliding_window_pattern=6, num_kv_shared_layers=0,
    hidden_size_per_layer_input=0, vocab_size=262144,
    vocab_size_per_layer_input=262144, final_logit_softcapping=30.0,
    tie_word_embeddings=True, use_double_wide_mlp=False,
    max_position_embeddings=262144)

BITS, GROUP = 4, 64
PREFILL_STEP = 2048  # mlx-lm generate's default prefill_step_size
DECODE_STEPS = 64  # greedy tokens after the prompt
DECODE_WARMUP = 16  # untimed decode steps before them
MIN_DEVICE_BYTES = 80 * 10 ** 9  # the part needs an 80 GB GPU
FIT_LENGTHS = (16384, 32768, 65536)  # single pass, for the L² fit
LONG_LENGTH = 131072
CHUNKED_LENGTHS = (32768, 65536, 131072)
# Bounds: the single pass may grow by at most 2 bytes per (query, key) pair:
# the [L, L] boolean window mask mlx-lm passes (1) and its creation,
# (l >= r) & (l < r + w), which holds one more byte per pair while it runs
# inside the model's graph (measured on an H200; the attention call adds
# only its output). An additive copy of the mask in the attention path
# (2 bytes per pair more) fails it. Chunked prefill at 128k may not exceed
# the 39.1 GiB peak the patched wheel measured on an H200
# (mx.get_peak_memory, the weights included).
MAX_BYTES_PER_PAIR = 2.0
CHUNKED_128K_PEAK_BYTES = int(39.1 * GIB)


def layer_types(config: dict) -> list[str]:
    """mlx-lm's rule: pattern-1 sliding layers, then a global one, repeated."""
    n = config["sliding_window_pattern"]
    pattern = ["sliding_attention"] * (n - 1) + ["full_attention"]
    return (pattern * (config["num_hidden_layers"] // n + 1))[:config["num_hidden_layers"]]


def linear_shapes(config: dict) -> list[tuple[int, int]]:
    """(out, in) of every Linear of the model that nn.quantize turns to 4 bits,
    and the tied embedding (vocab, hidden) last."""
    h, inter, hq = (config["hidden_size"], config["intermediate_size"],
                    config["num_attention_heads"])
    shapes = []
    for kind in layer_types(config):
        sliding = kind == "sliding_attention"
        d = config["head_dim"] if sliding else config["global_head_dim"]
        kv = config["num_key_value_heads"] if sliding else config["num_global_key_value_heads"]
        k_eq_v = config["attention_k_eq_v"] and not sliding
        shapes += [(hq * d, h), (kv * d, h)] + ([] if k_eq_v else [(kv * d, h)])
        shapes += [(h, hq * d), (inter, h), (inter, h), (h, inter)]
    shapes.append((config["vocab_size"], h))
    return shapes


def quantized_bytes(config: dict, bits: int = BITS, group: int = GROUP,
                    scale_bytes: int = 2) -> int:
    """Bytes of the quantized matrices: packed weights plus a scale and a
    bias (bf16) per group. Norm weights (a few MB) are left out."""
    total = 0
    for out, inp in linear_shapes(config):
        total += out * inp * bits // 8 + out * (inp // group) * 2 * scale_bytes
    return total


def prefill_schedule(L: int, step: int) -> list[int]:
    """The token counts of mlx-lm generate's model calls for an L-token
    prompt: chunks of ``step`` while more than one token is left (each
    followed by an eval of the cache), then the last token for the logits."""
    if L < 1 or step < 1:
        raise ValueError(f"need L >= 1 and step >= 1, got L={L}, step={step}")
    chunks, done = [], 0
    while L - done > 1:
        n = min(step, L - done - 1)
        chunks.append(n)
        done += n
    return [*chunks, 1]


def bytes_per_pair(results: Sequence[dict]) -> float:
    """The L² coefficient of peak extra memory over the completed runs."""
    ok = [r for r in results if r["status"] == "ok"]
    if len(ok) < 3:
        raise ValueError(f"need three completed lengths for a quadratic fit, "
                         f"have {[r['L'] for r in ok]}")
    return fit_quadratic_coefficient([r["L"] for r in ok], [r["peak_extra"] for r in ok])


def largest_completed(results: Sequence[dict]) -> int | None:
    ok = [r["L"] for r in results if r["status"] == "ok"]
    return max(ok) if ok else None


def device_skip_reason(total_memory: int) -> str | None:
    if total_memory < MIN_DEVICE_BYTES:
        return (f"the full-scale part needs a GPU with >= "
                f"{MIN_DEVICE_BYTES / 1e9:.0f} GB; this one has "
                f"{total_memory / 1e9:.1f} GB")
    return None


def record_name(mode: str, L: int, what: str) -> str:
    return f"{mode}_{L // 1024}k_{what}"


# ----------------------------------------------------------- with MLX


def build_gemma4_31b(mx: Any, mods: dict, config: dict = GEMMA4_31B,
                     bits: int = BITS) -> Any:
    """mlx-lm's gemma4_text Model with random weights, quantized to ``bits``
    (4 unless told) one decoder layer at a time: nn.Linear's initialisers
    are lazy, so only one layer's bf16 weights exist at once before they
    are quantized."""
    import mlx.nn as nn

    module = mods["gemma4_text"]
    mx.random.seed(2121)
    model = module.Model(module.ModelArgs.from_dict(dict(config)))
    model.set_dtype(mx.bfloat16)
    is_linear = lambda _path, m: isinstance(m, nn.Linear)  # noqa: E731
    for layer in model.layers:
        attn = layer.self_attn
        # gemma attends with scale 1 and leaves the score scale to trained
        # q_norm weights; random init (ones) would give scores of std
        # sqrt(head_dim). 1/sqrt(head_dim) keeps them unit-scale.
        attn.q_norm.weight = mx.full((attn.head_dim,), attn.head_dim ** -0.5,
                                     dtype=mx.bfloat16)
        nn.quantize(layer, group_size=GROUP, bits=bits, class_predicate=is_linear)
        mx.eval(layer.parameters())
        mx.clear_cache()
    nn.quantize(model.model, group_size=GROUP, bits=bits,
                class_predicate=lambda _p, m: isinstance(m, nn.Embedding))
    mx.eval(model.parameters())
    mx.clear_cache()
    return model


def prompt_tokens(mx: Any, L: int, *, vocab: int, seed: int = 0) -> Any:
    """The L random prompt tokens every run of length L here starts from."""
    tokens = mx.random.randint(0, vocab, (L,), key=mx.random.key(seed + L))
    mx.eval(tokens)
    return tokens


def fresh_cache(mx: Any, mods: dict, model: Any) -> list:
    """An empty prompt cache, with MLX's buffer cache emptied so that the
    run's peak memory starts from what is allocated."""
    cache = mods["cache"].make_prompt_cache(model)
    mx.synchronize()
    mx.clear_cache()
    return cache


def prefill_logits(mx: Any, model: Any, tokens: Any, cache: list, step: int) -> Any:
    """mlx-lm generate_step's prefill of ``tokens`` into ``cache``: model
    calls of prefill_schedule(len, step), the cache states evaluated (and
    MLX's cache cleared) after each but the last; returns the last call's
    logits ([1, vocab], not evaluated)."""
    done = 0
    chunks = prefill_schedule(tokens.shape[0], step)
    for n in chunks[:-1]:
        model(tokens[done:done + n][None], cache=cache)
        mx.eval([c.state for c in cache])
        mx.clear_cache()
        done += n
    return model(tokens[done:][None], cache=cache)[:, -1, :]


def _oom(mx: Any, exc: BaseException, base: int, **fields: Any) -> dict:
    """The result of a run the GPU's memory could not hold; any other error
    is raised again."""
    from sdpa_support import is_oom

    if not is_oom(exc):
        raise exc
    peak = int(mx.get_peak_memory())
    mx.clear_cache()
    return {**fields, "status": "oom", "peak": peak, "peak_extra": peak - base,
            "base": base, "error": str(exc)[:300]}


def _measured_start(mx: Any, mods: dict, model: Any, L: int, *, vocab: int,
                    seed: int) -> tuple[Any, list, int]:
    """The prompt, an empty cache and the memory allocated before a measured
    run (weights, tokens), with MLX's peak reset to it."""
    tokens = prompt_tokens(mx, L, vocab=vocab, seed=seed)
    cache = fresh_cache(mx, mods, model)
    base = mx.get_active_memory()
    mx.reset_peak_memory()
    return tokens, cache, base


def prefill(mx: Any, mods: dict, model: Any, L: int, step: int, *, vocab: int,
            seed: int = 0) -> dict:
    """An L-token prefill as mlx-lm's generate_step runs it (prefill_logits),
    then the last token's logits evaluated. Peak memory:
    mx.get_peak_memory() during it, total and above what was allocated
    before (weights, tokens)."""
    tokens, cache, base = _measured_start(mx, mods, model, L, vocab=vocab, seed=seed)
    start = time.perf_counter()
    try:
        logits = prefill_logits(mx, model, tokens, cache, step)
        mx.eval(logits)
        mx.synchronize()
    except (RuntimeError, ValueError, MemoryError) as exc:
        del cache
        return _oom(mx, exc, base, L=L, step=step)
    seconds = time.perf_counter() - start
    peak = int(mx.get_peak_memory())
    finite = bool(mx.all(mx.isfinite(logits)).item())
    del logits, cache
    mx.clear_cache()
    return {"L": L, "step": step, "status": "ok", "peak": peak,
            "peak_extra": peak - base, "base": base, "seconds": seconds,
            "tok_per_s": L / seconds, "finite": finite}


def _greedy(mx: Any, logits: Any) -> tuple[Any, Any]:
    """generate_step's greedy sampler (the argmax of the log-probabilities),
    and whether they are all finite."""
    logprobs = logits - mx.logsumexp(logits, keepdims=True)
    return mx.argmax(logprobs, axis=-1), mx.all(mx.isfinite(logprobs))


def prefill_then_decode(mx: Any, mods: dict, model: Any, L: int, step: int, *,
                        vocab: int, steps: int, warmup: int = DECODE_WARMUP,
                        seed: int = 0) -> dict:
    """What mlx-lm's generate does with an L-token prompt: the prefill of
    prefill(), its first token picked greedily, then ``steps`` decode steps
    of one token each, as generate_step runs them: the next step's token is
    queued (mx.async_eval) before the current one is read, so the host
    builds one step while the GPU runs the other. Prefill time ends when the
    first token is read; ``warmup`` untimed steps follow (MLX compiles the
    kernels of one-token shapes on first use), and decode tok/s is steps
    over the time after them.
    Peak memory covers both; ``finite`` holds for every step's logits;
    ``tokens`` are the timed steps' tokens and the one after them."""
    tokens, cache, base = _measured_start(mx, mods, model, L, vocab=vocab, seed=seed)

    start = time.perf_counter()
    try:
        y, ok = _greedy(mx, prefill_logits(mx, model, tokens, cache, step))
        mx.eval(y, ok)
        prefill_seconds = time.perf_counter() - start
        checks = [ok]
        for _ in range(warmup):
            y, ok = _greedy(mx, model(y[None], cache=cache)[:, -1, :])
            mx.eval(y, ok)
            checks.append(ok)
        start = time.perf_counter()
        decoded = []
        for n in range(steps):
            next_y, ok = _greedy(mx, model(y[None], cache=cache)[:, -1, :])
            mx.async_eval(next_y, ok)
            decoded.append(int(y.item()))
            checks.append(ok)
            if n % 256 == 0:  # as generate_step does
                mx.clear_cache()
            y = next_y
        decoded.append(int(y.item()))
        mx.synchronize()
        decode_seconds = time.perf_counter() - start
    except (RuntimeError, ValueError, MemoryError) as exc:
        del cache
        return _oom(mx, exc, base, L=L, step=step, steps=steps)
    peak = int(mx.get_peak_memory())
    finite = all(bool(c.item()) for c in checks)
    del cache
    mx.clear_cache()
    return {"L": L, "step": step, "steps": steps, "status": "ok", "peak": peak,
            "peak_extra": peak - base, "base": base,
            "prefill_seconds": prefill_seconds,
            "prefill_tok_per_s": L / prefill_seconds,
            "decode_seconds": decode_seconds,
            "decode_tok_per_s": steps / decode_seconds if steps else 0.0,
            "finite": finite, "tokens": decoded}


def teacher_forced_logits(mx: Any, mods: dict, model: Any, L: int, step: int, *,
                          vocab: int, steps: int, seed: int = 0) -> list[list[float]]:
    """The float32 logits of the prompt's last position (prefill_logits over
    prompt_tokens) and of each of ``steps`` further tokens fed one at a
    time. The fed tokens are fixed random draws, not the model's argmax, so
    two builds whose logits differ slightly still see the same inputs."""
    tokens = prompt_tokens(mx, L, vocab=vocab, seed=seed)
    fed = mx.random.randint(0, vocab, (steps,),
                            key=mx.random.split(mx.random.key(seed + L))[1])
    cache = fresh_cache(mx, mods, model)
    logits = prefill_logits(mx, model, tokens, cache, step)
    out = []
    for i in range(steps + 1):
        if i:
            logits = model(fed[i - 1:i][None], cache=cache)[:, -1, :]
        logits = logits[0].astype(mx.float32)
        mx.eval(logits)
        out.append(logits.tolist())
    del cache, logits
    mx.clear_cache()
    return out
