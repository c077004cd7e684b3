"""Measuring: :func:`measure` compiles candidates from one lowering and
times them interleaved against the default and a control; a candidate is
valid when it gives the default's results (:func:`_same`). Also the
``measure=`` option of ``compile``: the candidates it times
(:func:`_measured_space`) and its keep rule (:func:`measure_candidates`)."""

from __future__ import annotations

import functools
import hashlib
import re
import time
from typing import Any, Sequence

import numpy as np

from .. import onednn
from ..timing import interleaved, paired_ratio
from .space import CANDIDATE_NAMES, CANDIDATES, _with_ops, options_of


def _hlo_hash(text: str) -> str:
    # The module name line carries a unique id; the rest is the program.
    body = re.sub(r"^HloModule[^\n]*\n", "", text)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def _same(a, b) -> bool:
    import jax

    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.dtype.kind in "fc" or x.dtype.name == "bfloat16":
            # Other kernels sum in another order: relative to the result's
            # scale, 1/16 for bf16 (8 ulps), 1e-2 for f16, 1e-4 wider.
            tol = {"bfloat16": 1 / 16, "float16": 1e-2}.get(x.dtype.name, 1e-4)
            x64, y64 = x.astype(np.float64), y.astype(np.float64)
            scale = max(1.0, float(np.max(np.abs(np.nan_to_num(y64)), initial=0.0)))
            if not np.allclose(x64, y64, rtol=tol, atol=tol * scale, equal_nan=True):
                return False
        elif not np.array_equal(x, y):
            return False
    return True


def measure(lowered, args: Sequence[Any], *, candidates=None, budget_s: float = 3.0,
            min_rounds: int = 7, max_rounds: int = 301, seed: int = 0) -> dict[str, Any]:
    """Compiles each candidate of ``lowered`` and times them interleaved.

    A candidate is ``(name, compile options)``, or ``(name, compile options,
    op signatures)`` whose dots and convolutions run on oneDNN
    (:mod:`hlo_opt.onednn`).

    Returns ``{"candidates", "ratio", "runtime_ns", "compile_s", "alias",
    "ok", "control_ratio", "rounds", "repeat", "default_ns"}``: ``ratio[i]``
    is the median over rounds of candidate i's time over the default's time
    in the same round (:func:`hlo_opt.timing.interleaved`: each round runs
    every executable once, in a shuffled order, short programs ``repeat``
    times per sample); a candidate whose optimized module equals an earlier one's is
    that one's alias and shares its measurement; ``ok`` is False where a
    candidate failed to compile or computed other results than the default.
    """
    import jax

    cands = CANDIDATES if candidates is None else candidates
    names = [c[0] for c in cands]
    exes, alias, compile_s, ok, hashes = {}, [], [], [], {}
    for i, (name, opts, *sigs) in enumerate(cands):
        t = time.perf_counter()
        try:
            exe = _compile(lowered, opts, sigs[0] if sigs else ())
        except Exception as e:  # a refused option is a failed candidate
            compile_s.append(time.perf_counter() - t)
            alias.append(i)
            ok.append(False)
            print(f"  {name}: compile failed: {str(e)[:160]}")
            continue
        compile_s.append(time.perf_counter() - t)
        h = _hlo_hash(exe.as_text())
        first = hashes.setdefault(h, i)
        alias.append(first)
        ok.append(True)
        if first == i:
            exes[i] = exe
    if 0 not in exes:
        raise RuntimeError("the default compile failed")
    control = lowered.compile()
    args = jax.device_put(args)
    want = exes[0](*args)
    for i in list(exes):
        if i and not _same(exes[i](*args), want):
            ok[i] = False
            print(f"  {names[i]}: results differ from the default's: not a valid choice")
            del exes[i]
    runners = [(i, exes[i]) for i in exes] + [(-1, control)]
    times, run = interleaved([functools.partial(e, *args) for _, e in runners], budget_s=budget_s,
                             min_rounds=min_rounds, max_rounds=max_rounds, seed=seed)
    times = {i: t for (i, _), t in zip(runners, times)}
    base = times[0]
    ratio = np.full(len(names), np.nan)
    for i in exes:
        ratio[i] = paired_ratio(times[i], base)
    for i, a in enumerate(alias):
        if ok[i] and a != i:
            ratio[i] = ratio[a]
            ok[i] = ok[a]
    default_ns = float(np.median(base)) * 1e9
    return {
        "candidates": names,
        "ratio": ratio,
        "runtime_ns": np.where(np.isnan(ratio), -1, np.round(ratio * default_ns)).astype(np.int64),
        "compile_s": np.asarray(compile_s),
        "alias": np.asarray(alias, dtype=np.int64),
        "ok": np.asarray(ok, dtype=bool),
        "control_ratio": paired_ratio(times[-1], base),
        "rounds": run["rounds"],
        "repeat": run["repeat"],
        "default_ns": default_ns,
    }


def _copy_args(args):
    import jax

    return jax.tree_util.tree_map(lambda x: x.copy() if hasattr(x, "copy") else x, args)


def _compile(lowered, opts: dict[str, Any], sigs: Sequence[str] = ()):
    """``lowered`` compiled with the compile options ``opts``, the ops
    ``sigs`` on oneDNN."""
    if sigs:
        lowered = lowered.with_onednn(sigs) if isinstance(lowered, _Bound) else onednn.lowered_with(lowered, sigs)[0]
    return lowered.compile(compiler_options=opts) if opts else lowered.compile()


def _measured_space(decision, model_pick, measure, lowered):
    """The candidates ``measure`` compiles and times: the default, the
    model's choice, and the module-wide candidates (``"all"``: every one,
    and every eligible op on oneDNN; K: the K best predicted)."""
    if measure is True or measure == "all":
        names = list(CANDIDATE_NAMES)
    elif isinstance(measure, int) and measure > 0:
        preds = sorted((p for p in decision["predictions"] if p["candidate"] != "default"),
                       key=lambda p: p["change_pct"])
        names = ["default"] + ([p["candidate"] for p in preds] or CANDIDATE_NAMES[1:])[:measure]
    else:
        raise ValueError(f"measure={measure!r}: a number of candidates (the best predicted), or \"all\"")
    cands = [(n, options_of(n), ()) for n in names]
    if model_pick[2]:
        cands.append(model_pick)
    if (measure is True or measure == "all") and not onednn.supported():
        every = tuple(dict.fromkeys(d.signature for d in onednn.contractions(lowered) if d.eligible))
        if every and every != model_pick[2]:
            cands.append((_with_ops("default", every) + " (every op)", {}, every))
    return cands


def measure_candidates(lowered, args_kwargs, cands, budget_s: float = 2.0) -> dict[str, Any]:
    """``measure`` over ``cands`` with keyword arguments, and the keep rule:
    the fastest valid candidate when its ratio is below 1 by more than the
    control's distance from 1 (and at least 2%)."""
    args, kwargs = args_kwargs
    res = measure(_Bound(lowered, kwargs), args, candidates=cands, budget_s=budget_s)
    ratio = np.where(res["ok"], res["ratio"], np.inf)
    best = int(np.argmin(ratio))
    noise = max(0.02, abs(res["control_ratio"] - 1.0))
    if best and ratio[best] < 1.0 - noise:
        chosen, why = cands[best][0], f"x{ratio[best]:.3f} of the default, beyond the control's spread {noise:.3f}"
    else:
        chosen, why = "default", f"no candidate beat the default by more than the control's spread {noise:.3f}"
    return dict(res, chosen=chosen, why=why)


class _Bound:
    """A lowered function whose executables take ``kwargs`` too."""

    def __init__(self, lowered, kwargs):
        self._lowered, self._kwargs = lowered, kwargs

    def with_onednn(self, sigs):
        return _Bound(onednn.lowered_with(self._lowered, sigs)[0], self._kwargs)

    def compile(self, compiler_options=None):
        exe = self._lowered.compile(compiler_options=compiler_options) if compiler_options else self._lowered.compile()
        kw = self._kwargs
        return _WithKwargs(exe, kw)


class _WithKwargs:
    def __init__(self, exe, kwargs):
        self._exe, self._kwargs = exe, kwargs

    def as_text(self):
        return self._exe.as_text()

    def __call__(self, *args):
        return self._exe(*args, **self._kwargs)
