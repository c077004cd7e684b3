"""Interleaved timing on this CPU: the one loop that every measurement of
the package runs (``xla_cpu.measure``, ``xla_cpu.compile``'s ``verify``,
``xla_cpu.ops.measure_op``, and the benchmarks in scripts/).

Each round runs every callable once, in a seeded shuffled order, so that
load which comes and goes falls on all of them alike; a ratio is the
median over rounds of one callable's time over another's in the same
round. A program shorter than :data:`SAMPLE_S` runs several times back to
back per sample (the same count for every callable of the set), so that
timer resolution and scheduler noise do not decide between sub-millisecond
programs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

#: The shortest sample: the fastest callable of a set runs back to back
#: until one sample of it lasts about this long.
SAMPLE_S = 0.002
#: The most calls in one sample.
MAX_REPEAT = 64


def _once(fn: Callable[[], Any]) -> float:
    import jax

    t = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - t


def interleaved(fns: Sequence[Callable[[], Any]], *, budget_s: float = 0.0, min_rounds: int = 5,
                max_rounds: int = 201, seed: int = 0, warmup: int = 2) -> tuple[list[np.ndarray], dict[str, int]]:
    """Times each of ``fns`` (callables of no arguments that run one
    executable; their results are waited for) in interleaved rounds.

    Rounds: as many as fit ``budget_s`` by the warm-up's estimate, at least
    ``min_rounds`` and at most ``max_rounds``. Returns, per callable, its
    seconds per call in each round, and ``{"rounds", "repeat"}``."""
    for _ in range(warmup):
        for f in fns:
            _once(f)
    first = [_once(f) for f in fns]
    repeat = int(min(MAX_REPEAT, max(1, math.ceil(SAMPLE_S / max(min(first), 1e-9)))))
    per_round = sum(first) * repeat
    rounds = int(min(max_rounds, max(min_rounds, budget_s / max(per_round, 1e-9))))
    rng = np.random.default_rng(seed)
    times = np.zeros((len(fns), rounds))
    for r in range(rounds):
        for k in rng.permutation(len(fns)):
            f = fns[k]
            total = 0.0
            for _ in range(repeat):
                total += _once(f)
            times[k, r] = total / repeat
    return list(times), {"rounds": rounds, "repeat": repeat}


def paired_ratio(times: np.ndarray, base: np.ndarray) -> float:
    """The median over rounds of ``times`` over ``base`` in the same round."""
    return float(np.median(np.asarray(times) / np.asarray(base)))
