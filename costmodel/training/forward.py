"""The Python (JAX) forward pass of a `.hlocm` model on one npz graph.

Used by the parity test (`costmodel/tests/onnx_parity.rs`): the parameters are
read back from the model file's ONNX initializers and run through `model.py`
on the full, unpruned graph, so the test checks the export, the Rust pruning
and ONNX Runtime at once.

    forward.py --model M.hlocm --npz G.npz [--configs 0,5,9 | --first N] [--ort]

Prints one score per line (`%.9e`), in the order of the requested configs.
With `--ort` the scores come from onnxruntime in Python instead (for
debugging the export without Rust).
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import hlo_opt  # noqa: E402
import numpy as np  # noqa: E402

import data as D  # noqa: E402
import export as X  # noqa: E402
import model as M  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")


def load_inputs(npz_path: str, task: str, configs):
    d = hlo_opt.load_npz(npz_path, configs=True)
    g = {
        "node_feat": d["node_feat"].astype(np.float32),
        "node_opcode": d["node_opcode"].astype(np.int64),
        "edge_index": d["edge_index"].astype(np.int64).reshape(-1, 2),
    }
    key = "node_config_feat" if task == "layout" else "config_feat"
    cfg = d[key].astype(np.float32)
    if configs is not None:
        cfg = cfg[np.asarray(configs, np.int64)]
    g["config_feat"] = cfg
    if task == "layout":
        g["node_config_ids"] = d["node_config_ids"].astype(np.int64)
        # the early join's meta-graph, from the full graph (the Rust model: from the pruned one)
        g["config_edge_index"] = D.meta_edges(len(g["node_opcode"]), g["edge_index"], g["node_config_ids"])
    return g


def jax_scores(meta, graphs, g):
    p = X.params_from_onnx(graphs)
    hp = meta["hparams"]
    if meta["task"] == "layout":
        emb = M.layout_encoder(p, hp, g["node_feat"], g["node_opcode"], g["edge_index"], g["node_config_ids"])
        return np.asarray(M.layout_head(p, hp, emb, g["config_feat"], g["config_edge_index"]))
    return np.asarray(M.tile_forward(p, hp, g["node_feat"], g["node_opcode"], g["edge_index"], g["config_feat"]))


def ort_scores(meta, graphs, g):
    import onnxruntime as ort

    def run(proto, feeds):
        s = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        names = {i.name for i in s.get_inputs()}
        return s.run(None, {k: v for k, v in feeds.items() if k in names})[0]

    if meta["task"] == "layout":
        emb = run(graphs["encoder.onnx"], g)
        return run(graphs["head.onnx"], {"config_node_emb": emb, "config_feat": g["config_feat"],
                                         "config_edge_index": g["config_edge_index"]})
    return run(graphs["model.onnx"], g)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--npz", required=True)
    ap.add_argument("--configs", help="comma-separated config indices")
    ap.add_argument("--first", type=int, help="the first N configs")
    ap.add_argument("--ort", action="store_true")
    args = ap.parse_args(argv)
    meta, graphs = X.read_hlocm(args.model)
    configs = None
    if args.configs:
        configs = [int(x) for x in args.configs.split(",") if x]
    elif args.first is not None:
        configs = list(range(args.first))
    g = load_inputs(args.npz, meta["task"], configs)
    s = ort_scores(meta, graphs, g) if args.ort else jax_scores(meta, graphs, g)
    sys.stdout.write("".join(f"{v:.9e}\n" for v in np.asarray(s, np.float64)))


if __name__ == "__main__":
    main()
