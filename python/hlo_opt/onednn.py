"""Per-op oneDNN matmuls on XLA:CPU: the way in through StableHLO.

jaxlib's XLA:CPU runs a ``stablehlo.custom_call @__onednn$matmul`` with a
``{"onednn_matmul_config":{...}}`` backend config as a oneDNN matmul,
beside the YNNPACK fusions and XLA's own kernels of the same module
(docs/xla-cpu.md). jax lowers to StableHLO, and XLA keeps a custom call's
backend config where it drops a fusion's, so this module rewrites the
StableHLO module that ``jax.jit(f).lower(...)`` produced: each chosen
``stablehlo.dot_general`` becomes that custom call.

A dot is identified by its *signature* (:func:`signature`): the operand
dtype, the two operand shapes and the batch and contracting dimensions,
written as the Rust pass writes it from the module's HLO text
(``passes/src/xla_cpu/dots.rs``), so that a decision made on the HLO text
applies to the StableHLO ops it came from. Dots with the same signature
take the same choice.

Only the forms that oneDNN's matmul takes as XLA calls it are rewritten:
f32 or bf16 operands and result; no batch dimensions and a rank-2 right
operand (a left operand of higher rank is reshaped to rank 2 around the
call), or leading batch dimensions on both operands of rank ``b+2``; the
left operand contracting its last dimension, the right one its first or
(``transpose_b``) its last matrix dimension. Other forms abort inside XLA
(a 3-D by 2-D call, tried on 0.10.2), so they keep XLA's kernels.

The custom call is an internal name of XLA, not an API: :data:`VERIFIED`
lists the jaxlib versions whose behaviour was checked (the call reaches the
optimized module, its results equal XLA's), and :func:`supported` refuses
any other, with the reason.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Iterable

#: jaxlib versions on which the rewrite was verified
#: (python/tests/test_xla_cpu.py::test_onednn_rewrite_is_honoured checks it).
VERIFIED = ("0.10.2", "0.12.0.1")
#: The custom-call target XLA:CPU maps to a oneDNN matmul.
TARGET = "__onednn$matmul"

_DOT = re.compile(
    r"(?P<res>%[\w#.]+) = stablehlo\.dot_general (?P<a>%[\w#.]+), (?P<b>%[\w#.]+), "
    r"(?:batching_dims = \[(?P<lb>[\d, ]*)\] x \[(?P<rb>[\d, ]*)\], )?"
    r"contracting_dims = \[(?P<lc>[\d, ]+)\] x \[(?P<rc>[\d, ]+)\]"
    r"(?:, precision = \[[A-Z, ]*\])? : "
    r"\((?P<ta>tensor<[^>]*>), (?P<tb>tensor<[^>]*>)\) -> (?P<tr>tensor<[^>]*>)$",
    re.M,
)
_TENSOR = re.compile(r"tensor<((?:\d+x)*)(\w+)>")
_DTYPES = ("f32", "bf16")


def _ints(s: str | None) -> list[int]:
    return [int(v) for v in s.split(",")] if s and s.strip() else []


def _tensor(t: str) -> tuple[list[int], str] | None:
    m = _TENSOR.fullmatch(t)
    if not m:
        return None  # dynamic or unusual types keep XLA's kernels
    return [int(d) for d in m[1].split("x") if d], m[2]


@dataclass(frozen=True)
class Dot:
    """One ``stablehlo.dot_general`` of a module."""

    signature: str
    #: Whether oneDNN's matmul takes this form (see the module doc).
    eligible: bool
    #: ``transpose_b`` of the oneDNN config (the right operand contracts
    #: its last dimension).
    transpose_b: bool


def signature(dtype: str, lhs: Iterable[int], rhs: Iterable[int], lb: Iterable[int], rb: Iterable[int],
              lc: Iterable[int], rc: Iterable[int]) -> str:
    """``bf16[8,256]x[256,512] b[]x[] c[1]x[0]``: the form both the Rust
    pass and this module give a dot."""

    def j(v):
        return ",".join(str(x) for x in v)

    return f"{dtype}[{j(lhs)}]x[{j(rhs)}] b[{j(lb)}]x[{j(rb)}] c[{j(lc)}]x[{j(rc)}]"


def _classify(m: re.Match) -> Dot | None:
    ta, tb, tr = _tensor(m["ta"]), _tensor(m["tb"]), _tensor(m["tr"])
    if not (ta and tb and tr):
        return None
    (a, da), (b, db), (_, dr) = ta, tb, tr
    lb, rb, lc, rc = _ints(m["lb"]), _ints(m["rb"]), _ints(m["lc"]), _ints(m["rc"])
    sig = signature(da, a, b, lb, rb, lc, rc)
    nb = len(lb)
    ok = da == db == dr and da in _DTYPES and len(lc) == 1 and len(rc) == 1
    ok = ok and lb == rb == list(range(nb)) and lc[0] == len(a) - 1 and len(a) >= 2
    if nb == 0:
        ok = ok and len(b) == 2
    else:
        ok = ok and len(a) == nb + 2 and len(b) == nb + 2
    transpose_b = bool(rc) and rc[0] == len(b) - 1
    ok = ok and bool(rc) and rc[0] in (len(b) - 2, len(b) - 1)
    return Dot(sig, ok, transpose_b)


def dots(text: str) -> list[Dot]:
    """The dots of a StableHLO module (MLIR text), in order."""
    return [d for d in (_classify(m) for m in _DOT.finditer(text)) if d is not None]


def rewrite(text: str, chosen: Iterable[str]) -> tuple[str, int]:
    """``text`` with every eligible dot whose signature is in ``chosen``
    sent to oneDNN; returns the new text and how many dots were rewritten."""
    chosen = set(chosen)
    count = 0

    def sub(m: re.Match) -> str:
        nonlocal count
        d = _classify(m)
        if d is None or not d.eligible or d.signature not in chosen:
            return m[0]
        count += 1
        config = '{\\22onednn_matmul_config\\22:{\\22transpose_b\\22:true}}' if d.transpose_b \
            else '{\\22onednn_matmul_config\\22:{}}'
        a, dtype = _tensor(m["ta"])
        out, _ = _tensor(m["tr"])
        if _ints(m["lb"]) or len(a) == 2:
            return (f'{m["res"]} = stablehlo.custom_call @{TARGET}({m["a"]}, {m["b"]}) '
                    f'{{backend_config = "{config}"}} : ({m["ta"]}, {m["tb"]}) -> {m["tr"]}')
        # A left operand of rank > 2 without batch dimensions: oneDNN takes
        # it as the rows of a rank-2 matrix.
        rows = 1
        for v in a[:-1]:
            rows *= v
        flat_a = f"tensor<{rows}x{a[-1]}x{dtype}>"
        flat_r = f"tensor<{rows}x{out[-1]}x{dtype}>"
        lhs, res = f"%onednn_lhs{count}", f"%onednn_res{count}"
        return (f'{lhs} = stablehlo.reshape {m["a"]} : ({m["ta"]}) -> {flat_a}\n    '
                f'{res} = stablehlo.custom_call @{TARGET}({lhs}, {m["b"]}) {{backend_config = "{config}"}} '
                f': ({flat_a}, {m["tb"]}) -> {flat_r}\n    '
                f'{m["res"]} = stablehlo.reshape {res} : ({flat_r}) -> {m["tr"]}')

    return _DOT.sub(sub, text), count


def supported(version: str | None = None) -> str | None:
    """None when the jaxlib in use is one the rewrite was verified on, else
    why not."""
    if version is None:
        import jaxlib

        version = jaxlib.__version__
    if version in VERIFIED:
        return None
    return (f"per-op oneDNN matmuls were verified on jaxlib {', '.join(VERIFIED)}, not {version}: "
            f"XLA's internal custom call {TARGET} may differ there, so no dot is rewritten")


def lowered_with(lowered, chosen: Iterable[str]):
    """A copy of ``lowered`` (a ``jax.stages.Lowered``) whose chosen dots run
    as oneDNN matmuls, and how many were rewritten. ``lowered`` itself, and
    jax's caches, are left as they were. Raises ``RuntimeError`` on a jaxlib
    the rewrite was not verified on, or where jax's lowering is not the
    object this was written against."""
    why = supported()
    if why:
        raise RuntimeError(why)
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    text, count = rewrite(lowered.as_text(), chosen)
    if not count:
        return lowered, 0
    inner = getattr(lowered, "_lowering", None)
    if inner is None or not hasattr(inner, "_hlo"):
        raise RuntimeError("jax's Lowered has no _lowering._hlo here: per-op oneDNN matmuls need it")
    with mlir.make_ir_context():
        module = ir.Module.parse(text)
    # jax caches lowerings: the copies keep the cached one untouched.
    new_inner = copy.copy(inner)
    new_inner._hlo = module
    if hasattr(inner, "_executable"):
        new_inner._executable = None  # compiled from the old module, if ever
    out = copy.copy(lowered)
    out._lowering = new_inner
    return out, count
