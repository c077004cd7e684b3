"""Generates metrics_fixtures.json: ranking-metric cases with expected values
computed independently of the Rust code (Kendall tau-b by scipy, the other
metrics from their definitions, pair by pair). Run once; the Rust test
(costmodel/tests/metrics_fixtures.rs) reads the JSON without Python.

    .venv/bin/python testdata/costmodel/gen_metrics_fixtures.py
"""
import json
import math
import os

import numpy as np
import scipy
import scipy.stats


def kendall(pred, runtime):
    t = scipy.stats.kendalltau(pred, runtime).statistic  # variant 'b', ties handled
    return None if math.isnan(t) else float(t)


def opa(pred, runtime):
    """Ordered pair accuracy (TpuGraphs paper): pairs with y_i > y_j whose
    prediction is also strictly greater, over all pairs with y_i > y_j."""
    num = den = 0
    n = len(pred)
    for i in range(n):
        for j in range(n):
            if runtime[i] > runtime[j]:
                den += 1
                if pred[i] > pred[j]:
                    num += 1
    return None if den == 0 else num / den


def slowdown(pred, runtime, k):
    """min runtime of the K best-predicted / min runtime - 1 (prediction ties by index)."""
    if len(pred) == 0 or min(runtime) <= 0:
        return None
    order = np.argsort(np.asarray(pred, dtype=np.float64), kind="stable")
    return float(min(runtime[i] for i in order[:k]) / min(runtime) - 1.0)


def case(name, pred, runtime):
    pred = [float(v) for v in pred]
    runtime = [float(v) for v in runtime]
    s5 = slowdown(pred, runtime, 5)
    return {
        "name": name,
        "pred": pred,
        "runtime": runtime,
        "kendall_tau": kendall(pred, runtime),
        "ordered_pair_accuracy": opa(pred, runtime),
        "top1_slowdown": slowdown(pred, runtime, 1),
        "top5_slowdown": s5,
        "top10_slowdown": slowdown(pred, runtime, 10),
        "kaggle_tile_score": None if s5 is None else 2.0 - (s5 + 1.0),
    }


def main():
    rng = np.random.default_rng(20231121)
    cases = [
        case("perfect", [1, 2, 3, 4, 5, 6], [10, 20, 30, 40, 50, 60]),
        case("reversed", [6, 5, 4, 3, 2, 1], [10, 20, 30, 40, 50, 60]),
        case("ties_in_prediction", [1, 1, 2, 2, 3, 3, 3], [5, 3, 8, 7, 9, 9, 12]),
        case("ties_in_runtime", [0.5, 0.1, 0.9, 0.3, 0.7, 0.2], [100, 100, 300, 200, 300, 100]),
        case("ties_in_both", [1, 1, 1, 2, 2, 3, 3, 4], [7, 7, 9, 7, 8, 8, 8, 9]),
        case("constant_prediction", [3, 3, 3, 3], [4, 1, 2, 3]),
        case("constant_runtime", [1, 2, 3], [5, 5, 5]),
        case("two_configs", [0.2, 0.1], [900, 1000]),
        case("single_config", [1.0], [42]),
        case("negative_scores", [-3.5, -1.25, -2.0, 0.0, 1e-3], [13, 11, 12, 15, 14]),
    ]
    # Larger random cases with many ties (values drawn from small ranges).
    for n, levels in [(50, 7), (300, 20), (1000, 1000)]:
        runtime = rng.integers(1_000, 1_000 + levels * 10, size=n) // 10 * 10
        pred = runtime + rng.normal(0, levels * 3, size=n)
        pred = np.round(pred / 5) * 5  # ties in the prediction too
        cases.append(case(f"random_{n}_levels_{levels}", pred, runtime))
    # Predictions unrelated to the runtimes: non-zero top-K slowdowns.
    for n in [40, 200]:
        runtime = rng.integers(500, 5_000, size=n)
        pred = rng.integers(0, n // 4, size=n)
        cases.append(case(f"unrelated_{n}", pred, runtime))
    # A real runtime vector: openai_v0_rnn_optimized (layout:xla:random train), 20 configs.
    here = os.path.dirname(os.path.abspath(__file__))
    real = os.path.join(here, "npz", "layout_xla_random_openai_v0_rnn_optimized.npz")
    if os.path.exists(real):
        rt = np.load(real)["config_runtime"].astype(np.float64)
        pred = np.log(rt) + rng.normal(0, 0.05, size=len(rt))
        cases.append(case("real_openai_v0_rnn_runtimes", pred, rt))
    # The competition's layout score: mean Kendall tau over graphs.
    graphs = [c for c in cases if c["name"].startswith(("ties_", "random_", "perfect"))]
    taus = [c["kendall_tau"] for c in graphs if c["kendall_tau"] is not None]
    layout = {"cases": [c["name"] for c in graphs], "kaggle_layout_score": float(np.mean(taus))}
    out = {
        "generator": "testdata/costmodel/gen_metrics_fixtures.py",
        "scipy_version": scipy.__version__,
        "numpy_version": np.__version__,
        "cases": cases,
        "layout_score": layout,
    }
    with open(os.path.join(here, "metrics_fixtures.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
