"""ONNX export of the models in `model.py` and the `.hlocm` model file format.

The graphs are written node by node with the `onnx.helper` API, mirroring the
JAX forward passes op for op (see MODEL.md for the contract). Choices made for
ONNX Runtime on CPU: neighbour sums use `ScatterND(reduction="add")` (never
`ScatterElements`), degrees are computed once per graph and shared by all
layers, the per-(config, node) tensor of the layout head is produced by one
MatMul + Add + Relu and reduced by a batched MatMul.

Invariants: every parameter becomes an initializer with the same name as in
the parameter dict, so `params_from_onnx` recovers the parameters exactly.
"""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import data as D
import model as M

OPSET = 17
FEATURE_VERSION = 1
FORMAT = "hlo-opt-costmodel"


class _Builder:
    """Accumulates nodes and initializers; fresh names for intermediates."""

    def __init__(self, params: dict):
        self.params = params
        self.nodes = []
        self.inits = {}
        self.count = 0
        self.prefix = ""  # ensemble member being written: its parameters are `m{i}_NAME`


    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def param(self, name: str) -> str:
        if name not in M.SHARED_PARAMS:
            name = self.prefix + name
        if name not in self.inits:
            self.inits[name] = numpy_helper.from_array(np.asarray(self.params[name], np.float32), name)
        return name

    def const(self, value, dtype=np.float32, stem="c") -> str:
        name = self.fresh(stem)
        self.inits[name] = numpy_helper.from_array(np.asarray(value, dtype), name)
        return name

    def op(self, op_type: str, inputs, stem=None, **attrs) -> str:
        out = self.fresh(stem or op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def rename_output(self, value: str, name: str) -> str:
        self.nodes.append(helper.make_node("Identity", [value], [name]))
        return name

    # ---- composite pieces, each mirroring a function of model.py ----

    def signed_log(self, x: str) -> str:
        s = self.op("Sign", [x])
        a = self.op("Add", [self.op("Abs", [x]), self.const(M.LOG_EPS)])
        return self.op("Mul", [s, self.op("Log", [a])])

    def dense(self, x: str, w: str, b: str | None = None, relu=False) -> str:
        y = self.op("MatMul", [x, self.param(w)])
        if b is not None:
            y = self.op("Add", [y, self.param(b)])
        return self.op("Relu", [y]) if relu else y

    def rms_norm(self, h: str) -> str:
        ms = self.op("ReduceMean", [self.op("Mul", [h, h])], axes=[-1], keepdims=1)
        r = self.op("Sqrt", [self.op("Add", [ms, self.const(M.RMS_EPS)])])
        return self.op("Div", [h, r])

    def node_input(self) -> str:
        x = self.signed_log("node_feat")
        x = self.op("Mul", [self.op("Sub", [x, self.param("node_mu")]), self.param("node_inv_sigma")])
        e = self.op("Gather", [self.param("opcode_emb"), "node_opcode"], axis=0)
        cat = self.op("Concat", [x, e], axis=-1)
        return self.dense(cat, "in_w", "in_b", relu=True)

    def message_passing(self, h: str, num_layers: int, rank: int, edges: str = "edge_index", count: str | None = None,
                        layer_stem: str = "l") -> str:
        """`h` is [N, D] (rank 2) or [N, C, D] (rank 3); `edges` [E, 2] rows [consumer,
        producer]; `count` a [1] int64 tensor holding N (default: the shape of
        node_opcode); the layer parameters are `{layer_stem}{layer}_*`."""
        consumer = self.op("Gather", [edges, self.const(0, np.int64)], axis=1)  # [E]
        producer = self.op("Gather", [edges, self.const(1, np.int64)], axis=1)
        cons_idx = self.op("Unsqueeze", [consumer, self.const([1], np.int64)])  # [E, 1]
        prod_idx = self.op("Unsqueeze", [producer, self.const([1], np.int64)])
        n1 = self.op("Concat", [count or self.op("Shape", ["node_opcode"]), self.const([1], np.int64)], axis=0)
        zeros_n1 = self.op("ConstantOfShape", [n1], value=numpy_helper.from_array(np.zeros(1, np.float32)))
        ones_e1 = self.op(
            "ConstantOfShape", [self.op("Shape", [cons_idx])], value=numpy_helper.from_array(np.ones(1, np.float32))
        )
        one = self.const(1.0)
        deg_in = self.op("ScatterND", [zeros_n1, cons_idx, ones_e1], reduction="add")
        deg_out = self.op("ScatterND", [zeros_n1, prod_idx, ones_e1], reduction="add")
        inv_in = self.op("Reciprocal", [self.op("Max", [deg_in, one])])  # [N, 1]
        inv_out = self.op("Reciprocal", [self.op("Max", [deg_out, one])])
        if rank == 3:
            inv_in = self.op("Unsqueeze", [inv_in, self.const([2], np.int64)])  # [N, 1, 1]
            inv_out = self.op("Unsqueeze", [inv_out, self.const([2], np.int64)])
        for layer in range(num_layers):
            zeros = self.op("ConstantOfShape", [self.op("Shape", [h])], value=numpy_helper.from_array(np.zeros(1, np.float32)))
            from_prod = self.op("Gather", [h, producer], axis=0)
            from_cons = self.op("Gather", [h, consumer], axis=0)
            m_in = self.op("Mul", [self.op("ScatterND", [zeros, cons_idx, from_prod], reduction="add"), inv_in])
            m_out = self.op("Mul", [self.op("ScatterND", [zeros, prod_idx, from_cons], reduction="add"), inv_out])
            u = self.op("MatMul", [h, self.param(f"{layer_stem}{layer}_self_w")])
            u = self.op("Add", [u, self.op("MatMul", [m_in, self.param(f"{layer_stem}{layer}_in_w")])])
            u = self.op("Add", [u, self.op("MatMul", [m_out, self.param(f"{layer_stem}{layer}_out_w")])])
            u = self.op("Add", [u, self.param(f"{layer_stem}{layer}_b")])
            h = self.rms_norm(self.op("Add", [h, self.op("Relu", [u])]))
        return h

    def node_shape_features(self) -> str:
        """model.node_shape_features: [N, 8] = rank, 6 dims, log2(2 + elements)."""
        dims = self.op("Slice", ["node_feat", self.const([M.FEAT_DIMS], np.int64), self.const([M.FEAT_DIMS + 6], np.int64),
                                 self.const([1], np.int64)])
        zero = self.const(0.0)
        # rank = number of leading positive dims (a cumulative product of 0/1 flags)
        flags = self.op("Cast", [self.op("Greater", [dims, zero])], to=TensorProto.FLOAT)
        lead, prod = [], None
        for i in range(6):
            f = self.op("Slice", [flags, self.const([i], np.int64), self.const([i + 1], np.int64), self.const([1], np.int64)])
            prod = f if prod is None else self.op("Mul", [prod, f])
            lead.append(prod)
        rank = self.op("ReduceSum", [self.op("Concat", lead, axis=-1), self.const([-1], np.int64)], keepdims=1)
        elems = self.op("Slice", ["node_feat", self.const([M.FEAT_DIMS_PRODUCT], np.int64),
                                  self.const([M.FEAT_DIMS_PRODUCT + 1], np.int64), self.const([1], np.int64)])
        elems = self.op("Max", [elems, zero])
        w = self.op("Mul", [self.op("Log", [self.op("Add", [elems, self.const(2.0)])]),
                            self.const(np.float32(1.0 / np.log(2.0)))])
        return self.op("Concat", [rank, dims, w], axis=-1)

    def slice_last(self, x: str, start: int, end: int) -> str:
        return self.op("Slice", [x, self.const([start], np.int64), self.const([end], np.int64), self.const([-1], np.int64)])

    def tpu_features(self, cfg: str, shape: str) -> str:
        """model.tpu_features: [C, NC, 12] from config_feat [C, NC, 18] and shape [NC, 8]."""
        zero, one = self.const(0.0), self.const(1.0)
        rank = self.op("Unsqueeze", [self.slice_last(shape, 0, 1), self.const([0], np.int64)])  # [1, NC, 1]
        dims = self.slice_last(shape, 1, 7)  # [NC, 6]
        pos = self.const(np.arange(6, dtype=np.float32))
        default = self.op("Sub", [self.op("Sub", [rank, one]), pos])  # [1, NC, 6]
        axis = self.const([-1], np.int64)

        def flt(x):
            return self.op("Cast", [x], to=TensorProto.FLOAT)

        out = []
        for t in range(3):
            pre = self.slice_last(cfg, 6 * t, 6 * t + 6)
            given = flt(self.op("GreaterOrEqual", [pre, zero]))
            differs = self.op("Mul", [given, flt(self.op("Not", [self.op("Equal", [pre, default])]))])
            out += [self.slice_last(given, 0, 1), self.op("ReduceSum", [differs, axis], keepdims=1),
                    self.slice_last(differs, 0, 1)]
        pre = self.slice_last(cfg, 0, 6)
        eff = self.op("Where", [self.op("GreaterOrEqual", [pre, zero]), pre, default])  # [C, NC, 6]

        def size_at(j):
            hit = flt(self.op("Equal", [self.slice_last(eff, j, j + 1), pos]))  # [C, NC, 6]
            s = self.op("ReduceSum", [self.op("Mul", [hit, dims]), axis], keepdims=1)
            return self.op("Max", [s, one])

        for j, tile in [(0, 128.0), (1, 8.0)]:
            size = size_at(j)
            padded = self.op("Mul", [self.op("Ceil", [self.op("Div", [size, self.const(tile)])]), self.const(tile)])
            out.append(self.op("Log", [self.op("Div", [padded, size])]))
        largest = self.op("Cast", [self.op("ArgMax", [dims], axis=-1, keepdims=1)], to=TensorProto.FLOAT)  # [NC, 1]
        largest = self.op("Unsqueeze", [largest, self.const([0], np.int64)])
        viol = flt(self.op("Not", [self.op("Equal", [self.slice_last(eff, 0, 1), largest])]))
        out.append(self.op("Mul", [viol, flt(self.op("Greater", [rank, one]))]))
        return self.op("Concat", out, axis=-1)

    def layout_head(self, emb_in: str, hp: dict) -> str:
        """model.layout_head: [C] scores from config_node_emb and config_feat."""
        d, n = hp["hidden"], M.ensemble_size(hp)
        shape = self.slice_last(emb_in, n * d, n * d + M.NODE_EXTRA) if M.shape_in_embedding(hp) else None

        def score(emb, i):
            if M.is_early_join(hp, i):
                return self.ej_score(emb, hp)
            return self.network_score(emb, shape, hp)

        if n > 1:
            y = None
            for i in range(n):
                self.prefix = f"m{i}_"
                yi = self.op("Mul", [score(self.slice_last(emb_in, i * d, (i + 1) * d), i), self.param("scale")])
                y = yi if y is None else self.op("Add", [y, yi])
            self.prefix = ""
        else:
            emb = self.slice_last(emb_in, 0, d) if M.shape_in_embedding(hp) else emb_in
            y = score(emb, 0)
        if "blend_w" in self.params:
            wmean = self.weighted_tpu_features("config_feat", shape)  # [C, G]
            wmean = self.op("Min", [self.op("Max", [wmean, self.param("blend_lo")]), self.param("blend_hi")])
            y = self.op("Add", [self.op("Mul", [y, self.param("gnn_scale")]), self.op("MatMul", [wmean, self.param("blend_w")])])
        return self.op("Squeeze", [y, self.const([1], np.int64)])

    def network_score(self, emb: str, shape: str | None, hp: dict) -> str:
        """model.network_score: [C, 1] from one network's embeddings [NC, D]."""
        k = hp["channels"]
        tpu = bool(hp.get("tpu_features"))
        logits = self.op("MatMul", [emb, self.param("pool_w")])  # [NC, 1]
        weights = self.op("Softmax", [logits], axis=0)  # [NC, 1]
        u = self.op("Mul", [self.dense(emb, "node_w", "node_b"), weights])  # [NC, F*K]
        u = self.op("Reshape", [u, self.const([-1, k], np.int64)])  # [NC*F, K]
        x = "config_feat"
        if hp["config_expand"] == 2:
            x = self.op("Concat", [x, self.op("Mul", [x, x])], axis=-1)
        if tpu:
            g = self.tpu_features("config_feat", shape)  # [C, NC, G]
            x = self.op("Concat", [x, g], axis=-1)
            w = self.slice_last(shape, 7, 8)  # [NC, 1]
            w = self.op("Div", [w, self.op("ReduceSum", [w, self.const([0], np.int64)], keepdims=1)])
            mean = self.op("ReduceMean", [g], axes=[1], keepdims=0)  # [C, G]
            wmean = self.op("ReduceSum", [self.op("Mul", [g, w]), self.const([1], np.int64)], keepdims=0)
            agg = self.op("Concat", [mean, wmean], axis=-1)  # [C, 2G]
        x = self.op("Reshape", [x, self.const([0, -1], np.int64)])  # [C, NC*F]
        pooled = self.op("MatMul", [x, u])  # [C, K]
        if tpu:
            pooled = self.op("Concat", [pooled, agg], axis=-1)
        z = self.dense(pooled, "mlp_w", "mlp_b", relu=True)
        y = self.dense(z, "out_w", "out_b")  # [C, 1]
        if tpu:
            y = self.op("Add", [y, self.op("MatMul", [agg, self.param("lin_w")])])
            if hp.get("ref_blend"):
                ref = self.op("MatMul", [agg, self.const(M.reference_weights())])
                y = self.op("Add", [y, self.op("Mul", [ref, self.const(np.float32(hp["ref_blend"]))])])
        return y

    # ---- the head split at its node sums (incremental scoring, MODEL.md "Incremental stages") ----

    def head_terms(self, emb_in: str, hp: dict) -> str:
        """[C, M, P]: per configuration and selected configurable node
        (`term_nodes` [M], positions in config_node_emb; config_feat [C, M, 18]
        holds their rows), the node's terms of every sum over the nodes the
        head takes (each network's pooled channels, with `tpu_features` its
        feature means, the ridge term's weighted means), so that with every
        node selected layout_head = head_pool(the sum of head_terms over the
        nodes). The config-independent parts (attention weights, node maps,
        node weights) are computed from all of config_node_emb and folded in;
        P = pooled_width(hp). Early-join networks pool by max after message
        passing between the nodes: they have no such form (`has_node_sum_form`)."""
        d, n = hp["hidden"], M.ensemble_size(hp)
        shape = self.slice_last(emb_in, n * d, n * d + M.NODE_EXTRA) if M.shape_in_embedding(hp) else None
        parts = []
        for i in range(n):
            self.prefix = f"m{i}_" if n > 1 else ""
            emb = self.slice_last(emb_in, i * d, (i + 1) * d) if (n > 1 or shape is not None) else emb_in
            parts += self.network_terms(emb, shape, hp)
        self.prefix = ""
        if "blend_w" in self.params:
            parts.append(self.weighted_terms(shape))
        return parts[0] if len(parts) == 1 else self.op("Concat", parts, axis=-1)

    def selected(self, x: str) -> str:
        """Rows `term_nodes` of a per-node tensor [NC, ...]."""
        return self.op("Gather", [x, "term_nodes"], axis=0)

    def node_weights(self, shape: str) -> str:
        """[M, 1]: the selected nodes' weights of the weighted means (log2(2 + elements), over its sum on all nodes)."""
        w = self.slice_last(shape, 7, 8)  # [NC, 1]
        w = self.op("Div", [w, self.op("ReduceSum", [w, self.const([0], np.int64)], keepdims=1)])
        return self.selected(w)

    def network_terms(self, emb: str, shape: str | None, hp: dict) -> list:
        """network_score's node sums, per selected node: [C, M, K] (+ with
        `tpu_features` [C, M, 2G]: the plain mean's and the weighted mean's terms)."""
        k = hp["channels"]
        tpu = bool(hp.get("tpu_features"))
        logits = self.op("MatMul", [emb, self.param("pool_w")])  # [NC, 1]
        weights = self.selected(self.op("Softmax", [logits], axis=0))  # [M, 1]
        u = self.op("Mul", [self.dense(self.selected(emb), "node_w", "node_b"), weights])  # [M, F*K]
        u = self.op("Reshape", [u, self.const([0, -1, k], np.int64)])  # [M, F, K]
        x = "config_feat"
        if hp["config_expand"] == 2:
            x = self.op("Concat", [x, self.op("Mul", [x, x])], axis=-1)
        out = []
        if tpu:
            g = self.tpu_features("config_feat", self.selected(shape))  # [C, M, G]
            x = self.op("Concat", [x, g], axis=-1)
            nc = self.op("Cast", [self.op("Slice", [self.op("Shape", [emb]), self.const([0], np.int64),
                                                   self.const([1], np.int64)])], to=TensorProto.FLOAT)
            out = [self.op("Div", [g, nc]), self.op("Mul", [g, self.node_weights(shape)])]
        xt = self.op("Transpose", [x], perm=[1, 0, 2])  # [M, C, F]
        t = self.op("Transpose", [self.op("MatMul", [xt, u])], perm=[1, 0, 2])  # [C, M, K]
        return [t] + out

    def weighted_terms(self, shape: str) -> str:
        """weighted_tpu_features' node sum, per selected node: [C, M, G]."""
        g = self.tpu_features("config_feat", self.selected(shape))
        return self.op("Mul", [g, self.node_weights(shape)])

    def head_pool(self, pooled: str, hp: dict) -> str:
        """[C] scores from the node sums of head_terms, [C, P]: what layout_head
        does after its sums over the nodes."""
        k, n = hp["channels"], M.ensemble_size(hp)
        tpu = bool(hp.get("tpu_features"))
        g = M.TPU_FEATURES
        at = 0

        def take(width):
            nonlocal at
            s = self.slice_last(pooled, at, at + width)
            at += width
            return s

        y = None
        for i in range(n):
            self.prefix = f"m{i}_" if n > 1 else ""
            p = take(k)
            agg = None
            if tpu:
                agg = take(2 * g)
                p = self.op("Concat", [p, agg], axis=-1)
            z = self.dense(p, "mlp_w", "mlp_b", relu=True)
            yi = self.dense(z, "out_w", "out_b")  # [C, 1]
            if tpu:
                yi = self.op("Add", [yi, self.op("MatMul", [agg, self.param("lin_w")])])
                if hp.get("ref_blend"):
                    ref = self.op("MatMul", [agg, self.const(M.reference_weights())])
                    yi = self.op("Add", [yi, self.op("Mul", [ref, self.const(np.float32(hp["ref_blend"]))])])
            if n > 1:
                yi = self.op("Mul", [yi, self.param("scale")])
            y = yi if y is None else self.op("Add", [y, yi])
        self.prefix = ""
        if "blend_w" in self.params:
            wmean = take(g)
            wmean = self.op("Min", [self.op("Max", [wmean, self.param("blend_lo")]), self.param("blend_hi")])
            y = self.op("Add", [self.op("Mul", [y, self.param("gnn_scale")]), self.op("MatMul", [wmean, self.param("blend_w")])])
        return self.op("Squeeze", [y, self.const([1], np.int64)])

    def ej_score(self, emb: str, hp: dict) -> str:
        """model.ej_score: [C, 1] from one early-join network's embeddings [NC, D],
        config_feat and the meta-graph `config_edge_index`."""
        a = self.op("Unsqueeze", [self.op("MatMul", [emb, self.param("ej_emb_w")]), self.const([1], np.int64)])
        c = self.op("MatMul", [self.op("Transpose", ["config_feat"], perm=[1, 0, 2]), self.param("ej_cfg_w")])
        x = self.op("Relu", [self.op("Add", [self.op("Add", [a, c]), self.param("ej_b")])])  # [NC, C, H]
        nc = self.op("Slice", [self.op("Shape", [emb]), self.const([0], np.int64), self.const([1], np.int64)])
        x = self.message_passing(x, hp["ej_layers"], rank=3, edges="config_edge_index", count=nc, layer_stem="ej_l")
        mean = self.op("ReduceMean", [x], axes=[0], keepdims=0)
        mx = self.op("ReduceMax", [x], axes=[0], keepdims=0)
        z = self.dense(self.op("Concat", [mean, mx], axis=-1), "ej_mlp_w", "ej_mlp_b", relu=True)
        return self.dense(z, "ej_out_w", "ej_out_b")  # [C, 1]

    def weighted_tpu_features(self, cfg: str, shape: str) -> str:
        """model.weighted_tpu_features: [C, G], the node-weighted mean of tpu_features."""
        g = self.tpu_features(cfg, shape)  # [C, NC, G]
        w = self.slice_last(shape, 7, 8)  # [NC, 1]
        w = self.op("Div", [w, self.op("ReduceSum", [w, self.const([0], np.int64)], keepdims=1)])
        return self.op("ReduceSum", [self.op("Mul", [g, w]), self.const([1], np.int64)], keepdims=0)


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


_NODE_INPUTS = [
    ("node_feat", TensorProto.FLOAT, ["N", M.NODE_FEAT_DIM]),
    ("node_opcode", TensorProto.INT64, ["N"]),
    ("edge_index", TensorProto.INT64, ["E", 2]),
]


def _finish(b: _Builder, name: str, inputs, outputs, meta: dict) -> onnx.ModelProto:
    graph = helper.make_graph(
        b.nodes,
        name,
        [_vi(*i) for i in inputs],
        [_vi(*o) for o in outputs],
        initializer=list(b.inits.values()),
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="hlo-opt")
    m.ir_version = 8
    for k, v in meta.items():
        entry = m.metadata_props.add()
        entry.key, entry.value = k, str(v)
    onnx.checker.check_model(m, full_check=True)
    return m


def _encoder_body(b: _Builder, hp) -> str:
    """The per-node encoder output, [N, D] (with `shape_in_embedding`: [N, D + NODE_EXTRA];
    an ensemble of n: the members' side by side, [N, n * D (+ NODE_EXTRA)])."""
    n = M.ensemble_size(hp)
    if n > 1:
        parts = []
        for i in range(n):
            b.prefix = f"m{i}_"
            parts.append(b.message_passing(b.node_input(), hp["num_layers"], rank=2))
        b.prefix = ""
        h = b.op("Concat", parts, axis=-1)
    else:
        h = b.message_passing(b.node_input(), hp["num_layers"], rank=2)
    if M.shape_in_embedding(hp):
        h = b.op("Concat", [h, b.node_shape_features()], axis=-1)
    return h


def emb_width(hp) -> int:
    return M.ensemble_size(hp) * hp["hidden"] + (M.NODE_EXTRA if M.shape_in_embedding(hp) else 0)


def build_layout_encoder(params, hp) -> onnx.ModelProto:
    b = _Builder(params)
    h = _encoder_body(b, hp)
    out = b.op("Gather", [h, "node_config_ids"], axis=0)
    b.rename_output(out, "config_node_emb")
    inputs = _NODE_INPUTS + [("node_config_ids", TensorProto.INT64, ["NC"])]
    meta = {"task": "layout", "feature_version": FEATURE_VERSION, "stage": "encoder"}
    return _finish(b, "layout_encoder", inputs, [("config_node_emb", TensorProto.FLOAT, ["NC", emb_width(hp)])], meta)


def build_layout_head(params, hp) -> onnx.ModelProto:
    b = _Builder(params)
    b.rename_output(b.layout_head("config_node_emb", hp), "score")
    inputs = [
        ("config_node_emb", TensorProto.FLOAT, ["NC", emb_width(hp)]),
        ("config_feat", TensorProto.FLOAT, ["C", "NC", M.LAYOUT_CONFIG_DIM]),
    ]
    if hp.get("early_join"):
        inputs.append(("config_edge_index", TensorProto.INT64, ["EC", 2]))
    meta = {"task": "layout", "feature_version": FEATURE_VERSION, "stage": "head"}
    return _finish(b, "layout_head", inputs, [("score", TensorProto.FLOAT, ["C"])], meta)


def has_node_sum_form(hp) -> bool:
    """Whether the head is a function of sums over the configurable nodes
    (head_terms / head_pool exist): every network but an early-join one."""
    return not hp.get("early_join")


def pooled_width(params, hp) -> int:
    """P, the width of head_terms' last axis."""
    per = hp["channels"] + (2 * M.TPU_FEATURES if hp.get("tpu_features") else 0)
    return M.ensemble_size(hp) * per + (M.TPU_FEATURES if "blend_w" in params else 0)


def build_layout_head_terms(params, hp) -> onnx.ModelProto:
    """Incremental stage 1 (MODEL.md): config_node_emb [NC, D], term_nodes [M]
    (positions in config_node_emb), config_feat [C, M, 18] -> node_terms [C, M, P]."""
    b = _Builder(params)
    b.rename_output(b.head_terms("config_node_emb", hp), "node_terms")
    inputs = [
        ("config_node_emb", TensorProto.FLOAT, ["NC", emb_width(hp)]),
        ("term_nodes", TensorProto.INT64, ["M"]),
        ("config_feat", TensorProto.FLOAT, ["C", "M", M.LAYOUT_CONFIG_DIM]),
    ]
    meta = {"task": "layout", "feature_version": FEATURE_VERSION, "stage": "head_terms"}
    return _finish(b, "layout_head_terms", inputs, [("node_terms", TensorProto.FLOAT, ["C", "M", pooled_width(params, hp)])], meta)


def build_layout_head_pool(params, hp) -> onnx.ModelProto:
    """Incremental stage 2 (MODEL.md): pooled [C, P] (node_terms summed over the nodes) -> score [C]."""
    b = _Builder(params)
    b.rename_output(b.head_pool("pooled", hp), "score")
    inputs = [("pooled", TensorProto.FLOAT, ["C", pooled_width(params, hp)])]
    meta = {"task": "layout", "feature_version": FEATURE_VERSION, "stage": "head_pool"}
    return _finish(b, "layout_head_pool", inputs, [("score", TensorProto.FLOAT, ["C"])], meta)


def incremental_stages(task: str, params, hp) -> dict:
    """The incremental stages of a layout model whose head has the node-sum form, else {}."""
    if task != "layout" or not has_node_sum_form(hp):
        return {}
    return {"head_terms.onnx": build_layout_head_terms(params, hp), "head_pool.onnx": build_layout_head_pool(params, hp)}


def build_layout_single(params, hp) -> onnx.ModelProto:
    """Encoder and head in one graph (the plain `.onnx` form of a layout model)."""
    if hp.get("early_join"):
        raise ValueError("an early-join layout model needs the meta-graph: only the two-stage .hlocm form holds one")
    b = _Builder(params)
    emb = b.op("Gather", [_encoder_body(b, hp), "node_config_ids"], axis=0)
    b.rename_output(b.layout_head(emb, hp), "score")
    inputs = _NODE_INPUTS + [
        ("node_config_ids", TensorProto.INT64, ["NC"]),
        ("config_feat", TensorProto.FLOAT, ["C", "NC", M.LAYOUT_CONFIG_DIM]),
    ]
    meta = {"task": "layout", "feature_version": FEATURE_VERSION, "stage": "single", "khop": hp["num_layers"]}
    return _finish(b, "layout_model", inputs, [("score", TensorProto.FLOAT, ["C"])], meta)


def build_tile(params, hp) -> onnx.ModelProto:
    b = _Builder(params)
    h0 = b.node_input()  # [N, D]
    c = b.signed_log("config_feat")
    c = b.op("Mul", [b.op("Sub", [c, b.param("cfg_mu")]), b.param("cfg_inv_sigma")])
    c = b.dense(c, "cfg_w", "cfg_b", relu=True)  # [C, D]
    h = b.op(
        "Add",
        [b.op("Unsqueeze", [h0, b.const([1], np.int64)]), b.op("Unsqueeze", [c, b.const([0], np.int64)])],
    )
    h = b.op("Relu", [h])  # [N, C, D]
    h = b.message_passing(h, hp["num_layers"], rank=3)
    mean = b.op("ReduceMean", [h], axes=[0], keepdims=0)
    mx = b.op("ReduceMax", [h], axes=[0], keepdims=0)
    z = b.dense(b.op("Concat", [mean, mx], axis=-1), "mlp_w", "mlp_b", relu=True)
    y = b.dense(z, "out_w", "out_b")
    b.rename_output(b.op("Squeeze", [y, b.const([1], np.int64)]), "score")
    inputs = _NODE_INPUTS + [("config_feat", TensorProto.FLOAT, ["C", M.TILE_CONFIG_DIM])]
    meta = {"task": "tile", "feature_version": FEATURE_VERSION, "stage": "single"}
    return _finish(b, "tile_model", inputs, [("score", TensorProto.FLOAT, ["C"])], meta)


def stages(task: str, params, hp) -> dict:
    """Stage file name -> ONNX model, as stored in a `.hlocm`."""
    if task == "layout":
        return {"encoder.onnx": build_layout_encoder(params, hp), "head.onnx": build_layout_head(params, hp)}
    return {"model.onnx": build_tile(params, hp)}


def write_hlocm(path: str, task: str, params, hp, info: dict) -> dict:
    """Writes a `.hlocm` (zip: model.json + ONNX stages). Returns the model.json dict."""
    graphs = stages(task, params, hp)
    extra = incremental_stages(task, params, hp)
    meta = {
        "format": FORMAT,
        "format_version": 1,
        "task": task,
        "feature_version": FEATURE_VERSION,
        "opset": OPSET,
        "stages": list(graphs.keys()),
        **({"incremental_stages": list(extra.keys())} if extra else {}),
        "khop": hp["num_layers"] if task == "layout" else None,
        # early join: the head reads the configurable nodes' meta-graph of this depth (data.meta_edges)
        **({"meta_hops": D.META_HOPS} if task == "layout" and hp.get("early_join") else {}),
        "hparams": hp,
        **({"log_runtime_per_score": hp["ridge_fit"]["log_runtime_per_score"]} if "ridge_fit" in hp else {}),
        **({"log_runtime_resolution": hp["ridge_fit"]["log_runtime_resolution"]}
           if "log_runtime_resolution" in hp.get("ridge_fit", {}) else {}),
        **info,
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        # Fixed timestamps: the same parameters give the same bytes.
        def put(name, data):
            zi = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)

        put("model.json", json.dumps(meta, indent=2, sort_keys=False) + "\n")
        for name, g in {**graphs, **extra}.items():
            put(name, g.SerializeToString())
    with open(path, "wb") as f:
        f.write(buf.getvalue())
    return meta


def read_hlocm(path: str):
    """(model.json dict, {stage name: onnx.ModelProto}) of a `.hlocm` file."""
    with zipfile.ZipFile(path) as z:
        meta = json.loads(z.read("model.json"))
        graphs = {name: onnx.load_from_string(z.read(name)) for name in meta["stages"]}
    return meta, graphs


def params_from_onnx(graphs: dict) -> dict:
    """The parameter dict back from the named initializers of the stages."""
    p = {}
    for g in graphs.values():
        for init in g.graph.initializer:
            if not init.name.startswith("c_"):
                p[init.name] = numpy_helper.to_array(init)
    return p
