#!/usr/bin/env python3
"""Writes small and medium real-model HLO modules for `hlo-cost collect`.

Usage: make_cpu_layout_modules.py OUT_DIR

Each module is a jax function lowered before any XLA pass
(`jax.jit(f).lower(...).compiler_ir('hlo').as_hlo_text()`, the stage of the
corpus's *.pre.hlo): MLPs, CNNs, convolutions of several shapes and
dimension orders (NHWC, NCHW, strided, 1x1, depthwise, 1-D, 3-D), attention
blocks and their train steps (`held_*`: modules kept out of the
collection, for the benchmark of the pass's output). Shapes are chosen so that one run takes
milliseconds on a CPU and a module compiles in seconds, so that a layout
collection can measure many configurations of many modules. Written as
OUT_DIR/NAME.pre.hlo (existing files are replaced; nothing else is
written). Deterministic: the same jax gives the same files. Used by
scripts/cpu_layout_model.sh (docs/cost-models.md, "A layout model of your own
hardware"); the modules are data, not committed.
"""
import os
import sys

import jax
import jax.numpy as jnp
from jax import lax

F32 = jnp.float32


def z(*shape, dtype=F32):
    return jax.ShapeDtypeStruct(shape, dtype)


def mlp(widths, act=jax.nn.relu):
    def f(x, *ws):
        for i, w in enumerate(ws):
            x = x @ w
            if i + 1 < len(ws):
                x = act(x)
        return x

    return f, [z(*p) for p in zip(widths[:-1], widths[1:])]


def mlp_module(batch, widths, act=jax.nn.relu):
    f, ws = mlp(widths, act)
    return f, [z(batch, widths[0])] + ws


def mlp_train(batch, widths):
    f, ws = mlp(widths, jax.nn.gelu)

    def step(x, y, *params):
        def loss(params):
            return jnp.mean((f(x, *params) - y) ** 2)

        g = jax.grad(loss)(params)
        return tuple(p - 0.01 * d for p, d in zip(params, g))

    return step, [z(batch, widths[0]), z(batch, widths[-1])] + ws


def conv(x, w, stride=1, layout=("NHWC", "HWIO", "NHWC"), groups=1, padding="SAME"):
    nd = len(layout[0]) - 2
    return lax.conv_general_dilated(
        x,
        w,
        window_strides=(stride,) * nd,
        padding=padding,
        dimension_numbers=layout,
        feature_group_count=groups,
    )


def conv_module(x_shape, w_shape, stride=1, layout=("NHWC", "HWIO", "NHWC"), groups=1):
    def f(x, w, b):
        y = conv(x, w, stride, layout, groups)
        c = layout[2].index("C")
        shape = [1] * y.ndim
        shape[c] = -1
        return jax.nn.relu(y + b.reshape(shape))

    out_c = w_shape[layout[1].index("O")]
    return f, [z(*x_shape), z(*w_shape), z(out_c)]


def cnn(batch, hw, chans, layout="NHWC", classes=10, pool=True):
    """Conv-relu stack, global pooling, a dense head."""
    lhs = layout
    rhs = "HWIO" if layout == "NHWC" else "OIHW"
    spatial = tuple(i for i, d in enumerate(layout) if d in "HW")

    def f(x, *ps):
        convs, head = ps[:-1], ps[-1]
        for i, w in enumerate(convs):
            x = jax.nn.relu(conv(x, w, 2 if (pool and i % 2 == 1) else 1, (lhs, rhs, lhs)))
        x = jnp.mean(x, axis=spatial)
        return x @ head

    ws = []
    for cin, cout in zip(chans[:-1], chans[1:]):
        ws.append(z(3, 3, cin, cout) if rhs == "HWIO" else z(cout, cin, 3, 3))
    x = z(batch, hw, hw, chans[0]) if layout == "NHWC" else z(batch, chans[0], hw, hw)
    return f, [x] + ws + [z(chans[-1], classes)]


def cnn_train(batch, hw, chans):
    f, args = cnn(batch, hw, chans)

    def step(x, y, *params):
        def loss(params):
            return jnp.mean((f(x, *params) - y) ** 2)

        g = jax.grad(loss)(params)
        return tuple(p - 0.01 * d for p, d in zip(params, g))

    return step, [args[0], z(batch, 10)] + args[1:]


def attention(batch, seq, d, heads, ffn=True, causal=False):
    hd = d // heads

    def f(x, wq, wk, wv, wo, w1, w2):
        def split(t):
            return t.reshape(batch, seq, heads, hd).transpose(0, 2, 1, 3)

        q, k, v = split(x @ wq), split(x @ wk), split(x @ wv)
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(F32(hd))
        if causal:
            s = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), s, -1e9)
        a = jax.nn.softmax(s, axis=-1)
        o = jnp.einsum("bhqk,bhkd->bhqd", a, v).transpose(0, 2, 1, 3).reshape(batch, seq, d)
        x = x + o @ wo
        if ffn:
            x = x + jax.nn.gelu(x @ w1) @ w2
        return x

    return f, [z(batch, seq, d)] + [z(d, d)] * 4 + [z(d, 4 * d), z(4 * d, d)]


def attention_train(batch, seq, d, heads):
    f, args = attention(batch, seq, d, heads)

    def step(x, *params):
        def loss(params):
            return jnp.mean(f(x, *params) ** 2)

        g = jax.grad(loss)(params)
        return tuple(p - 0.01 * dp for p, dp in zip(params, g))

    return step, args


def einsum_chain(b, m, k, n):
    """Batched matmuls whose operands need transposes: dot dimension orders."""

    def f(a, x, y):
        t = jnp.einsum("bmk,bkn->bnm", a, x)
        u = jnp.einsum("bnm,nk->bkm", t, y)
        return jnp.tanh(u).reshape(b, -1)

    return f, [z(b, m, k), z(b, k, n), z(n, k)]


def separable(batch, hw, c, mult=1):
    """Depthwise then pointwise convolution (MobileNet block)."""

    def f(x, dw, pw):
        y = jax.nn.relu(conv(x, dw, 1, ("NHWC", "HWIO", "NHWC"), groups=c))
        return jax.nn.relu(conv(y, pw))

    return f, [z(batch, hw, hw, c), z(3, 3, 1, c * mult), z(1, 1, c * mult, 2 * c)]


def resblock(batch, hw, c, layout="NHWC"):
    rhs = "HWIO" if layout == "NHWC" else "OIHW"

    def f(x, w1, w2):
        y = jax.nn.relu(conv(x, w1, 1, (layout, rhs, layout)))
        return jax.nn.relu(x + conv(y, w2, 1, (layout, rhs, layout)))

    x = z(batch, hw, hw, c) if layout == "NHWC" else z(batch, c, hw, hw)
    w = z(3, 3, c, c) if rhs == "HWIO" else z(c, c, 3, 3)
    return f, [x, w, w]


MODULES = {
    "gen_mlp_wide": lambda: mlp_module(16, [512, 1024, 1024, 256]),
    "gen_mlp_deep": lambda: mlp_module(64, [128, 256, 256, 256, 256, 64], jax.nn.gelu),
    "gen_mlp_tall": lambda: mlp_module(512, [64, 256, 64, 16]),
    "gen_mlp_train": lambda: mlp_train(32, [256, 512, 128, 10]),
    "gen_conv3x3_nhwc": lambda: conv_module((4, 32, 32, 32), (3, 3, 32, 64)),
    "gen_conv3x3_nchw": lambda: conv_module((4, 32, 32, 32), (64, 32, 3, 3), layout=("NCHW", "OIHW", "NCHW")),
    "gen_conv1x1": lambda: conv_module((8, 16, 16, 128), (1, 1, 128, 64)),
    "gen_conv5x5_s2": lambda: conv_module((4, 48, 48, 16), (5, 5, 16, 32), stride=2),
    "gen_conv_depthwise": lambda: conv_module((4, 32, 32, 64), (3, 3, 1, 64), groups=64),
    "gen_conv1d": lambda: conv_module((8, 256, 32), (5, 32, 64), layout=("NWC", "WIO", "NWC")),
    "gen_conv3d": lambda: conv_module((2, 12, 16, 16, 8), (3, 3, 3, 8, 16), layout=("NDHWC", "DHWIO", "NDHWC")),
    "gen_cnn_nhwc": lambda: cnn(8, 32, [3, 16, 32, 64]),
    "gen_cnn_nchw": lambda: cnn(8, 32, [3, 16, 32, 64], layout="NCHW"),
    "gen_cnn_small": lambda: cnn(16, 16, [1, 8, 16]),
    "gen_cnn_train": lambda: cnn_train(4, 24, [3, 16, 32]),
    "gen_resblock": lambda: resblock(4, 16, 64),
    "gen_resblock_nchw": lambda: resblock(4, 16, 32, layout="NCHW"),
    "gen_separable": lambda: separable(4, 32, 32),
    "gen_attention": lambda: attention(2, 64, 128, 4),
    "gen_attention_causal": lambda: attention(4, 32, 64, 2, causal=True),
    "gen_attention_noffn": lambda: attention(2, 128, 256, 8, ffn=False),
    "gen_attention_train": lambda: attention_train(2, 32, 64, 2),
    "gen_einsum": lambda: einsum_chain(8, 64, 96, 48),
    "gen_einsum_small": lambda: einsum_chain(32, 16, 24, 32),
    # A second set of shapes (collected as more training modules).
    "gen2_mlp_narrow": lambda: mlp_module(256, [32, 64, 64, 8], jax.nn.tanh),
    "gen2_mlp_square": lambda: mlp_module(128, [384, 384, 384]),
    "gen2_mlp_train": lambda: mlp_train(64, [64, 128, 128, 16]),
    "gen2_conv3x3_wide": lambda: conv_module((2, 16, 16, 128), (3, 3, 128, 128)),
    "gen2_conv3x3_nchw_s2": lambda: conv_module((4, 16, 40, 40), (32, 16, 3, 3), stride=2, layout=("NCHW", "OIHW", "NCHW")),
    "gen2_conv7x7": lambda: conv_module((2, 64, 64, 3), (7, 7, 3, 32), stride=2),
    "gen2_conv1x1_nchw": lambda: conv_module((4, 64, 16, 16), (128, 64, 1, 1), layout=("NCHW", "OIHW", "NCHW")),
    "gen2_conv1d_long": lambda: conv_module((4, 1024, 16), (9, 16, 16), layout=("NWC", "WIO", "NWC")),
    "gen2_conv_grouped": lambda: conv_module((4, 24, 24, 64), (3, 3, 16, 64), groups=4),
    "gen2_cnn_deep": lambda: cnn(4, 32, [3, 16, 16, 32, 32, 64]),
    "gen2_cnn_nchw_small": lambda: cnn(16, 16, [1, 8, 16], layout="NCHW"),
    "gen2_resblock_wide": lambda: resblock(2, 8, 128),
    "gen2_separable_x2": lambda: separable(2, 24, 48, mult=2),
    "gen2_attention_long": lambda: attention(1, 256, 64, 2),
    "gen2_attention_wide": lambda: attention(2, 32, 256, 8),
    "gen2_attention_train": lambda: attention_train(1, 64, 32, 4),
    "gen2_einsum": lambda: einsum_chain(4, 128, 32, 64),
    # Held out: never collected, for the pass-output benchmark (docs/benchmarks.md).
    "held_mlp": lambda: mlp_module(32, [256, 512, 512, 64]),
    "held_cnn_nhwc": lambda: cnn(8, 24, [3, 24, 48]),
    "held_cnn_nchw": lambda: cnn(8, 24, [3, 24, 48], layout="NCHW"),
    "held_conv3x3_nchw": lambda: conv_module((4, 48, 24, 24), (48, 48, 3, 3), layout=("NCHW", "OIHW", "NCHW")),
    "held_attention": lambda: attention(2, 48, 96, 3),
    "held_einsum": lambda: einsum_chain(16, 48, 64, 40),
}


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().split("\n\n")[1])
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, make in MODULES.items():
        f, args = make()
        text = jax.jit(f).lower(*args).compiler_ir("hlo").as_hlo_text()
        with open(os.path.join(out, f"{name}.pre.hlo"), "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"{out}/{name}.pre.hlo: {text.count(chr(10))} lines")


if __name__ == "__main__":
    main()
