"""Ranking metrics of a cost model on one graph (Python side of `hlo-cost eval`).

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

import numpy as np
from scipy.stats import kendalltau

TOP_K = (1, 5, 10)


def ranking_metrics(scores: np.ndarray, runtime: np.ndarray) -> dict:
    scores = np.asarray(scores, np.float64)
    runtime = np.asarray(runtime, np.float64)
    tau = kendalltau(scores, runtime).statistic
    order = np.lexsort((np.arange(len(scores)), scores))  # ties broken by index
    best = runtime.min()
    out = {"configs": int(len(scores)), "kendall": None if np.isnan(tau) else round(float(tau), 4)}
    for k in TOP_K:
        out[f"slowdown@{k}"] = round(float(runtime[order[:k]].min() / best - 1.0), 5)
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
