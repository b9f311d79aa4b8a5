"""Which op of gemma-4 31B's 128k single pass fails? Each runs alone at L = 131072."""
import sys, traceback
import mlx.core as mx
import mlx.nn as nn
L = int(sys.argv[1]) if len(sys.argv) > 1 else 131072
GIB = 2 ** 30

def run(name, fn):
    mx.clear_cache(); mx.reset_peak_memory()
    base = mx.get_active_memory()
    try:
        out = fn()
        mx.eval(out); mx.synchronize()
        print(f"ok    {name}: peak extra {(mx.get_peak_memory() - base) / GIB:.2f} GiB", flush=True)
    except Exception as e:
        print(f"FAIL  {name}: {type(e).__name__}: {str(e)[:200]}", flush=True)
    finally:
        out = None
        mx.clear_cache()

def window_mask(n, w=1024):
    r = mx.arange(n); l = r[:, None]; r = r[None]
    return (l >= r) & (l < r + w)

bf = mx.bfloat16
run("arange compare [L,L]", lambda: mx.arange(L)[:, None] >= mx.arange(L)[None])
run("window mask [L,L]", lambda: window_mask(L))
mask = window_mask(L); mx.eval(mask)
q = mx.random.normal((1, 32, L, 256)).astype(bf); k = mx.random.normal((1, 16, L, 256)).astype(bf)
mx.eval(q, k)
run("sdpa D256 bool window mask", lambda: mx.fast.scaled_dot_product_attention(q, k, k, scale=0.0625, mask=mask))
run("sdpa D256 causal", lambda: mx.fast.scaled_dot_product_attention(q, k, k, scale=0.0625, mask="causal"))
del mask
run("rope D256 [1,32,L,256]", lambda: mx.fast.rope(q, 256, traditional=False, base=10000.0, scale=1.0, offset=0))
run("transpose copy q", lambda: mx.contiguous(q.transpose(0, 2, 1, 3)).reshape(1, L, -1))
run("concat kv cache", lambda: mx.concatenate([k[:, :, :1024], k], axis=2))
del q, k
q = mx.random.normal((1, 32, L, 512)).astype(bf); k = mx.random.normal((1, 4, L, 512)).astype(bf); mx.eval(q, k)
run("sdpa D512 causal", lambda: mx.fast.scaled_dot_product_attention(q, k, k, scale=1.0, mask="causal"))
run("rope D512", lambda: mx.fast.rope(q, 128, traditional=False, base=1e6, scale=1.0, offset=0))
run("rms_norm heads D512", lambda: mx.fast.rms_norm(q, mx.ones((512,), dtype=bf), 1e-6))
del q, k
x = mx.random.normal((1, L, 5376)).astype(bf); mx.eval(x)
run("rms_norm [L,5376]", lambda: mx.fast.rms_norm(x, mx.ones((5376,), dtype=bf), 1e-6))
for n_out in (21504, 16384, 8192, 2048):
    lin = nn.QuantizedLinear(5376, n_out, bias=False, group_size=64, bits=4); mx.eval(lin.parameters())
    run(f"qlinear 5376->{n_out}", lambda: lin(x))
h = mx.random.normal((1, L, 21504)).astype(bf); mx.eval(h)
run("gelu_approx [L,21504]", lambda: nn.gelu_approx(h) * h)
lin = nn.QuantizedLinear(21504, 5376, bias=False, group_size=64, bits=4); mx.eval(lin.parameters())
run("qlinear 21504->5376", lambda: lin(h))
del h
emb = nn.QuantizedEmbedding(262144, 5376, group_size=64, bits=4); mx.eval(emb.parameters())
tok = mx.random.randint(0, 262144, (1, L))
run("quantized embedding", lambda: emb(tok))
run("add+scale [L,5376]", lambda: (x * 2.0 + x))
