"""``verify``: the candidates the decision says are worth it, compiled
and timed against the default on the caller's arguments. Its stages: the
space (:func:`_verify_space`), the compiles (:func:`_build_all`), a first
run that drops invalid and far slower ones (:func:`_verify_check`), the
screen (:func:`_screen`), one step of local search (:func:`_neighbours`),
and the contenders timed again (:func:`_verify`)."""

from __future__ import annotations

import functools
import json
import os
import time

from .. import onednn
from ..timing import interleaved, paired_ratio
from .measuring import _copy_args, _hlo_hash, _same
from .space import CANDIDATE_NAMES, _with_ops, options_of

#: A candidate is kept by ``verify`` when it runs at most this fraction of
#: the default's time.
VERIFY_KEEP = 0.98


def _verify_space(decision, model_pick, lowered):
    """What ``verify`` times against the default: the model's choice, the
    card's portfolio (the decision's ``verify`` list), and every eligible
    dot and convolution on oneDNN, each once."""
    cands = [model_pick] if model_pick[0] != "default" else []
    cands += [(n, options_of(n), ()) for n in decision.get("verify", [])]
    if not onednn.supported():
        every = tuple(dict.fromkeys(d.signature for d in onednn.contractions(lowered) if d.eligible))
        if every:
            cands.append((_with_ops("default", every) + " (every op)", {}, every))
    out, seen = [], set()
    for c in cands:
        if (key := (json.dumps(c[1], sort_keys=True), tuple(sorted(c[2])))) not in seen and c[0] != "default":
            seen.add(key)
            out.append(c)
    return out


#: A candidate whose first run, and then its second, takes more than this
#: times the default's second run is not timed further (a bf16 program
#: without YNNPACK can run 16x slower: five rounds of it would cost more
#: than all the rest). A first run alone decides nothing: oneDNN makes its
#: kernels then, and a first run of a good candidate was seen at 2.2x.
FIRST_RUN_CUT = 1.5
#: ... when that run took longer than this: shorter ones cost little to
#: time, and a first run of a short program is noisy.
FIRST_RUN_FLOOR_S = 0.02


def _variants(plain, cands):
    """Each candidate's lowering (its ops rewritten to oneDNN, in this
    thread: the rewrite parses MLIR) and compile options."""
    return [(onednn.lowered_with(plain, c[2])[0] if c[2] else plain, c[1]) for c in cands]


def _build_all(plain, cands):
    """Each candidate of ``cands`` compiled (:func:`_build`), two at a time."""
    from concurrent.futures import ThreadPoolExecutor

    variants = _variants(plain, cands)
    with ThreadPoolExecutor(max(1, min(2, os.cpu_count() or 1))) as pool:
        return list(pool.map(lambda v: _build(*v), variants))


def _build(low, opts):
    """``low`` compiled with ``opts``, or the error of an option this XLA
    refuses."""
    try:
        return low.compile(compiler_options=opts) if opts else low.compile()
    except Exception as e:
        return e


#: ``verify``'s last stage times again, with the default, the candidates
#: whose ratio came within this factor of the fastest one's (at most
#: :data:`FINAL_MAX`, the fastest first), and keeps the fastest of that
#: stage: close candidates trade places from one short timing to the next.
CONTEND_WITHIN = 1.05
FINAL_MAX = 3

#: ``verify`` also times the module-wide candidates one YNNPACK kind away
#: from the fastest module-wide one it screened, when that one ran within
#: this ratio of the default (a step of local search: in leave-one-family-out
#: cross-validation it took the portfolio's mean slowdown from 0.75% to
#: 0.26% (0.10.2) and from 0.65% to 0.18% (0.12.0.1), for 1.7 and 1.1 more
#: compiles on average).
LOCAL_SEARCH_WITHIN = 1.02


def _verify(base, cands, exes, args_kwargs, budget_s: float, check: bool, expand=None):
    """``verify``: of the candidates ``cands`` (``(name, options, op
    signatures)``) and their executables ``exes``, those that are another
    valid executable and not far slower in their first run
    (:func:`_verify_check`) run interleaved with ``base`` (the default) for
    ``budget_s``. With ``expand`` (candidates -> their executables), the
    neighbours of the fastest module-wide one (:func:`_neighbours`) are
    compiled and timed with it in fresh rounds. When the fastest of all
    ran at :data:`VERIFY_KEEP` or better, it and those within
    :data:`CONTEND_WITHIN` of it (the contenders) run again with the
    default in fresh rounds, and the fastest of that stage is kept when it
    runs at :data:`VERIFY_KEEP` or better there. Returns the
    pick, the record (candidates, ratio, status, searched, contenders,
    final, confirmed, chosen, why) and the pick's executable (None for the
    default)."""
    default = ("default", {}, ())
    st = _verify_check(base, cands, exes, args_kwargs, check)
    ratio = list(st["first"])
    _screen(base, exes, st, ratio, args_kwargs, budget_s, range(len(cands)))
    centre, near = _neighbours(cands, ratio, st["status"]) if expand is not None else (None, [])
    if near:
        first = len(cands)
        cands, exes = cands + near, exes + list(expand(near))
        st = _verify_check(base, cands, exes, args_kwargs, check, st)
        ratio += st["first"][first:]
        _screen(base, exes, st, ratio, args_kwargs, budget_s, [centre, *range(first, len(cands))])
    status, live = st["status"], [i for i, s in enumerate(st["status"]) if s == "timed"]
    record = dict(candidates=[c[0] for c in cands], ratio=ratio, status=status, searched=[c[0] for c in near])
    if not live:
        return default, dict(record, chosen="default", why="kept XLA's default: no candidate compiled to another "
                             "executable with the default's results and its speed"), None
    best = min(live, key=lambda i: ratio[i])
    if ratio[best] > VERIFY_KEEP:
        return default, dict(record, chosen="default", why=f"kept XLA's default: the fastest verified, "
                             f"{cands[best][0]}, ran x{ratio[best]:.3f} of its time (kept at most x{VERIFY_KEEP})"), None
    contenders = sorted((i for i in live if ratio[i] <= ratio[best] * CONTEND_WITHIN), key=lambda i: ratio[i])
    contenders = contenders[:FINAL_MAX]
    # As many rounds per executable as one candidate alone would get.
    final = _paired_ratios([exes[i] for i in contenders], base, args_kwargs, budget_s * (len(contenders) + 1) / 2)
    k = min(range(len(contenders)), key=lambda j: final[j])
    pick, again = contenders[k], final[k]
    name = cands[pick][0]
    record.update(contenders=[cands[i][0] for i in contenders], final=list(final), confirmed=again)
    among = f" (the fastest of {len(contenders)} timed again)" if len(contenders) > 1 else ""
    if again > VERIFY_KEEP:
        return default, dict(record, chosen="default", why=f"kept XLA's default: {name} ran x{ratio[pick]:.3f}, "
                             f"then x{again:.3f} of its time when timed again{among} (kept at most x{VERIFY_KEEP})"), None
    return cands[pick], dict(record, chosen=name, why=f"{name} ran x{ratio[pick]:.3f}, then x{again:.3f} of the "
                             f"default's time on these arguments{among}"), exes[pick]


def _screen(base, exes, st, ratio, args_kwargs, budget_s: float, among) -> None:
    """Times the candidates ``among`` that :func:`_verify_check` left
    ``timed`` interleaved with ``base`` into ``ratio``; one that shares an
    executable takes its twin's ratio (1 for the default's)."""
    live = [i for i in among if st["status"][i] == "timed"]
    for i, r in zip(live, _paired_ratios([exes[i] for i in live], base, args_kwargs, budget_s) if live else []):
        ratio[i] = r
    for i, j in st["same_as"].items():
        ratio[i] = 1.0 if j < 0 else ratio[j]


def _neighbours(cands, ratio, status):
    """The fastest timed module-wide candidate of ``cands`` (no oneDNN ops),
    when it ran within :data:`LOCAL_SEARCH_WITHIN` of the default, and the
    module-wide candidates one YNNPACK kind away from it that ``cands``
    does not hold: ``(its index, [(name, options, ()), ...])``."""
    wide = [i for i, c in enumerate(cands)
            if status[i] == "timed" and not c[2] and c[0].startswith("ynn:") and c[0] in CANDIDATE_NAMES]
    if not wide:
        return None, []
    centre = min(wide, key=lambda i: ratio[i])
    if not ratio[centre] <= LOCAL_SEARCH_WITHIN:
        return None, []
    kinds = _kinds(cands[centre][0])
    have = {c[0] for c in cands if not c[2]}
    near = [n for n in CANDIDATE_NAMES if n.startswith("ynn:") and len(_kinds(n) ^ kinds) == 1 and n not in have]
    return centre, [(n, options_of(n), ()) for n in near]


def _kinds(name: str) -> set[str]:
    """The YNNPACK kinds of a module-wide candidate (``ynn:dot+reduce``:
    {dot, reduce}; ``ynn:none``: none)."""
    rest = name.removeprefix("ynn:")
    return set() if rest == "none" else set(rest.split("+"))


def _verify_check(base, cands, exes, args_kwargs, check: bool, state=None):
    """Runs the default twice and each candidate's executable once (twice
    when its first run is slow). Returns the state: each candidate's ratio
    to the default's second run (``first``: its faster run; NaN where it did
    not run), its ``status`` (``timed``; ``the default's executable`` or
    ``X's executable`` when its optimized module is that one's, which shares
    its time; ``did not compile``; ``other results`` than the default's,
    with ``check``; ``slow in two runs``, both beyond :data:`FIRST_RUN_CUT`
    and :data:`FIRST_RUN_FLOOR_S`), and ``same_as``:
    which earlier one (-1: the default) each shared executable is. Given
    the ``state`` of a prefix of ``cands``, runs only the rest."""
    import jax

    def run(exe):
        b = _copy_args(args_kwargs)
        t = time.perf_counter()
        out = jax.block_until_ready(exe(*b[0], **b[1]))
        return out, time.perf_counter() - t

    if state is None:
        want, _ = run(base)
        state = dict(want=want, took=run(base)[1], seen={_hlo_hash(base.as_text()): -1},
                     first=[], status=[], same_as={})
    first, status, same_as, seen = state["first"], state["status"], state["same_as"], state["seen"]
    for i in range(len(status), len(exes)):
        first.append(float("nan"))
        exe = exes[i]
        if isinstance(exe, Exception):
            status.append(f"did not compile: {str(exe)[:120]}")
            continue
        h = _hlo_hash(exe.as_text())
        if h in seen:
            same_as[i] = seen[h]
            status.append("the default's executable" if seen[h] < 0 else f"{cands[seen[h]][0]}'s executable")
            continue
        seen[h] = i
        got, took = run(exe)
        if check and not _same(got, state["want"]):
            first[i] = took / max(state["took"], 1e-9)
            status.append("other results")
            continue
        if took / max(state["took"], 1e-9) > FIRST_RUN_CUT and took > FIRST_RUN_FLOOR_S:
            took = min(took, run(exe)[1])
        first[i] = took / max(state["took"], 1e-9)
        status.append("slow in two runs" if first[i] > FIRST_RUN_CUT and took > FIRST_RUN_FLOOR_S else "timed")
    return state


def _paired_ratios(exes, base, args_kwargs, budget_s: float, min_rounds: int = 5) -> list[float]:
    """Per executable of ``exes``, the median over interleaved rounds of its
    time over ``base``'s in the same round (:func:`hlo_opt.timing.interleaved`),
    on copies of the arguments (donated buffers stay the caller's)."""
    args, kwargs = args_kwargs
    a = _copy_args(args)
    times, _ = interleaved([functools.partial(e, *a, **kwargs) for e in [base, *exes]], budget_s=budget_s,
                           min_rounds=min_rounds, warmup=1)
    return [paired_ratio(t, times[0]) for t in times[1:]]
