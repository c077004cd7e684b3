"""The held-out programs of the XLA:CPU benchmark (scripts/bench_xla_cpu.py):
real JAX programs whose architectures are not among the training families
of hlo_opt/cpu_corpus.py (no MLP stack, plain conv stack, ResNet block,
depthwise block, 1-D conv stack, bare attention, pre-norm transformer
block, embedding classifier, LSTM scan, dense MoE, MLP train step, batched
matmul chain or norm/softmax kernel). f32 and bf16, batch 1 to 256.

``programs()`` returns ``Program``s (hlo_opt.cpu_corpus.Program).
"""

from __future__ import annotations

import numpy as np

import jax
import jax.numpy as jnp

from hlo_opt.cpu_corpus import Program


def _init(seed):
    rng = np.random.default_rng(seed)

    def normal(shape, dtype, scale=None):
        scale = 1.0 / np.sqrt(shape[0]) if scale is None else scale
        return jnp.asarray(rng.standard_normal(shape).astype(np.float32) * scale, dtype=dtype)

    return rng, normal


def _rms(x):
    return x * jax.lax.rsqrt(jnp.mean(jnp.square(x.astype(jnp.float32)), -1, keepdims=True).astype(x.dtype) + 1e-6)


def t5_encoder(dtype, batch, seq=64, d=256, heads=4, ff=1024, layers=2):
    """T5-style encoder: RMSNorm, relative position bias, gated-GELU FFN."""
    _, n = _init(1)
    p = [dict(qkv=n((d, 3 * d), dtype), o=n((d, d), dtype), wi0=n((d, ff), dtype), wi1=n((d, ff), dtype),
              wo=n((ff, d), dtype)) for _ in range(layers)]
    bias = n((heads, seq, seq), dtype, 0.1)
    x = n((batch, seq, d), dtype, 1.0)

    def fn(p, bias, x):
        b, s, _ = x.shape
        for l in p:
            q, k, v = jnp.split(_rms(x) @ l["qkv"], 3, -1)
            q, k, v = (t.reshape(b, s, heads, d // heads) for t in (q, k, v))
            a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) + bias, -1)
            x = x + jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(b, s, d) @ l["o"]
            h = _rms(x)
            x = x + (jax.nn.gelu(h @ l["wi0"]) * (h @ l["wi1"])) @ l["wo"]
        return _rms(x)

    return fn, (p, bias, x)


def vit(dtype, batch, img=32, patch=8, d=192, heads=3, layers=2, classes=10):
    """ViT: patch embedding (strided conv), class token, encoder, head."""
    _, n = _init(2)
    npatch = (img // patch) ** 2
    p = dict(embed=n((patch, patch, 3, d), dtype, 0.05), cls=n((1, 1, d), dtype, 0.02),
             pos=n((1, npatch + 1, d), dtype, 0.02), head=n((d, classes), dtype),
             layers=[dict(qkv=n((d, 3 * d), dtype), o=n((d, d), dtype), up=n((d, 4 * d), dtype),
                          down=n((4 * d, d), dtype)) for _ in range(layers)])
    x = n((batch, img, img, 3), dtype, 1.0)

    def ln(x):
        m = x.mean(-1, keepdims=True)
        return (x - m) * jax.lax.rsqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-6)

    def fn(p, x):
        y = jax.lax.conv_general_dilated(x, p["embed"], (patch, patch), "VALID",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        b = y.shape[0]
        y = y.reshape(b, -1, d)
        y = jnp.concatenate([jnp.broadcast_to(p["cls"], (b, 1, d)), y], 1) + p["pos"]
        s = y.shape[1]
        for l in p["layers"]:
            q, k, v = (t.reshape(b, s, heads, d // heads) for t in jnp.split(ln(y) @ l["qkv"], 3, -1))
            a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / 8.0, -1)
            y = y + jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(b, s, d) @ l["o"]
            y = y + jax.nn.gelu(ln(y) @ l["up"]) @ l["down"]
        return ln(y[:, 0]) @ p["head"]

    return fn, (p, x)


def unet(dtype, batch, hw=32, c=16):
    """A two-level U-Net: convs, average pooling, nearest upsampling, skips."""
    _, n = _init(3)
    dn = ("NHWC", "HWIO", "NHWC")
    w = dict(d1=n((3, 3, 3, c), dtype, 0.2), d2=n((3, 3, c, 2 * c), dtype, 0.1), mid=n((3, 3, 2 * c, 2 * c), dtype, 0.1),
             u1=n((3, 3, 4 * c, c), dtype, 0.1), out=n((1, 1, c, 1), dtype, 0.2))
    x = n((batch, hw, hw, 3), dtype, 1.0)

    def conv(x, k):
        return jax.nn.relu(jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=dn))

    def fn(w, x):
        a = conv(x, w["d1"])
        b = jax.lax.reduce_window(a, 0.0, jax.lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4
        b = conv(b, w["d2"])
        m = conv(b, w["mid"])
        up = jnp.repeat(jnp.repeat(jnp.concatenate([m, b], -1), 2, 1), 2, 2)
        u = conv(jnp.concatenate([up[..., : 2 * c] + 0, up[..., 2 * c:]], -1), w["u1"]) + a
        return jax.lax.conv_general_dilated(u, w["out"], (1, 1), "SAME", dimension_numbers=dn)

    return fn, (w, x)


def gru(dtype, batch, d=256, steps=24):
    """A GRU over a sequence (lax.scan), then a linear readout."""
    _, n = _init(4)
    w = dict(x=n((d, 3 * d), dtype), h=n((d, 3 * d), dtype), out=n((d, d), dtype))
    xs = n((steps, batch, d), dtype, 1.0)

    def fn(w, xs):
        def cell(h, x):
            xr, xz, xn = jnp.split(x @ w["x"], 3, -1)
            hr, hz, hn = jnp.split(h @ w["h"], 3, -1)
            r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
            h = (1 - z) * jnp.tanh(xn + r * hn) + z * h
            return h, h

        h, _ = jax.lax.scan(cell, jnp.zeros(xs.shape[1:], xs.dtype), xs)
        return h @ w["out"]

    return fn, (w, xs)


def mixer(dtype, batch, patches=64, c=256, tokens_hidden=128, ch_hidden=1024, layers=2):
    """MLP-Mixer: token-mixing and channel-mixing MLPs with layer norms."""
    _, n = _init(5)
    p = [dict(t1=n((patches, tokens_hidden), dtype), t2=n((tokens_hidden, patches), dtype),
              c1=n((c, ch_hidden), dtype), c2=n((ch_hidden, c), dtype)) for _ in range(layers)]
    x = n((batch, patches, c), dtype, 1.0)

    def ln(x):
        m = x.mean(-1, keepdims=True)
        return (x - m) * jax.lax.rsqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-6)

    def fn(p, x):
        for l in p:
            y = jnp.swapaxes(ln(x), 1, 2)
            x = x + jnp.swapaxes(jax.nn.gelu(y @ l["t1"]) @ l["t2"], 1, 2)
            x = x + jax.nn.gelu(ln(x) @ l["c1"]) @ l["c2"]
        return x.mean(1)

    return fn, (p, x)


def wavenet(dtype, batch, length=512, c=64, layers=6):
    """WaveNet: dilated causal 1-D convolutions, gated tanh/sigmoid, skips."""
    _, n = _init(6)
    p = [dict(f=n((2, c, c), dtype, 0.1), g=n((2, c, c), dtype, 0.1), res=n((1, c, c), dtype, 0.1))
         for _ in range(layers)]
    x = n((batch, length, c), dtype, 1.0)
    dn = ("NWC", "WIO", "NWC")

    def fn(p, x):
        skip = jnp.zeros_like(x)
        for i, l in enumerate(p):
            dil = 2 ** i
            pad = [(dil, 0)]
            f = jax.lax.conv_general_dilated(x, l["f"], (1,), pad, rhs_dilation=(dil,), dimension_numbers=dn)
            g = jax.lax.conv_general_dilated(x, l["g"], (1,), pad, rhs_dilation=(dil,), dimension_numbers=dn)
            h = jnp.tanh(f) * jax.nn.sigmoid(g)
            skip = skip + h
            x = x + jax.lax.conv_general_dilated(h, l["res"], (1,), "VALID", dimension_numbers=dn)
        return jax.nn.relu(skip)

    return fn, (p, x)


def vae(dtype, batch, hw=28, c=32, z=32):
    """A convolutional VAE: strided conv encoder, reparameterisation, dense decoder."""
    _, n = _init(7)
    dn = ("NHWC", "HWIO", "NHWC")
    p = dict(e1=n((4, 4, 1, c), dtype, 0.2), e2=n((4, 4, c, 2 * c), dtype, 0.1),
             mu=n((7 * 7 * 2 * c, z), dtype), lv=n((7 * 7 * 2 * c, z), dtype),
             d1=n((z, 512), dtype), d2=n((512, hw * hw), dtype))
    x = n((batch, hw, hw, 1), dtype, 1.0)
    eps = n((batch, z), dtype, 1.0)

    def fn(p, x, eps):
        h = jax.nn.relu(jax.lax.conv_general_dilated(x, p["e1"], (2, 2), "SAME", dimension_numbers=dn))
        h = jax.nn.relu(jax.lax.conv_general_dilated(h, p["e2"], (2, 2), "SAME", dimension_numbers=dn))
        h = h.reshape(h.shape[0], -1)
        mu, logvar = h @ p["mu"], h @ p["lv"]
        zs = mu + jnp.exp(0.5 * logvar) * eps
        recon = jax.nn.sigmoid(jax.nn.relu(zs @ p["d1"]) @ p["d2"])
        kl = -0.5 * jnp.sum(1 + logvar - mu**2 - jnp.exp(logvar), -1)
        return recon, kl

    return fn, (p, x, eps)


def dlrm(dtype, batch, tables=8, rows=10000, d=64):
    """DLRM: embedding lookups, bottom MLP, pairwise dot interaction, top MLP."""
    rng, n = _init(8)
    p = dict(emb=n((tables, rows, d), dtype, 0.05), b1=n((13, 256), dtype), b2=n((256, d), dtype),
             t1=n((d + tables * (tables + 1) // 2 + tables, 512), dtype), t2=n((512, 256), dtype), t3=n((256, 1), dtype))
    dense = n((batch, 13), dtype, 1.0)
    ids = jnp.asarray(rng.integers(0, rows, (batch, tables)), dtype=jnp.int32)

    def fn(p, dense, ids):
        x = jax.nn.relu(jax.nn.relu(dense @ p["b1"]) @ p["b2"])
        e = jax.vmap(lambda t, i: t[i], in_axes=(0, 1), out_axes=1)(p["emb"], ids)
        feats = jnp.concatenate([x[:, None], e], 1)
        inter = jnp.einsum("bid,bjd->bij", feats, feats)
        iu = jnp.triu_indices(tables + 1, 1)
        z = jnp.concatenate([x, inter[:, iu[0], iu[1]]], 1)
        z = jnp.pad(z, ((0, 0), (0, p["t1"].shape[0] - z.shape[1])))
        return jax.nn.sigmoid(jax.nn.relu(jax.nn.relu(z @ p["t1"]) @ p["t2"]) @ p["t3"])

    return fn, (p, dense, ids)


def gcn(dtype, batch, nodes=256, f=128, hidden=128):
    """A two-layer graph convolutional network over dense normalised adjacencies."""
    rng, n = _init(9)
    adj = (rng.random((batch, nodes, nodes)) < 0.05).astype(np.float32)
    adj = adj + np.transpose(adj, (0, 2, 1)) + np.eye(nodes, dtype=np.float32)
    deg = adj.sum(-1, keepdims=True)
    a = jnp.asarray(adj / np.sqrt(deg) / np.sqrt(np.transpose(deg, (0, 2, 1))), dtype=dtype)
    p = dict(w1=n((f, hidden), dtype), w2=n((hidden, 16), dtype))
    x = n((batch, nodes, f), dtype, 1.0)

    def fn(p, a, x):
        h = jax.nn.relu(a @ (x @ p["w1"]))
        return jax.nn.log_softmax(a @ (h @ p["w2"]), -1)

    return fn, (p, a, x)


def gpt_train_step(dtype, batch, seq=64, d=256, heads=4, vocab=2000):
    """A GPT-2-style causal decoder layer: loss, gradient and SGD update."""
    rng, n = _init(10)
    p = dict(emb=n((vocab, d), dtype, 0.02), qkv=n((d, 3 * d), dtype), o=n((d, d), dtype),
             up=n((d, 4 * d), dtype), down=n((4 * d, d), dtype))
    ids = jnp.asarray(rng.integers(0, vocab, (batch, seq + 1)), dtype=jnp.int32)
    mask = jnp.tril(jnp.ones((seq, seq), bool))

    def ln(x):
        m = x.mean(-1, keepdims=True)
        return (x - m) * jax.lax.rsqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5)

    def loss(p, ids):
        x = p["emb"][ids[:, :-1]]
        b, s, _ = x.shape
        q, k, v = (t.reshape(b, s, heads, d // heads) for t in jnp.split(ln(x) @ p["qkv"], 3, -1))
        sc = jnp.where(mask, jnp.einsum("bqhd,bkhd->bhqk", q, k) / 8.0, -1e4)
        x = x + jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(sc, -1), v).reshape(b, s, d) @ p["o"]
        x = x + jax.nn.gelu(ln(x) @ p["up"]) @ p["down"]
        logits = (ln(x) @ p["emb"].T).astype(jnp.float32)
        tgt = jax.nn.one_hot(ids[:, 1:], vocab)
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * tgt, -1))

    def fn(p, ids):
        l, g = jax.value_and_grad(loss)(p, ids)
        return l, jax.tree_util.tree_map(lambda w, g: w - (1e-3 * g).astype(w.dtype), p, g)

    return fn, (p, ids)


def lenet_train_step(dtype, batch):
    """LeNet-5 on 28x28 images: conv, max pool, dense; cross-entropy, gradient, SGD."""
    rng, n = _init(11)
    dn = ("NHWC", "HWIO", "NHWC")
    p = dict(c1=n((5, 5, 1, 6), dtype, 0.2), c2=n((5, 5, 6, 16), dtype, 0.1), f1=n((16 * 4 * 4, 120), dtype),
             f2=n((120, 84), dtype), f3=n((84, 10), dtype))
    x = n((batch, 28, 28, 1), dtype, 1.0)
    y = jax.nn.one_hot(jnp.asarray(rng.integers(0, 10, batch)), 10)

    def pool(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def loss(p, x, y):
        h = pool(jax.nn.relu(jax.lax.conv_general_dilated(x, p["c1"], (1, 1), "VALID", dimension_numbers=dn)))
        h = pool(jax.nn.relu(jax.lax.conv_general_dilated(h, p["c2"], (1, 1), "VALID", dimension_numbers=dn)))
        h = h.reshape(h.shape[0], -1)
        logits = (jax.nn.relu(jax.nn.relu(h @ p["f1"]) @ p["f2"]) @ p["f3"]).astype(jnp.float32)
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, -1))

    def fn(p, x, y):
        g = jax.grad(loss)(p, x, y)
        return jax.tree_util.tree_map(lambda w, g: w - (0.01 * g).astype(w.dtype), p, g)

    return fn, (p, x, y)


def deep_sets(dtype, batch, items=64, f=32, hidden=512):
    """Deep Sets: a per-element network, a sum over the set, a readout network."""
    _, n = _init(12)
    p = dict(phi1=n((f, hidden), dtype), phi2=n((hidden, hidden), dtype), rho1=n((hidden, hidden), dtype),
             rho2=n((hidden, 1), dtype))
    x = n((batch, items, f), dtype, 1.0)

    def fn(p, x):
        h = jax.nn.elu(jax.nn.elu(x @ p["phi1"]) @ p["phi2"]).sum(1)
        return jax.nn.elu(h @ p["rho1"]) @ p["rho2"]

    return fn, (p, x)


def perceiver(dtype, batch, inputs=256, latents=32, d=128, heads=4):
    """Perceiver: latents cross-attend to the input, then self-attend."""
    _, n = _init(13)
    p = dict(lat=n((latents, d), dtype, 1.0), q=n((d, d), dtype), kv=n((d, 2 * d), dtype), o=n((d, d), dtype),
             sq=n((d, 3 * d), dtype), so=n((d, d), dtype))
    x = n((batch, inputs, d), dtype, 1.0)

    def attend(q, k, v):
        b = q.shape[0]
        q, k, v = (t.reshape(b, t.shape[1], heads, d // heads) for t in (q, k, v))
        a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d // heads), -1)
        return jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(b, -1, d)

    def fn(p, x):
        lat = jnp.broadcast_to(p["lat"], (x.shape[0], latents, d))
        k, v = jnp.split(x @ p["kv"], 2, -1)
        lat = lat + attend(lat @ p["q"], k, v) @ p["o"]
        q, k, v = jnp.split(lat @ p["sq"], 3, -1)
        return lat + attend(q, k, v) @ p["so"]

    return fn, (p, x)


#: (architecture, dtype, batch): both dtypes, batch 1 to 256.
PLAN = [
    (t5_encoder, "float32", 8), (t5_encoder, "bfloat16", 2),
    (vit, "float32", 32), (vit, "bfloat16", 4),
    (unet, "float32", 4), (unet, "bfloat16", 16),
    (gru, "float32", 64), (gru, "bfloat16", 1),
    (mixer, "float32", 2), (mixer, "bfloat16", 16),
    (wavenet, "float32", 1), (wavenet, "bfloat16", 8),
    (vae, "float32", 256), (vae, "bfloat16", 64),
    (dlrm, "float32", 256), (dlrm, "bfloat16", 128),
    (gcn, "float32", 4), (gcn, "bfloat16", 1),
    (gpt_train_step, "float32", 4), (gpt_train_step, "bfloat16", 2),
    (lenet_train_step, "float32", 128), (lenet_train_step, "bfloat16", 256),
    (deep_sets, "float32", 128), (deep_sets, "bfloat16", 32),
    (perceiver, "float32", 16), (perceiver, "bfloat16", 4),
]


def programs(only: str | None = None) -> list[Program]:
    out = []
    for arch, dtype, batch in PLAN:
        short = "bf16" if dtype == "bfloat16" else "f32"
        name = f"{arch.__name__}_{short}_b{batch}"
        if only and only not in name:
            continue
        fn, args = arch(dtype, batch)
        out.append(Program(name, arch.__name__, dtype, batch, fn, args))
    return out
