"""The ranking metrics of the TpuGraphs paper and the Kaggle competition
(``costmodel::metrics``): predictions and runtimes of the same
configurations, lower = faster for both. ``None`` where undefined."""

from typing import Any

import numpy.typing as npt

def kendall_tau(pred: npt.ArrayLike, runtime: npt.ArrayLike) -> float | None:
    """Kendall's tau-b, exactly as ``scipy.stats.kendalltau`` (None where scipy gives NaN)."""

def ordered_pair_accuracy(pred: npt.ArrayLike, runtime: npt.ArrayLike) -> float | None:
    """The paper's OPA: the share of pairs with different runtimes the prediction orders the same way strictly."""

def top_k_slowdown(pred: npt.ArrayLike, runtime: npt.ArrayLike, k: int) -> float | None:
    """``min runtime of the k best-predicted / min runtime - 1`` (0: the best is among them)."""

def kaggle_tile_score(pred: npt.ArrayLike, runtime: npt.ArrayLike) -> float | None:
    """The competition's per-kernel tile score, ``1 - top_k_slowdown(5)``."""

def ranking_metrics(pred: npt.ArrayLike, runtime: npt.ArrayLike) -> dict[str, Any]:
    """Every metric ``hlo-cost eval`` reports for one graph."""
