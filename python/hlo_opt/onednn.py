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

import json
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
_CONV = re.compile(
    r"(?P<res>%[\w#.]+) = stablehlo\.convolution\((?P<a>%[\w#.]+), (?P<b>%[\w#.]+)\) "
    r"dim_numbers = \[(?P<il>[\w, ]+)\]x\[(?P<kl>[\w, ]+)\]->\[(?P<ol>[\w, ]+)\], "
    r"window = \{(?P<window>[^}]*)\} \{(?P<attrs>[^}]*)\} : "
    r"\((?P<ta>tensor<[^>]*>), (?P<tb>tensor<[^>]*>)\) -> (?P<tr>tensor<[^>]*>)$",
    re.M,
)
_TENSOR = re.compile(r"tensor<((?:\d+x)*)(\w+)>")
CONV_TARGET = "__onednn$convolution"
_DTYPES = ("f32", "bf16")


def _ints(s: str | None) -> list[int]:
    return [int(v) for v in s.split(",")] if s and s.strip() else []


def _tensor(t: str) -> tuple[list[int], str] | None:
    m = _TENSOR.fullmatch(t)
    if not m:
        return None  # dynamic or unusual types keep XLA's kernels
    return [int(d) for d in m[1].split("x") if d], m[2]


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

    def j(v):
        return ",".join(str(x) for x in v)

    return f"{dtype}[{j(lhs)}]x[{j(rhs)}] b[{j(lb)}]x[{j(rb)}] c[{j(lc)}]x[{j(rc)}]"


def _classify(m: re.Match) -> Contraction | None:
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
    return Contraction(sig, ok, transpose_b)


def contractions(text: str) -> list[Contraction]:
    """The dots and convolutions of a StableHLO module (MLIR text): dots
    first, then convolutions, each in order."""
    found = [_classify(m) for m in _DOT.finditer(text)] + [_classify_conv(m) for m in _CONV.finditer(text)]
    return [d for d in found if d is not None]


def _conv_parts(m: re.Match):
    """The dimension roles, window and groups of a convolution match, or
    None where the text is not in the form jax writes."""
    ta, tb, tr = _tensor(m["ta"]), _tensor(m["tb"]), _tensor(m["tr"])
    if not (ta and tb and tr):
        return None
    il, kl, ol = ([x.strip() for x in m[k].split(",")] for k in ("il", "kl", "ol"))
    rank = len(il) - 2
    w = m["window"]

    def ints(key, default):
        g = re.search(key + r" = \[([\d, ]*)\]", w)
        return [int(v) for v in g[1].split(",")] if g and g[1].strip() else [default] * rank

    pads = re.search(r"pad = \[((?:\[[-\d, ]*\],? ?)*)\]", w)
    pad = [tuple(int(v) for v in p.split(",")) for p in re.findall(r"\[([-\d, ]*)\]", pads[1])] if pads \
        else [(0, 0)] * rank
    groups = re.search(r"feature_group_count = (\d+)", m["attrs"])
    bgroups = re.search(r"batch_group_count = (\d+)", m["attrs"])
    return dict(ta=ta, tb=tb, tr=tr, il=il, kl=kl, ol=ol, rank=rank, stride=ints("stride", 1), pad=pad,
                ld=ints("lhs_dilate", 1), rd=ints("rhs_dilate", 1), reversed="true" in w,
                groups=int(groups[1]) if groups else 1, bgroups=int(bgroups[1]) if bgroups else 1)


def conv_signature(c: dict) -> str:
    """``conv f32[8,56,56,64]x[3,3,64,64] b01f_01io->b01f s[1,1] p[1_1,1_1]
    ld[1,1] rd[1,1] g1``, as the Rust pass writes it."""

    def j(v):
        return ",".join(str(x) for x in v)

    (a, dt), (b, _) = c["ta"], c["tb"]
    sig = (f"conv {dt}[{j(a)}]x[{j(b)}] {''.join(c['il'])}_{''.join(c['kl'])}->{''.join(c['ol'])} "
           f"s[{j(c['stride'])}] p[{','.join(f'{lo}_{hi}' for lo, hi in c['pad'])}] ld[{j(c['ld'])}] "
           f"rd[{j(c['rd'])}] g{c['groups']}")
    if c["bgroups"] != 1:
        sig += f" bg{c['bgroups']}"
    if c["reversed"]:
        sig += " rev"
    return sig


def _classify_conv(m: re.Match) -> Contraction | None:
    c = _conv_parts(m)
    if c is None:
        return None
    (_, da), (_, db), (_, dr) = c["ta"], c["tb"], c["tr"]
    ok = (da == db == dr and da in _DTYPES and c["groups"] == 1 and c["bgroups"] == 1 and not c["reversed"]
          and all(v == 1 for v in c["ld"]) and all(lo >= 0 and hi >= 0 for lo, hi in c["pad"])
          and all(v >= 1 for v in c["stride"]) and len(c["pad"]) == c["rank"])
    return Contraction(conv_signature(c), ok, False)


def _conv_config(c: dict) -> str:
    """The backend config of a oneDNN convolution for ``c``, escaped for an
    MLIR string attribute."""
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
    return json.dumps(config, separators=(",", ":")).replace('"', "\\22")


def rewrite(text: str, chosen: Iterable[str]) -> tuple[str, int]:
    """``text`` with every eligible dot or convolution whose signature is in
    ``chosen`` sent to oneDNN; returns the new text and how many ops were
    rewritten."""
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

    def sub_conv(m: re.Match) -> str:
        nonlocal count
        d = _classify_conv(m)
        if d is None or not d.eligible or d.signature not in chosen:
            return m[0]
        count += 1
        return (f'{m["res"]} = stablehlo.custom_call @{CONV_TARGET}({m["a"]}, {m["b"]}) '
                f'{{backend_config = "{_conv_config(_conv_parts(m))}"}} : ({m["ta"]}, {m["tb"]}) -> {m["tr"]}')

    text = _DOT.sub(sub, text)
    return _CONV.sub(sub_conv, text), count


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

    text, count = rewrite(lowered.as_text(), chosen)
    if not count:
        return lowered, 0
    return stablehlo.with_module(lowered, stablehlo.parse(text)), count
