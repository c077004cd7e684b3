"""The ranking metrics of the TpuGraphs paper and the Kaggle competition
(``costmodel::metrics`` in Rust): predictions and runtimes of the same
configurations, lower = faster for both. ``None`` where a metric is
undefined (as scipy gives NaN)."""

from __future__ import annotations

from typing import Any

import numpy as _np

from . import _native


def _pair(pred: Any, runtime: Any) -> tuple[_np.ndarray, _np.ndarray]:
    p = _np.ascontiguousarray(pred, dtype=_np.float64).ravel()
    r = _np.ascontiguousarray(runtime, dtype=_np.float64).ravel()
    return p, r


def kendall_tau(pred: Any, runtime: Any) -> float | None:
    return _native.kendall_tau(*_pair(pred, runtime))


def ordered_pair_accuracy(pred: Any, runtime: Any) -> float | None:
    return _native.ordered_pair_accuracy(*_pair(pred, runtime))


def top_k_slowdown(pred: Any, runtime: Any, k: int) -> float | None:
    return _native.top_k_slowdown(*_pair(pred, runtime), k)


def kaggle_tile_score(pred: Any, runtime: Any) -> float | None:
    return _native.kaggle_tile_score(*_pair(pred, runtime))


def ranking_metrics(pred: Any, runtime: Any) -> dict[str, Any]:
    return _native.ranking_metrics(*_pair(pred, runtime))


__all__ = [
    "kaggle_tile_score",
    "kendall_tau",
    "ordered_pair_accuracy",
    "ranking_metrics",
    "top_k_slowdown",
]
