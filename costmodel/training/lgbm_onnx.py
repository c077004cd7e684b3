"""A LightGBM model as ONNX bytes, the same bytes at every run: the
converter names the graph at random and lists its opsets in set order
(which varies with PYTHONHASHSEED), so both are fixed here. Used by the
exporters of xla_cpu_model.py, xla_cpu_ops_model.py and xla_gpu_ranker.py,
whose models CI retrains and compares byte for byte."""

from __future__ import annotations


def lightgbm_onnx(booster, dim: int, doc: str, name: str) -> bytes:
    """``booster`` (a fitted LightGBM booster over ``dim`` float features)
    as a serialized ONNX model with ``doc`` as its doc string and graph
    ``name``."""
    import onnxmltools
    from onnxmltools.convert.common.data_types import FloatTensorType

    onx = onnxmltools.convert_lightgbm(booster, initial_types=[("features", FloatTensorType([None, dim]))],
                                       target_opset=15)
    onx.doc_string = doc
    onx.graph.name = name
    opsets = sorted(onx.opset_import, key=lambda o: o.domain)
    del onx.opset_import[:]
    onx.opset_import.extend(opsets)
    return onx.SerializeToString()
