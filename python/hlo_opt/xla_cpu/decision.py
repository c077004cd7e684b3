"""The decision: jax's lowered module read as the xla-cpu pass reads it
(:func:`printed`, :func:`_module_of`), the pass's decision for it
(:func:`decide`), and the model's pick as a candidate (:func:`_model_pick`)."""

from __future__ import annotations

import json
from typing import Any

from .. import _native, onednn
from .space import _module_wide, _with_ops, options_of


def printed(lowered) -> bytes:
    """The StableHLO of ``lowered`` as the decision reads it: the generic op
    form, as bytes (read as UTF-8 by the reader). jax verified the module
    when it lowered it: printing it again without MLIR's verifier is 10-20%
    cheaper, as bytes a further 15%, and in the module's own scope (the
    same text: it has no parent) 5-10% more. The decision reads shapes,
    not the elements of constants: those of more than 16 (weights closed
    over by the function) are not printed (a 4 MB one took 30 ms to print
    and 0.6 s to read; splats are kept)."""
    return lowered.compiler_ir().operation.get_asm(print_generic_op_form=True, assume_verified=True, binary=True,
                                                   use_local_scope=True, large_elements_limit=16)


def _module_of(lowered):
    """The module XLA compiles for ``lowered``: read from its StableHLO
    (generic op form; about a tenth of the cost of jax's own conversion,
    docs/formats.md), or, for what that reader does not know yet, from
    jax's HLO text."""
    from .. import HloError, parse, parse_stablehlo

    try:
        return parse_stablehlo(printed(lowered), name="<jax>")
    except HloError:
        return parse(lowered.as_text(dialect="hlo"), name="<jax>")


def decide(lowered, *, model: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """The xla-cpu pass's decision for a lowered ``jax.jit`` function."""
    import jaxlib

    from .. import PassError

    module = _module_of(lowered)
    try:
        text, notes = _native.xla_cpu_decide(module, jaxlib=jaxlib.__version__, model=model)
    except PassError as e:
        # A model for another XLA: keep XLA's default, and say why.
        return ({"chosen": "default", "options": [], "reason": f"kept XLA's default: {e}",
                 "predictions": [], "model": model or "built-in", "xla": f"jaxlib {jaxlib.__version__}",
                 "trained_cpu": "?"}, [str(e)])
    return json.loads(text), list(notes)


def _model_pick(decision: dict[str, Any], notes: list[str]) -> tuple[str, dict[str, Any], tuple[str, ...]]:
    """The model's choice as (name, compile options, oneDNN ops)."""
    sigs = tuple(d["signature"] for d in decision.get("onednn", []) if d["onednn"])
    if sigs and (why := onednn.supported()):
        notes.append(why)
        sigs = ()
    base = _module_wide(decision["chosen"])
    return _with_ops(base, sigs), options_of(base), sigs
