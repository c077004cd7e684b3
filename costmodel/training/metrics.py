"""Ranking metrics of a cost model on one graph (Python side of `hlo-cost eval`).

- `kendall`: Kendall's tau-b between predicted scores and measured runtimes
  (the TpuGraphs layout metric; 1 = same order).
- `slowdown@K`: best measured runtime among the K configurations the model
  ranks fastest, divided by the best runtime overall, minus 1 (0 = the model's
  top K contain the fastest configuration; the TpuGraphs tile metric is
  1 - slowdown@5 averaged over kernels).
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
