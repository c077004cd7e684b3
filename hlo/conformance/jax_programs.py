"""The JAX programs `gen_jax_modules.py` lowers and compiles (one function
per program, registered in PROGRAMS). Kept small: each module is a test
input committed to git. The generator loads this file under the fixed name
`jax_programs.py`, so the file names in the modules' debug info (stack
frames) do not depend on where the checkout lives.

Each entry: name -> (function, example arguments, jit keyword arguments,
sharded), where `sharded` programs need the 8-device mesh `MESH`.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

PROGRAMS = {}


def program(name, sharded=False):
    def register(make):
        PROGRAMS[name] = (make, sharded)
        return make
    return register


def _key(seed=0):
    return jax.random.key(seed)


def _normal(seed, shape, dtype=jnp.float32):
    return jax.random.normal(jax.random.key(seed), shape, dtype)


# ---- single-device programs ------------------------------------------------

def _mlp(params, x):
    for w, b in params[:-1]:
        x = jax.nn.gelu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


@program("mlp_train")
def mlp_train():
    sizes = [16, 32, 32, 8]
    params = [(_normal(k, (a, b)), jnp.zeros((b,))) for k, (a, b) in enumerate(zip(sizes, sizes[1:]))]
    x, y = _normal(10, (4, 16)), _normal(11, (4, 8))

    def step(params, x, y):
        loss, g = jax.value_and_grad(lambda p: jnp.mean((_mlp(p, x) - y) ** 2))(params)
        return loss, jax.tree.map(lambda p, q: p - 0.01 * q, params, g)
    return step, (params, x, y), {}


@program("conv_net")
def conv_net():
    w1, w2 = _normal(1, (8, 3, 3, 3)), _normal(2, (8, 8, 3, 3))
    wd = _normal(3, (8 * 4 * 4, 10))
    x = _normal(4, (2, 3, 16, 16))
    labels = jnp.array([1, 7])

    def loss(params, x, labels):
        w1, w2, wd = params
        h = lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))
        h = jax.nn.relu(h)
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        h = lax.conv_general_dilated(h, w2, (1, 1), ((1, 1), (1, 1)), rhs_dilation=(1, 1),
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
        h = jax.nn.relu(h)
        h = lax.reduce_window(h, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 2, 2), "VALID") / 4.0
        logits = h.reshape(h.shape[0], -1) @ wd
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=1))

    def step(params, x, labels):
        l, g = jax.value_and_grad(loss)(params, x, labels)
        return l, jax.tree.map(lambda p, q: p - 0.1 * q, params, g)
    return step, ((w1, w2, wd), x, labels), {}


def _layer_norm(x, g, b):
    m = jnp.mean(x, -1, keepdims=True)
    v = jnp.mean((x - m) ** 2, -1, keepdims=True)
    return (x - m) * lax.rsqrt(v + 1e-5) * g + b


def _attention_block(p, x, dtype=jnp.float32):
    h = _layer_norm(x, p["ln_g"], p["ln_b"]).astype(dtype)
    q, k, v = (h @ p[n].astype(dtype) for n in ("wq", "wk", "wv"))
    b, t, d = q.shape
    heads = 2
    q, k, v = (a.reshape(b, t, heads, d // heads) for a in (q, k, v))
    s = jnp.einsum("bthd,bshd->bhts", q, k) / np.sqrt(d // heads).astype(dtype)
    mask = jnp.tril(jnp.ones((t, t), bool))
    s = jnp.where(mask, s, jnp.finfo(dtype).min)
    a = jax.nn.softmax(s.astype(jnp.float32), axis=-1).astype(dtype)
    o = jnp.einsum("bhts,bshd->bthd", a, v).reshape(b, t, d)
    x = x + (o @ p["wo"].astype(dtype)).astype(x.dtype)
    h = _layer_norm(x, p["ln2_g"], p["ln2_b"]).astype(dtype)
    return x + (jax.nn.gelu(h @ p["w1"].astype(dtype)) @ p["w2"].astype(dtype)).astype(x.dtype)


def _block_params(d=16, f=32, seed=0):
    p = {n: _normal(seed + k, (d, d)) * 0.1 for k, n in enumerate(("wq", "wk", "wv", "wo"))}
    p.update(w1=_normal(seed + 5, (d, f)) * 0.1, w2=_normal(seed + 6, (f, d)) * 0.1,
             ln_g=jnp.ones(d), ln_b=jnp.zeros(d), ln2_g=jnp.ones(d), ln2_b=jnp.zeros(d))
    return p


@program("transformer_train")
def transformer_train():
    p = {"blocks": [_block_params(seed=0), _block_params(seed=10)], "emb": _normal(20, (32, 16))}
    tokens = jnp.arange(16).reshape(2, 8) % 32

    def loss(p, tokens):
        x = p["emb"][tokens]
        for bp in p["blocks"]:
            x = _attention_block(bp, x)
        logits = x @ p["emb"].T
        lp = jax.nn.log_softmax(logits[:, :-1])
        return -jnp.mean(jnp.take_along_axis(lp, tokens[:, 1:, None], axis=-1))

    def step(p, tokens):
        l, g = jax.value_and_grad(loss)(p, tokens)
        return l, jax.tree.map(lambda a, b: a - 0.01 * b, p, g)
    return step, (p, tokens), {}


@program("bf16_train")
def bf16_train():
    p = _block_params(seed=30)
    x = _normal(40, (2, 8, 16))

    def loss(p, x):
        y = _attention_block(p, x, dtype=jnp.bfloat16)
        return jnp.mean(y.astype(jnp.float32) ** 2)

    def step(p, x, scale):
        l, g = jax.value_and_grad(lambda p: loss(p, x) * scale)(p)
        g = jax.tree.map(lambda a: (a / scale).astype(jnp.float32), g)
        finite = jnp.all(jnp.array([jnp.all(jnp.isfinite(a)) for a in jax.tree.leaves(g)]))
        new = jax.tree.map(lambda a, b: jnp.where(finite, a - 0.01 * b, a), p, g)
        return l, new, jnp.where(finite, scale, scale / 2)
    return step, (p, x, jnp.float32(1024.0)), {}


@program("scan_rnn")
def scan_rnn():
    wx, wh = _normal(1, (8, 16)), _normal(2, (16, 16))
    xs = _normal(3, (12, 4, 8))

    def loss(params, xs):
        wx, wh = params

        def cell(h, x):
            h = jnp.tanh(x @ wx + h @ wh)
            return h, jnp.sum(h)
        h, ys = lax.scan(cell, jnp.zeros((4, 16)), xs)
        return jnp.sum(ys) + jnp.sum(h)
    return jax.value_and_grad(loss), ((wx, wh), xs), {}


@program("while_loop")
def while_loop():
    def newton_sqrt(a, tol):
        def cond(s):
            x, i = s
            return (jnp.max(jnp.abs(x * x - a)) > tol) & (i < 50)

        def body(s):
            x, i = s
            return 0.5 * (x + a / x), i + 1
        return lax.while_loop(cond, body, (jnp.ones_like(a), 0))
    return newton_sqrt, (jnp.linspace(1.0, 9.0, 8), jnp.float32(1e-5)), {}


@program("fori_loop_unrolled")
def fori_loop_unrolled():
    def f(x, n):
        y = lax.fori_loop(0, n, lambda i, x: jnp.sin(x) * i, x)
        z = lax.fori_loop(0, 4, lambda i, x: x + jnp.cos(x), x, unroll=2)
        return y + z
    return f, (jnp.ones(8), 5), {}


@program("remat_mlp")
def remat_mlp():
    ws = [_normal(k, (16, 16)) * 0.3 for k in range(4)]
    x = _normal(9, (4, 16))

    @jax.checkpoint
    def layer(w, x):
        return jnp.tanh(jnp.sin(x @ w) * x)

    def loss(ws, x):
        for w in ws:
            x = layer(w, x)
        return jnp.sum(x ** 2)
    return jax.grad(loss), (ws, x), {}


@program("remat_scan_policy")
def remat_scan_policy():
    w = _normal(1, (6, 16, 16)) * 0.2
    x = _normal(2, (4, 16))
    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable

    def loss(w, x):
        def body(x, w):
            return jax.checkpoint(lambda x, w: jax.nn.relu(x @ w) + x, policy=policy)(x, w), None
        y, _ = lax.scan(body, x, w)
        return jnp.mean(y)
    return jax.grad(loss), (w, x), {}


@jax.custom_vjp
def _clip_gradient(x):
    return x


def _clip_fwd(x):
    return x, None


def _clip_bwd(_, g):
    return (jnp.clip(g, -0.1, 0.1),)


_clip_gradient.defvjp(_clip_fwd, _clip_bwd)


@jax.custom_vjp
def _safe_log(x):
    return jnp.log(x)


def _safe_log_fwd(x):
    return jnp.log(x), x


def _safe_log_bwd(x, g):
    return (g / jnp.maximum(x, 1e-6),)


_safe_log.defvjp(_safe_log_fwd, _safe_log_bwd)


@program("custom_vjp")
def custom_vjp():
    w = _normal(1, (8, 8))
    x = jnp.abs(_normal(2, (4, 8))) + 0.1

    def loss(w, x):
        return jnp.sum(_safe_log(jnp.abs(_clip_gradient(x @ w)) + 1.0))
    return jax.value_and_grad(loss, argnums=(0, 1)), (w, x), {}


@program("custom_jvp")
def custom_jvp():
    @jax.custom_jvp
    def softplus(x):
        return jnp.logaddexp(x, 0.0)

    @softplus.defjvp
    def softplus_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return softplus(x), t * jax.nn.sigmoid(x)
    return jax.grad(lambda x: jnp.sum(softplus(x) ** 2)), (_normal(1, (16,)),), {}


@program("sort_ops")
def sort_ops():
    def f(x, keys, vals):
        a = jnp.sort(x, axis=-1)
        b = jnp.argsort(x, axis=0, stable=True)
        k2, v2 = lax.sort((keys, vals), num_keys=1)
        desc = jnp.sort(x, axis=-1, descending=True)
        return a, b, k2, v2, desc, jnp.median(x, axis=1)
    return f, (_normal(1, (6, 10)), jnp.arange(12)[::-1] % 5, _normal(2, (12,))), {}


@program("top_k")
def top_k():
    def f(x):
        v, i = lax.top_k(x, 3)
        v2, i2 = lax.top_k(x.T, 2)
        return v, i, v2, i2, jnp.argmax(x, axis=1), jnp.argmin(x, axis=0)
    return f, (_normal(1, (5, 16)),), {}


@program("fft")
def fft():
    def f(x, z):
        a = jnp.fft.fft(z)
        b = jnp.fft.ifft2(z)
        c = jnp.fft.rfft(x, axis=-1)
        d = jnp.fft.irfft(c, n=x.shape[-1])
        e = jnp.fft.fftn(x, axes=(0, 1))
        return a, b, c, d, e
    z = _normal(1, (4, 8)) + 1j * _normal(2, (4, 8))
    return f, (_normal(3, (4, 8)), z.astype(jnp.complex64)), {}


@program("rng_threefry")
def rng_threefry():
    def f(key):
        k1, k2, k3 = jax.random.split(key, 3)
        return (jax.random.normal(k1, (4, 4)), jax.random.uniform(k2, (8,), minval=-1.0),
                jax.random.bernoulli(k3, 0.3, (16,)), jax.random.randint(k1, (5,), 0, 10),
                jax.random.permutation(k2, 10))
    return f, (_key(1),), {}


@program("rng_bit_generator")
def rng_bit_generator():
    def f(state):
        s1, bits = lax.rng_bit_generator(state, (4, 8), dtype=jnp.uint32)
        s2, bits8 = lax.rng_bit_generator(s1, (6,), dtype=jnp.uint8,
                                          algorithm=lax.RandomAlgorithm.RNG_PHILOX)
        dropout = jnp.where((bits >> 16) % 2 == 0, 1.0, 0.0)
        return s2, dropout, bits8
    return f, (jnp.arange(4, dtype=jnp.uint32),), {}


@program("rng_uniform_rbg")
def rng_uniform_rbg():
    def f(x):
        key = jax.random.key(3, impl="rbg")
        mask = jax.random.bernoulli(key, 0.9, x.shape)
        return jnp.where(mask, x / 0.9, 0.0)
    return f, (_normal(1, (8, 8)),), {}


@program("linalg_decompositions")
def linalg_decompositions():
    a = _normal(1, (6, 6))
    spd = a @ a.T + 6 * jnp.eye(6)

    def f(spd, a, b):
        l = jnp.linalg.cholesky(spd)
        q, r = jnp.linalg.qr(a)
        w, v = jnp.linalg.eigh(spd)
        x = jax.scipy.linalg.solve_triangular(l, b, lower=True)
        y = lax.linalg.triangular_solve(l, b.T, left_side=False, lower=True, transpose_a=True)
        return l, q, r, w, v, x, y
    return f, (spd, a, _normal(2, (6, 3))), {}


@program("linalg_solve")
def linalg_solve():
    def f(a, b):
        lu, piv, perm = lax.linalg.lu(a)
        x = jnp.linalg.solve(a, b)
        s = jnp.linalg.svd(a, compute_uv=False)
        return lu, piv, perm, x, s, jnp.linalg.det(a), jnp.linalg.inv(a)
    return f, (_normal(1, (5, 5)) + 5 * jnp.eye(5), _normal(2, (5, 2))), {}


@program("linalg_grad")
def linalg_grad():
    def loss(a):
        spd = a @ a.T + 4 * jnp.eye(4)
        l = jnp.linalg.cholesky(spd)
        return jnp.sum(jnp.log(jnp.diag(l))) + jnp.sum(jnp.linalg.eigh(spd)[0])
    return jax.grad(loss), (_normal(1, (4, 4)),), {}


@program("control_flow")
def control_flow():
    def f(x, i, p):
        a = lax.cond(p, lambda x: jnp.sin(x), lambda x: jnp.cos(x) * 2, x)
        b = lax.switch(i, [lambda x: x + 1, lambda x: x * x, lambda x: -x], x)
        return a, b, jax.grad(lambda x: jnp.sum(lax.cond(p, jnp.exp, jnp.tanh, x)))(x)
    return f, (_normal(1, (8,)), 1, True), {}


@program("gather_scatter")
def gather_scatter():
    def f(table, idx, upd):
        g = table[idx]
        t2 = table.at[idx].add(upd)
        t3 = table.at[idx, 0].set(-1.0)
        t4 = table.at[jnp.array([1, 3])].max(upd[:2])
        seg = jax.ops.segment_sum(upd, idx % 3, num_segments=3)
        return g, t2, t3, t4, seg
    return f, (_normal(1, (10, 4)), jnp.array([0, 3, 3, 7]), _normal(2, (4, 4))), {}


@program("reductions_cumulative")
def reductions_cumulative():
    def f(x):
        return (jnp.cumsum(x, axis=0), jnp.cumprod(x[:4], axis=1), lax.cummax(x, axis=1),
                jax.nn.logsumexp(x, axis=1), jnp.var(x, axis=0), jnp.any(x > 2.0),
                jnp.prod(x[:3, :3]))
    return f, (_normal(1, (8, 6)),), {}


@program("dynamic_slicing")
def dynamic_slicing():
    def f(x, i, j):
        a = lax.dynamic_slice(x, (i, j), (3, 2))
        b = lax.dynamic_update_slice(x, jnp.zeros((2, 2)), (j, i))
        c = jnp.roll(x, 2, axis=1)
        d = jnp.pad(x, ((1, 2), (0, 1)), mode="reflect")
        return a, b, c, d, x[::2, 1::3], jnp.flip(x, 0)
    return f, (_normal(1, (8, 8)), 2, 3), {}


@program("vmap_einsum")
def vmap_einsum():
    def f(a, b, c):
        bm = jax.vmap(lambda x, y: x @ y)(a, b)
        e = jnp.einsum("bij,bjk,kl->bil", a, b, c)
        outer = jax.vmap(jax.vmap(lambda x, y: x * y, (0, None)), (None, 0))(a[0, 0], c[0])
        return bm, e, outer
    return f, (_normal(1, (3, 4, 5)), _normal(2, (3, 5, 6)), _normal(3, (6, 2))), {}


@program("integer_bitwise")
def integer_bitwise():
    def f(x, y):
        return (x & y, x | y, x ^ y, x << 2, lax.shift_right_logical(x, 3), lax.population_count(x),
                lax.clz(y), x // 3, x % 5, jnp.clip(x, 2, 9).astype(jnp.int8),
                lax.bitcast_convert_type(y.astype(jnp.float32), jnp.int32))
    return f, (jnp.arange(16, dtype=jnp.int32), jnp.arange(16, dtype=jnp.uint32)[::-1]), {}


@program("complex_and_special")
def complex_and_special():
    def f(z, x):
        return (jnp.abs(z), jnp.angle(z), z * jnp.conj(z), jnp.exp(z), lax.erf(x),
                lax.lgamma(jnp.abs(x) + 1), jnp.arctan2(x, x + 1), lax.erf_inv(jnp.tanh(x) * 0.9),
                jnp.round(x * 3), jnp.sign(x), lax.is_finite(x), jax.nn.one_hot(jnp.arange(4), 5))
    z = (_normal(1, (8,)) + 1j * _normal(2, (8,))).astype(jnp.complex64)
    return f, (z, _normal(3, (8,))), {}


# ---- sharded programs (8 host devices) -------------------------------------

def mesh(shape, names, order=None):
    """A mesh over the 8 host devices, in `order` (a permutation of 0..8) if
    given: a device order that is not the identity makes XLA print the
    collectives' mesh replica groups with `device_ids=(...)`."""
    devs = np.array(jax.devices())
    if order is not None:
        devs = devs[np.array(order)]
    return Mesh(devs.reshape(shape), names)


def _sharded_step(m, p_specs, x_spec):
    def loss(p, x):
        h = jax.nn.relu(x @ p["w1"])
        return jnp.mean((h @ p["w2"]) ** 2)

    def step(p, x):
        l, g = jax.value_and_grad(loss)(p, x)
        return l, jax.tree.map(lambda a, b: a - 0.1 * b, p, g)
    p = {"w1": _normal(1, (16, 32)), "w2": _normal(2, (32, 16))}
    x = _normal(3, (16, 16))
    shard = lambda spec: NamedSharding(m, spec)
    in_sh = ({k: shard(s) for k, s in p_specs.items()}, shard(x_spec))
    return step, (p, x), {"in_shardings": in_sh}


@program("spmd_mlp_dp_tp", sharded=True)
def spmd_mlp_dp_tp():
    m = mesh((4, 2), ("data", "model"))
    return _sharded_step(m, {"w1": P(None, "model"), "w2": P("model", None)}, P("data", None))


@program("spmd_mlp_transposed_devices", sharded=True)
def spmd_mlp_transposed_devices():
    m = mesh((4, 1, 2), ("data", "seq", "model"), order=[0, 4, 1, 5, 2, 6, 3, 7])
    return _sharded_step(m, {"w1": P(None, "model"), "w2": P("model", None)}, P("data", None))


@program("spmd_mlp_fsdp", sharded=True)
def spmd_mlp_fsdp():
    m = mesh((8,), ("fsdp",), order=[7, 6, 5, 4, 3, 2, 1, 0])
    return _sharded_step(m, {"w1": P("fsdp", None), "w2": P(None, "fsdp")}, P("fsdp", None))


@program("spmd_gpt_train", sharded=True)
def spmd_gpt_train():
    m = mesh((4, 1, 2), ("data", "seq", "model"), order=[0, 2, 4, 6, 1, 3, 5, 7])
    p = {"blocks": [_block_params(seed=0)], "emb": _normal(20, (32, 16))}
    tokens = jnp.arange(32).reshape(4, 8) % 32
    col, row = P(None, "model"), P("model", None)
    bspec = {"wq": col, "wk": col, "wv": col, "wo": row, "w1": col, "w2": row,
             "ln_g": P(), "ln_b": P(), "ln2_g": P(), "ln2_b": P()}
    specs = {"blocks": [bspec], "emb": P(None, None)}

    def loss(p, tokens):
        x = p["emb"][tokens]
        for bp in p["blocks"]:
            x = _attention_block(bp, x)
        lp = jax.nn.log_softmax(x @ p["emb"].T)
        return -jnp.mean(jnp.take_along_axis(lp[:, :-1], tokens[:, 1:, None], axis=-1))

    def step(p, tokens):
        l, g = jax.value_and_grad(loss)(p, tokens)
        return l, jax.tree.map(lambda a, b: a - 0.01 * b, p, g)
    sh = jax.tree.map(lambda s: NamedSharding(m, s), specs, is_leaf=lambda s: isinstance(s, P))
    return step, (p, tokens), {"in_shardings": (sh, NamedSharding(m, P("data", None)))}


@program("spmd_constraint_reshard", sharded=True)
def spmd_constraint_reshard():
    m = mesh((2, 4), ("x", "y"))

    def f(a, b):
        c = a @ b
        c = jax.lax.with_sharding_constraint(c, NamedSharding(m, P("y", "x")))
        d = jnp.sum(c, axis=0)
        return jax.lax.with_sharding_constraint(d, NamedSharding(m, P(None))), c.T
    return f, (_normal(1, (16, 8)), _normal(2, (8, 16))), {
        "in_shardings": (NamedSharding(m, P("x", None)), NamedSharding(m, P(None, "y")))}


def _shard_map(m, in_specs, out_specs):
    return functools.partial(jax.shard_map, mesh=m, in_specs=in_specs, out_specs=out_specs,
                             check_vma=False)


@program("shard_map_psum", sharded=True)
def shard_map_psum():
    m = mesh((4, 2), ("i", "j"))

    @_shard_map(m, (P("i", "j"),), (P(None, "j"), P()))
    def f(x):
        s = lax.psum(x, "i")
        return s, lax.pmax(jnp.max(x), ("i", "j"))
    return f, (_normal(1, (8, 8)),), {}


@program("shard_map_all_gather", sharded=True)
def shard_map_all_gather():
    m = mesh((2, 4), ("a", "b"), order=[1, 0, 3, 2, 5, 4, 7, 6])

    @_shard_map(m, (P("a", "b"),), (P("a", None), P(None, None)))
    def f(x):
        g = lax.all_gather(x, "b", axis=1, tiled=True)
        g2 = lax.all_gather(g, "a", axis=0, tiled=True)
        return g, g2
    return f, (_normal(1, (4, 8)),), {}


@program("shard_map_ppermute", sharded=True)
def shard_map_ppermute():
    m = mesh((8,), ("ring",))
    perm = [(k, (k + 1) % 8) for k in range(8)]

    @_shard_map(m, (P("ring"),), P("ring"))
    def f(x):
        acc = x
        y = x
        for _ in range(3):
            y = lax.ppermute(y, "ring", perm)
            acc = acc + y * lax.axis_index("ring").astype(x.dtype)
        return acc
    return f, (_normal(1, (16, 4)),), {}


@program("shard_map_all_to_all", sharded=True)
def shard_map_all_to_all():
    m = mesh((4, 2), ("e", "d"))

    @_shard_map(m, (P("e", None),), P(None, "e"))
    def f(x):
        return lax.all_to_all(x, "e", split_axis=1, concat_axis=0, tiled=True)
    return f, (_normal(1, (8, 8)),), {}


@program("shard_map_reduce_scatter", sharded=True)
def shard_map_reduce_scatter():
    m = mesh((2, 4), ("dp", "tp"), order=[0, 1, 2, 3, 7, 6, 5, 4])

    @_shard_map(m, (P("dp", None), P(None, "tp")), P("dp", "tp"))
    def f(x, w):
        y = x @ w
        return lax.psum_scatter(y, "dp", scatter_dimension=0, tiled=True)
    return f, (_normal(1, (8, 16)), _normal(2, (16, 8))), {}


@program("shard_map_ring_matmul", sharded=True)
def shard_map_ring_matmul():
    m = mesh((8,), ("x",), order=[0, 2, 4, 6, 1, 3, 5, 7])
    perm = [(k, (k + 1) % 8) for k in range(8)]

    @_shard_map(m, (P("x", None), P(None, "x")), P("x", None))
    def f(a, b):
        def body(i, carry):
            acc, blk = carry
            j = (lax.axis_index("x") + i) % 8
            acc = lax.dynamic_update_slice(acc, a @ blk, (0, j * blk.shape[1]))
            return acc, lax.ppermute(blk, "x", perm)
        acc = jnp.zeros((a.shape[0], b.shape[1] * 8), a.dtype)
        acc, _ = lax.fori_loop(0, 8, body, (acc, b))
        return acc
    return f, (_normal(1, (16, 8)), _normal(2, (8, 16))), {}


@program("spmd_scan_train", sharded=True)
def spmd_scan_train():
    m = mesh((4, 2), ("data", "model"), order=[6, 7, 4, 5, 2, 3, 0, 1])
    w = _normal(1, (3, 16, 16)) * 0.2
    x = _normal(2, (8, 16))

    def loss(w, x):
        def body(h, w):
            return jnp.tanh(h @ w), None
        h, _ = lax.scan(body, x, w)
        return jnp.mean(h ** 2)

    def step(w, x):
        l, g = jax.value_and_grad(loss)(w, x)
        return l, w - 0.1 * g
    return step, (w, x), {"in_shardings": (NamedSharding(m, P(None, None, "model")),
                                           NamedSharding(m, P("data", None)))}


@program("spmd_conv", sharded=True)
def spmd_conv():
    m = mesh((4, 2), ("batch", "chan"))
    w = _normal(1, (8, 4, 3, 3))
    x = _normal(2, (8, 4, 8, 8))

    def loss(w, x):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return jnp.mean(jax.nn.relu(y))
    return jax.grad(loss), (w, x), {"in_shardings": (NamedSharding(m, P("chan")),
                                                     NamedSharding(m, P("batch")))}
