"""Where does a single pass's extra 0.38 byte per pair come from? Peak memory
above the inputs of the pieces around the sliding layers' SDPA, at L = 32768."""
import mlx.core as mx
GIB = 2 ** 30
L = 32768
def window_mask(n, w=1024):
    r = mx.arange(n); l = r[:, None]; r = r[None]
    return (l >= r) & (l < r + w)
q = mx.random.normal((1, 32, L, 256)).astype(mx.bfloat16)
k = mx.random.normal((1, 16, L, 256)).astype(mx.bfloat16)
mx.eval(q, k)
def measure(name, fn):
    mx.synchronize(); mx.clear_cache(); mx.reset_peak_memory()
    base = mx.get_active_memory()
    out = fn(); mx.eval(out); mx.synchronize()
    peak = mx.get_peak_memory() - base
    print(f"{name:48s} peak extra {peak / GIB:6.2f} GiB = {peak / L / L:5.2f} B/pair "
          f"(kept {(mx.get_active_memory() - base) / GIB:5.2f} GiB)", flush=True)
    return out
mask = measure("mask creation", lambda: window_mask(L))
measure("any(mask, -1)", lambda: mx.any(mask, -1, keepdims=True))
measure("sdpa with the bool mask (output 1 GiB... 2 B/pair at 32k: 0.5)",
        lambda: mx.fast.scaled_dot_product_attention(q, k, k, scale=0.0625, mask=mask))
measure("two sdpa calls, one mask", lambda: [mx.fast.scaled_dot_product_attention(q, k, k, scale=0.0625, mask=mask) for _ in range(2)])
measure("sdpa chained x4 (out feeds q)", lambda: __import__("functools").reduce(
    lambda x, _: mx.fast.scaled_dot_product_attention(x, k, k, scale=0.0625, mask=mask), range(4), q))
del mask
measure("mask built and used in one graph", lambda: mx.fast.scaled_dot_product_attention(q, k, k, scale=0.0625, mask=window_mask(L)))
