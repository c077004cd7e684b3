"""Per-op oneDNN matmuls and convolutions on XLA:CPU: the way in through
StableHLO.

jaxlib's XLA:CPU runs a ``stablehlo.custom_call @__onednn$matmul`` (backend
config ``{"onednn_matmul_config":{...}}``) as a oneDNN matmul and a
``@__onednn$convolution`` (``{"onednn_conv_config":{...}}``) as a oneDNN
convolution, beside the YNNPACK fusions and XLA's own kernels of the same
module (docs/xla-cpu.md). jax lowers to StableHLO, and XLA keeps a custom
call's backend config where it drops a fusion's, so this module rewrites
the StableHLO module that ``jax.jit(f).lower(...)`` produced: each chosen
``stablehlo.dot_general`` or ``stablehlo.convolution`` becomes that call.
The rewrite works on a copy of the module through MLIR's own API (ops read
from their types and attributes, replaced in place), not on its text:
printing, rewriting and parsing the text cost 1.5-9x more.

An op is identified by its *signature* (:func:`signature`,
:func:`conv_signature`), written as the Rust pass writes it from the
module's HLO text (``passes/src/xla_cpu/contractions.rs``), so that a
decision made on the HLO text applies to the StableHLO ops it came from.
Ops with the same signature take the same choice.

Only the forms oneDNN takes as XLA calls it are rewritten: f32 or bf16
operands and result. Dots: no batch dimensions and a rank-2 right operand
(a left operand of higher rank is reshaped to rank 2 around the call), or
leading batch dimensions on both operands of rank ``b+2``; the left operand
contracting its last dimension, the right one its first or
(``transpose_b``) its last matrix dimension. Other forms abort inside XLA
(a 3-D by 2-D call, tried on 0.10.2), so they keep XLA's kernels.
Convolutions: one feature group and one batch group, no lhs dilation, no
reversal, no negative padding; the config carries the dimension roles,
window size, paddings, strides and rhs dilations as they are (no +1
offsets, which older XLA wanted: with them, jaxlib 0.10.2 aborts).

The custom calls are internal names of XLA, not an API: :data:`VERIFIED`
lists the jaxlib versions whose behaviour was checked (the call reaches the
optimized module, its results equal XLA's), and :func:`supported` refuses
any other, with the reason.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Iterable

#: jaxlib versions on which the rewrite was verified
#: (python/tests/test_xla_cpu.py::test_onednn_rewrite_is_honoured checks it).
VERIFIED = ("0.10.2", "0.12.0.1")
#: The custom-call target XLA:CPU maps to a oneDNN matmul.
TARGET = "__onednn$matmul"

_TENSOR = re.compile(r"tensor<((?:\d+x)*)(\w+)>")
CONV_TARGET = "__onednn$convolution"
_DTYPES = ("f32", "bf16")


def _ints(s: str | None) -> list[int]:
    return [int(v) for v in s.split(",")] if s and s.strip() else []


def _join(v) -> str:
    return ",".join(str(x) for x in v)


@functools.lru_cache(maxsize=4096)
def _tensor(t: str) -> tuple[tuple[int, ...], str] | None:
    m = _TENSOR.fullmatch(t)
    if not m:
        return None  # dynamic or unusual types keep XLA's kernels
    return tuple(int(d) for d in m[1].split("x") if d), m[2]


@dataclass(frozen=True)
class Contraction:
    """One ``stablehlo.dot_general`` or ``stablehlo.convolution`` of a module."""

    signature: str
    #: Whether oneDNN takes this form (see the module doc).
    eligible: bool
    #: ``transpose_b`` of the oneDNN config (the right operand contracts
    #: its last dimension).
    transpose_b: bool


def signature(dtype: str, lhs: Iterable[int], rhs: Iterable[int], lb: Iterable[int], rb: Iterable[int],
              lc: Iterable[int], rc: Iterable[int]) -> str:
    """``bf16[8,256]x[256,512] b[]x[] c[1]x[0]``: the form both the Rust
    pass and this module give a dot."""
    return f"{dtype}[{_join(lhs)}]x[{_join(rhs)}] b[{_join(lb)}]x[{_join(rb)}] c[{_join(lc)}]x[{_join(rc)}]"


def _dims(text: str, key: str) -> list[int]:
    m = re.search(key + r" = \[([\d, ]*)\]", text)
    return _ints(m[1]) if m else []


class _Text:
    """``str()`` of MLIR types and attributes, each printed once per call
    (the bindings print through Python, about 5 us each; MLIR uniques
    types and attributes, so the ops of a module share most of them)."""

    def __init__(self):
        self.seen: dict = {}

    def __call__(self, x) -> str:
        s = self.seen.get(x)
        if s is None:
            s = self.seen[x] = str(x)
        return s

    def attr(self, op, key: str) -> str | None:
        a = op.attributes.get(key)
        return None if a is None else self(a)


@dataclass(frozen=True)
class _Read:
    """What is read of one dot or convolution through the bindings (about
    1-2 us a call): its operand and result types, and the attributes its
    kind names (None where absent), as text; and how many attributes it
    has. Ops with equal reads (most of a module's) are decoded once."""

    operands: int
    types: tuple[str, ...]
    attrs: tuple[str | None, ...]
    count: int

    @staticmethod
    def of(op, text: _Text, keys: tuple[str, ...], operand_types: tuple[str, ...] | None = None) -> "_Read":
        if operand_types is None:
            operand_types = tuple(text(v.type) for v in op.operands)
        types = operand_types + tuple(text(v.type) for v in op.results)
        return _Read(len(operand_types), types, tuple(text.attr(op, k) for k in keys), len(op.attributes))

    def attr(self, keys: tuple[str, ...], key: str) -> str | None:
        return self.attrs[keys.index(key)]


def _array(text: str | None, default: int, rank: int) -> list[int]:
    """An ``array<i64: ...>`` attribute; ``default`` per spatial dimension
    where it is absent."""
    m = re.fullmatch(r"array<i64(?:: ([-\d, ]*))?>", text) if text is not None else None
    return _ints(m[1]) if m else [default] * rank


def _types(r: _Read) -> tuple | None:
    if r.operands != 2 or len(r.types) != 3:
        return None
    ta, tb, tr = (_tensor(t) for t in r.types)
    return (ta, tb, tr) if ta and tb and tr else None


def _attr_names(op) -> list[str]:
    # Iterating an op's attributes gives names or NamedAttributes, by jaxlib.
    return [getattr(a, "name", a) for a in op.attributes]


def _dot_parts(r: _Read):
    """(types, batch and contracting dimensions) of a ``stablehlo.dot_general``
    op, or None where it is not in the form jax writes (an attribute but its
    dimensions and precision, e.g. an ``algorithm``, keeps XLA's kernel)."""
    types = _types(r)
    dn = r.attr(_DOT_KEYS, "dot_dimension_numbers")
    if types is None or dn is None or r.count > 1 + (r.attr(_DOT_KEYS, "precision_config") is not None):
        return None
    return types, [_dims(dn, k) for k in ("lhs_batching_dimensions", "rhs_batching_dimensions",
                                          "lhs_contracting_dimensions", "rhs_contracting_dimensions")]


def _classify(parts) -> Contraction:
    ((a, da), (b, db), (_, dr)), (lb, rb, lc, rc) = parts
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
    return Contraction(sig, ok, transpose_b)


#: The attributes read from a dot and from a convolution.
_DOT_KEYS = ("dot_dimension_numbers", "precision_config")
_CONV_KEYS = ("dimension_numbers", "padding", "window_strides", "lhs_dilation", "rhs_dilation", "window_reversal",
              "feature_group_count", "batch_group_count")


def _module(x):
    """The MLIR module of ``x``: a ``jax.stages.Lowered``, an ``ir.Module``,
    or StableHLO text (parsed)."""
    if isinstance(x, str):
        from . import stablehlo

        return stablehlo.parse(x)
    return x.compiler_ir() if hasattr(x, "compiler_ir") else x


def _operands_key(sig: str) -> str:
    """The part of a signature that its op's operand types give:
    ``bf16[8,256]x[256,512]``, ``conv f32[8,56,56,64]x[3,3,64,64]``."""
    return " ".join(sig.split(" ")[:2]) if sig.startswith("conv ") else sig.split(" ")[0]


def _found(module, wanted: set[str] | None = None) -> list:
    """``(op, parts, Contraction)`` of each ``stablehlo.dot_general`` and
    ``stablehlo.convolution`` op of ``module`` in a form jax writes: dots
    first, then convolutions, each in the module's order. With ``wanted``
    (:func:`_operands_key` of signatures), only the ops whose operand types
    give one of them are read further."""
    from jax._src.lib.mlir import ir

    dots, convs = [], []

    def visit(op):
        name = op.name
        if name == "stablehlo.dot_general":
            dots.append(op)
        elif name == "stablehlo.convolution":
            convs.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    text, out, known = _Text(), [], {}
    for ops, prefix, keys, read, classify in ((dots, "", _DOT_KEYS, _dot_parts, _classify),
                                              (convs, "conv ", _CONV_KEYS, _conv_parts, _classify_conv)):
        for op in ops:
            types = None
            if wanted is not None:
                types = tuple(text(v.type) for v in op.operands)
                a, b = (_tensor(t) for t in types) if len(types) == 2 else (None, None)
                if not (a and b) or f"{prefix}{a[1]}[{_join(a[0])}]x[{_join(b[0])}]" not in wanted:
                    continue
            # Ops of the same types and attributes (most of a module's) are
            # decoded once.
            r = _Read.of(op, text, keys, types)
            if r not in known:
                parts = read(r)
                known[r] = None if parts is None else (parts, classify(parts))
            if known[r] is not None:
                out.append((op, *known[r]))
    return out


def contractions(module) -> list[Contraction]:
    """The dots and convolutions of a StableHLO module (a
    ``jax.stages.Lowered``, an ``ir.Module`` or MLIR text): dots first,
    then convolutions, each in order."""
    return [c for _, _, c in _found(_module(module))]


def _conv_parts(r: _Read):
    """The dimension roles, window and groups of a ``stablehlo.convolution``
    op, or None where it is not in the form jax writes."""

    def attr(key):
        return r.attr(_CONV_KEYS, key)

    types = _types(r)
    dn = attr("dimension_numbers")
    dn = re.fullmatch(r"#stablehlo\.conv<\[([\w, ]+)\]x\[([\w, ]+)\]->\[([\w, ]+)\]>", dn) if dn else None
    if types is None or dn is None:
        return None
    ta, tb, tr = types
    il, kl, ol = ([x.strip() for x in dn[k].split(",")] for k in (1, 2, 3))
    rank = len(il) - 2
    pad = [(0, 0)] * rank
    if (padding := attr("padding")) is not None:
        body = re.match(r"dense<(.*)>\s*:", padding)
        if body is None:
            return None
        if body[1].startswith("["):
            pad = [tuple(int(v) for v in p.split(",")) for p in re.findall(r"\[([-\d, ]+)\]", body[1])]
        else:  # a splat
            pad = [(int(body[1]), int(body[1]))] * rank

    def count(key):
        v = attr(key)
        return int(v.split(":")[0]) if v is not None else 1

    return dict(ta=ta, tb=tb, tr=tr, il=il, kl=kl, ol=ol, rank=rank,
                stride=_array(attr("window_strides"), 1, rank), pad=pad,
                ld=_array(attr("lhs_dilation"), 1, rank), rd=_array(attr("rhs_dilation"), 1, rank),
                reversed="true" in (attr("window_reversal") or ""), groups=count("feature_group_count"),
                bgroups=count("batch_group_count"))


def conv_signature(c: dict) -> str:
    """``conv f32[8,56,56,64]x[3,3,64,64] b01f_01io->b01f s[1,1] p[1_1,1_1]
    ld[1,1] rd[1,1] g1``, as the Rust pass writes it."""
    (a, dt), (b, _) = c["ta"], c["tb"]
    sig = (f"conv {dt}[{_join(a)}]x[{_join(b)}] {''.join(c['il'])}_{''.join(c['kl'])}->{''.join(c['ol'])} "
           f"s[{_join(c['stride'])}] p[{','.join(f'{lo}_{hi}' for lo, hi in c['pad'])}] ld[{_join(c['ld'])}] "
           f"rd[{_join(c['rd'])}] g{c['groups']}")
    if c["bgroups"] != 1:
        sig += f" bg{c['bgroups']}"
    if c["reversed"]:
        sig += " rev"
    return sig


def _classify_conv(c: dict) -> Contraction:
    (_, da), (_, db), (_, dr) = c["ta"], c["tb"], c["tr"]
    ok = (da == db == dr and da in _DTYPES and c["groups"] == 1 and c["bgroups"] == 1 and not c["reversed"]
          and all(v == 1 for v in c["ld"]) and all(lo >= 0 and hi >= 0 for lo, hi in c["pad"])
          and all(v >= 1 for v in c["stride"]) and len(c["pad"]) == c["rank"])
    return Contraction(conv_signature(c), ok, False)


def _conv_config(c: dict) -> str:
    """The backend config of a oneDNN convolution for ``c``."""
    il, kl, ol = c["il"], c["kl"], c["ol"]

    def spatial(labels):
        return [labels.index(str(i)) for i in range(c["rank"])]

    (b, _) = c["tb"]
    config = {"onednn_conv_config": {
        "dims": len(il), "feature_groups": c["groups"],
        "input": {"data": {"batch_dim": il.index("b"), "feature_dim": il.index("f"), "spatial_dims": spatial(il)}},
        "kernel": {"filter": {"input_feature_dim": kl.index("i"), "output_feature_dim": kl.index("o"),
                              "spatial_dims": spatial(kl)}},
        "output": {"data": {"batch_dim": ol.index("b"), "feature_dim": ol.index("f"), "spatial_dims": spatial(ol)}},
        "window": {"size": [b[d] for d in spatial(kl)], "pad_left": [lo for lo, _ in c["pad"]],
                   "pad_right": [hi for _, hi in c["pad"]], "strides": c["stride"], "window_dilations": c["rd"]},
    }}
    return json.dumps(config, separators=(",", ":"))


def _custom_call(ir, target: str, config: str, operands, result_type, at):
    """A ``stablehlo.custom_call @target`` with ``config`` before ``at``."""
    return ir.Operation.create("stablehlo.custom_call", results=[result_type], operands=list(operands),
                               attributes={"call_target_name": ir.StringAttr.get(target),
                                           "backend_config": ir.StringAttr.get(config)},
                               loc=at.location, ip=ir.InsertionPoint(at))


def _send_dot(ir, op, parts, d: Contraction) -> None:
    """Replaces the dot ``op`` by a oneDNN matmul."""
    config = '{"onednn_matmul_config":{"transpose_b":true}}' if d.transpose_b else '{"onednn_matmul_config":{}}'
    ((a, _), _, (out, _)), (lb, *_rest) = parts
    lhs, rhs = op.operands[0], op.operands[1]
    result = op.results[0]
    if lb or len(a) == 2:
        call = _custom_call(ir, TARGET, config, (lhs, rhs), result.type, op)
        result.replace_all_uses_with(call.results[0])
    else:
        # A left operand of rank > 2 without batch dimensions: oneDNN takes
        # it as the rows of a rank-2 matrix.
        rows = 1
        for v in a[:-1]:
            rows *= v
        elem = result.type.element_type
        flat_a = ir.RankedTensorType.get([rows, a[-1]], elem)
        flat_r = ir.RankedTensorType.get([rows, out[-1]], elem)
        at = dict(loc=op.location, ip=ir.InsertionPoint(op))
        flat = ir.Operation.create("stablehlo.reshape", results=[flat_a], operands=[lhs], **at)
        call = _custom_call(ir, TARGET, config, (flat.results[0], rhs), flat_r, op)
        back = ir.Operation.create("stablehlo.reshape", results=[result.type], operands=[call.results[0]], **at)
        result.replace_all_uses_with(back.results[0])
    op.erase()


def _send_conv(ir, op, config: str) -> None:
    """Replaces the convolution ``op`` by a oneDNN convolution of backend
    config ``config`` (:func:`_conv_config`)."""
    call = _custom_call(ir, CONV_TARGET, config, (op.operands[0], op.operands[1]),
                        op.results[0].type, op)
    op.results[0].replace_all_uses_with(call.results[0])
    op.erase()


def _copy(module):
    """A new module holding a copy of ``module``'s ops and attributes (jax's
    own module, which its caches hold, is never changed)."""
    from jax._src.lib.mlir import ir

    with module.context, ir.Location.unknown():
        new = ir.Module.create()
        for name in _attr_names(module.operation):
            new.operation.attributes[name] = module.operation.attributes[name]
        ip = ir.InsertionPoint(new.body)
        for op in module.body.operations:
            op.operation.clone(ip=ip)
    return new


def module_with(module, chosen: Iterable[str]):
    """A copy of the StableHLO ``module`` (an ``ir.Module``) with every
    eligible dot or convolution whose signature is in ``chosen`` sent to
    oneDNN, and how many ops were: the ops are replaced in place in the
    copy, through MLIR's own API (no text is printed or parsed)."""
    from jax._src.lib.mlir import ir

    chosen = set(chosen)
    if not chosen:
        return module, 0
    new = _copy(module)
    count, configs = 0, {}
    with new.context, ir.Location.unknown():
        for op, parts, d in _found(new, {_operands_key(sig) for sig in chosen}):
            if not d.eligible or d.signature not in chosen:
                continue
            if op.name == "stablehlo.dot_general":
                _send_dot(ir, op, parts, d)
            else:
                # Equal convolutions share their parts, and so their config.
                if id(parts) not in configs:
                    configs[id(parts)] = _conv_config(parts)
                _send_conv(ir, op, configs[id(parts)])
            count += 1
    return new, count


def rewrite(text: str, chosen: Iterable[str]) -> tuple[str, int]:
    """``text`` (a StableHLO module) with every eligible dot or convolution
    whose signature is in ``chosen`` sent to oneDNN, as text; and how many
    ops were rewritten."""
    new, count = module_with(_module(text), chosen)
    return str(new), count


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
    from . import stablehlo

    module, count = module_with(lowered.compiler_ir(), chosen)
    if not count:
        return lowered, 0
    return stablehlo.with_module(lowered, module), count
