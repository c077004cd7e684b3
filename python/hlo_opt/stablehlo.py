"""StableHLO modules as jax ``Lowered`` objects: the way a module that did
not come from a jax function in this process (a file a user dumped with
``jax.jit(f).lower(...).as_text()``, a rewritten copy of jax's own) is
compiled and run with jaxlib's own CPU client.

- :func:`with_module`: a copy of a ``Lowered`` that compiles another
  module of the same signature (jax's caches and the original untouched).
- :func:`lowered_from_text`: a ``Lowered`` for a whole module text, and
  its main function's argument types. Donation marks
  (``tf.aliasing_output``, ``jax.buffer_donor``) are dropped: the module
  runs many times on the same arguments.
- :func:`random_args`: seeded arguments of those types.

Both rest on one internal of jax (``Lowered._lowering._hlo``, the MLIR
module a lowering compiles); where it is missing, they raise
``RuntimeError`` saying so.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

#: MLIR element types and the numpy dtype of an argument of that type.
ELEMENT_TYPES = {
    "f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16",
    "i1": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "ui8": "uint8", "ui16": "uint16", "ui32": "uint32", "ui64": "uint64",
}

_DONATION = r"(?:tf\.aliasing_output = \d+ : i32|jax\.buffer_donor = true)"


@dataclass(frozen=True)
class TensorSpec:
    """A ranked tensor type: its static shape and numpy dtype name."""

    shape: tuple[int, ...]
    dtype: str


def with_module(lowered, module):
    """A copy of ``lowered`` (a ``jax.stages.Lowered``) that compiles the
    MLIR ``module`` instead of its own; ``module`` must take and give what
    ``lowered``'s did."""
    inner = getattr(lowered, "_lowering", None)
    if inner is None or not hasattr(inner, "_hlo"):
        raise RuntimeError("jax's Lowered has no _lowering._hlo here: another module cannot be compiled through it")
    # jax caches lowerings: the copies keep the cached one untouched.
    new_inner = copy.copy(inner)
    new_inner._hlo = module
    if hasattr(inner, "_executable"):
        new_inner._executable = None  # compiled from the old module, if ever
    out = copy.copy(lowered)
    out._lowering = new_inner
    return out


def parse(text: str):
    """``text`` as an MLIR module in jax's context (``ValueError`` with
    MLIR's diagnostic when it does not parse)."""
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    with mlir.make_ir_context():
        try:
            return ir.Module.parse(text)
        except Exception as e:  # MLIR raises its own error type
            raise ValueError(f"not a StableHLO module MLIR reads: {str(e).strip()[:400]}") from None


def _spec(t, where: str) -> TensorSpec:
    from jax._src.lib.mlir import ir

    try:
        r = ir.RankedTensorType(t)
    except Exception:
        raise ValueError(f"{where} has type {t}: only ranked tensors can be given as arguments") from None
    if not r.has_static_shape:
        raise ValueError(f"{where} has type {t}: its shape is not static")
    elem = str(r.element_type)
    if elem not in ELEMENT_TYPES:
        raise ValueError(f"{where} has element type {elem}: supported are {', '.join(ELEMENT_TYPES)}")
    return TensorSpec(tuple(int(d) for d in r.shape), ELEMENT_TYPES[elem])


def signature(module) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """The argument and result types of the module's public ``main``."""
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    with mlir.make_ir_context():
        mains = [op for op in module.body.operations
                 if op.operation.name == "func.func" and "sym_name" in op.attributes
                 and ir.StringAttr(op.attributes["sym_name"]).value == "main"]
        if not mains:
            raise ValueError("the module has no `main` function")
        ft = ir.FunctionType(ir.TypeAttr(mains[0].attributes["function_type"]).value)
        ins = [_spec(t, f"argument {i} of main") for i, t in enumerate(ft.inputs)]
        outs = [_spec(t, f"result {i} of main") for i, t in enumerate(ft.results)]
    return ins, outs


def lowered_from_text(text: str):
    """A ``jax.stages.Lowered`` that compiles the StableHLO module ``text``
    (its donation marks dropped), and its ``main``'s argument types.
    ``ValueError`` for a module jax cannot run as a function of arrays."""
    import jax
    import jax.numpy as jnp

    text = re.sub(r",\s*" + _DONATION, "", text)
    text = re.sub(_DONATION + r",?\s*", "", text)
    module = parse(text)
    ins, outs = signature(module)

    # A function of the same signature, lowered with every argument kept;
    # its module is then replaced.
    def same_signature(*args):
        return tuple(jnp.zeros(o.shape, o.dtype) for o in outs)

    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in ins]
    lowered = jax.jit(same_signature, keep_unused=True).lower(*specs)
    return with_module(lowered, module), ins


def random_args(specs: list[TensorSpec], seed: int) -> list[Any]:
    """Arguments of the types ``specs``: floats standard normal, integers
    in [0, 8) (small, as indices are), booleans fair coins; the same seed,
    the same values."""
    import jax.numpy as jnp

    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        if s.dtype == "bool":
            v = rng.random(s.shape) < 0.5
        elif s.dtype.startswith(("int", "uint")):
            v = rng.integers(0, 8, s.shape)
        else:
            v = rng.standard_normal(s.shape).astype(np.float32)
        out.append(jnp.asarray(v, dtype=s.dtype))
    return out
