"""Benchmark: the XLA:CPU program model's learning curve. Leave-one-program-out
mean top-1 slowdown (margin 0, issue 37's bar) when each program's model is
trained on a random fraction of the other programs: if the figure still
falls from a half to all of them, more programs will help (docs/benchmarks.md,
session 9).

    .venv/bin/python scripts/xla_cpu_learning_curve.py testdata/xla_cpu/jaxlib-0.10.2.tar.gz \\
        [--fractions 0.5 0.75 1] [--draws 2] [--variant knn-3] [--first N]

DATA as costmodel/training/xla_cpu_model.py takes it (folders, or .tar.gz
archives of one; features from target/release/hlo-cost, or --features).
``--first N`` keeps programs 000 to N-1 (the corpus of a smaller
``collect --count``). Each fraction and draw fits one model per program:
about a minute and a half per 336 programs on a 2-core machine with
LightGBM (gbm-*), seconds with nearest programs (knn-*).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "costmodel" / "training"))
import xla_cpu_model as M  # noqa: E402


def lopo_top1(programs, variant: str, fraction: float, seed: int) -> float:
    """Each program predicted by a model fitted on ``fraction`` of the others
    (drawn with ``seed``); the mean top-1 slowdown against the measured best
    at margin 0, errors from the same predictions."""
    rng = np.random.default_rng(seed)
    preds = {}
    for p in programs:
        others = [q for q in programs if q.get("module") != p.get("module")]
        keep = rng.permutation(len(others))[: max(1, int(round(fraction * len(others))))]
        preds[p["name"]] = M.fit([others[i] for i in sorted(keep)], variant).predict(M.predict_rows(p))
    return M.evaluate(programs, preds, M.candidate_errors(programs, preds), 0.0)["mean"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="+", type=Path)
    ap.add_argument("--features", type=Path, help="hlo-cost cpu-features output (else it is run)")
    ap.add_argument("--hlo-cost", type=Path, default=Path("target/release/hlo-cost"))
    ap.add_argument("--variant", choices=sorted(M.VARIANTS), default="knn-3")
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.5, 0.75, 1.0])
    ap.add_argument("--draws", type=int, default=2, help="random draws per fraction below 1")
    ap.add_argument("--first", type=int, help="only programs whose number is below this")
    a = ap.parse_args(argv)
    if not all(0 < f <= 1 for f in a.fractions) or a.draws < 1:
        ap.error("fractions must be in (0, 1] and --draws at least 1")
    with tempfile.TemporaryDirectory(prefix="xla_cpu_curve.") as scratch:
        dirs = M.unpack(a.data, Path(scratch))
        features = a.features or M.featurize(a.hlo_cost, dirs, Path(scratch) / "features.jsonl")
        programs = M.load(dirs, features)
    if a.first is not None:
        programs = [p for p in programs if int(p["name"].split("_", 1)[0]) < a.first]
    print(f"{len(programs)} programs, {a.variant}, leave-one-program-out mean top-1 slowdown at margin 0")
    for f in a.fractions:
        draws = [lopo_top1(programs, a.variant, f, seed) for seed in range(a.draws if f < 1 else 1)]
        print(f"trained on {f:.2f} of the other programs: " + ", ".join(f"{100 * d:.2f}%" for d in draws), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
