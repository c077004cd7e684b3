"""Writes testdata/stablehlo/NAME.mlir (StableHLO, generic op form) and
NAME.hlo (jax's `as_text(dialect="hlo")`) for a few small jax programs,
one construct each; passes/tests/stablehlo.rs checks that both give the
same XLA:CPU features and contraction rows.

    /work/main/.venv/bin/python scripts/make_stablehlo_testdata.py [NAME...]
"""

import os
import sys
from pathlib import Path

# Four CPU devices, for the collectives of `shard_map` (before jax loads).
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

import jax
import jax.numpy as jnp
import numpy as np

OUT = Path(__file__).resolve().parent.parent / "testdata" / "stablehlo"


def f32(*shape):
    return jnp.asarray(np.random.default_rng(0).standard_normal(shape), dtype=jnp.float32)


def bf16(*shape):
    return f32(*shape).astype(jnp.bfloat16)


@jax.jit
def _relu(x):
    return jnp.maximum(x, 0)


def scan(w, xs):
    def step(h, x):
        h = jnp.tanh(x @ w + h)
        return h, h
    return jax.lax.scan(step, jnp.zeros((4, 16)), xs)[1]


W1 = np.asarray(f32(32, 64))
W2 = np.asarray(f32(64, 8))

CASES = {
    "dot": (lambda a, b: a @ b + 1.0, (f32(8, 32), f32(32, 16))),
    "dot_bf16_batched": (lambda a, b: jnp.einsum("bij,bjk->bik", a, b), (bf16(2, 8, 32), bf16(2, 32, 16))),
    "conv": (lambda x, w: jax.lax.conv_general_dilated(x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
             (f32(2, 16, 16, 8), f32(3, 3, 8, 16))),
    "conv_depthwise": (lambda x, w: jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", feature_group_count=8,
                                                                 dimension_numbers=("NHWC", "HWIO", "NHWC")),
                       (f32(2, 16, 16, 8), f32(3, 3, 1, 8))),
    "scan": (scan, (f32(16, 16), f32(6, 4, 16))),
    "reduce_softmax": (lambda x: jax.nn.softmax(x, axis=-1).sum(0), (f32(16, 64),)),
    "argmax_multi_result": (lambda x: jnp.argmax(x, axis=1), (f32(8, 32),)),
    "call_relu": (lambda x, w: _relu(x @ w) + _relu(x @ w * 2), (f32(4, 8), f32(8, 8))),
    "maxpool_grad": (jax.grad(lambda x: jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                                                             "VALID").sum()), (f32(2, 8, 8, 4),)),
    "gather_scatter": (lambda t, i: t[i].sum() + t.at[i].add(1.0).sum(), (f32(50, 8), jnp.arange(6) % 5)),
    # Read from the HLO fallback before 30 Nov (issue 37's sweep of unusual programs):
    "cond_captures": (lambda p, x, w: jax.lax.cond(p > 0, lambda y: (y @ w, jnp.tanh(y)), lambda y: (y.T, y * 2.0), x),
                      (f32(), f32(16, 16), f32(16, 16))),
    "switch_three_branches": (lambda i, x: jax.lax.switch(i, [lambda y: y @ y, lambda y: y + 1.0, lambda y: y], x),
                              (jnp.int32(1), f32(8, 8))),
    "remat_barrier": (jax.grad(lambda w, x: jax.checkpoint(lambda w: jnp.tanh(x @ w) @ w)(w).sum()),
                      (f32(16, 16), f32(4, 16))),
    "bits_clz_popcnt": (lambda x: (jax.lax.clz(x) + jax.lax.population_count(x)).sum(), (jnp.arange(64, dtype=jnp.int32),)),
    "fft_complex": (lambda x: jnp.fft.fft(x).real @ x.T, (f32(8, 32),)),
    "top_k": (lambda x: jax.lax.top_k(x @ x.T, 3), (f32(16, 32),)),
    "reduce_precision": (lambda x: jax.lax.reduce_precision(x @ x, 5, 10), (f32(16, 16),)),
    "scatter_scalar_index": (lambda t, i: t.at[i].set(0.0) @ t.T, (f32(8, 8), jnp.int32(3))),
    "random_normal_erf_inv": (lambda k, x: x @ jax.random.normal(k, (16, 8)), (jax.random.PRNGKey(0), f32(4, 16))),
    "erf_inv_bf16": (lambda x: jax.lax.erf_inv(jnp.tanh(x)) @ x.T, (bf16(8, 16),)),
    # Weights closed over as constants, printed as the XLA:CPU decision
    # prints them (`_elided`: large_elements_limit, `dense_resource<__elided__>`).
    # From the GPT train step (held-out): a transpose undone by a transpose
    # (MLIR folds both away), and an iota whose other dimensions are all 1
    # (a reshape, not a broadcast).
    "transpose_undone_one_hot": (lambda x, w, i: (x.T).T @ w + jax.nn.one_hot(i, 16).reshape(8, 16), (f32(8, 32), f32(32, 16), jnp.arange(8).reshape(2, 4) % 16)),
    "closed_over_weights_elided": (lambda x: jnp.tanh(x @ W1) @ W2 + 1.0, (f32(4, 32),)),
    # Collectives: `psum` / `pmax` in `shard_map` over all four devices and
    # over one axis of a 2x2 mesh (replica groups of one row, of two).
    "shard_map_all_reduce": (lambda x, b: _sharded(x, b), (f32(8, 8), f32(8,))),
    # The same, written by jaxlib 0.12.0.1 (.venv-next): replica groups named
    # by mesh axes (`#stablehlo.replica_group_mesh_axes`), meshes as `sdy.mesh`.
    "shard_map_mesh_axes": (lambda x, b: _sharded(x, b), (f32(8, 8), f32(8,))),
    # all_gather, reduce_scatter (psum_scatter) and collective_permute
    # (ppermute); `_mesh_axes` written by jaxlib 0.12.0.1.
    "shard_map_collectives": (lambda x: _collectives(x), (f32(8, 8),)),
    "shard_map_collectives_mesh_axes": (lambda x: _collectives(x), (f32(8, 8),)),
    # all_to_all, concatenating along the split dimension and along another
    # (XlaBuilder's reshape, transpose, reshape); `_mesh_axes` by 0.12.0.1.
    "shard_map_all_to_all": (lambda x: _all_to_all(x), (f32(16, 8),)),
    "shard_map_all_to_all_mesh_axes": (lambda x: _all_to_all(x), (f32(16, 8),)),
}


def _shard_map():
    """jax's ``shard_map`` (out of ``jax.experimental`` in newer jax)."""
    try:
        from jax import shard_map
    except ImportError:
        from jax.experimental.shard_map import shard_map
    return shard_map


def _over_x(body, x):
    """``body`` on the rows of ``x`` split over a 4-device mesh axis "x"."""
    from jax.sharding import Mesh, PartitionSpec as PS

    mesh = Mesh(np.array(jax.devices()[:4]), ("x",))
    return _shard_map()(body, mesh=mesh, in_specs=PS("x"), out_specs=PS("x"))(x)


def _collectives(x):
    def body(a):
        g = jax.lax.all_gather(a, "x", axis=0, tiled=True)
        s = jax.lax.psum_scatter(a.T @ a, "x", scatter_dimension=0, tiled=True)
        p = jax.lax.ppermute(a, "x", perm=[(0, 1), (1, 2), (2, 3), (3, 0)])
        return (g.sum() + s.sum() + p.sum())[None]

    return _over_x(body, x)


def _all_to_all(x):
    def body(a):
        u = jax.lax.all_to_all(a, "x", split_axis=1, concat_axis=0, tiled=True)
        v = jax.lax.all_to_all(a, "x", split_axis=0, concat_axis=1, tiled=True)
        w = jax.lax.all_to_all(a, "x", split_axis=0, concat_axis=0, tiled=True)
        return (u.sum() + v.sum() + w.sum())[None]

    return _over_x(body, x)


def _sharded(x, b):
    from jax.sharding import Mesh, PartitionSpec as PS

    shard_map = _shard_map()
    flat = Mesh(np.array(jax.devices()[:4]), ("x",))
    grid = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("x", "y"))
    s = shard_map(lambda a, c: (jax.lax.psum(a @ a.T, "x"), jax.lax.pmax(c, "x")), mesh=flat,
                  in_specs=(PS("x"), PS("x")), out_specs=(PS(), PS()))(x, b)
    t = shard_map(lambda a: jax.lax.psum(jnp.tanh(a), "y"), mesh=grid, in_specs=PS("x", "y"),
                  out_specs=PS("x"))(x)
    return s[0].sum() + t.sum(), s[1]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    names = sys.argv[1:] or list(CASES)
    for name, (fn, args) in ((n, CASES[n]) for n in names):
        lowered = jax.jit(fn).lower(*args)
        limit = dict(large_elements_limit=16) if name.endswith("_elided") else {}
        (OUT / f"{name}.mlir").write_text(lowered.compiler_ir().operation.get_asm(print_generic_op_form=True, **limit))
        (OUT / f"{name}.hlo").write_text(lowered.as_text(dialect="hlo"))
    print(f"{len(names)} cases, jax {jax.__version__}")


if __name__ == "__main__":
    main()
