"""hj.compile on 38 unusual JAX programs (complex numbers, RNG, sort,
cond, LAPACK custom calls, host callbacks, integer and f16 dots, nested
and reverse scans, transposed and grouped convolutions, pooling gradients,
scatter, top_k, special functions, sharding constraints, shard_map, ...):
each must run and give jax.jit's results; the reader column says whether
the decision read jax's StableHLO (`stablehlo`) or fell back to jax's HLO
text (`jax-hlo`, correct but about four times the decision's cost).

    .venv/bin/python scripts/xla_cpu_unusual_programs.py [NAME...]
"""
import sys, traceback, warnings, time
import numpy as np, jax, jax.numpy as jnp
from jax import lax
import hlo_opt.jax as hj
from hlo_opt import HloError, parse_stablehlo
warnings.simplefilter("ignore")
k = jax.random.PRNGKey(0)
r = lambda *s, d=jnp.float32: jax.random.normal(jax.random.PRNGKey(sum(s)), s, jnp.float32).astype(d)
P = {}
def prog(name):
    def deco(fn):
        P[name] = fn; return fn
    return deco
@prog("fft")
def _(): return (lambda x: jnp.fft.fft(x).real.sum(), (r(64, 128),))
@prog("complex_matmul")
def _(): return (lambda a, b: a @ b, (r(32, 32).astype(jnp.complex64) * (1 + 1j), r(32, 32).astype(jnp.complex64)))
@prog("random_in_jit")
def _(): return (lambda key, x: x + jax.random.normal(key, x.shape), (k, r(128, 128)))
@prog("sort_argsort")
def _(): return (lambda x: (jnp.sort(x, axis=-1), jnp.argsort(x, axis=0)), (r(64, 100),))
@prog("cond")
def _(): return (lambda p, x: lax.cond(p > 0, lambda y: y @ y, lambda y: y.T, x), (jnp.float32(1.0), r(64, 64)))
@prog("cholesky_solve")
def _():
    a = r(32, 32); a = a @ a.T + 32 * jnp.eye(32)
    return (lambda a, b: jnp.linalg.solve(a, b) + jnp.linalg.cholesky(a).sum(), (a, r(32, 8)))
@prog("eigh")
def _():
    a = r(16, 16); return (lambda a: jnp.linalg.eigh(a + a.T)[0], (a,))
@prog("pure_callback")
def _():
    return (lambda x: jax.pure_callback(lambda v: np.asarray(v) * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1, (r(8, 8),))
@prog("int8_dot")
def _(): return (lambda a, b: lax.dot(a, b, preferred_element_type=jnp.int32), (jnp.ones((64, 64), jnp.int8), jnp.ones((64, 64), jnp.int8)))
@prog("int32_ops")
def _(): return (lambda a: (a * 3 + (a >> 2)) % 7, (jnp.arange(1000, dtype=jnp.int32),))
@prog("f16_mlp")
def _(): return (lambda x, w: jax.nn.relu(x @ w) @ w.T, (r(16, 256, d=jnp.float16), r(256, 512, d=jnp.float16)))
@prog("nested_scan_reverse")
def _():
    def f(xs):
        def outer(c, x):
            c2, _ = lax.scan(lambda a, b: (a * 0.9 + b, a), c, x)
            return c2, c2.sum()
        return lax.scan(outer, jnp.zeros(16), xs, reverse=True)
    return (f, (r(5, 7, 16),))
@prog("while_dynamic")
def _(): return (lambda n, x: lax.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, jnp.tanh(s[1] @ s[1])), (0, x))[1], (jnp.int32(7), r(32, 32) * 0.1))
@prog("einsum_odd_batch")
def _(): return (lambda a, b: jnp.einsum("ibjk,jkbl->bil", a, b), (r(8, 4, 6, 5), r(6, 5, 4, 7)))
@prog("conv_transpose_groups")
def _():
    def f(x, w, w2):
        y = lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return lax.conv_general_dilated(y, w2, (1, 1), "SAME", feature_group_count=4, dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return (f, (r(2, 8, 8, 8), r(3, 3, 8, 8), r(3, 3, 2, 8)))
@prog("conv1d_ncw")
def _(): return (lambda x, w: lax.conv_general_dilated(x, w, (1,), "VALID", rhs_dilation=(2,)), (r(4, 3, 50), r(6, 3, 5)))
@prog("maxpool_grad")
def _():
    pool = lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID").sum()
    return (jax.grad(pool), (r(2, 8, 8, 3),))
@prog("avgpool_cumsum")
def _(): return (lambda x: (lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME"), jnp.cumsum(x, axis=1)), (r(2, 8, 8, 3),))
@prog("gather_scatter")
def _(): return (lambda x, i: x.at[i].add(1.0)[i[::-1]], (r(100, 16), jnp.array([3, 1, 4, 1, 5, 9, 2, 6])))
@prog("top_k")
def _(): return (lambda x: lax.top_k(x, 5), (r(32, 100),))
@prog("argmax")
def _(): return (lambda x: (jnp.argmax(x, -1), jnp.argmin(x, 0)), (r(32, 100),))
@prog("dot_product_attention")
def _(): return (lambda q, kk, v: jax.nn.dot_product_attention(q, kk, v), (r(2, 16, 4, 32), r(2, 16, 4, 32), r(2, 16, 4, 32)))
@prog("bits")
def _(): return (lambda x: (lax.population_count(x), lax.clz(x), lax.bitcast_convert_type(x, jnp.float32)), (jnp.arange(64, dtype=jnp.int32),))
@prog("empty_array")
def _(): return (lambda x, y: (x.sum(), y * 2), (jnp.zeros((0, 4)), r(3)))
@prog("identity")
def _(): return (lambda x: x, (r(4, 4),))
@prog("constant_out")
def _(): return (lambda x: jnp.arange(10.0), (r(2),))
@prog("big_closure_constant")
def _():
    c = np.random.RandomState(0).randn(512, 512).astype(np.float32)
    return (lambda x: x @ c, (r(8, 512),))
@prog("custom_vjp_grad")
def _():
    @jax.custom_vjp
    def g(x): return jnp.sin(x)
    g.defvjp(lambda x: (jnp.sin(x), x), lambda x, ct: (ct * jnp.cos(x),))
    return (jax.grad(lambda x: g(x).sum()), (r(64),))
@prog("remat")
def _(): return (jax.grad(lambda w, x: jax.checkpoint(lambda w: jnp.tanh(x @ w) @ w)(w).sum()), (r(64, 64), r(8, 64)))
@prog("vmap_matvec")
def _(): return (jax.vmap(lambda m, v: m @ v), (r(16, 32, 32), r(16, 32)))
@prog("special_fns")
def _(): return (lambda x: (lax.lgamma(x + 2), lax.digamma(x + 2), lax.erf_inv(jnp.tanh(x) * 0.9), lax.igamma(x + 2, x + 1)), (jnp.abs(r(64)),))
@prog("reduce_precision_rng_bits")
def _(): return (lambda key, x: (lax.reduce_precision(x, 5, 10), jax.random.bits(key, (16,))), (k, r(64)))
@prog("uint_and_bool")
def _(): return (lambda a, b: (a & b, a.astype(bool) | (b > 3)), (jnp.arange(16, dtype=jnp.uint8), jnp.arange(16, dtype=jnp.uint32)))
@prog("pytree_dict_kwargs")
def _(): return (lambda p, x: {"y": jnp.tanh(x @ p["w"] + p["b"]), "n": [x.sum(), p["b"].max()]}, ({"w": r(32, 32), "b": r(32)}, r(4, 32)))
@prog("bf16_conv")
def _(): return (lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")), (r(2, 16, 16, 16, d=jnp.bfloat16), r(3, 3, 16, 32, d=jnp.bfloat16)))
@prog("sharding_constraint")
def _():
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as PS
    mesh = Mesh(np.array(jax.devices()[:1]), ("x",))
    return (lambda x: jax.lax.with_sharding_constraint(x * 2, NamedSharding(mesh, PS("x"))) @ x.T, (r(8, 8),))
@prog("shard_map")
def _():
    from jax.sharding import Mesh, PartitionSpec as PS
    try:
        from jax import shard_map
    except ImportError:
        from jax.experimental.shard_map import shard_map
    mesh = Mesh(np.array(jax.devices()[:1]), ("x",))
    return (shard_map(lambda a: jax.lax.psum(a @ a.T, "x"), mesh=mesh, in_specs=PS("x"), out_specs=PS()), (r(8, 8),))
@prog("x_dot_large")
def _(): return (lambda a, b: jnp.tanh(a @ b), (r(256, 512), r(512, 256)))

names = sys.argv[1:] or list(P)


def reader(f, args) -> str:
    lowered = jax.jit(f).lower(*args)
    text = lowered.compiler_ir().operation.get_asm(print_generic_op_form=True, assume_verified=True, binary=True)
    try:
        parse_stablehlo(text, name="<jax>")
        return "stablehlo"
    except HloError as e:
        return f"jax-hlo ({str(e).splitlines()[0][:80]})"


bad = fallback = 0
for n in names:
    t = time.perf_counter()
    try:
        f, args = P[n]()
        want = jax.jit(f)(*args)
        c = hj.compile(f, *args, backend="cpu", verify=0.2)
        got = c(*args)
        lw, lg = jax.tree.leaves(want), jax.tree.leaves(got)
        assert len(lw) == len(lg), "leaf count"
        for a, b in zip(lw, lg):
            a, b = np.asarray(a), np.asarray(b)
            assert a.shape == b.shape and a.dtype == b.dtype, f"{a.shape}{a.dtype} vs {b.shape}{b.dtype}"
            if a.dtype.kind in "fc" or a.dtype == jnp.bfloat16:
                wide = np.complex128 if a.dtype.kind == "c" else np.float64
                np.testing.assert_allclose(a.astype(wide), b.astype(wide), rtol=2e-2, atol=2e-2)
            else:
                np.testing.assert_array_equal(a, b)
        read = reader(f, args)
        fallback += read != "stablehlo"
        print(f"ok   {n:28} {c.decision.get('chosen')!s:30} {time.perf_counter()-t:5.1f}s  {read}", flush=True)
    except Exception as e:
        bad += 1
        print(f"FAIL {n:28} {type(e).__name__}: {str(e)[:300]}", flush=True)
print(f"jax {jax.__version__}: {len(names)} programs, {bad} failed, {fallback} read from jax's HLO text")
sys.exit(1 if bad else 0)
