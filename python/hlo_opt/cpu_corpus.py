"""The generated training corpus of the XLA:CPU kernel model: JAX programs
of many architectures, f32 and bf16, batch sizes 1 to 256.

``programs(seed, count)`` draws ``count`` programs; each is a
``Program(name, family, dtype, batch, fn, args)`` whose ``fn(*args)`` is
what ``jax.jit`` compiles. The same seed gives the same programs (names,
shapes and argument values). Sizes shrink as the batch grows so that one
run stays between about 0.1 and 100 ms on a laptop CPU.

The families here are the *training* architectures. The benchmark's
held-out programs (scripts/bench_xla_cpu.py) use other architectures, so
that the benchmark measures programs the model never saw.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

import jax
import jax.numpy as jnp

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DTYPES = ("float32", "bfloat16")


@dataclasses.dataclass
class Program:
    name: str
    family: str
    dtype: str
    batch: int
    fn: Callable[..., Any]
    args: tuple


def _normal(rng: np.random.Generator, shape, dtype: str, scale: float = 1.0):
    return jnp.asarray(rng.standard_normal(shape).astype(np.float32) * scale, dtype=dtype)


def _dense(rng, n_in, n_out, dtype):
    return (_normal(rng, (n_in, n_out), dtype, 1.0 / np.sqrt(n_in)), _normal(rng, (n_out,), dtype, 0.01))


def _act(name: str):
    return {"relu": jax.nn.relu, "gelu": jax.nn.gelu, "tanh": jnp.tanh, "silu": jax.nn.silu}[name]


def _layernorm(x):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5)


def _scaled(batch: int, big: int, small: int, at: int = 64) -> int:
    """``big`` for small batches, shrinking towards ``small`` past ``at``."""
    if batch <= at:
        return big
    return max(small, int(big * at / batch))


def mlp(rng, dtype, batch):
    width = int(rng.choice([128, 256, 512, 1024, 2048]))
    width = min(width, _scaled(batch, 2048, 256))
    depth = int(rng.integers(1, 5))
    mult = int(rng.choice([1, 2, 4]))
    act = str(rng.choice(["relu", "gelu", "tanh"]))
    layers = []
    for i in range(depth):
        layers.append(_dense(rng, width, width * mult, dtype))
        layers.append(_dense(rng, width * mult, width, dtype))

    def fn(params, x):
        for k in range(0, len(params), 2):
            (w1, b1), (w2, b2) = params[k], params[k + 1]
            x = x + _act(act)(x @ w1 + b1) @ w2 + b2
        return x

    return f"w{width}x{mult}_d{depth}_{act}", fn, (layers, _normal(rng, (batch, width), dtype))


def gated_mlp(rng, dtype, batch):
    d = int(rng.choice([256, 512, 768, 1024]))
    h = int(d * rng.choice([2, 3, 4]))
    seq = int(rng.choice([1, 8, 32]))
    seq = max(1, min(seq, 4096 // batch))
    w_gate, w_up, w_down = (_normal(rng, s, dtype, 1 / np.sqrt(s[0])) for s in [(d, h), (d, h), (h, d)])

    def fn(wg, wu, wd, x):
        return (jax.nn.silu(x @ wg) * (x @ wu)) @ wd

    return f"d{d}_h{h}_s{seq}", fn, (w_gate, w_up, w_down, _normal(rng, (batch, seq, d), dtype))


def conv_stack(rng, dtype, batch):
    c = int(rng.choice([8, 16, 32, 64, 128]))
    hw = int(rng.choice([8, 14, 28, 56]))
    hw = min(hw, _scaled(batch, 56, 7, at=8))
    k = int(rng.choice([1, 3, 5]))
    depth = int(rng.integers(1, 5))
    kernels = [_normal(rng, (k, k, c, c), dtype, 1 / np.sqrt(k * k * c)) for _ in range(depth)]
    dn = ("NHWC", "HWIO", "NHWC")

    def fn(ks, x):
        for w in ks:
            x = jax.nn.relu(jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=dn))
        return x

    return f"c{c}_hw{hw}_k{k}_d{depth}", fn, (kernels, _normal(rng, (batch, hw, hw, c), dtype))


def resnet_block(rng, dtype, batch):
    c = int(rng.choice([16, 32, 64, 128]))
    hw = min(int(rng.choice([14, 28, 56])), _scaled(batch, 56, 7, at=8))
    w1 = _normal(rng, (3, 3, c, c), dtype, 1 / np.sqrt(9 * c))
    w2 = _normal(rng, (3, 3, c, c), dtype, 1 / np.sqrt(9 * c))
    scale = _normal(rng, (c,), dtype, 0.1) + 1
    dn = ("NHWC", "HWIO", "NHWC")

    def fn(w1, w2, scale, x):
        y = jax.lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=dn)
        y = jax.nn.relu(_layernorm(y) * scale)
        y = jax.lax.conv_general_dilated(y, w2, (1, 1), "SAME", dimension_numbers=dn)
        return jax.nn.relu(x + y)

    return f"c{c}_hw{hw}", fn, (w1, w2, scale, _normal(rng, (batch, hw, hw, c), dtype))


def depthwise(rng, dtype, batch):
    c = int(rng.choice([32, 64, 128, 256]))
    hw = min(int(rng.choice([14, 28, 56])), _scaled(batch, 56, 7, at=8))
    dw = _normal(rng, (3, 3, 1, c), dtype, 1 / 3)
    pw = _normal(rng, (1, 1, c, c), dtype, 1 / np.sqrt(c))
    dn = ("NHWC", "HWIO", "NHWC")

    def fn(dw, pw, x):
        y = jax.lax.conv_general_dilated(x, dw, (1, 1), "SAME", dimension_numbers=dn, feature_group_count=c)
        y = jax.nn.relu(y)
        return jax.lax.conv_general_dilated(y, pw, (1, 1), "SAME", dimension_numbers=dn)

    return f"c{c}_hw{hw}", fn, (dw, pw, _normal(rng, (batch, hw, hw, c), dtype))


def conv1d(rng, dtype, batch):
    c = int(rng.choice([32, 64, 128, 256]))
    length = min(int(rng.choice([64, 256, 1024])), _scaled(batch, 1024, 32, at=8))
    k = int(rng.choice([3, 5, 9]))
    depth = int(rng.integers(1, 4))
    ws = [_normal(rng, (k, c, c), dtype, 1 / np.sqrt(k * c)) for _ in range(depth)]
    dn = ("NWC", "WIO", "NWC")

    def fn(ws, x):
        for w in ws:
            x = jnp.tanh(jax.lax.conv_general_dilated(x, w, (1,), "SAME", dimension_numbers=dn))
        return x

    return f"c{c}_l{length}_k{k}_d{depth}", fn, (ws, _normal(rng, (batch, length, c), dtype))


def attention(rng, dtype, batch):
    heads = int(rng.choice([2, 4, 8, 12]))
    dh = int(rng.choice([32, 64]))
    seq = min(int(rng.choice([32, 64, 128, 256, 512])), _scaled(batch, 512, 16, at=4))
    d = heads * dh
    wq, wk, wv, wo = (_normal(rng, (d, d), dtype, 1 / np.sqrt(d)) for _ in range(4))

    def fn(wq, wk, wv, wo, x):
        b, s, _ = x.shape
        q, k, v = ((x @ w).reshape(b, s, heads, dh) for w in (wq, wk, wv))
        a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(dh), axis=-1)
        return jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(b, s, d) @ wo

    return f"h{heads}x{dh}_s{seq}", fn, (wq, wk, wv, wo, _normal(rng, (batch, seq, d), dtype))


def transformer_block(rng, dtype, batch):
    heads = int(rng.choice([4, 8]))
    dh = 64
    d = heads * dh
    seq = min(int(rng.choice([16, 64, 128])), _scaled(batch, 128, 8, at=4))
    p = {
        "qkv": _normal(rng, (d, 3 * d), dtype, 1 / np.sqrt(d)),
        "o": _normal(rng, (d, d), dtype, 1 / np.sqrt(d)),
        "up": _normal(rng, (d, 4 * d), dtype, 1 / np.sqrt(d)),
        "down": _normal(rng, (4 * d, d), dtype, 1 / np.sqrt(4 * d)),
    }

    def fn(p, x):
        b, s, _ = x.shape
        h = _layernorm(x)
        q, k, v = jnp.split(h @ p["qkv"], 3, axis=-1)
        q, k, v = (t.reshape(b, s, heads, dh) for t in (q, k, v))
        a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / 8.0, axis=-1)
        x = x + jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(b, s, d) @ p["o"]
        return x + jax.nn.gelu(_layernorm(x) @ p["up"]) @ p["down"]

    return f"d{d}_s{seq}", fn, (p, _normal(rng, (batch, seq, d), dtype))


def embed_classifier(rng, dtype, batch):
    vocab = int(rng.choice([1000, 5000, 20000]))
    d = int(rng.choice([64, 128, 256]))
    seq = min(int(rng.choice([16, 64, 256])), _scaled(batch, 256, 8, at=16))
    classes = int(rng.choice([10, 100, 1000]))
    table = _normal(rng, (vocab, d), dtype, 0.1)
    w, b = _dense(rng, d, classes, dtype)
    ids = jnp.asarray(rng.integers(0, vocab, (batch, seq)), dtype=jnp.int32)

    def fn(table, w, b, ids):
        return jax.nn.log_softmax(table[ids].mean(axis=1) @ w + b)

    return f"v{vocab}_d{d}_s{seq}_c{classes}", fn, (table, w, b, ids)


def rnn_scan(rng, dtype, batch):
    d = int(rng.choice([64, 128, 256, 512]))
    steps = int(rng.choice([8, 16, 32]))
    wx = _normal(rng, (d, 4 * d), dtype, 1 / np.sqrt(d))
    wh = _normal(rng, (d, 4 * d), dtype, 1 / np.sqrt(d))

    def fn(wx, wh, xs):
        def cell(carry, x):
            h, c = carry
            i, f, g, o = jnp.split(x @ wx + h @ wh, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        zero = jnp.zeros((xs.shape[1], d), xs.dtype)
        return jax.lax.scan(cell, (zero, zero), xs)[1]

    return f"d{d}_t{steps}", fn, (wx, wh, _normal(rng, (steps, batch, d), dtype))


def moe(rng, dtype, batch):
    experts = int(rng.choice([4, 8]))
    d = int(rng.choice([128, 256, 512]))
    h = 2 * d
    tokens = batch * int(rng.choice([1, 4, 16]))
    router = _normal(rng, (d, experts), dtype, 1 / np.sqrt(d))
    w1 = _normal(rng, (experts, d, h), dtype, 1 / np.sqrt(d))
    w2 = _normal(rng, (experts, h, d), dtype, 1 / np.sqrt(h))

    def fn(router, w1, w2, x):
        gate = jax.nn.softmax(x @ router, axis=-1)
        hidden = jax.nn.relu(jnp.einsum("td,edh->teh", x, w1))
        out = jnp.einsum("teh,ehd->ted", hidden, w2)
        return jnp.einsum("ted,te->td", out, gate)

    return f"e{experts}_d{d}_t{tokens}", fn, (router, w1, w2, _normal(rng, (tokens, d), dtype))


def mlp_train_step(rng, dtype, batch):
    width = int(rng.choice([128, 256, 512, 1024]))
    depth = int(rng.integers(1, 4))
    params = [_dense(rng, width, width, dtype) for _ in range(depth)]
    x = _normal(rng, (batch, width), dtype)
    y = _normal(rng, (batch, width), dtype)

    def loss(params, x, y):
        for w, b in params:
            x = jnp.tanh(x @ w + b)
        return jnp.mean((x - y) ** 2)

    def fn(params, x, y):
        g = jax.grad(loss)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, g)

    return f"w{width}_d{depth}", fn, (params, x, y)


def bmm_chain(rng, dtype, batch):
    m = int(rng.choice([32, 64, 128, 256]))
    k = int(rng.choice([32, 64, 128, 256]))
    links = int(rng.integers(1, 4))
    ws = [_normal(rng, (k, k), dtype, 1 / np.sqrt(k)) for _ in range(links)]

    def fn(ws, x):
        for w in ws:
            x = jnp.einsum("bmk,kn->bmn", x, w)
            x = x / (1 + jnp.abs(x))
        return jnp.einsum("bmk,bnk->bmn", x, x)

    return f"m{m}_k{k}_l{links}", fn, (ws, _normal(rng, (batch, m, k), dtype))


def norm_softmax(rng, dtype, batch):
    d = int(rng.choice([256, 1024, 4096]))
    rows = batch * int(rng.choice([1, 16, 64]))

    def fn(x):
        y = _layernorm(x)
        return jax.nn.softmax(y * 2.0, axis=-1) + jnp.exp(-y * y)

    return f"d{d}_r{rows}", fn, (_normal(rng, (rows, d), dtype),)


FAMILIES: dict[str, Callable] = {
    "mlp": mlp,
    "gated_mlp": gated_mlp,
    "conv_stack": conv_stack,
    "resnet_block": resnet_block,
    "depthwise": depthwise,
    "conv1d": conv1d,
    "attention": attention,
    "transformer_block": transformer_block,
    "embed_classifier": embed_classifier,
    "rnn_scan": rnn_scan,
    "moe": moe,
    "mlp_train_step": mlp_train_step,
    "bmm_chain": bmm_chain,
    "norm_softmax": norm_softmax,
}


def programs(seed: int = 0, count: int = 140) -> list[Program]:
    """``count`` programs, families taken in turn, dtypes and batches
    drawn; deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    out = []
    names = list(FAMILIES)
    for i in range(count):
        family = names[i % len(names)]
        dtype = DTYPES[int(rng.integers(0, 2))]
        batch = int(rng.choice(BATCHES))
        tag, fn, args = FAMILIES[family](np.random.default_rng(rng.integers(1 << 63)), dtype, batch)
        short = "bf16" if dtype == "bfloat16" else "f32"
        name = f"{i:03d}_{family}_{tag}_{short}_b{batch}"
        out.append(Program(name, family, dtype, batch, fn, args))
    return out
