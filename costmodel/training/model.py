"""The GNN cost models of hlo-opt in JAX: parameters and forward passes.

This module is the reference definition of the architecture; `export.py`
writes the same computation as ONNX graphs, op for op, and the parity test
(`costmodel/tests/onnx_parity.rs`) checks that the two agree within 1e-4.

Invariants:
- Raw TpuGraphs features go in; all normalisation happens here (and in the
  exported graphs), from constants stored with the parameters.
- The layout encoder has no graph-level pooling: a configurable node's
  embedding depends only on its `num_layers`-hop neighbourhood, so pruning the
  graph to that neighbourhood (`hlo_opt.prune_khop`) is exact.
- Scores are "lower = predicted faster".
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

NODE_FEAT_DIM = 140
LAYOUT_CONFIG_DIM = 18
TILE_CONFIG_DIM = 24
NUM_OPCODES = 256  # node_opcode is a u8 in the published format
RMS_EPS = 1e-5
LOG_EPS = 1.0
FEAT_DIMS = 21  # node features 21-26: output shape dimensions (tpu_graphs README)
FEAT_DIMS_PRODUCT = 28  # node feature 28: shape_dimensions_product
NODE_EXTRA = 8  # node_shape_features: rank, 6 dims, log2(2 + elements)
TPU_FEATURES = 12  # tpu_features per (config, node)


def signed_log(x):
    """sign(x) * log(1 + |x|): squashes byte counts and shapes to a sane range."""
    return jnp.sign(x) * jnp.log(jnp.abs(x) + LOG_EPS)


def rms_norm(h):
    return h / jnp.sqrt(jnp.mean(h * h, axis=-1, keepdims=True) + RMS_EPS)


def default_hparams(task: str) -> dict:
    if task == "layout":
        return {
            "hidden": 64,  # encoder width D
            "opcode_dim": 16,
            "num_layers": 3,  # message-passing layers = k of the k-hop pruning
            "channels": 32,  # K: per-node linear maps of the config features into K channels
            "config_expand": 1,  # F = 18 * config_expand (1: raw values, 2: values and squares)
            "mlp_hidden": 64,
            "tpu_features": 0,  # 1: TPU tiling features computed in the model (tpu_features); off: CV, MODEL.md
            "ridge_blend": 0.0,  # a > 0: add a times a ridge ranker over size-weighted TPU features (MODEL.md)
            "ridge_prefit": 0.0,  # c > 0: the ridge ranker fitted before training, c times it in the trained score
            "early_join": 0,  # the last `early_join` of the model's networks are early-join networks (ej_head)
            "ej_hidden": 32,  # H: width of the early join
            "ej_layers": 2,  # SAGE layers over the configurable nodes' meta-graph (data.meta_edges)
        }
    return {
        "hidden": 32,
        "opcode_dim": 16,
        "num_layers": 2,
        "mlp_hidden": 64,
    }


def _dense(rng, fan_in, fan_out, scale=1.0):
    w = rng.normal(0.0, scale * np.sqrt(2.0 / fan_in), size=(fan_in, fan_out))
    return w.astype(np.float32)


def init_params(task: str, hp: dict, seed: int, node_mu, node_inv_sigma, cfg_mu=None, cfg_inv_sigma=None):
    """Initial parameters as a flat dict name -> float32 array.

    Names are the ONNX initializer names (export.py), so a model file can be
    turned back into parameters (forward.py) without a second format.
    """
    rng = np.random.default_rng(seed)
    d, od = hp["hidden"], hp["opcode_dim"]
    p = {
        "node_mu": np.asarray(node_mu, np.float32),
        "node_inv_sigma": np.asarray(node_inv_sigma, np.float32),
        "opcode_emb": (rng.normal(0, 0.5, size=(NUM_OPCODES, od))).astype(np.float32),
        "in_w": _dense(rng, NODE_FEAT_DIM + od, d),
        "in_b": np.zeros(d, np.float32),
    }
    if task == "tile":
        p["cfg_mu"] = np.asarray(cfg_mu, np.float32)
        p["cfg_inv_sigma"] = np.asarray(cfg_inv_sigma, np.float32)
        p["cfg_w"] = _dense(rng, TILE_CONFIG_DIM, d)
        p["cfg_b"] = np.zeros(d, np.float32)
    for layer in range(hp["num_layers"]):
        p[f"l{layer}_self_w"] = _dense(rng, d, d, 0.5)
        p[f"l{layer}_in_w"] = _dense(rng, d, d, 0.5)
        p[f"l{layer}_out_w"] = _dense(rng, d, d, 0.5)
        p[f"l{layer}_b"] = np.zeros(d, np.float32)
    if task == "layout" and is_early_join(hp, 0):
        p.update(ej_init_params(hp, seed))
    elif task == "layout":
        k, mh = hp["channels"], hp["mlp_hidden"]
        f = head_config_dim(hp)
        a = 2 * TPU_FEATURES if hp.get("tpu_features") else 0
        p["node_w"] = _dense(rng, d, f * k, 0.1)
        p["node_b"] = (rng.normal(0, 0.1, size=(f * k,))).astype(np.float32)
        p["pool_w"] = (rng.normal(0, 0.01, size=(d, 1))).astype(np.float32)
        p["mlp_w"] = _dense(rng, k + a, mh)
        p["mlp_b"] = np.zeros(mh, np.float32)
        p["out_w"] = _dense(rng, mh, 1, 0.5)
        p["out_b"] = np.zeros(1, np.float32)
        if a:
            p["lin_w"] = np.zeros((a, 1), np.float32)
            # ref_init: start the linear term as the reference heuristic (its
            # per-tensor weights on the size-weighted mean deviations), scaled.
            p["lin_w"] += hp.get("ref_init", 0.0) * reference_weights()
    else:
        mh = hp["mlp_hidden"]
        p["mlp_w"] = _dense(rng, 2 * d, mh)
        p["mlp_b"] = np.zeros(mh, np.float32)
        p["out_w"] = _dense(rng, mh, 1, 0.5)
        p["out_b"] = np.zeros(1, np.float32)
    return p


def ej_init_params(hp, seed):
    """The early-join head's parameters (`ej_*`, `ej_head`), from their own stream (seed + 1000)."""
    rng = np.random.default_rng(seed + 1000)
    d, h, mh = hp["hidden"], hp["ej_hidden"], hp["mlp_hidden"]
    p = {"ej_emb_w": _dense(rng, d, h), "ej_cfg_w": _dense(rng, LAYOUT_CONFIG_DIM, h), "ej_b": np.zeros(h, np.float32)}
    for layer in range(hp["ej_layers"]):
        for name in ["self", "in", "out"]:
            p[f"ej_l{layer}_{name}_w"] = _dense(rng, h, h, 0.5)
        p[f"ej_l{layer}_b"] = np.zeros(h, np.float32)
    p["ej_mlp_w"] = _dense(rng, 2 * h, mh)
    p["ej_mlp_b"] = np.zeros(mh, np.float32)
    p["ej_out_w"] = _dense(rng, mh, 1, 0.5)
    p["ej_out_b"] = np.zeros(1, np.float32)
    return p


def is_early_join(hp, i: int) -> bool:
    """Whether network `i` of the model is an early-join network: the last
    `early_join` of its `ensemble_size` networks are."""
    return i >= ensemble_size(hp) - int(hp.get("early_join") or 0)


def node_input(p, node_feat, node_opcode):
    """Normalised node features joined with the opcode embedding, projected to D."""
    x = (signed_log(node_feat) - p["node_mu"]) * p["node_inv_sigma"]
    e = p["opcode_emb"][node_opcode]
    return jax.nn.relu(jnp.concatenate([x, e], axis=-1) @ p["in_w"] + p["in_b"])


def message_passing(p, h, edge_index, num_layers):
    """SAGE-style layers: mean over producers, mean over consumers, residual, RMS norm.

    `h` is [N, D] or [N, C, D] (tile early join: node axis first). Edges are
    [consumer, producer] rows.
    """
    n = h.shape[0]
    consumer, producer = edge_index[:, 0], edge_index[:, 1]
    ones = jnp.ones((edge_index.shape[0],), jnp.float32)
    deg_in = jax.ops.segment_sum(ones, consumer, num_segments=n)  # producers of each node
    deg_out = jax.ops.segment_sum(ones, producer, num_segments=n)
    extra = (1,) * (h.ndim - 1)
    inv_in = (1.0 / jnp.maximum(deg_in, 1.0)).reshape((n,) + extra)
    inv_out = (1.0 / jnp.maximum(deg_out, 1.0)).reshape((n,) + extra)
    for layer in range(num_layers):
        m_in = jax.ops.segment_sum(h[producer], consumer, num_segments=n) * inv_in
        m_out = jax.ops.segment_sum(h[consumer], producer, num_segments=n) * inv_out
        u = (
            h @ p[f"l{layer}_self_w"]
            + m_in @ p[f"l{layer}_in_w"]
            + m_out @ p[f"l{layer}_out_w"]
            + p[f"l{layer}_b"]
        )
        h = rms_norm(h + jax.nn.relu(u))
    return h


def node_shape_features(node_feat):
    """Per node, from its raw features: [rank, dims 0..5, log2(2 + elements)], [N, NODE_EXTRA].

    The rank is the number of leading non-zero output dimensions (features
    21-26); elements = feature 28 (`shape_dimensions_product`), clamped at 0.
    """
    dims = node_feat[:, FEAT_DIMS : FEAT_DIMS + 6]
    rank = jnp.sum(jnp.cumprod((dims > 0).astype(jnp.float32), axis=-1), axis=-1, keepdims=True)
    elems = jnp.maximum(node_feat[:, FEAT_DIMS_PRODUCT : FEAT_DIMS_PRODUCT + 1], 0.0)
    return jnp.concatenate([rank, dims, jnp.log(elems + 2.0) * np.float32(1.0 / np.log(2.0))], axis=-1)


def shape_in_embedding(hp) -> bool:
    """Whether stage 1 appends the node's shape (`node_shape_features`) to its embedding:
    the head needs it for the TPU tiling features (`tpu_features`, `ridge_blend`, `ridge_prefit`)."""
    return bool(hp.get("tpu_features") or hp.get("ridge_blend") or hp.get("ridge_prefit"))


SHARED_PARAMS = ("node_mu", "node_inv_sigma", "gnn_scale", "blend_w", "blend_lo", "blend_hi")


def ensemble_size(hp) -> int:
    """Networks in the model: `ensemble` (>= 2) or 1."""
    return max(int(hp.get("ensemble") or 1), 1)


def member_params(p, i: int):
    """The parameters of ensemble member `i` under their plain names: its own
    (stored as `m{i}_NAME`) and the shared ones (`SHARED_PARAMS`: the feature
    normalisation, which all members take from the same training graphs, and
    the ridge term, which applies to the ensemble)."""
    pre = f"m{i}_"
    out = {k[len(pre):]: v for k, v in p.items() if k.startswith(pre)}
    out.update({k: p[k] for k in SHARED_PARAMS if k in p})
    return out


def layout_encoder(p, hp, node_feat, node_opcode, edge_index, node_config_ids):
    """Stage 1 (once per graph): embeddings of the configurable nodes, [NC, D]
    (with `shape_in_embedding`: [NC, D + NODE_EXTRA], the node's shape appended).
    An ensemble of n networks (`ensemble`): the members' embeddings side by
    side, [NC, n * D (+ NODE_EXTRA)]."""
    n = ensemble_size(hp)
    if n > 1:
        h = jnp.concatenate([message_passing(member_params(p, i), node_input(member_params(p, i), node_feat, node_opcode),
                                             edge_index, hp["num_layers"]) for i in range(n)], axis=-1)
    else:
        h = node_input(p, node_feat, node_opcode)
        h = message_passing(p, h, edge_index, hp["num_layers"])
    if shape_in_embedding(hp):
        h = jnp.concatenate([h, node_shape_features(node_feat)], axis=-1)
    return h[node_config_ids]


def tpu_features(config_feat, shape):
    """Per-(config, node) layout features of the TPU's (8, 128) tiling, [C, NC, TPU_FEATURES].

    `config_feat` [C, NC, 18] raw (minor-to-major prefixes of the output,
    input and kernel layouts, -1 = left to the compiler); `shape` [NC, 8]
    from `node_shape_features`. With r = the node's rank and XLA's default
    minor-to-major order (r-1, r-2, ..., 0), per tensor t (output, input,
    kernel): set (a layout is given), the number of given positions that
    differ from the default, whether the minor-most dimension differs (the
    reference heuristic's terms). For the output tensor, whose shape the node
    features give: the padding waste of the minor-most dimension to 128 and of
    the second-minor dimension to 8 (log of padded/actual size) and the
    violation (the largest dimension is not minor-most). Unset positions take
    the default layout.
    """
    rank = shape[:, 0][None, :, None]  # [1, NC, 1]
    dims = shape[:, 1:7]  # [NC, 6]
    default = rank - 1.0 - jnp.arange(6, dtype=jnp.float32)  # [1, NC, 6]
    out = []
    for t in range(3):
        pre = config_feat[..., 6 * t : 6 * t + 6]
        given = (pre >= 0.0).astype(jnp.float32)
        differs = given * (pre != default).astype(jnp.float32)
        out += [given[..., 0], jnp.sum(differs, axis=-1), differs[..., 0]]
    pre = config_feat[..., 0:6]
    eff = jnp.where(pre >= 0.0, pre, default)  # [C, NC, 6], the effective order
    pos = jnp.arange(6, dtype=jnp.float32)
    minor = jnp.sum((eff[..., 0:1] == pos).astype(jnp.float32) * dims, axis=-1)  # size of the minor-most dim
    second = jnp.sum((eff[..., 1:2] == pos).astype(jnp.float32) * dims, axis=-1)
    minor, second = jnp.maximum(minor, 1.0), jnp.maximum(second, 1.0)
    out.append(jnp.log(jnp.ceil(minor / 128.0) * 128.0 / minor))
    out.append(jnp.log(jnp.ceil(second / 8.0) * 8.0 / second))
    largest = jnp.argmax(dims, axis=-1).astype(jnp.float32)  # [NC], first largest
    out.append((eff[..., 0] != largest).astype(jnp.float32) * (rank[..., 0] > 1.0))
    return jnp.stack(out, axis=-1)


def weighted_tpu_features(config_feat, shape):
    """[C, TPU_FEATURES]: `tpu_features` averaged over the configurable nodes, each
    node weighted by log2(2 + elements) (its share of the total weight). The
    inputs of the ridge ranker of `ridge_blend`."""
    g = tpu_features(config_feat, shape)
    w = shape[:, 7]
    return jnp.sum(g * (w / jnp.sum(w))[None, :, None], axis=1)


def layout_config_features(config_feat, expand):
    """Per-(config, node) inputs of the head: the raw values, optionally their squares."""
    if expand == 2:
        return jnp.concatenate([config_feat, config_feat * config_feat], axis=-1)
    return config_feat


def head_config_dim(hp) -> int:
    """F: per-(config, node) inputs of the head's node-specific maps."""
    return LAYOUT_CONFIG_DIM * hp["config_expand"] + (TPU_FEATURES if hp.get("tpu_features") else 0)


def layout_head(p, hp, config_node_emb, config_feat, config_edge_index=None):
    """Stage 2 (per batch): one score per configuration, [C].

    Each configurable node turns its embedding into a weight matrix over its
    per-(config, node) inputs (F x K, node-specific, scaled by an attention
    weight over the nodes), so the whole batch reduces to one GEMM
    [C, NC*F] @ [NC*F, K] with no [C, NC, H] intermediate; then an MLP. With
    `tpu_features`, the TPU tiling features join the inputs, and their means
    over the nodes (plain and weighted by log2(2 + elements)) join the MLP
    input and a linear term; `ref_blend` adds that many times the reference
    heuristic's score (`reference_weights`), a fixed term. Every step is per configuration: a score depends
    on the graph and its configuration only, never on the rest of the batch.
    Early-join networks (`early_join`) score with `ej_score` and need
    `config_edge_index` (data.meta_edges).
    """
    d, n = hp["hidden"], ensemble_size(hp)
    shape = config_node_emb[:, n * d :]

    def score(q, i):
        emb = config_node_emb[:, i * d : (i + 1) * d]
        if is_early_join(hp, i):
            return ej_score(q, hp, emb, config_feat, config_edge_index)
        return network_score(q, hp, emb, shape, config_feat)

    if n > 1:
        # The members' scores, each over its spread on the training graphs
        # (`m{i}_scale`, train.ensemble_params), summed: their mean in common units.
        y = sum(score(member_params(p, i), i) * p[f"m{i}_scale"][0] for i in range(n))
    else:
        y = score(p, 0)
    if "blend_w" in p:
        # ridge_blend (fitted after training, train.ridge_blend): the network's
        # score in units of its spread on the training graphs, plus the ridge
        # ranker's, scaled the same way and weighted by a (both folded into
        # gnn_scale and blend_w).
        wmean = weighted_tpu_features(config_feat, shape)
        wmean = jnp.clip(wmean, p["blend_lo"], p["blend_hi"])  # the range of the training configurations
        y = y * p["gnn_scale"][0] + (wmean @ p["blend_w"])[:, 0]
    return y


def network_score(p, hp, emb, shape, config_feat):
    """The learned part of `layout_head` for one network: `emb` [NC, D] its
    embeddings, `shape` [NC, NODE_EXTRA] (read with `tpu_features` only)."""
    nc = emb.shape[0]
    k = hp["channels"]
    f = head_config_dim(hp)
    logits = (emb @ p["pool_w"])[:, 0]  # [NC]
    weights = jax.nn.softmax(logits)  # attention pooling over configurable nodes
    u = (emb @ p["node_w"] + p["node_b"]) * weights[:, None]  # [NC, F*K]
    u = u.reshape(nc * f, k)
    x = layout_config_features(config_feat, hp["config_expand"])
    if hp.get("tpu_features"):
        g = tpu_features(config_feat, shape)  # [C, NC, G]
        x = jnp.concatenate([x, g], axis=-1)
        w = shape[:, 7]  # log2(2 + elements) >= 1
        agg = jnp.concatenate([jnp.mean(g, axis=1), jnp.sum(g * (w / jnp.sum(w))[None, :, None], axis=1)], axis=-1)
    pooled = x.reshape(config_feat.shape[0], nc * f) @ u  # [C, K]
    if hp.get("tpu_features"):
        pooled = jnp.concatenate([pooled, agg], axis=-1)
    z = jax.nn.relu(pooled @ p["mlp_w"] + p["mlp_b"])  # [C, M]
    y = (z @ p["out_w"] + p["out_b"])[:, 0]
    if hp.get("tpu_features"):
        y = y + (agg @ p["lin_w"])[:, 0]
        if hp.get("ref_blend"):
            y = y + hp["ref_blend"] * (agg @ reference_weights())[:, 0]
    return y


def ej_score(p, hp, emb, config_feat, config_edge_index):
    """An early-join network's score, [C] (the Kaggle "Fast or Slow" layout
    winners' join; the tile model's): each configuration's 18 raw values are
    joined to its configurable nodes' embeddings before message passing, so a
    node sees its neighbours' layouts. On the configurable nodes alone, to keep
    the per-configuration work small: `ej_layers` SAGE layers over their
    meta-graph (`config_edge_index` [EC, 2], data.meta_edges), then mean and
    max over the nodes and an MLP. Every step is per configuration.

        x[n, c] = relu(emb[n] W_e + config_feat[c, n] W_c + b)       [NC, C, H]
    """
    x = jax.nn.relu((emb @ p["ej_emb_w"])[:, None, :] + jnp.swapaxes(config_feat, 0, 1) @ p["ej_cfg_w"] + p["ej_b"])
    q = {f"l{layer}_{k}": p[f"ej_l{layer}_{k}"] for layer in range(hp["ej_layers"]) for k in ["self_w", "in_w", "out_w", "b"]}
    x = message_passing(q, x, config_edge_index, hp["ej_layers"])  # [NC, C, H]
    pooled = jnp.concatenate([jnp.mean(x, axis=0), jnp.max(x, axis=0)], axis=-1)
    z = jax.nn.relu(pooled @ p["ej_mlp_w"] + p["ej_mlp_b"])
    return (z @ p["ej_out_w"] + p["ej_out_b"])[:, 0]


def reference_weights() -> np.ndarray:
    """[2 * TPU_FEATURES, 1]: the reference heuristic (`costmodel/src/reference.rs`)
    as a linear function of the head's feature means: its per-tensor weights
    (1, 1, 0.5) on the size-weighted mean deviations (differing positions and
    minor-most differs). Within a graph this is the reference score divided by
    the sum of the node weights, so it orders configurations as the heuristic
    does (up to the heuristic's rank corrections)."""
    w = np.zeros((2 * TPU_FEATURES, 1), np.float32)
    for t, weight in enumerate((1.0, 1.0, 0.5)):
        for j in (1, 2):
            w[TPU_FEATURES + 3 * t + j, 0] = weight
    return w


def tile_forward(p, hp, node_feat, node_opcode, edge_index, config_feat):
    """The tile model: config features joined to every node before message passing."""
    h = node_input(p, node_feat, node_opcode)  # [N, D]
    c = (signed_log(config_feat) - p["cfg_mu"]) * p["cfg_inv_sigma"]
    c = jax.nn.relu(c @ p["cfg_w"] + p["cfg_b"])  # [C, D]
    h = jax.nn.relu(h[:, None, :] + c[None, :, :])  # [N, C, D]
    h = message_passing(p, h, edge_index, hp["num_layers"])
    pooled = jnp.concatenate([jnp.mean(h, axis=0), jnp.max(h, axis=0)], axis=-1)  # [C, 2D]
    z = jax.nn.relu(pooled @ p["mlp_w"] + p["mlp_b"])
    return (z @ p["out_w"] + p["out_b"])[:, 0]
