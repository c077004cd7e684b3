"""The one-liner, :func:`compile`, as its stages: lower, take a kept choice
(:mod:`.cache`), decide while XLA compiles the default
(:func:`_decide_while_compiling`), then measure (:func:`_by_measure`),
verify (:func:`_by_verify`) or trust the model, and finish with the pick's
executable (:func:`_finish`)."""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

from .cache import ChoiceCache
from .compiled import Compiled, _Static
from .decision import _model_pick, decide
from .measuring import _compile, _copy_args, _measured_space, _same, measure_candidates
from .verify import _build, _build_all, _variants, _verify, _verify_space


def compile(f, *args, model: str | None = None, measure: int | str = 0, check: bool = True,
            verify: float = 0.5, jit_options: dict[str, Any] | None = None,
            cache_dir: str | os.PathLike | None = None, **kwargs: Any) -> Compiled:
    """``jax.jit(f, **jit_options).lower(*args, **kwargs)``, the XLA:CPU
    kernels chosen by the model (the default kept unless the predicted
    gain beats the model's error), compiled with jaxlib's own client.

    ``verify``: seconds (at least 5 rounds) to time, against the default and
    interleaved on copies of ``args``, what the decision says is worth it:
    the model's choice, the model card's portfolio (the module-wide
    candidates that came closest to the best on the training programs) and
    every eligible op on oneDNN, then the module-wide candidates one
    YNNPACK kind from the fastest module-wide one. The fastest, and those
    within 1.05x of it, are timed again in fresh rounds; the fastest of
    that run is kept only when it runs at most 0.98x the default's time.
    Each candidate costs one more compile. ``verify=0``: trust the model.
    ``check``: a candidate other than the default must give the default's
    results on ``args`` (within the dtype's tolerance), else it is not kept.
    ``measure=K`` (``"all"``): compile the default and the K best predicted
    candidates (every candidate) and keep the fastest only when it beats the
    default by more than a control's spread (autotuning).
    ``cache_dir`` (else ``$HLO_OPT_CACHE_DIR``; neither: no cache): a choice
    that was verified or measured is kept there, keyed by the module, the
    jaxlib, the CPU, the model and this build of hlo-opt; the same program
    compiled again (another process, another day) takes it without
    deciding, compiling candidates or timing them (:class:`ChoiceCache`)."""
    import warnings

    lowered, plain = _lowered(f, (args, kwargs), jit_options)
    # What the executables take: the arguments but the static ones.
    static = _Static.of(f, jit_options, args, kwargs)
    args_kwargs = static.dynamic(args, kwargs) if static else (args, kwargs)
    cache = ChoiceCache.of(cache_dir, plain, model)
    if cache is not None and (cached := cache.compiled(lowered)) is not None:
        cached.static = static
        return cached
    st = _decide_while_compiling(lowered, plain, model, verify=bool(verify and not measure))
    for n in st.notes[:st.warned]:
        warnings.warn(n, stacklevel=3)
    if measure:
        pick, exe, decision, measured = _by_measure(st, measure, args_kwargs)
    elif verify:
        pick, exe, decision, measured = _by_verify(st, args_kwargs, verify, check)
    else:
        pick, exe, decision, measured = st.model_pick, None, st.decision, None
    compiled = _finish(st, pick, exe, decision, measured, args_kwargs, check)
    compiled.static = static
    if cache is not None:
        cache.store(compiled)
    return compiled


def _lowered(f, args_kwargs, jit_options):
    """``jax.jit(f, **jit_options)`` lowered for the arguments, and the same
    without donation (what measuring and checking run many times: the same
    kernels, and the caller's buffers stay theirs)."""
    import jax

    args, kwargs = args_kwargs
    jit_options = dict(jit_options or {})
    lowered = jax.jit(f, **jit_options).lower(*args, **kwargs)
    keep = {k: v for k, v in jit_options.items() if not k.startswith("donate")}
    plain = lowered if keep == jit_options else jax.jit(f, **keep).lower(*args, **kwargs)
    return lowered, plain


@dataclasses.dataclass
class _Staged:
    """What :func:`compile` has after its first stage: the decision, and
    the executables compiled while it was made."""

    lowered: Any
    plain: Any
    decision: dict[str, Any]
    notes: list[str]
    warned: int  # the notes that are warnings (those of the decision)
    model_pick: tuple[str, dict[str, Any], tuple[str, ...]]
    default_exe: Any
    base: Any = None  # the default without donation (verify)
    cands: list = dataclasses.field(default_factory=list)  # verify's candidates
    built: list = dataclasses.field(default_factory=list)  # and their executables


def _decide_while_compiling(lowered, plain, model, verify: bool) -> _Staged:
    """The model decides while XLA compiles the default, then, with
    ``verify``, the candidates it times (compiles release the GIL): when
    the default is kept without verify, the decision costs no wall time."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, min(2, os.cpu_count() or 1))) as pool:
        speculative = pool.submit(lowered.compile)
        decision, notes = decide(lowered, model=model)
        warned = len(notes)
        model_pick = _model_pick(decision, notes)
        st = _Staged(lowered, plain, decision, notes, warned, model_pick, None)
        if verify:
            st.cands = _verify_space(decision, model_pick, lowered)
            base = speculative if plain is lowered else pool.submit(plain.compile)
            building = [pool.submit(_build, low, opts) for low, opts in _variants(plain, st.cands)]
            st.base, st.built = base.result(), [b.result() for b in building]
        st.default_exe = speculative.result()
    return st


def _by_measure(st: _Staged, measure, args_kwargs):
    """``measure``: the candidates compiled and timed here, the fastest kept
    beyond the control's noise. Returns (pick, its executable or None,
    decision, the measurement's record)."""
    cands = _measured_space(st.decision, st.model_pick, measure, st.lowered)
    res = measure_candidates(st.plain, _copy_args(args_kwargs), cands)
    pick = cands[[c[0] for c in cands].index(res["chosen"])]
    measured = dict(candidates=[c[0] for c in cands], ratio=[float(r) for r in res["ratio"]],
                    chosen=res["chosen"], why=res["why"], control=res["control_ratio"])
    return pick, None, st.decision, measured


def _by_verify(st: _Staged, args_kwargs, budget_s: float, check: bool):
    """``verify``: the candidates compiled in the first stage timed against
    the default (their results checked there). Returns (pick, its
    executable or None, the decision with the ``verified`` record, None)."""
    pick, record, exe = _verify(st.base, st.cands, st.built, args_kwargs, budget_s, check,
                                expand=functools.partial(_build_all, st.plain))
    record.update(model_choice=st.model_pick[0], model_reason=st.decision["reason"])
    decision = dict(st.decision, verified=record, reason=record["why"])
    if st.plain is not st.lowered:
        exe = None  # timed without donation: compiled again, with it
    return pick, exe, decision, None


def _finish(st: _Staged, pick, exe, decision, measured, args_kwargs, check: bool) -> Compiled:
    """The executable of ``pick`` (the default's, the one timed, or compiled
    now); a pick that was not verified must give the default's results
    (``check``), else the default is kept."""
    name, opts, sigs = pick
    if name == "default":
        exe = st.default_exe
    elif exe is None:
        exe = _compile(st.lowered, opts, sigs)
    if name != "default" and check and "verified" not in decision and not _same_results(
            st.lowered, st.plain, st.default_exe, exe, pick, args_kwargs):
        exe, name, sigs = st.default_exe, "default", ()
        if measured:
            measured["chosen"], measured["why"] = "default", "the faster candidate's results differed"
        else:
            decision = dict(decision, reason="its results differed from the default's")
    if not measured and decision["chosen"] != name:
        decision = dict(decision, chosen=name)
    return Compiled(exe, st.lowered, decision, st.notes, measured, sigs)


def _same_results(lowered, plain, default_exe, exe, pick, args_kwargs) -> bool:
    """``check`` of a pick ``verify`` did not run: its executable gives the
    default's results on copies of the arguments (without donation where
    the caller donates); else a warning."""
    import warnings

    name, opts, sigs = pick
    want_exe = default_exe if plain is lowered else plain.compile()
    got_exe = exe if plain is lowered else _compile(plain, opts, sigs)
    a, b = _copy_args(args_kwargs), _copy_args(args_kwargs)
    if _same(got_exe(*a[0], **a[1]), want_exe(*b[0], **b[1])):
        return True
    warnings.warn(f"xla-cpu: {name} gave other results than XLA's default on these arguments; "
                  "kept the default", stacklevel=3)
    return False
