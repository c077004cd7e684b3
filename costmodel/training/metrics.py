"""Ranking metrics of a cost model on one graph, as training reports them.

The metrics are `hlo-cost eval`'s (`costmodel::metrics`, through
`hlo_opt.metrics`); this module rounds and names them for training's logs
and model.json.

- `kendall`: Kendall's tau-b between predicted scores and measured runtimes
  (the TpuGraphs layout metric; 1 = same order).
- `slowdown@K`: best measured runtime among the K configurations the model
  ranks fastest, divided by the best runtime overall, minus 1 (0 = the model's
  top K contain the fastest configuration; the TpuGraphs tile metric is
  1 - slowdown@5 averaged over kernels).
- `log_runtime_resolution`: how far a calibrated model's predicted runtime
  ratios can be trusted (model.json `log_runtime_resolution`).
"""

from __future__ import annotations

import hlo_opt
import numpy as np

TOP_K = (1, 5, 10)


def ranking_metrics(scores: np.ndarray, runtime: np.ndarray) -> dict:
    """Kendall's tau-b (None where undefined: fewer than two configurations,
    or constant scores or runtimes) and slowdown@K (ties in the scores broken
    by index; NaN where undefined: a best runtime of 0) of one graph."""
    scores = np.ascontiguousarray(scores, np.float64)
    runtime = np.ascontiguousarray(runtime, np.float64)
    tau = hlo_opt.metrics.kendall_tau(scores, runtime)
    out = {"configs": int(len(scores)), "kendall": None if tau is None else round(tau, 4)}
    for k in TOP_K:
        s = hlo_opt.metrics.top_k_slowdown(scores, runtime, k)
        out[f"slowdown@{k}"] = float("nan") if s is None else round(s, 5)
    return out


def format_metrics(per_graph: dict) -> str:
    parts = []
    for name, m in per_graph.items():
        tau = "n/a" if m["kendall"] is None else f"{m['kendall']:.3f}"
        parts.append(f"{name}: tau={tau} slow@1={m['slowdown@1']:.4f} slow@5={m['slowdown@5']:.4f} (C={m['configs']})")
    return "; ".join(parts)


def log_runtime_resolution(scored, k: float) -> float:
    """The standard error of a predicted runtime ratio between two configurations
    of one graph, in ln units. `scored`: per graph, (scores, ln runtimes). With
    the calibration `k` (`log_runtime_per_score`), a configuration's
    predicted ln runtime relative to its graph's mean is k * (s - mean s); its
    error e = (y - mean y) - k * (s - mean s) has the within-graph variance
    pooled over the graphs (each graph weighing the same) sigma^2, and the
    predicted ln ratio of two configurations, the difference of two such
    errors, has the standard error sqrt(2) * sigma. The layout pass applies
    no change predicted to gain less than 1 - exp(-this) (model.json
    `log_runtime_resolution`). Measured on the training graphs: a lower bound
    of the error on unseen graphs."""
    var = [np.var((y - y.mean()) - k * (s - s.mean())) for s, y in scored]
    return float(np.sqrt(2.0 * np.mean(var)))
