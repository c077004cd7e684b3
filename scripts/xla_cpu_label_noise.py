"""Benchmark: how far two collections of the same XLA:CPU programs agree,
and so how low a leave-one-program-out figure can go when it is judged by
one collection (docs/benchmarks.md, session 8).

Both folders hold NAME.npz files of `python -m hlo_opt.xla_cpu collect`
(or the archives under testdata/xla_cpu, extracted), measured on the same
device and jaxlib at different times. For the programs in both it reports:
- the spread of the control (a second executable of the default, whose
  true ratio is 1) in each collection;
- how far the two measurements of the same candidate differ;
- the "perfect model" floor: choose each program's best candidate by one
  collection, and score that choice by the other, as the CV scores a
  model (mean top-1 slowdown against that collection's best). A model
  that predicted one collection exactly would score this against the
  other; a target below it asks for the noise to be predicted.

    tar xzf testdata/xla_cpu/jaxlib-0.10.2.tar.gz -C /tmp/a
    .venv/bin/python -m hlo_opt.xla_cpu collect /tmp/b/jaxlib-0.10.2   # a copy of /tmp/a: measures again
    .venv/bin/python scripts/xla_cpu_label_noise.py /tmp/a/jaxlib-0.10.2 /tmp/b/jaxlib-0.10.2
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def read(path: Path) -> tuple[list[str], np.ndarray, dict]:
    """Candidates, ratios (inf where not valid; the default's is 1) and meta."""
    with np.load(path) as z:
        names = [str(n) for n in z["candidates"]]
        ratio = np.where(z["ok"].astype(bool), z["ratio"].astype(float), np.inf)
        meta = json.loads(str(z["meta"]))
    ratio[0] = 1.0
    return names, ratio, meta


def chosen_by(judge: np.ndarray, by: np.ndarray) -> float:
    """Slowdown, measured by ``judge``, of the best candidate of ``by``."""
    pick = int(np.argmin(by))
    return float(judge[pick] / judge.min()) if np.isfinite(judge[pick]) else float("nan")


def compare(a_dir: Path, b_dir: Path) -> dict:
    diffs, ctrl_a, ctrl_b, a_by_b, b_by_a, differ, programs = [], [], [], [], [], 0, 0
    for fa in sorted(a_dir.glob("*.npz")):
        fb = b_dir / fa.name
        if not fb.exists():
            continue
        na, ra, ma = read(fa)
        nb, rb, mb = read(fb)
        if na != nb:
            raise SystemExit(f"{fa.name}: the two collections have different candidates")
        if ma.get("device") != mb.get("device"):
            raise SystemExit(f"{fa.name}: measured on {ma.get('device')} and {mb.get('device')}: not comparable")
        programs += 1
        both = np.isfinite(ra) & np.isfinite(rb)
        both[0] = False
        diffs.extend(np.abs(np.log(ra[both]) - np.log(rb[both])))
        ctrl_a.append(abs(np.log(ma["control_ratio"])))
        ctrl_b.append(abs(np.log(mb["control_ratio"])))
        a_by_b.append(chosen_by(ra, rb))
        b_by_a.append(chosen_by(rb, ra))
        differ += int(np.argmin(ra) != np.argmin(rb))
    if not programs:
        raise SystemExit(f"no NAME.npz in both {a_dir} and {b_dir}")
    d = np.asarray(diffs)

    def spread(x):
        x = np.asarray(x)
        return dict(mean=float(x.mean()), p90=float(np.quantile(x, 0.9)))

    return dict(programs=programs, control_a=spread(ctrl_a), control_b=spread(ctrl_b),
                same_candidate=dict(median=float(np.median(d)), mean=float(d.mean()),
                                    p90=float(np.quantile(d, 0.9)), max=float(d.max())),
                best_differs=differ,
                floor_judged_by_a=float(np.nanmean(a_by_b) - 1), floor_judged_by_b=float(np.nanmean(b_by_a) - 1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", type=Path, help="a folder of NAME.npz")
    ap.add_argument("b", type=Path, help="another collection of the same programs")
    args = ap.parse_args(argv)
    r = compare(args.a, args.b)
    pct = lambda x: f"{100 * x:.1f}%"
    print(f"{r['programs']} programs in both")
    print(f"control |log ratio|: A mean {pct(r['control_a']['mean'])} (p90 {pct(r['control_a']['p90'])}), "
          f"B mean {pct(r['control_b']['mean'])} (p90 {pct(r['control_b']['p90'])})")
    s = r["same_candidate"]
    print(f"the same candidate, A against B, |log ratio|: median {pct(s['median'])}, mean {pct(s['mean'])}, "
          f"p90 {pct(s['p90'])}, max {pct(s['max'])}")
    print(f"the best candidate differs on {r['best_differs']}/{r['programs']} programs")
    print(f"perfect-model floor: B's best judged by A {pct(r['floor_judged_by_a'])}, "
          f"A's best judged by B {pct(r['floor_judged_by_b'])} (mean top-1 slowdown)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
