#!/usr/bin/env python3
"""The GEMM-heavy jax programs of the XLA:GPU tile collection (docs/xla-gpu.md).

`programs()` returns (name, fn, args, held_out): a jitted-able function and
its argument shapes (`jax.ShapeDtypeStruct`). Transformer blocks and
attention in bf16/f16/f32, MLPs of several batch sizes, gated MLPs,
batched matmuls, convolutions written as GEMMs (patches x kernel), training
steps (whose backward pass multiplies transposed operands), odd
(non-power-of-two) shapes, int8 weights. `held_out` programs are kept out of
the collected data: the measurement (scripts/gpu_measure.py) runs on them.

Deterministic: names and shapes depend on nothing but this file. Run as a
script it lists the programs (`--lower` also lowers each on the default
backend and prints its dot count: the CPU check of the corpus).
"""
import sys

import jax
import jax.numpy as jnp
from jax import lax

BF16, F16, F32, I8 = jnp.bfloat16, jnp.float16, jnp.float32, jnp.int8
DT = {"bf16": BF16, "f16": F16, "f32": F32}


def z(*shape, dtype=F32):
    return jax.ShapeDtypeStruct(shape, dtype)


def mlp(x, *ws):
    for i, w in enumerate(ws):
        x = x @ w
        if i + 1 < len(ws):
            x = jax.nn.relu(x)
    return x


def gated_mlp(x, wg, wu, wd):
    return (jax.nn.silu(x @ wg) * (x @ wu)) @ wd


def layer_norm(x):
    m = jnp.mean(x.astype(F32), axis=-1, keepdims=True)
    v = jnp.var(x.astype(F32), axis=-1, keepdims=True)
    return ((x.astype(F32) - m) * lax.rsqrt(v + 1e-5)).astype(x.dtype)


def attention(x, wq, wk, wv, wo, heads):
    b, s, d = x.shape
    hd = d // heads
    q = (x @ wq).reshape(b, s, heads, hd)
    k = (x @ wk).reshape(b, s, heads, hd)
    v = (x @ wv).reshape(b, s, heads, hd)
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(jnp.asarray(hd, x.dtype))
    p = jax.nn.softmax(logits.astype(F32), axis=-1).astype(x.dtype)
    o = jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(b, s, d)
    return o @ wo


def block(x, wq, wk, wv, wo, w1, w2, heads):
    x = x + attention(layer_norm(x), wq, wk, wv, wo, heads)
    return x + jax.nn.gelu(layer_norm(x) @ w1) @ w2


def conv_as_gemm(x, k):
    # NHWC image, HWIO kernel: patches (N*H*W, KH*KW*C) times (KH*KW*C, O).
    n, h, w, c = x.shape
    kh, kw, _, o = k.shape
    p = lax.conv_general_dilated_patches(
        x, (kh, kw), (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return (p.reshape(n * h * w, c * kh * kw) @ k.transpose(2, 0, 1, 3).reshape(c * kh * kw, o)).reshape(n, h, w, o)


def mlp_train_step(x, y, w1, w2):
    def loss(ws):
        a, b = ws
        out = jax.nn.relu(x @ a) @ b
        return jnp.mean((out.astype(F32) - y.astype(F32)) ** 2)
    g = jax.grad(loss)((w1, w2))
    return w1 - 0.01 * g[0], w2 - 0.01 * g[1]


def int8_weights(x, w, scale):
    return (x @ w.astype(x.dtype)) * scale


def programs():
    out = []

    def add(name, fn, args, held_out=False):
        out.append((name, fn, args, held_out))

    for dn in ("bf16", "f16", "f32"):
        dt = DT[dn]
        for b in (32, 256, 2048):
            add(f"mlp_{dn}_b{b}", mlp, [z(b, 512, dtype=dt), z(512, 1024, dtype=dt),
                                       z(1024, 1024, dtype=dt), z(1024, 256, dtype=dt)])
        for s in (128, 512):
            add(f"attention_{dn}_s{s}", lambda x, a, b_, c, d: attention(x, a, b_, c, d, 8),
                [z(4, s, 512, dtype=dt)] + [z(512, 512, dtype=dt)] * 4)
    for dn, b, s, d in (("bf16", 4, 256, 768), ("bf16", 1, 1024, 1024), ("f32", 2, 128, 512),
                        ("f16", 8, 128, 768)):
        dt = DT[dn]
        add(f"block_{dn}_b{b}_s{s}_d{d}", lambda x, *w: block(x, *w, heads=d // 64),
            [z(b, s, d, dtype=dt)] + [z(d, d, dtype=dt)] * 4 + [z(d, 4 * d, dtype=dt), z(4 * d, d, dtype=dt)])
    for dn, b in (("bf16", 64), ("bf16", 1024)):
        add(f"gated_mlp_{dn}_b{b}", gated_mlp, [z(b, 1024, dtype=BF16), z(1024, 2816, dtype=BF16),
                                                z(1024, 2816, dtype=BF16), z(2816, 1024, dtype=BF16)])
    for dn, (bq, h, s, d) in (("bf16", (8, 16, 256, 64)), ("f16", (4, 8, 512, 128)), ("f32", (2, 4, 128, 64))):
        dt = DT[dn]
        add(f"bmm_{dn}_h{h}_s{s}", lambda q, k: jnp.einsum("bhqd,bhkd->bhqk", q, k),
            [z(bq, h, s, d, dtype=dt), z(bq, h, s, d, dtype=dt)])
    for dn, (n, hw, c, o, k) in (("bf16", (8, 32, 64, 128, 3)), ("f32", (4, 16, 128, 128, 1)),
                                 ("f16", (16, 14, 256, 256, 3))):
        dt = DT[dn]
        add(f"conv_gemm_{dn}_c{c}_k{k}", conv_as_gemm, [z(n, hw, hw, c, dtype=dt), z(k, k, c, o, dtype=dt)])
    for dn, b in (("bf16", 256), ("f32", 128)):
        dt = DT[dn]
        add(f"mlp_train_{dn}_b{b}", mlp_train_step, [z(b, 784, dtype=dt), z(b, 10, dtype=dt),
                                                     z(784, 1024, dtype=dt), z(1024, 10, dtype=dt)])
    for dn in ("bf16", "f32"):
        dt = DT[dn]
        add(f"odd_{dn}", lambda x, w: jax.nn.gelu(x @ w), [z(100, 300, dtype=dt), z(300, 700, dtype=dt)])
    add("int8_weights_bf16", int8_weights, [z(512, 1024, dtype=BF16), z(1024, 1024, dtype=I8), z(1024, dtype=BF16)])
    # Wave 2 (added after session 1, which collected everything above): single
    # GEMMs with an epilogue over a grid of shapes, so the model sees sizes
    # between and beyond the blocks' and MLPs' (M, N, K from 64 to 8192;
    # square, tall, wide, deep-K; each dtype).
    shapes = [(64, 64, 64), (128, 256, 512), (256, 256, 4096), (512, 512, 512), (512, 4096, 512),
              (1024, 1024, 1024), (1024, 4096, 256), (2048, 256, 2048), (2048, 2048, 2048),
              (4096, 1024, 4096), (8192, 512, 1024), (384, 1536, 768), (96, 3072, 1024),
              (4096, 4096, 512)]
    for dn in ("bf16", "f16", "f32"):
        dt = DT[dn]
        for (m, n, k) in shapes:
            add(f"gemm_{dn}_{m}x{n}x{k}", lambda x, w: jax.nn.gelu(x @ w), [z(m, k, dtype=dt), z(k, n, dtype=dt)])
    for dn, (b, m, n, k) in (("bf16", (16, 128, 128, 64)), ("bf16", (32, 512, 64, 512)),
                             ("f16", (8, 1024, 1024, 128)), ("f32", (4, 256, 256, 256))):
        dt = DT[dn]
        add(f"bgemm_{dn}_b{b}_{m}x{n}x{k}", lambda x, w: jnp.einsum("bmk,bkn->bmn", x, w),
            [z(b, m, k, dtype=dt), z(b, k, n, dtype=dt)])
    # Held out of the data: the measurement's programs. Sized so that a step
    # is GPU time (0.3 ms or more on an H100), not dispatch.
    add("held_mlp_bf16_b4096", mlp, [z(4096, 2048, dtype=BF16), z(2048, 8192, dtype=BF16),
                                     z(8192, 2048, dtype=BF16)], True)
    add("held_block_bf16_b8_s1024", lambda x, *w: block(x, *w, heads=16),
        [z(8, 1024, 1024, dtype=BF16)] + [z(1024, 1024, dtype=BF16)] * 4
        + [z(1024, 4096, dtype=BF16), z(4096, 1024, dtype=BF16)], True)
    add("held_attention_f16_s1024", lambda x, a, b_, c, d: attention(x, a, b_, c, d, 8),
        [z(8, 1024, 512, dtype=F16)] + [z(512, 512, dtype=F16)] * 4, True)
    add("held_gated_mlp_bf16_b2048", gated_mlp, [z(2048, 1536, dtype=BF16), z(1536, 4096, dtype=BF16),
                                                 z(1536, 4096, dtype=BF16), z(4096, 1536, dtype=BF16)], True)
    add("held_mlp_f32_b4096", mlp, [z(4096, 1024, dtype=F32), z(1024, 4096, dtype=F32),
                                    z(4096, 1024, dtype=F32)], True)
    add("held_mlp_train_bf16_b4096", mlp_train_step, [z(4096, 1536, dtype=BF16), z(4096, 16, dtype=BF16),
                                                      z(1536, 3072, dtype=BF16), z(3072, 16, dtype=BF16)], True)
    return out


def main():
    ps = programs()
    names = [p[0] for p in ps]
    assert len(set(names)) == len(names), "program names repeat"
    lower = "--lower" in sys.argv
    for name, fn, args, held in ps:
        line = f"{name}\t{'held_out' if held else 'collect'}"
        if lower:
            text = jax.jit(fn).lower(*args).as_text()
            line += f"\tdot_general: {text.count('dot_general')}"
        print(line)
    print(f"{len(ps)} programs, {sum(1 for p in ps if not p[3])} collected, {sum(1 for p in ps if p[3])} held out")


if __name__ == "__main__":
    main()
