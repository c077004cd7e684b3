"""Generates npz/layout_xla_mask_rcnn_unsorted_ids.npz: a small slice of the
real published graph `layout/xla/default/train/mask_rcnn_batch_16_bf16_img1024.npz`
whose `node_config_ids` are not in increasing order (as published: the format
does not promise sorted ids) and whose graph has several `node_splits`.

The slice keeps configurable nodes 50..=65 in file order (the published
order breaks between positions 57 and 58), their 1-hop undirected
neighbourhood (node order kept), the edges among those nodes, the first (up
to) 40 configurations that differ on those nodes and their runtimes; `node_splits` are the original segment boundaries counted
in kept nodes. Run once from the repository root (needs ../shared):

    .venv/bin/python testdata/costmodel/gen_unsorted_ids.py
"""
import os

import numpy as np

SRC = "../shared/data/tpugraphs/npz/layout/xla/default/train/mask_rcnn_batch_16_bf16_img1024.npz"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "npz", "layout_xla_mask_rcnn_unsorted_ids.npz")
FIRST, NUM_IDS, NUM_CONFIGS = 50, 16, 40

d = np.load(SRC)
n = d["node_opcode"].shape[0]
edges = d["edge_index"].astype(np.int64)
pick = np.arange(FIRST, FIRST + NUM_IDS)
ids = d["node_config_ids"].astype(np.int64)[pick]
assert (np.diff(ids) < 0).any(), "the slice must keep the published order break"
keep = np.zeros(n, bool)
keep[ids] = True
near = keep.copy()
near[edges[keep[edges[:, 0]], 1]] = True
near[edges[keep[edges[:, 1]], 0]] = True
kept = np.nonzero(near)[0]
remap = np.full(n, -1, np.int64)
remap[kept] = np.arange(len(kept))
e = edges[near[edges[:, 0]] & near[edges[:, 1]]]
splits = np.unique([np.searchsorted(kept, s) for s in d["node_splits"].reshape(-1)])
all_cfg = d["node_config_feat"][:, pick, :]
_, first = np.unique(all_cfg.reshape(len(all_cfg), -1), axis=0, return_index=True)
rows = np.sort(first)[:NUM_CONFIGS]  # the first configurations distinct on the kept nodes
cfg = all_cfg[rows]
rt = d["config_runtime"][rows]
np.savez_compressed(
    OUT,
    edge_index=remap[e],
    node_feat=d["node_feat"][kept],
    node_opcode=d["node_opcode"][kept],
    node_config_feat=cfg,
    node_config_ids=remap[ids],
    node_splits=splits.reshape(1, -1).astype(np.int64),
    config_runtime=rt,
)
print(f"{OUT}: {len(kept)} nodes, {len(e)} edges, ids {remap[ids].tolist()}, splits {splits.tolist()}, "
      f"{len(cfg)} distinct configs")
