"""`xla_gpu_ranker.py`'s scoring rules, on a hand-made candidate file (no
lightgbm needed): a choice XLA never measured counts at the fusion's slowest
measured time and is counted; slowdowns are over the fusion's fastest
measured Triton time (which may lie outside the generated candidates);
top-5 is the best of the first five; the training label of an unmeasured
candidate is beyond the slowest measured one. Run by
`costmodel/tests/training_scripts.rs`; exits non-zero on a failure.

    .venv/bin/python costmodel/training/test_xla_gpu_ranker.py
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

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
    print("ok: unmeasured choices count at the slowest time; slowdowns over the best measured")


if __name__ == "__main__":
    main()
