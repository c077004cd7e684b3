"""Reading the published TpuGraphs npz files, one graph at a time.

The files are read, checked, pruned and meta-graphed by the Rust side, as
`hlo-cost eval` and the layout model do it, through the `hlo_opt` package
(`hlo_opt.load_npz`, `prune_khop`, `meta_edges`; `pip install .` from the
checkout, docs/python.md): this module only shapes the result for training.
A graph's arrays are read only when its turn comes; nothing holds more than
one graph (plus its sampled configs) in memory, which is what lets training
scale to the full dataset.

Invariants of a `GraphData`:
- configurations are deduplicated (identical config features -> one entry
  with the minimum runtime);
- for layout, the graph is pruned to the configurable nodes and their
  `khop`-hop undirected neighbourhood (`hlo_opt.prune_khop`), which leaves
  the encoder's output unchanged when `khop` >= its number of layers.
"""

from __future__ import annotations

import dataclasses
import glob
import os

import hlo_opt
import numpy as np


@dataclasses.dataclass
class GraphData:
    name: str
    node_feat: np.ndarray  # [N, 140] f32
    node_opcode: np.ndarray  # [N] i32
    edge_index: np.ndarray  # [E, 2] i32, [consumer, producer]
    node_config_ids: np.ndarray | None  # [NC] i32 (layout)
    config_feat: np.ndarray  # [C, NC, 18] or [C, 24] f32
    runtime: np.ndarray  # [C] f64 (normalised for tile)
    # layout early join: the configurable nodes' meta-graph (`meta_edges`),
    # computed on first use (`meta_edge_index`), never cached on disk
    meta_edges: np.ndarray | None = dataclasses.field(default=None, repr=False)


def list_npz(paths: list[str]) -> list[str]:
    """Files from a list of files, directories and globs, sorted (determinism)."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            out += glob.glob(os.path.join(p, "**", "*.npz"), recursive=True)
        elif any(ch in p for ch in "*?["):
            out += glob.glob(p, recursive=True)
        elif os.path.exists(p):
            out.append(p)
        else:
            raise FileNotFoundError(p)
    return sorted(set(out))


def collected_device(paths: list[str], explicit: str | None = None) -> str:
    """The device of training files: `explicit` when given; else the `device`
    of the `hlo-cost collect` manifest.json in their folders (all must agree);
    else `tpu` (the published TpuGraphs files, measured on TPUs).

    Raises ValueError when the manifests name several devices, or name
    another device than `explicit` (a model would record the wrong one).
    """
    import json

    found = {}
    for d in sorted({os.path.dirname(os.path.abspath(p)) for p in paths}):
        m = os.path.join(d, "manifest.json")
        if os.path.isfile(m):
            with open(m) as f:
                doc = json.load(f)
            if doc.get("format") == "hlo-cost-collect-manifest" and doc.get("device"):
                found[d] = doc["device"]
    devices = sorted(set(found.values()))
    if len(devices) > 1:
        raise ValueError(f"training files measured on several devices: {found}")
    if explicit:
        if devices and devices != [explicit]:
            raise ValueError(f"--device {explicit}, but the files were collected on {devices[0]} ({sorted(found)})")
        return explicit
    if devices and len(found) < len({os.path.dirname(os.path.abspath(p)) for p in paths}):
        raise ValueError(f"some training files come from a {devices[0]} collection, others from none: name --device")
    return devices[0] if devices else "tpu"


META_HOPS = 3  # the meta-graph joins configurable nodes at most this many directed edges apart


def meta_edges(num_nodes: int, edge_index: np.ndarray, ids: np.ndarray, hops: int = META_HOPS) -> np.ndarray:
    """The meta-graph of the configurable nodes `ids` of a graph of `num_nodes`
    nodes, [EC, 2] int64 rows [consumer, producer] over positions in `ids`
    (`hlo_opt.meta_edges`, i.e. `costmodel/src/prune.rs::meta_edges`: each
    pair once, sorted, no self-loops). Only the graph's structure matters."""
    arrays = {
        "node_feat": np.zeros((num_nodes, 140), np.float32),
        "node_opcode": np.zeros(num_nodes, np.uint8),
        "edge_index": np.asarray(edge_index).reshape(-1, 2),
        "node_config_ids": ids,
    }
    return hlo_opt.meta_edges(arrays, hops)


def meta_edge_index(g: "GraphData", hops: int = META_HOPS) -> np.ndarray:
    """`meta_edges` of a layout GraphData, computed once and kept on it."""
    if g.meta_edges is None:
        arrays = {"node_feat": g.node_feat, "node_opcode": g.node_opcode, "edge_index": g.edge_index,
                  "node_config_ids": g.node_config_ids}
        g.meta_edges = hlo_opt.meta_edges(arrays, hops)
    return g.meta_edges


def dedup_configs(config_feat: np.ndarray, runtime: np.ndarray):
    """Unique configurations (first occurrence order) with their minimum runtime."""
    flat = np.ascontiguousarray(config_feat.reshape(config_feat.shape[0], -1))
    _, first, inverse = np.unique(flat, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    best = np.full(len(first), np.inf)
    np.minimum.at(best, inverse, runtime.astype(np.float64))
    order = np.argsort(first)
    return config_feat[first[order]], best[order]


def load_graph(path: str, task: str, khop: int | None = None, dedup: bool = True) -> GraphData:
    d = hlo_opt.load_npz(path)
    if task == "layout":
        cfg = d["node_config_feat"]
        rt = d["config_runtime"].astype(np.float64)
        if khop is not None:
            d = hlo_opt.prune_khop(d, khop)
        ids = d["node_config_ids"]
    else:
        ids = None
        cfg = d["config_feat"]
        rt = d["config_runtime"].astype(np.float64) / d["config_runtime_normalizers"].astype(np.float64)
    node_feat = d["node_feat"]
    node_opcode = d["node_opcode"].astype(np.int32)
    edge_index = d["edge_index"]
    if dedup:
        cfg, rt = dedup_configs(cfg, rt)
    return GraphData(
        name=os.path.basename(path),
        node_feat=node_feat,
        node_opcode=node_opcode,
        edge_index=edge_index.astype(np.int32),
        node_config_ids=None if ids is None else ids.astype(np.int32),
        config_feat=cfg,
        runtime=rt,
    )


def feature_stats(paths: list[str], task: str):
    """Per-feature mean and 1/std of signed_log(node_feat) (and tile config_feat) over files.

    Streams the files; features constant over the data get 1/std = 1.
    """
    def signed_log(x):
        return np.sign(x) * np.log(np.abs(x) + 1.0)

    acc = {}

    def add(key, x):
        x = signed_log(x.astype(np.float64))
        s = acc.setdefault(key, [0.0, 0.0, 0.0])
        s[0] += x.shape[0]
        s[1] = s[1] + x.sum(0)
        s[2] = s[2] + (x * x).sum(0)

    for p in paths:
        d = hlo_opt.load_npz(p, configs=task == "tile")
        add("node", d["node_feat"])
        if task == "tile":
            add("cfg", d["config_feat"])
    out = {}
    for key, (n, s1, s2) in acc.items():
        mu = s1 / n
        var = np.maximum(s2 / n - mu * mu, 0.0)
        sd = np.sqrt(var)
        inv = np.where(sd > 1e-6, 1.0 / np.maximum(sd, 1e-6), 1.0)
        out[key] = (mu.astype(np.float32), inv.astype(np.float32))
    return out


def load_graph_cached(path: str, task: str, khop: int | None, cache_dir: str | None) -> GraphData:
    """`load_graph` (deduplicated, pruned) through an on-disk cache of the result.

    The cache entry is keyed by the file's name, size and modification time
    and `khop`; a missing or unreadable entry is rebuilt. Without `cache_dir`
    this is `load_graph`.
    """
    if not cache_dir:
        return load_graph(path, task, khop)
    st = os.stat(path)
    key = f"{os.path.basename(path)}.{task}.k{khop}.{st.st_size}.{int(st.st_mtime)}.npz"
    entry = os.path.join(cache_dir, key)
    try:
        c = np.load(entry)
        return GraphData(
            name=os.path.basename(path),
            node_feat=c["node_feat"],
            node_opcode=c["node_opcode"],
            edge_index=c["edge_index"],
            node_config_ids=c["node_config_ids"] if task == "layout" else None,
            config_feat=c["config_feat"],
            runtime=c["runtime"],
        )
    except (OSError, KeyError, ValueError):
        pass
    g = load_graph(path, task, khop)
    os.makedirs(cache_dir, exist_ok=True)
    tmp = entry + ".tmp.npz"
    arrays = {k: v for k, v in dataclasses.asdict(g).items() if k not in ("name", "meta_edges") and v is not None}
    np.savez(tmp, **arrays)
    os.replace(tmp, entry)
    return g
