"""The XLA:CPU program model's nearest-programs variant (``knn-K`` in
xla_cpu_model.py) as ONNX bytes, for the pass's row runner
(``costmodel::rows::RowModel``: one input ``features`` [n, width], one
value per row).

Each row is a program's features followed by a candidate's encoding
(``xla_cpu_model.encoding``). The graph standardizes the features with the
training programs' mean and scale, finds the ``k`` training programs
nearest in squared Euclidean distance (``TopK``: ties to the earlier
program, as ``numpy.argsort(kind="stable")``), averages their measured log
ratios of every candidate, and returns the one of the row's candidate,
whose index the encoding gives: 0 for the default, else 1 + the YNNPACK
kinds' bit mask. The same bytes at every run (fixed names, opset and
constant order)."""

from __future__ import annotations

import numpy as np


def knn_onnx(mean, scale, points, labels, k: int, kind_bits, width: int, doc: str, name: str) -> bytes:
    """The model as serialized ONNX: ``mean`` and ``scale`` ([f]), the
    standardized training ``points`` ([p, f]) and their ``labels`` ([p, c]
    log ratios, the default's 0), over rows of ``width`` = f + 1 +
    len(kind_bits) floats (the encoding: is-default, then each YNNPACK kind,
    whose bit in the candidate's index ``kind_bits`` gives)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    f = len(mean)
    enc = 1 + len(kind_bits)
    if width != f + enc or points.shape[1] != f or not 1 <= k <= len(points):
        raise ValueError(f"knn_onnx: width {width}, {f} features, {len(points)} points, k {k}")

    def const(nm, v, dtype=np.float32):
        return numpy_helper.from_array(np.asarray(v, dtype=dtype), nm)

    inits = [
        const("mean", mean), const("scale", scale), const("points", points), const("labels", labels),
        const("feat_start", [0], np.int64), const("feat_end", [f], np.int64),
        const("enc_start", [f], np.int64), const("enc_end", [f + enc], np.int64),
        const("def_end", [f + 1], np.int64), const("axis1", [1], np.int64), const("axis2", [2], np.int64),
        const("k", [k], np.int64), const("one", [1.0]), const("bits", [[0.0]] + [[b] for b in kind_bits]),
        const("flat", [-1], np.int64),
    ]
    N = helper.make_node
    nodes = [
        N("Slice", ["features", "feat_start", "feat_end", "axis1"], ["x"]),
        N("Sub", ["x", "mean"], ["centred"]),
        N("Div", ["centred", "scale"], ["z"]),
        N("Unsqueeze", ["z", "axis1"], ["z3"]),
        N("Sub", ["z3", "points"], ["diff"]),
        N("Mul", ["diff", "diff"], ["sq"]),
        N("ReduceSum", ["sq", "axis2"], ["dist"], keepdims=0),
        N("TopK", ["dist", "k"], ["near_dist", "near"], axis=1, largest=0, sorted=1),
        N("Gather", ["labels", "near"], ["near_labels"], axis=0),
        N("ReduceMean", ["near_labels"], ["mean_labels"], axes=[1], keepdims=0),
        N("Slice", ["features", "enc_start", "enc_end", "axis1"], ["enc"]),
        N("MatMul", ["enc", "bits"], ["mask"]),
        N("Add", ["mask", "one"], ["ynn_index"]),
        N("Slice", ["features", "enc_start", "def_end", "axis1"], ["is_default"]),
        N("Sub", ["one", "is_default"], ["not_default"]),
        N("Mul", ["not_default", "ynn_index"], ["index_f"]),
        N("Cast", ["index_f"], ["index"], to=TensorProto.INT64),
        N("GatherElements", ["mean_labels", "index"], ["picked"], axis=1),
        N("Reshape", ["picked", "flat"], ["prediction"]),
    ]
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("features", TensorProto.FLOAT, [None, width])],
        [helper.make_tensor_value_info("prediction", TensorProto.FLOAT, [None])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], producer_name="hlo-opt",
                              doc_string=doc)
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()
