"""`ridge_blend` (train.py) fits a ranker that ranks and is used by the head.

Trains the layout model a few steps on real graph slices from testdata, adds the
ridge term (`train.ridge_blend`), and checks: the ridge ranker alone orders the
graphs it was fitted on better than chance (a flipped sign or a wrong feature
would not); with the network's weight made negligible, the model's ranking is
the ridge ranker's (the head uses `blend_w`); the exported `.hlocm` scores the
same as the JAX forward pass (`export.py` mirrors `model.py`). Run by
`costmodel/tests/training_scripts.rs`; exits non-zero on a failure.
The fitted model records `log_runtime_per_score` (> 0) for the layout pass.

    .venv/bin/python costmodel/training/test_ridge_blend.py
"""

from __future__ import annotations

import os
import sys
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

import data as D  # noqa: E402
import export as X  # noqa: E402
import metrics  # noqa: E402
import model as M  # noqa: E402
import train as T  # noqa: E402

NPZ = os.path.join(HERE, "..", "..", "testdata", "costmodel", "npz")
GRAPHS = [os.path.join(NPZ, n) for n in ["layout_xla_mask_rcnn_unsorted_ids.npz", "layout_xla_default_test_cd708819.npz"]]


def scores(hp, p, g):
    emb = M.layout_encoder(p, hp, g.node_feat, g.node_opcode, g.edge_index, g.node_config_ids)
    return np.asarray(M.layout_head(p, hp, emb, g.config_feat), np.float64)


def encode(enc, g):
    """The exported encoder's node embeddings of graph `g` (ONNX Runtime session `enc`)."""
    return enc.run(None, {"node_feat": g.node_feat.astype(np.float32), "node_opcode": g.node_opcode.astype(np.int64),
                          "edge_index": g.edge_index.astype(np.int64),
                          "node_config_ids": g.node_config_ids.astype(np.int64)})[0]


def main():
    # train.py --valid with no files: a sentence, not a bare "valid " line.
    line = T.valid_line({}, 0)
    assert line.startswith("valid: not evaluated: no held-out files"), line
    hp = M.default_hparams("layout")
    hp.update(hidden=16, channels=8, mlp_hidden=16, ridge_blend=1.0)
    graphs = [D.load_graph(p, "layout", hp["num_layers"]) for p in GRAPHS]
    graphs = [g for g in graphs if T.usable_graph(g)]
    if not graphs:
        sys.exit("no usable graph in the test slices")
    stats = D.feature_stats(GRAPHS, "layout")
    net = T.fit("layout", hp, graphs, stats, steps=4, batch=8, lr=1e-3, loss="hinge", margin=0.1,
                weight_decay=0.05, seed=1, log=None)
    blended = T.ridge_blend(hp, net, graphs, 1.0)
    if not all(k in blended for k in ("blend_w", "gnn_scale", "blend_lo", "blend_hi")):
        sys.exit("ridge_blend added no parameters")
    if not hp["ridge_fit"]["log_runtime_per_score"] > 0:
        sys.exit(f"log_runtime_per_score {hp['ridge_fit']['log_runtime_per_score']} is not positive")
    res = hp["ridge_fit"].get("log_runtime_resolution")
    if not (isinstance(res, float) and np.isfinite(res) and res >= 0):
        sys.exit(f"log_runtime_resolution {res} is not a number >= 0")
    # The resolution: 0 for scores that predict ln runtime exactly (whatever
    # each graph's offset); sqrt(2) x the pooled error otherwise.
    s = np.arange(10.0)
    if abs(metrics.log_runtime_resolution([(s, 0.5 * s + 3), (s[:4], 0.5 * s[:4] - 1)], 0.5)) > 1e-12:
        sys.exit("log_runtime_resolution of exact predictions is not 0")
    err = np.array([1.0, -1.0] * 5)
    r = metrics.log_runtime_resolution([(s, 0.5 * s + err), (s, 0.5 * s - err)], 0.5)
    if abs(r - np.sqrt(2.0)) > 1e-12:
        sys.exit(f"log_runtime_resolution {r}, want sqrt(2) for errors of standard deviation 1")
    # 1. The ridge ranker alone, on the graphs it was fitted on.
    taus = []
    for g in graphs:
        shape = M.node_shape_features(g.node_feat)[g.node_config_ids]
        ridge = np.asarray(M.weighted_tpu_features(g.config_feat, shape)) @ blended["blend_w"][:, 0]
        taus.append(metrics.ranking_metrics(ridge.astype(np.float64), g.runtime)["kendall"])
    if not np.mean(taus) > 0.05:
        sys.exit(f"the ridge ranker does not rank its own training graphs (Kendall tau {taus})")
    # 2. The head uses it: with the network scaled away, the ranking is the ridge's.
    tiny = dict(blended, gnn_scale=np.asarray([1e-9], np.float32))
    for g, tau_ridge in zip(graphs, taus):
        tau = metrics.ranking_metrics(scores(hp, tiny, g), g.runtime)["kendall"]
        if abs(tau - tau_ridge) > 1e-6:
            sys.exit(f"{g.name}: the head's ranking (tau {tau:.4f}) is not the ridge ranker's ({tau_ridge:.4f})")
    # 3. The exported model agrees with the JAX forward pass, with the ridge
    # inputs' clipping range narrowed to the middle of the training range so
    # that the clipping is in play.
    mid = (blended["blend_lo"] + blended["blend_hi"]) / 2
    half = (blended["blend_hi"] - blended["blend_lo"]) / 4
    blended = dict(blended, blend_lo=(mid - half).astype(np.float32), blend_hi=(mid + half).astype(np.float32))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.hlocm")
        X.write_hlocm(path, "layout", blended, hp, {})
        meta, stages = X.read_hlocm(path)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        enc = ort.InferenceSession(stages["encoder.onnx"].SerializeToString(), opts)
        head = ort.InferenceSession(stages["head.onnx"].SerializeToString(), opts)
        for g in graphs:
            emb = encode(enc, g)
            onnx_s = head.run(None, {"config_node_emb": emb, "config_feat": g.config_feat.astype(np.float32)})[0]
            jax_s = scores(hp, blended, g)
            if not np.allclose(onnx_s, jax_s, rtol=1e-4, atol=1e-4):
                sys.exit(f"{g.name}: ONNX and JAX scores differ by up to {np.max(np.abs(onnx_s - jax_s)):.3g}")
    # 4. ridge_prefit: the same ridge ranker, fitted before training, is in the
    # trained score and stays fixed (never trained); calibrated afterwards.
    hp_pre = dict(hp, ridge_blend=0.0, ridge_prefit=1.0)
    pre = T.ridge_prefit_params(graphs, 1.0)
    w, spread, _, _ = T.ridge_fit(graphs)
    if not np.allclose(pre["blend_w"][:, 0], w / spread, rtol=1e-5) or pre["gnn_scale"][0] != 1.0:
        sys.exit("ridge_prefit: the prefit term is not the ridge ranker in units of its spread")
    trained = T.fit("layout", hp_pre, graphs, stats, steps=4, batch=8, lr=1e-3, loss="hinge", margin=0.1,
                    weight_decay=0.05, seed=1, log=None)
    for k, v in pre.items():
        if not np.array_equal(trained[k], v):
            sys.exit(f"ridge_prefit: {k} changed in training")
    if not any(not np.array_equal(trained[k], net[k]) for k in net):
        sys.exit("ridge_prefit: the ridge term did not change the network's training")
    trained = T.finish_ridge_term(hp_pre, trained, graphs)
    if not hp_pre["ridge_fit"]["log_runtime_per_score"] > 0:
        sys.exit("ridge_prefit: not calibrated")
    # 5. An ensemble (train.ensemble_params): two networks in one encoder/head
    # pair score the mean of their scores, each over its spread, plus the
    # ridge term; the ONNX stages agree with JAX, and a configuration scores
    # the same alone as in its batch.
    net2 = T.fit("layout", hp, graphs, stats, steps=4, batch=8, lr=1e-3, loss="hinge", margin=0.1,
                 weight_decay=0.05, seed=2, log=None)
    ens_hp, ens = T.ensemble_params(hp, [net, net2], graphs)
    ens = T.finish_ridge_term(ens_hp, ens, graphs)
    if ens_hp.get("ensemble") != 2 or "ensemble" in hp:
        sys.exit("ensemble_params: the ensemble's hparams do not say 2 members (or changed the members')")
    spreads = [np.mean([np.std(scores(hp, m, g)) for g in graphs]) for m in (net, net2)]
    for g in graphs:
        shape = M.node_shape_features(g.node_feat)[g.node_config_ids]
        wmean = np.clip(np.asarray(M.weighted_tpu_features(g.config_feat, shape)), ens["blend_lo"], ens["blend_hi"])
        members = [scores(hp, m, g) / s for m, s in zip((net, net2), spreads)]
        want = (members[0] + members[1]) / 2 * ens["gnn_scale"][0] + wmean @ ens["blend_w"][:, 0]
        if not np.allclose(scores(ens_hp, ens, g), want, rtol=1e-4, atol=1e-4):
            sys.exit(f"{g.name}: the ensemble is not the mean of its members over their spreads plus the ridge term")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "e.hlocm")
        X.write_hlocm(path, "layout", ens, ens_hp, {})
        meta, stages = X.read_hlocm(path)
        if meta["hparams"].get("ensemble") != 2:
            sys.exit("the exported ensemble's model.json does not record it")
        # The incremental stages (MODEL.md): the head split at its node sums gives its scores.
        if meta.get("incremental_stages") != ["head_terms.onnx", "head_pool.onnx"]:
            sys.exit(f"the exported ensemble names incremental stages {meta.get('incremental_stages')}")
        import zipfile

        import add_incremental as AI
        with zipfile.ZipFile(path) as z:
            err = AI.check_split(z.read("head.onnx"), z.read("head_terms.onnx"), z.read("head_pool.onnx"),
                                 X.emb_width(ens_hp))
        if not err <= 1e-4:
            sys.exit(f"the ensemble's incremental stages differ from its head by {err:.3g}")
        enc = ort.InferenceSession(stages["encoder.onnx"].SerializeToString(), opts)
        head = ort.InferenceSession(stages["head.onnx"].SerializeToString(), opts)
        for g in graphs:
            emb = encode(enc, g)
            if emb.shape[1] != 2 * hp["hidden"] + M.NODE_EXTRA:
                sys.exit(f"ensemble encoder output width {emb.shape[1]}, want 2 x {hp['hidden']} + {M.NODE_EXTRA}")
            cfg = g.config_feat.astype(np.float32)
            onnx_s = head.run(None, {"config_node_emb": emb, "config_feat": cfg})[0]
            jax_s = scores(ens_hp, ens, g)
            if not np.allclose(onnx_s, jax_s, rtol=1e-4, atol=1e-4):
                sys.exit(f"{g.name}: ensemble ONNX and JAX scores differ by up to {np.max(np.abs(onnx_s - jax_s)):.3g}")
            alone = [head.run(None, {"config_node_emb": emb, "config_feat": cfg[i : i + 1]})[0][0] for i in range(len(cfg))]
            if not np.allclose(alone, onnx_s, rtol=1e-6, atol=1e-6):
                sys.exit(f"{g.name}: an ensemble score depends on the rest of its batch")
    # 6. ridge_only (train.py --ridge-only): untrained network parameters, the
    # score is the ridge ranker alone (same ranking, exactly, whatever the
    # network's random weights), calibrated, and exported like the rest.
    hp_only = dict(hp, ridge_only=True)
    untrained = M.init_params("layout", hp_only, 7, *stats["node"])
    only = T.finish_ridge_term(hp_only, untrained, graphs)
    if only["gnn_scale"][0] != 0.0:
        sys.exit(f"ridge_only: the network's weight is {only['gnn_scale'][0]}, not 0")
    if not np.allclose(only["blend_w"][:, 0], w / spread, rtol=1e-5):
        sys.exit("ridge_only: the score is not the ridge ranker in units of its spread")
    for g, tau_ridge in zip(graphs, taus):
        tau = metrics.ranking_metrics(scores(hp_only, only, g), g.runtime)["kendall"]
        if abs(tau - tau_ridge) > 1e-6:
            sys.exit(f"ridge_only: {g.name}: tau {tau:.4f} is not the ridge ranker's ({tau_ridge:.4f})")
    if not hp_only["ridge_fit"]["log_runtime_per_score"] > 0:
        sys.exit("ridge_only: not calibrated")
    print(f"ok: ridge tau on its training graphs {', '.join(f'{t:.3f}' for t in taus)}; head and ONNX agree; "
          "the prefit ridge term stays fixed in training; a 2-network ensemble exports and agrees; "
          "ridge_only ranks as the ridge ranker; the ensemble's incremental stages give its head's scores")


if __name__ == "__main__":
    main()
