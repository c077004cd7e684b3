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

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def param(self, name: str) -> str:
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

    def message_passing(self, h: str, num_layers: int, rank: int) -> str:
        """`h` is [N, D] (rank 2) or [N, C, D] (rank 3)."""
        consumer = self.op("Gather", ["edge_index", self.const(0, np.int64)], axis=1)  # [E]
        producer = self.op("Gather", ["edge_index", self.const(1, np.int64)], axis=1)
        cons_idx = self.op("Unsqueeze", [consumer, self.const([1], np.int64)])  # [E, 1]
        prod_idx = self.op("Unsqueeze", [producer, self.const([1], np.int64)])
        n1 = self.op("Concat", [self.op("Shape", ["node_opcode"]), self.const([1], np.int64)], axis=0)
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
            u = self.op("MatMul", [h, self.param(f"l{layer}_self_w")])
            u = self.op("Add", [u, self.op("MatMul", [m_in, self.param(f"l{layer}_in_w")])])
            u = self.op("Add", [u, self.op("MatMul", [m_out, self.param(f"l{layer}_out_w")])])
            u = self.op("Add", [u, self.param(f"l{layer}_b")])
            h = self.rms_norm(self.op("Add", [h, self.op("Relu", [u])]))
        return h

    def layout_head(self, emb: str, hp: dict) -> str:
        k = hp["channels"]
        logits = self.op("MatMul", [emb, self.param("pool_w")])  # [NC, 1]
        weights = self.op("Softmax", [logits], axis=0)  # [NC, 1]
        u = self.op("Mul", [self.dense(emb, "node_w", "node_b"), weights])  # [NC, F*K]
        u = self.op("Reshape", [u, self.const([-1, k], np.int64)])  # [NC*F, K]
        x = "config_feat"
        if hp["config_expand"] == 2:
            x = self.op("Concat", [x, self.op("Mul", [x, x])], axis=-1)
        x = self.op("Reshape", [x, self.const([0, -1], np.int64)])  # [C, NC*F]
        pooled = self.op("MatMul", [x, u])  # [C, K]
        z = self.dense(pooled, "mlp_w", "mlp_b", relu=True)
        if hp["attn_dim"] > 0:
            q = self.op("MatMul", [z, self.param("att_q")])
            k = self.op("MatMul", [z, self.param("att_k")])
            v = self.op("MatMul", [z, self.param("att_v")])
            s = self.op("MatMul", [q, self.op("Transpose", [k], perm=[1, 0])])
            s = self.op("Mul", [s, self.const(1.0 / np.sqrt(hp["attn_dim"]))])
            att = self.op("Softmax", [s], axis=-1)
            z = self.op("Add", [z, self.op("MatMul", [att, v])])
        y = self.dense(z, "out_w", "out_b")  # [C, 1]
        return self.op("Squeeze", [y, self.const([1], np.int64)])


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


def build_layout_encoder(params, hp) -> onnx.ModelProto:
    b = _Builder(params)
    h = b.message_passing(b.node_input(), hp["num_layers"], rank=2)
    out = b.op("Gather", [h, "node_config_ids"], axis=0)
    b.rename_output(out, "config_node_emb")
    inputs = _NODE_INPUTS + [("node_config_ids", TensorProto.INT64, ["NC"])]
    meta = {"task": "layout", "feature_version": FEATURE_VERSION, "stage": "encoder"}
    return _finish(b, "layout_encoder", inputs, [("config_node_emb", TensorProto.FLOAT, ["NC", hp["hidden"]])], meta)


def build_layout_head(params, hp) -> onnx.ModelProto:
    b = _Builder(params)
    b.rename_output(b.layout_head("config_node_emb", hp), "score")
    inputs = [
        ("config_node_emb", TensorProto.FLOAT, ["NC", hp["hidden"]]),
        ("config_feat", TensorProto.FLOAT, ["C", "NC", M.LAYOUT_CONFIG_DIM]),
    ]
    meta = {"task": "layout", "feature_version": FEATURE_VERSION, "stage": "head"}
    return _finish(b, "layout_head", inputs, [("score", TensorProto.FLOAT, ["C"])], meta)


def build_layout_single(params, hp) -> onnx.ModelProto:
    """Encoder and head in one graph (the plain `.onnx` form of a layout model)."""
    b = _Builder(params)
    h = b.message_passing(b.node_input(), hp["num_layers"], rank=2)
    emb = b.op("Gather", [h, "node_config_ids"], axis=0)
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
    meta = {
        "format": FORMAT,
        "format_version": 1,
        "task": task,
        "feature_version": FEATURE_VERSION,
        "opset": OPSET,
        "stages": list(graphs.keys()),
        "khop": hp["num_layers"] if task == "layout" else None,
        "hparams": hp,
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
        for name, g in graphs.items():
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
