"""Benchmark: hlo_opt.jax.compile(f, *args, backend="cpu") against jax.jit(f)
on held-out real JAX programs (scripts/xla_cpu_heldout.py), with the oracle
(every module-wide candidate, the model's per-op oneDNN choice and every
eligible dot as a oneDNN matmul, measured) in the same run, on this
machine's jaxlib.

Per program: the decision's cost (HLO text, parse, features, model) against
XLA:CPU's compile time; every candidate measured interleaved (the oracle);
then jax.jit(f), hlo-opt's choice, the oracle's best and a second executable
of the default (the control) timed interleaved (hlo_opt.timing: a program
under 2 ms runs back to back within each sample), ROUNDS rounds, medians;
results of hlo-opt's executable compared with jax.jit's (bf16 as bf16).

    .venv/bin/python scripts/bench_xla_cpu.py [--rounds 61] [--only NAME] [--out results.jsonl]

Prints a markdown table (docs/benchmarks.md) and the summary.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jaxlib  # noqa: E402

import hlo_opt.jax as hj  # noqa: E402
from hlo_opt import xla_cpu  # noqa: E402
from hlo_opt.timing import interleaved, paired_ratio  # noqa: E402
import xla_cpu_heldout  # noqa: E402


def timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t


def bench(p, rounds: int, oracle_budget: float, seed: int = 0) -> dict:
    lowered = jax.jit(p.fn).lower(*p.args)
    _, xla_compile = timed(lowered.compile)
    xla_cpu.decide(lowered)  # the model loads once per process
    (decision, _), decide_s = timed(xla_cpu.decide, lowered)
    compiled, hlo_opt_total = timed(lambda: hj.compile(p.fn, *p.args))
    tuned, tuned_total = timed(lambda: hj.compile(p.fn, *p.args, measure="all"))
    # The oracle: every module-wide candidate, the model's per-op choice
    # and every eligible dot as a oneDNN matmul, measured.
    space = xla_cpu.measuring._measured_space(decision, xla_cpu.decision._model_pick(decision, []), "all", lowered)
    oracle = xla_cpu.measure(lowered, p.args, candidates=space, budget_s=oracle_budget, seed=seed)
    ratio = np.where(oracle["ok"], oracle["ratio"], np.inf)
    best = int(np.argmin(ratio))
    names = oracle["candidates"]
    chosen = compiled.choice
    jitted = jax.jit(p.fn)
    runners = {"jax.jit": jitted, "hlo-opt": compiled, "measured": tuned,
               "oracle": xla_cpu.measuring._compile(lowered, space[best][1], space[best][2]),
               "control": lowered.compile()}
    args = jax.device_put(p.args)
    want = jitted(*args)
    same = xla_cpu.measuring._same(compiled(*args), want)
    keys = list(runners)
    samples, run = interleaved([functools.partial(runners[k], *args) for k in keys], min_rounds=rounds,
                               max_rounds=rounds, seed=seed)
    times = dict(zip(keys, samples))
    med = {k: float(np.median(v)) * 1e3 for k, v in times.items()}
    paired = {k: paired_ratio(times[k], times["jax.jit"]) for k in runners}
    mine = xla_cpu.measuring._hlo_hash(compiled._exe.as_text())
    same_as_oracle = mine == xla_cpu.measuring._hlo_hash(runners["oracle"].as_text())
    # jax caches the executable of a lowering: the control, and hlo-opt's
    # default, are jax.jit's own executable, whose true ratio is 1.
    same_as_default = mine == xla_cpu.measuring._hlo_hash(runners["control"].as_text())
    return dict(program=p.name, family=p.family, dtype=p.dtype, batch=p.batch, jaxlib=jaxlib.__version__,
                chosen=chosen, onednn_ops=len(compiled.onednn), measured_choice=tuned.choice, measured_compile_s=tuned_total, oracle=names[best], oracle_ratio=float(ratio[best]),
                model_pred=[(q["candidate"], round(q["change_pct"], 1)) for q in decision["predictions"]],
                ms=med, ratio_to_jit=paired, same_results=bool(same), rounds=rounds, repeat=run["repeat"],
                same_executable_as_oracle=bool(same_as_oracle), same_executable_as_default=bool(same_as_default),
                xla_compile_s=xla_compile, decide_s=decide_s, hlo_opt_compile_s=hlo_opt_total,
                candidate_ratios={n: (None if not math.isfinite(r) else round(float(r), 4)) for n, r in zip(names, ratio)})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=61)
    ap.add_argument("--oracle-budget", type=float, default=3.0, help="seconds of timing per program for the oracle")
    ap.add_argument("--only", help="programs whose name contains this")
    ap.add_argument("--out", help="append one JSON line per program here")
    a = ap.parse_args(argv)
    rows = []
    for p in xla_cpu_heldout.programs(a.only):
        r = bench(p, a.rounds, a.oracle_budget)
        rows.append(r)
        print(json.dumps(r), flush=True)
        if a.out:
            with open(a.out, "a") as f:
                f.write(json.dumps(r) + "\n")
    print(f"\njaxlib {jaxlib.__version__}, {xla_cpu.fingerprint()['cpu']}, {a.rounds} interleaved rounds, medians\n")
    print("| program | dtype | batch | jax.jit ms | hlo-opt ms | measure=all ms | oracle ms | control | hlo-opt choice | measured choice | oracle choice | results |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        q = r["ratio_to_jit"]
        print(f"| {r['family']} | {r['dtype']} | {r['batch']} | {r['ms']['jax.jit']:.2f} | {r['ms']['hlo-opt']:.2f} "
              f"(x{1 / q['hlo-opt']:.3f}) | {r['ms']['measured']:.2f} (x{1 / q['measured']:.3f}) | {r['ms']['oracle']:.2f} (x{1 / q['oracle']:.3f}) | x{1 / q['control']:.3f} | "
              f"{r['chosen']} | {r['measured_choice']} | {r['oracle']} | {'equal' if r['same_results'] else 'DIFFER'} |")
    sp = np.asarray([1 / r["ratio_to_jit"]["hlo-opt"] for r in rows])
    orc = np.asarray([1 / r["ratio_to_jit"]["oracle"] for r in rows])
    msd = np.asarray([1 / r["ratio_to_jit"]["measured"] for r in rows])
    ctl = np.asarray([1 / r["ratio_to_jit"]["control"] for r in rows])
    dec = np.asarray([r["decide_s"] / r["xla_compile_s"] for r in rows])
    comp = np.asarray([r["hlo_opt_compile_s"] / r["xla_compile_s"] for r in rows])
    below = ", ".join(f"{r['program']} x{v:.3f}" + (" (jax.jit's optimized module)" if r["same_executable_as_default"] else "")
                      for r, v in zip(rows, sp) if v < 0.98) or "none"
    print(f"\nhlo-opt speed-up over jax.jit: geomean {math.exp(np.log(sp).mean()):.3f}x, worst {sp.min():.3f}x; "
          f"measure=all geomean {math.exp(np.log(msd).mean()):.3f}x (worst {msd.min():.3f}x, within "
          f"{100 * (np.max(orc / msd) - 1):.1f}% of the oracle at worst); "
          f"oracle geomean {math.exp(np.log(orc).mean()):.3f}x; control geomean {math.exp(np.log(ctl).mean()):.3f}x "
          f"(range {ctl.min():.3f}-{ctl.max():.3f}); hlo-opt within {100 * (np.max(orc / sp) - 1):.1f}% of the oracle "
          f"at worst; decision cost {100 * np.median(dec):.2f}% of XLA's compile time (median, max {100 * dec.max():.2f}%); "
          f"results equal on {sum(r['same_results'] for r in rows)}/{len(rows)}; hlo-opt within 5% of the oracle "
          f"on {int(np.sum(orc / sp <= 1.05))}/{len(rows)} (the oracle's own executable on "
          f"{sum(r['same_executable_as_oracle'] for r in rows)}), never more than 2% slower than jax.jit on "
          f"{int(np.sum(sp >= 0.98))}/{len(rows)} (below it: {below}); hj.compile's time (lowering, decision, verify) "
          f"{np.median(comp):.1f}x XLA's compile time (median, max {comp.max():.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
