"""hlo-opt from Python: parse, verify and print XLA HLO modules, run the
layout and tile passes, featurize modules the TpuGraphs way and score them
with the learned cost models.

The work is done by the Rust crates of hlo-opt (the extension module
``hlo_opt._native``); this file only converts numpy arrays and names.
See docs/python.md.
"""

from __future__ import annotations

import json as _json
import os as _os
import sys as _sys
import sysconfig as _sysconfig
from pathlib import Path as _Path
from typing import Any, Mapping, Sequence

import numpy as _np

from . import _native
from ._native import (
    BackendError,
    CostModelError,
    HloError,
    Module,
    PassError,
    PassResult,
    list_passes,
    parse,
    parse_stablehlo,
    read,
)
from . import metrics

__all__ = [
    "BackendError",
    "CostModel",
    "CostModelError",
    "HloError",
    "Module",
    "collect",
    "PassError",
    "PassResult",
    "featurize",
    "list_passes",
    "load_npz",
    "meta_edges",
    "metrics",
    "parse",
    "parse_stablehlo",
    "prune_khop",
    "read",
    "save_npz",
]

# The dtypes of the published TpuGraphs npz format (costmodel::npz).
NPZ_DTYPES: dict[str, Any] = {
    "node_feat": _np.float32,
    "node_opcode": _np.uint8,
    "edge_index": _np.int64,
    "node_config_feat": _np.float32,
    "node_config_ids": _np.int64,
    "node_splits": _np.int64,
    "config_feat": _np.float32,
    "config_runtime": _np.int64,
    "config_runtime_normalizers": _np.int64,
}


def _published(arrays: Mapping[str, Any]) -> dict[str, _np.ndarray]:
    """The known keys of ``arrays`` as C-contiguous arrays of the published dtypes."""
    out = {}
    for key, value in arrays.items():
        dtype = NPZ_DTYPES.get(key)
        if dtype is not None:
            out[key] = _np.ascontiguousarray(value, dtype=dtype)
    return out


def featurize(module: Module, task: str = "layout") -> dict[str, _np.ndarray]:
    return _native.featurize(module, task)


def load_npz(path: "str | _os.PathLike[str]", *, configs: bool = True) -> dict[str, _np.ndarray]:
    return _native.load_npz(_os.fspath(path), configs=configs)


def prune_khop(arrays: Mapping[str, Any], k: int) -> dict[str, _np.ndarray]:
    return _native.prune_khop(_published(arrays), k)


def meta_edges(arrays: Mapping[str, Any], hops: int = 3) -> _np.ndarray:
    return _native.meta_edges(_published(arrays), hops)


def save_npz(path: "str | _os.PathLike[str]", arrays: Mapping[str, Any], *, compressed: bool = True) -> None:
    _native.save_npz(_os.fspath(path), _published(arrays), compressed=compressed)


class CostModel:
    def __init__(self, spec: "str | _os.PathLike[str]" = "layout", *, task: str | None = None, threads: int = 0):
        self._model = _native.CostModel(_os.fspath(spec), task=task, threads=threads)

    @property
    def task(self) -> str:
        return self._model.task

    @property
    def device(self) -> str | None:
        return self._model.device

    def __repr__(self) -> str:
        return repr(self._model)

    def score(self, features: Mapping[str, Any], configs: Any = None, *, batch: int = 512) -> _np.ndarray:
        feats = _published(features)
        if configs is not None and not isinstance(configs, Mapping):
            key = "node_config_feat" if self.task == "layout" else "config_feat"
            configs = {key: configs}
        cfg = _published(configs) if configs is not None else None
        return _native.CostModel.score(self._model, feats, cfg, batch=batch)


def collect(
    modules: "str | _os.PathLike[str] | Sequence[str | _os.PathLike[str]]",
    output: "str | _os.PathLike[str]",
    *,
    device: str = "xla-cpu",
    configs: int = 32,
    random_fraction: float = 0.5,
    seed: int = 0,
    budget: "float | str | None" = None,
    chunk: int = 8,
    measure_budget: float = 2.0,
    estimator: str = "median",
    ray_address: str | None = None,
    allow_mixed_devices: bool = False,
    max_retries: int = 3,
) -> dict[str, Any]:
    if isinstance(modules, (str, bytes, _os.PathLike)):
        modules = [modules]
    paths = [_os.fspath(p) for p in modules]
    for p in paths:  # a bad module raises HloError with its position, as read() does
        read(p)
    if ray_address is not None:
        from . import fleet

        if isinstance(budget, str):
            budget = fleet.parse_budget(budget)
        out = fleet.collect(
            paths,
            output,
            ray_address=ray_address,
            device=device,
            configs=configs,
            random_fraction=random_fraction,
            seed=seed,
            budget=budget,
            chunk=chunk,
            measure_budget=measure_budget,
            estimator=estimator,
            allow_mixed_devices=allow_mixed_devices,
            max_retries=max_retries,
        )
        if out["failures"]:
            raise BackendError("\n".join(out["failures"]))
        return out
    if allow_mixed_devices:
        raise ValueError("allow_mixed_devices needs ray_address (one process measures on one device)")
    out = _native.collect(
        paths,
        _os.fspath(output),
        device=device,
        configs=configs,
        random_fraction=random_fraction,
        seed=seed,
        budget=budget,
        chunk=chunk,
        measure_budget=measure_budget,
        estimator=estimator,
    )
    return _json.loads(out)


def _decisions(self: PassResult) -> list[dict[str, Any]]:
    return _json.loads(self.decisions_json)


PassResult.decisions = property(_decisions)  # type: ignore[attr-defined]


def _find_worker() -> None:
    """Points the PJRT backend at this package's worker script (installed
    with the package as ``hlo-opt-pjrt-worker``) unless the environment
    names one: the interpreter's own folder is not where it is found."""
    if "HLO_OPT_PJRT_WORKER" in _os.environ:
        return
    for folder in (_sysconfig.get_path("scripts"), _os.path.dirname(_sys.executable)):
        candidate = _Path(folder or "") / "hlo-opt-pjrt-worker"
        if candidate.is_file():
            _os.environ["HLO_OPT_PJRT_WORKER"] = str(candidate)
            return


_find_worker()
