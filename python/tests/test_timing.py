"""hlo_opt.timing: the interleaved loop every measurement runs."""

import time

import numpy as np

from hlo_opt import timing


def counting(sleep_s):
    calls = []

    def f():
        calls.append(1)
        if sleep_s:
            time.sleep(sleep_s)
        return 0

    return f, calls


def test_short_programs_repeat_within_a_sample_and_every_callable_runs_alike():
    fast, fast_calls = counting(0.0)
    slow, slow_calls = counting(0.0002)
    times, run = timing.interleaved([fast, slow], min_rounds=7, max_rounds=7, warmup=1)
    assert run["rounds"] == 7 and len(times) == 2 and all(len(t) == 7 for t in times)
    # A sub-millisecond pair runs several times per sample, the same count each.
    assert run["repeat"] > 1
    assert len(fast_calls) == len(slow_calls) == 2 + 7 * run["repeat"]
    assert timing.paired_ratio(times[1], times[0]) > 1.0


def test_a_program_longer_than_a_sample_runs_once_per_round():
    slow, calls = counting(timing.SAMPLE_S * 1.5)
    _, run = timing.interleaved([slow], min_rounds=3, max_rounds=50, warmup=0)
    assert run == {"rounds": 3, "repeat": 1} and len(calls) == 1 + 3


def test_rounds_follow_the_budget_within_their_bounds():
    f, _ = counting(0.003)
    _, run = timing.interleaved([f, f], budget_s=0.06, min_rounds=2, max_rounds=100, warmup=0)
    # About 6 ms a round: 0.06 s buys about 10 rounds (sleep overshoots).
    assert 2 <= run["rounds"] <= 10
    _, run = timing.interleaved([f], budget_s=10.0, min_rounds=2, max_rounds=4, warmup=0)
    assert run["rounds"] == 4


def test_paired_ratio_is_the_median_of_same_round_ratios():
    base = np.array([1.0, 2.0, 4.0])
    assert timing.paired_ratio(np.array([2.0, 4.0, 100.0]), base) == 2.0
