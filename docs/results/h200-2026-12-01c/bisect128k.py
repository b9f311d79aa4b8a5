"""Run gemma-4 31B's first 128k single-pass model call (131071 tokens) with
every module, cache update and fast op evaluated as it returns; print the
innermost one that fails."""
import sys, functools, traceback
sys.path.insert(0, "tests/sdpa")
import mlx.core as mx
import mlx.nn as nn
from e2e_support import mlx_lm_modules
from fullscale_support import build_gemma4_31b, GEMMA4_31B

N = int(sys.argv[1]) if len(sys.argv) > 1 else 131071
mods = mlx_lm_modules()
model = build_gemma4_31b(mx, mods)
names = {id(m): n for n, m in model.named_modules()}
reported = []

def arrays(x):
    if isinstance(x, mx.array):
        return [x]
    if isinstance(x, (tuple, list)):
        return [a for y in x for a in arrays(y)]
    return []

def shapes(args):
    return [tuple(a.shape) for a in arrays(list(args))][:4]

def wrap(owner, attr, label):
    fn = getattr(owner, attr)
    @functools.wraps(fn)
    def inner(*args, **kw):
        try:
            out = fn(*args, **kw)
            mx.eval(arrays(out))
            return out
        except Exception as e:
            who = label(args)
            if not reported:
                print(f"FIRST FAILURE in {who}: inputs {shapes(args)}: {str(e)[:200]}", flush=True)
            reported.append(who)
            raise
    setattr(owner, attr, inner)

classes = {type(m) for _, m in model.named_modules()}
for cls in classes:
    wrap(cls, "__call__", lambda a, c=cls: f"{c.__name__} {names.get(id(a[0]), '?')}")
for cls in (mods["cache"].KVCache, mods["cache"].RotatingKVCache):
    wrap(cls, "update_and_fetch", lambda a, c=cls: f"{c.__name__}.update_and_fetch")
for op in ("scaled_dot_product_attention", "rope", "rms_norm"):
    wrap(mx.fast, op, lambda a, o=op: f"mx.fast.{op}" if False else f"mx.fast.{o}")
tokens = mx.random.randint(0, GEMMA4_31B["vocab_size"], (1, N))
cache = mods["cache"].make_prompt_cache(model)
try:
    model(tokens, cache=cache)
    mx.eval([c.state for c in cache])
    print(f"model call of {N} tokens completed; peak {mx.get_peak_memory() / 2**30:.1f} GiB")
except Exception as e:
    print("failure chain (innermost first):", reported[:8])
