"""`xla_gpu_ranker.py`'s scoring rules, on a hand-made candidate file (no
lightgbm needed): a choice XLA never measured counts at the fusion's slowest
measured time and is counted; slowdowns are over the fusion's fastest
measured Triton time (which may lie outside the generated candidates);
top-5 is the best of the first five; the training label of an unmeasured
candidate is beyond the slowest measured one; the nested cross-validation
never trains on, nor chooses its variant with, the program it scores. Run by
`costmodel/tests/training_scripts.rs`; exits non-zero on a failure.

    .venv/bin/python costmodel/training/test_xla_gpu_ranker.py
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import xla_gpu_ranker as R  # noqa: E402


def fusion(times, best, worst):
    return {"program": "p", "fusion": "f", "best_triton_ns": best, "worst_triton_ns": worst,
            "candidates": [{"config": [0] * 10, "features": [0.0], "nanos": t} for t in times]}


def main():
    a = fusion([100, 200, None], best=100, worst=400)
    b = fusion([300, 150], best=120, worst=300)
    r = R.evaluate([a, b], [[2, 0, 1], [1, 0]])
    # a: unmeasured -> 400/100; b: 150/120.
    assert r["unmeasured"] == 1, r
    assert math.isclose(r["mean"], (4.0 + 1.25) / 2 - 1), r
    assert math.isclose(r["max"], 3.0), r
    assert math.isclose(r["geomean"], math.sqrt(4.0 * 1.25) - 1), r
    # top-5: a's best of all three is 100 (1.0); b's is 150 (1.25).
    assert math.isclose(r["top5"], (1.0 + 1.25) / 2 - 1), r
    y = R.log_slowdowns(a)
    assert y[0] == 0.0 and math.isclose(y[1], math.log(2)), y
    assert y[2] > math.log(4.0), y
    # Nested: every fit and every inner choice leaves the scored program out.
    fusions = []
    for p in ("p0", "p1", "p2"):
        for i in range(2):
            f = fusion([100, 120 + 10 * i], best=100, worst=200)
            f["program"], f["fusion"] = p, f"{p}.f{i}"
            fusions.append(f)
    seen = []

    def spy_fit(train, params, seed=0):
        seen.append(sorted({f["program"] for f in train}))
        return lambda xs: -np.arange(len(xs), dtype=float)  # the first candidate

    real_fit, R.fit = R.fit, spy_fit
    try:
        r, picks = R.nested(fusions, ["lambdarank-300x15", "regression-300x15"])
    finally:
        R.fit = real_fit
    # 3 outer folds x (2 variants x 2 inner folds + 1 final fit).
    assert len(seen) == 3 * (2 * 2 + 1), seen
    for outer, p in enumerate(("p0", "p1", "p2")):
        for programs in seen[outer * 5:(outer + 1) * 5]:
            assert p not in programs, (p, programs)
    assert r["fusions"] == 6 and math.isclose(r["mean"], 0.0), r
    assert sum(picks.values()) == 3, picks
    print("ok: unmeasured choices count at the slowest time; slowdowns over the best measured; "
          "nested folds never see the scored program")


if __name__ == "__main__":
    main()
