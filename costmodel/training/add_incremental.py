"""Adds the incremental stages (MODEL.md "Incremental stages") to an existing
layout `.hlocm`, from the parameters stored in its own stages.

    python costmodel/training/add_incremental.py MODEL.hlocm [MODEL.hlocm ...]

The other entries keep their bytes (the encoder and head are not re-exported);
`model.json` gains `incremental_stages`. Checks, before writing, that the
split head gives the head's scores (within 1e-5) on random inputs. A model
whose head has no node-sum form (early join) is left as it is, with a message.
"""

from __future__ import annotations

import io
import json
import sys
import zipfile

import numpy as np
import onnxruntime as ort

import export as X
import model as M


def check_split(head: bytes, terms: bytes, pool: bytes, emb_dim: int, seed: int = 0) -> float:
    """Largest |head - pool(sum terms)| over random embeddings and configurations."""
    rng = np.random.default_rng(seed)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    h, t, p = (ort.InferenceSession(b, so, providers=["CPUExecutionProvider"]) for b in (head, terms, pool))
    worst = 0.0
    for nc, c in [(1, 3), (7, 5), (40, 9)]:
        emb = rng.normal(size=(nc, emb_dim)).astype(np.float32)
        # the last 8 columns are shape features: rank, dims, log2(2 + elements) (>= 1)
        emb[:, -8] = rng.integers(1, 5, size=nc)
        emb[:, -7:-1] = rng.integers(1, 300, size=(nc, 6))
        emb[:, -1] = np.log2(2 + emb[:, -7:-1].prod(axis=1))
        cfg = rng.integers(-1, 4, size=(c, nc, M.LAYOUT_CONFIG_DIM)).astype(np.float32)
        want = h.run(None, {"config_node_emb": emb, "config_feat": cfg})[0]
        every = np.arange(nc, dtype=np.int64)
        nt = t.run(None, {"config_node_emb": emb, "term_nodes": every, "config_feat": cfg})[0]
        got = p.run(None, {"pooled": nt.astype(np.float64).sum(axis=1).astype(np.float32)})[0]
        worst = max(worst, float(np.abs(want - got).max()))
        # a subset of the nodes, in another order, gives those nodes' terms
        sub = rng.permutation(nc)[: max(1, nc // 2)]
        part = t.run(None, {"config_node_emb": emb, "term_nodes": sub.astype(np.int64), "config_feat": cfg[:, sub]})[0]
        worst = max(worst, float(np.abs(part - nt[:, sub]).max()))
    return worst


def add(path: str) -> None:
    with zipfile.ZipFile(path) as z:
        entries = [(zi, z.read(zi.filename)) for zi in z.infolist()]
    raw = dict((zi.filename, data) for zi, data in entries)
    meta = json.loads(raw["model.json"])
    if meta.get("task") != "layout":
        print(f"{path}: a {meta.get('task')} model; only layout models have incremental stages")
        return
    hp = meta["hparams"]
    if not X.has_node_sum_form(hp):
        print(f"{path}: an early-join head has no node-sum form; left as it is")
        return
    graphs = {name: __import__("onnx").load_from_string(raw[name]) for name in meta["stages"]}
    params = X.params_from_onnx(graphs)
    extra = X.incremental_stages("layout", params, hp)
    blobs = {name: g.SerializeToString() for name, g in extra.items()}
    err = check_split(raw["head.onnx"], blobs["head_terms.onnx"], blobs["head_pool.onnx"], X.emb_width(hp))
    if not err <= 1e-5:
        raise SystemExit(f"{path}: the split head differs from the head by {err:.3g}; not written")
    new_meta = {}
    for k, v in meta.items():
        if k == "incremental_stages":
            continue
        new_meta[k] = v
        if k == "stages":
            new_meta["incremental_stages"] = list(blobs.keys())
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for zi, data in entries:
            if zi.filename in blobs:
                continue
            if zi.filename == "model.json":
                data = (json.dumps(new_meta, indent=2, sort_keys=False) + "\n").encode()
            z.writestr(zi, data)
        for name, data in blobs.items():
            zi = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    with open(path, "wb") as f:
        f.write(buf.getvalue())
    print(f"{path}: added {', '.join(blobs)} (split head vs head: {err:.2g} apart)")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    for p in sys.argv[1:]:
        add(p)
