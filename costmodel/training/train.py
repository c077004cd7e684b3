"""Trains a GNN cost model on TpuGraphs npz files and writes a `.hlocm` model file.

Reproduce the default models from the repository root (deterministic, CPU):

    .venv/bin/python costmodel/training/train.py --task layout --loss hinge-gap --ridge-blend 1 \
        --data ../shared/data/tpugraphs/npz --out costmodel/models/layout.hlocm
    .venv/bin/python costmodel/training/train.py --task tile \
        --data ../shared/data/tpugraphs/npz --out costmodel/models/tile.hlocm

Graphs are streamed from disk one at a time (see data.py); each step samples a
batch of deduplicated configurations of one graph and takes a pairwise hinge
(default) or ListMLE ranking loss. Validation reports per-graph Kendall tau and
top-K slowdown on graphs not trained on; the numbers go into model.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import data as D  # noqa: E402
import export as X  # noqa: E402
import metrics  # noqa: E402
import model as M  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")

DEFAULT_SPLITS = {
    # Every labeled layout graph (the design was chosen by leave-one-graph-out
    # cross-validation, cv.py, so no graph is held out of the shipped model).
    "layout": (
        ["layout/xla/default/train", "layout/xla/default/valid", "layout/xla/random/train"],
        [],
    ),
    # "@/" = relative to this folder: real kernels featurized by make_tile_kernels.sh
    "tile": (["tile/xla/train", "@/data/tile_kernels"], ["tile/xla/valid"]),
}
HERE = os.path.dirname(os.path.abspath(__file__))


def resolve(data_root: str, spec: str) -> str:
    if spec.startswith("@/"):
        return os.path.join(HERE, spec[2:])
    return os.path.join(data_root, spec)


def forward_fn(task, hp):
    if task == "layout":

        def f(p, g_feat, g_op, g_edge, g_ids, cfg, g_cedges=None):
            emb = M.layout_encoder(p, hp, g_feat, g_op, g_edge, g_ids)
            return M.layout_head(p, hp, emb, cfg, g_cedges)

    else:

        def f(p, g_feat, g_op, g_edge, g_ids, cfg, g_cedges=None):
            del g_ids, g_cedges
            return M.tile_forward(p, hp, g_feat, g_op, g_edge, cfg)

    return f


_FORWARD = {}


def jitted_forward(task, hp):
    """`jax.jit(forward_fn(task, hp))`, one per (task, hp): a forward pass
    compiles once per graph shape across calls (cross-validation folds
    calibrate and evaluate the same shapes again). `ridge_fit`, a summary
    written into hp after the fit, does not change the function."""
    key = (task, json.dumps({k: v for k, v in hp.items() if k != "ridge_fit"}, sort_keys=True, default=str))
    if key not in _FORWARD:
        _FORWARD[key] = jax.jit(forward_fn(task, dict(hp)))
    return _FORWARD[key]


def needs_meta_edges(task, hp) -> bool:
    """Whether the forward pass reads the configurable nodes' meta-graph (early join)."""
    return task == "layout" and bool(hp.get("early_join"))


def meta_edges_of(task, hp, g):
    return D.meta_edge_index(g) if needs_meta_edges(task, hp) else None


EJ_CHUNK = 1024  # configurations per forward pass of an early-join model ([NC, C, H] tensors)


def graph_scores(task, hp, params, g, cfg=None) -> np.ndarray:
    """The model's scores of `cfg` (default: all of `g`'s configurations), f64 [C].
    An early-join model scores them in chunks of EJ_CHUNK (padded: one compiled
    shape per graph); a score depends on its configuration alone, so chunking
    changes nothing but the memory."""
    fwd = jitted_forward(task, hp)
    cfg = g.config_feat if cfg is None else cfg
    args = (g.node_feat, g.node_opcode, g.edge_index, g.node_config_ids)
    if not needs_meta_edges(task, hp):
        return np.asarray(fwd(params, *args, cfg), np.float64)
    cedges = meta_edges_of(task, hp, g)
    out = []
    for i in range(0, cfg.shape[0], EJ_CHUNK):
        c = cfg[i : i + EJ_CHUNK]
        n = c.shape[0]
        if n < EJ_CHUNK:
            c = np.concatenate([c, np.repeat(c[-1:], EJ_CHUNK - n, axis=0)])
        out.append(np.asarray(fwd(params, *args, c, cedges), np.float64)[:n])
    return np.concatenate(out)


def pairwise_hinge(scores, runtime, margin):
    """Mean over ordered pairs (i faster than j) of max(0, margin - (s_j - s_i))."""
    faster = (runtime[:, None] < runtime[None, :]).astype(jnp.float32)
    diff = scores[None, :] - scores[:, None]  # s_j - s_i
    loss = jax.nn.relu(margin - diff) * faster
    return loss.sum() / jnp.maximum(faster.sum(), 1.0)


def pairwise_hinge_gap(scores, runtime, margin):
    """The pairwise hinge with each pair weighted by its runtime gap, log(r_j / r_i)."""
    gap = jnp.log(runtime[None, :]) - jnp.log(runtime[:, None])
    w = jnp.where(gap > 0, gap, 0.0)
    diff = scores[None, :] - scores[:, None]
    loss = jax.nn.relu(margin - diff) * w
    return loss.sum() / jnp.maximum(w.sum(), 1e-12)


def list_mle(scores, runtime, margin=None):
    """ListMLE with lower score = faster: likelihood of the fastest-first order."""
    del margin
    s = -scores[jnp.argsort(runtime)]
    tail = jax.lax.cumlogsumexp(s[::-1])[::-1]  # logsumexp(s[i:])
    return jnp.mean(tail - s)


LOSSES = {"hinge": pairwise_hinge, "hinge-gap": pairwise_hinge_gap, "listmle": list_mle}


def relative_runtime(runtime):
    """Runtimes of a batch over their minimum (order and ratios kept, scale removed)."""
    r = np.asarray(runtime, np.float64)
    return jnp.asarray(r / max(r.min(), 1e-30), jnp.float32)


def batches_for(g: D.GraphData, rng: np.random.Generator, batch: int):
    c = g.config_feat.shape[0]
    if c <= batch:
        return np.arange(c)
    return np.sort(rng.choice(c, size=batch, replace=False))


def evaluate(task, hp, params, graphs):
    """Per-graph metrics over all (deduplicated) configurations of each graph."""
    out = {}
    for g in graphs:
        out[g.name] = metrics.ranking_metrics(graph_scores(task, hp, params, g), g.runtime)
    return out


# Adam's epsilon. Layout: above the rounding noise of a gradient that is zero
# in exact arithmetic (a feature constant over a batch), which Adam would
# otherwise blow up to a full step of random sign (and data-parallel training
# would then differ from one device); far below real gradients. Tile: optax's
# default, with which tile.hlocm was trained.
ADAM_EPS = {"layout": 1e-6, "tile": 1e-8}
RIDGE_PARAMS = {"gnn_scale", "blend_w", "blend_lo", "blend_hi"}  # the ridge term: fitted, never trained
FROZEN = {"node_mu", "node_inv_sigma", "cfg_mu", "cfg_inv_sigma"} | RIDGE_PARAMS
_STEPS = {}


def make_step(task, hp, loss, margin, steps, lr, weight_decay):
    """(optimizer, jitted step) for one training setup; cached, so repeated
    trainings of the same setup (cross-validation folds, seeds) compile once
    per graph shape."""
    key = (task, json.dumps(hp, sort_keys=True), loss, margin, steps, lr, weight_decay)
    if key in _STEPS:
        return _STEPS[key]
    sched = optax.warmup_cosine_decay_schedule(0.0, lr, max(steps // 20, 1), steps, lr * 0.05)
    opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(sched, eps=ADAM_EPS[task], weight_decay=weight_decay))
    fwd = forward_fn(task, hp)
    loss_of = LOSSES[loss]

    def loss_fn(tp, consts, g_feat, g_op, g_edge, g_ids, cfg, rt, g_cedges):
        return loss_of(fwd({**tp, **consts}, g_feat, g_op, g_edge, g_ids, cfg, g_cedges), rt, margin)

    @jax.jit
    def step_fn(tp, st, consts, g_feat, g_op, g_edge, g_ids, cfg, rt, g_cedges=None):
        value, grads = jax.value_and_grad(loss_fn)(tp, consts, g_feat, g_op, g_edge, g_ids, cfg, rt, g_cedges)
        upd, st = opt.update(grads, st, tp)
        return optax.apply_updates(tp, upd), st, value

    _STEPS[key] = (opt, step_fn)
    return opt, step_fn


class DataParallel:
    """Places a step's arrays on a 1-D device mesh: configurations (and their
    runtimes) split along the batch axis across the devices, everything else
    (parameters, optimizer state, the graph) replicated. `jax.jit` then runs
    each device's share of the batch there and combines the gradients (XLA's
    SPMD partitioner inserts the collectives); the result equals the
    one-device step up to float rounding. Works across processes
    (`jax.distributed`): every process builds the same global batch (same
    seed, same data) and hands each of its devices its slice."""

    def __init__(self, devices=None):
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        self.devices = list(devices if devices is not None else jax.devices())
        self.mesh = Mesh(np.array(self.devices), ("data",))
        self.split = NamedSharding(self.mesh, PartitionSpec("data"))
        self.whole = NamedSharding(self.mesh, PartitionSpec())

    def _put(self, x, sharding):
        x = np.asarray(x)
        return jax.make_array_from_callback(x.shape, sharding, lambda idx: x[idx])

    def replicate(self, tree):
        return jax.tree.map(lambda x: self._put(x, self.whole), tree)

    def split_batch(self, x):
        if x.shape[0] % len(self.devices):
            raise ValueError(f"a batch of {x.shape[0]} does not split over {len(self.devices)} devices")
        return self._put(x, self.split)

    @staticmethod
    def fetch(x):
        """The value of a replicated array (a local copy; every process has one)."""
        return np.asarray(x.addressable_data(0))


def fit(task, hp, graphs, stats, *, steps, batch, lr, loss, margin, weight_decay, seed, log=print, parallel=None):
    """Trains on `graphs` (GraphData with >= 2 distinct runtimes, or callables
    returning one: loaded on demand); returns the parameters.

    Each step takes one graph (graph-fair: every graph gets the same number of
    steps, in a seeded random order) and `batch` of its configurations drawn
    without replacement. Deterministic for the same inputs and seed. With
    `parallel` (a `DataParallel`), each batch is split across its devices
    (graphs with fewer configurations than `batch` are skipped then).
    """
    node_mu, node_inv = stats["node"]
    cfg_mu, cfg_inv = stats.get("cfg", (None, None))
    params = M.init_params(task, hp, seed, node_mu, node_inv, cfg_mu, cfg_inv)
    if task == "layout" and hp.get("ridge_prefit"):
        params.update(ridge_prefit_params(graphs, hp["ridge_prefit"]))
    trainable = {k: jnp.asarray(v) for k, v in params.items() if k not in FROZEN}
    consts = {k: jnp.asarray(v) for k, v in params.items() if k in FROZEN}
    opt, step_fn = make_step(task, hp, loss, margin, steps, lr, weight_decay)
    opt_state = opt.init(trainable)
    put_graph = put_batch = lambda x: x  # noqa: E731
    if parallel is not None:
        graphs = [g for g in graphs if (g() if callable(g) else g).config_feat.shape[0] >= batch]
        if not graphs:
            raise ValueError(f"data-parallel training needs graphs with at least {batch} configurations")
        trainable, opt_state, consts = parallel.replicate((trainable, opt_state, consts))
        put_graph = lambda x: None if x is None else parallel.replicate(x)  # noqa: E731
        put_batch = parallel.split_batch
    rng = np.random.default_rng(seed)
    order, losses, t0 = [], [], time.time()
    progress = sys.stderr.isatty()
    for step in range(steps):
        if not order:
            order = list(rng.permutation(len(graphs)))
        g = graphs[order.pop()]
        g = g() if callable(g) else g
        idx = batches_for(g, rng, batch)
        trainable, opt_state, value = step_fn(
            trainable,
            opt_state,
            consts,
            put_graph(g.node_feat),
            put_graph(g.node_opcode),
            put_graph(g.edge_index),
            put_graph(g.node_config_ids),
            put_batch(g.config_feat[idx]),
            put_batch(np.asarray(relative_runtime(g.runtime[idx]))),
            put_graph(meta_edges_of(task, hp, g)),
        )
        losses.append(float(DataParallel.fetch(value) if parallel is not None else value))
        if progress:
            # A progress line on a terminal only; logs and pipes get the
            # step lines below and nothing else.
            sys.stderr.write(f"\rtraining: step {step + 1}/{steps} ({time.time() - t0:.0f}s)\x1b[K")
            if step == steps - 1:
                sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
        if log and ((step + 1) % 50 == 0 or step == steps - 1):
            log(f"step {step + 1}/{steps} loss {np.mean(losses[-50:]):.4f} ({time.time() - t0:.0f}s)")
    get = DataParallel.fetch if parallel is not None else np.asarray
    return {k: np.asarray(get(v), np.float32) for k, v in {**trainable, **consts}.items()}


RIDGE_LAMBDA = 1e-2  # on standardized features; the fits are insensitive from 1e-3 to 10 (MODEL.md)


def ridge_fit(graphs):
    """The ridge ranker of the ridge term (model.layout_head), fitted on `graphs`.

    The node-weighted TPU tiling features (model.weighted_tpu_features) of
    every configuration, a ridge regression of each graph's standardized log
    runtime on them (every graph weighs the same, whatever its number of
    configurations). Returns (w [G] per raw feature, the ridge scores' spread:
    the mean over graphs of their standard deviation within a graph, lo [G],
    hi [G]: the range of the features over the configurations).
    """
    feats, targets = [], []
    for g in graphs:
        g = g() if callable(g) else g
        shape = M.node_shape_features(g.node_feat)[g.node_config_ids]
        feats.append(np.asarray(M.weighted_tpu_features(g.config_feat, shape), np.float64))
        y = np.log(np.asarray(g.runtime, np.float64))
        targets.append((y - y.mean()) / max(y.std(), 1e-12))
    wt = np.concatenate([np.full(len(t), 1.0 / len(t)) for t in targets])
    x, y = np.concatenate(feats), np.concatenate(targets)
    mu = (x * wt[:, None]).sum(0) / wt.sum()
    sd = np.sqrt(((x - mu) ** 2 * wt[:, None]).sum(0) / wt.sum()) + 1e-6
    z = np.concatenate([(x - mu) / sd, np.ones((len(x), 1))], axis=1)
    beta = np.linalg.solve(z.T @ (z * wt[:, None]) + RIDGE_LAMBDA * np.eye(z.shape[1]), z.T @ (y * wt))
    w = beta[:-1] / sd  # per raw feature; the constant does not change a ranking
    spread = float(np.mean([(f @ w).std() for f in feats]))
    if not spread > 0:
        raise ValueError(f"ridge term: degenerate ridge spread {spread}")
    return w, spread, x.min(axis=0), x.max(axis=0)


def _calibrate(hp, params, graphs, fit_summary):
    """hp["ridge_fit"] = fit_summary + `log_runtime_per_score`: the mean within-graph
    spread of log runtime over that of the final score on `graphs`, and
    `log_runtime_resolution` (metrics.log_runtime_resolution): how far such a
    predicted ratio can be trusted."""
    score_spread, log_spread, scored = [], [], []
    for g in graphs:
        g = g() if callable(g) else g
        s = graph_scores("layout", hp, params, g)
        y = np.log(np.asarray(g.runtime, np.float64))
        score_spread.append(s.std())
        log_spread.append(y.std())
        scored.append((s, y))
    k = float(np.mean(log_spread) / np.mean(score_spread))
    hp["ridge_fit"] = {**fit_summary, "log_runtime_per_score": k,
                       "log_runtime_resolution": metrics.log_runtime_resolution(scored, k)}


def ridge_blend(hp, params, graphs, a, network=True):
    """Adds the fixed `ridge_blend` term to trained layout parameters (model.layout_head).

    On the training graphs: the ridge ranker (`ridge_fit`) and the spread of
    the network's scores (mean over graphs of the standard deviation within a
    graph). The exported score is network / its spread + a * ridge / its
    spread: both rankers in the same units, fixed numbers, so a score still
    depends on its configuration alone. The ridge inputs are clipped to the
    range the training configurations span (`blend_lo`, `blend_hi`): a search
    over configurations far from the published ones (every node changed) must
    not ride the linear term beyond its data. Returns new parameters with
    `gnn_scale` [1], `blend_w` [G, 1], `blend_lo` and `blend_hi` [G]; the
    fit's summary goes to hp["ridge_fit"], with `log_runtime_per_score`: the
    mean within-graph spread of log runtime over that of the final score on
    the training graphs, which turns a score difference into a predicted
    runtime ratio (the layout pass's gain).

    `network=False` (`ridge_only`): the network's weight is 0 (`gnn_scale`),
    so the score is the ridge ranker alone; `params` need not be trained.
    """
    w, ridge_spread, lo, hi = ridge_fit(graphs)
    gnn = 0.0
    if network:
        gnn_spread = []
        for g in graphs:
            g = g() if callable(g) else g
            gnn_spread.append(graph_scores("layout", hp, params, g).std())
        gnn = float(np.mean(gnn_spread))
        if not gnn > 0:
            raise ValueError(f"ridge_blend: degenerate network spread {gnn}")
    out = dict(params)
    out["gnn_scale"] = np.asarray([1.0 / gnn if network else 0.0], np.float32)
    out["blend_w"] = (a * w / ridge_spread).astype(np.float32)[:, None]
    out["blend_lo"] = lo.astype(np.float32)
    out["blend_hi"] = hi.astype(np.float32)
    _calibrate(hp, out, graphs, {"weights": [round(float(v), 6) for v in w], "network_spread": gnn,
                                 "ridge_spread": ridge_spread})
    return out


def ridge_prefit_params(graphs, c):
    """The ridge term fitted before training (`ridge_prefit = c`, in `fit`): fixed
    parameters (`RIDGE_PARAMS`, never trained) that put c times the ridge
    ranker (`ridge_fit`), in units of its spread, into the score the network
    is trained with (gnn_scale = 1): the network learns what the ridge ranker
    gets wrong, instead of being blended with it afterwards (`ridge_blend`)."""
    w, spread, lo, hi = ridge_fit(graphs)
    return {
        "gnn_scale": np.ones(1, np.float32),
        "blend_w": (c * w / spread).astype(np.float32)[:, None],
        "blend_lo": lo.astype(np.float32),
        "blend_hi": hi.astype(np.float32),
    }


def ensemble_params(hp, members, graphs, early_join=0):
    """One model from n separately trained networks (`hp`: theirs, without
    `ensemble`; the last `early_join` of them are early-join networks, trained
    with `dict(hp, early_join=1)`): each member's parameters under
    `m{i}_NAME` (model.member_params), and `m{i}_scale` = 1 / (n x its spread:
    the mean over `graphs` of the standard deviation of its scores within a
    graph), so the ensemble scores the mean of its members in common units. A
    score stays a function of the graph and the configuration alone. Returns
    (ensemble hparams, parameters); `finish_ridge_term` applies to them as to
    one network."""
    n = len(members)
    if n < 2:
        raise ValueError("an ensemble needs at least 2 networks")
    if hp.get("ridge_prefit"):
        raise ValueError("an ensemble of networks trained with ridge_prefit is not supported")
    if hp.get("early_join") or not 0 <= early_join <= n:
        raise ValueError("ensemble_params: pass the members' plain hparams and the number of early-join members")
    out = {}
    for k in M.SHARED_PARAMS:
        if k in members[0]:
            if not all(np.array_equal(m[k], members[0][k]) for m in members):
                raise ValueError(f"ensemble: the members' {k} differ (trained on other graphs?)")
            out[k] = members[0][k]
    for i, m in enumerate(members):
        member_hp = dict(hp, early_join=1) if i >= n - early_join else hp
        spread = []
        for g in graphs:
            g = g() if callable(g) else g
            spread.append(float(np.std(graph_scores("layout", member_hp, m, g))))
        if not np.mean(spread) > 0:
            raise ValueError(f"ensemble: member {i} has a degenerate spread {np.mean(spread)}")
        out.update({f"m{i}_{k}": v for k, v in m.items() if k not in M.SHARED_PARAMS})
        out[f"m{i}_scale"] = np.asarray([1.0 / (n * np.mean(spread))], np.float32)
    return dict(hp, ensemble=n, early_join=early_join), out


def finish_ridge_term(hp, params, graphs):
    """After `fit` on `graphs`: the ridge term's final parameters and hp["ridge_fit"]
    (with `log_runtime_per_score`). `ridge_blend`: fitted now and blended
    (`ridge_blend`); `ridge_prefit`: already in `params`, calibrated only;
    `ridge_only`: the ridge ranker alone (`ridge_blend` with the network's
    weight 0); neither: `params` unchanged."""
    if hp.get("ridge_blend") and hp.get("ridge_prefit"):
        raise ValueError("ridge_blend and ridge_prefit exclude each other")
    if hp.get("ridge_only"):
        if hp.get("ridge_prefit"):
            raise ValueError("ridge_only and ridge_prefit exclude each other")
        return ridge_blend(hp, params, graphs, 1.0, network=False)
    if hp.get("ridge_blend"):
        return ridge_blend(hp, params, graphs, hp["ridge_blend"])
    if hp.get("ridge_prefit"):
        w = params["blend_w"][:, 0].astype(np.float64)
        _calibrate(hp, params, graphs, {"weights": [round(float(v), 6) for v in w], "prefit": hp["ridge_prefit"]})
    return params


def usable_graph(g: D.GraphData) -> bool:
    return g.config_feat.shape[0] >= 2 and np.ptp(g.runtime) > 0


def valid_line(valid_ev, n_files):
    """The held-out metrics line; with no held-out files (`--valid` given
    nothing) it says so instead of printing a bare "valid "."""
    if not valid_ev:
        why = "no held-out files (--valid named none)" if n_files == 0 else f"none of the {n_files} held-out files is usable"
        return f"valid: not evaluated: {why}; the metrics above are on the training files"
    return "valid " + metrics.format_metrics(valid_ev)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", choices=["layout", "tile"], required=True)
    ap.add_argument("--data", required=True, help="root of the npz tree (…/tpugraphs/npz)")
    ap.add_argument("--train", nargs="*", help="npz files/dirs/globs relative to --data (default: see DEFAULT_SPLITS)")
    ap.add_argument("--valid", nargs="*", help="held-out npz files/dirs relative to --data")
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--batch", type=int, default=None, help="configurations sampled per step")
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--loss", choices=sorted(LOSSES), default="hinge")
    ap.add_argument("--margin", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hidden", type=int, default=None)
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--mlp-hidden", type=int, default=None, help="width of the scoring MLP")
    ap.add_argument("--tpu-features", type=int, choices=[0, 1], default=None, help="layout: TPU tiling features in the head")
    ap.add_argument("--ref-init", type=float, default=None, help="layout: start the linear term as the reference heuristic, scaled")
    ap.add_argument("--channels", type=int, default=None, help="layout head channels K")
    ap.add_argument("--ridge-blend", type=float, default=None,
                    help="layout: add this many times a ridge ranker over size-weighted TPU features, fitted after training")
    ap.add_argument("--ridge-prefit", type=float, default=None,
                    help="layout: fit the ridge ranker before training and train the network with this many times it "
                         "in the score (excludes --ridge-blend)")
    ap.add_argument("--ridge-only", action="store_true",
                    help="layout: no network training; the score is the ridge ranker alone (MODEL.md)")
    ap.add_argument("--config-expand", type=int, choices=[1, 2], default=None)
    ap.add_argument("--ensemble", type=int, default=1,
                    help="layout: train this many networks (seeds SEED, SEED+1, ...) and export their mean "
                         "(each over its spread) as one model")
    ap.add_argument("--early-join", type=int, default=0, metavar="J",
                    help="layout: also train J early-join networks (seeds SEED ... SEED+J-1; model.ej_score) and "
                         "export the mean of all the networks (each over its spread) as one model")
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--device", help="the hardware the training runtimes were measured on, recorded in model.json "
                    "(`tpu`, `xla-cpu`, ...); default: the device of the `hlo-cost collect` manifest.json beside "
                    "the training files, or `tpu` (TpuGraphs) when there is none")
    ap.add_argument("--cache-dir", help="keep pruned, deduplicated graphs here between runs")
    ap.add_argument("--cache-mb", type=float, default=2048, help="keep loaded graphs in memory up to this size")
    ap.add_argument("--data-parallel", action="store_true",
                    help="split each batch across all devices (of all processes with --coordinator)")
    ap.add_argument("--coordinator", help="multi-process: host:port of process 0 (jax.distributed)")
    ap.add_argument("--num-processes", type=int, help="multi-process: number of processes")
    ap.add_argument("--process-id", type=int, help="multi-process: this process's index")
    args = ap.parse_args(argv)

    task = args.task
    parallel = None
    if args.data_parallel:
        if args.coordinator:
            jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id)
        parallel = DataParallel()
        print(f"data-parallel over {len(parallel.devices)} devices, {jax.process_count()} processes", flush=True)
    elif args.coordinator:
        sys.exit("--coordinator needs --data-parallel")
    hp = M.default_hparams(task)
    if args.hidden:
        hp["hidden"] = args.hidden
    if args.layers:
        hp["num_layers"] = args.layers
    if args.mlp_hidden:
        hp["mlp_hidden"] = args.mlp_hidden
    if task == "layout":
        for key, value in [("tpu_features", args.tpu_features), ("ref_init", args.ref_init), ("channels", args.channels),
                           ("config_expand", args.config_expand), ("ridge_blend", args.ridge_blend),
                           ("ridge_prefit", args.ridge_prefit)]:
            if value is not None:
                hp[key] = value
        if args.ridge_only:
            if args.ridge_prefit or args.ridge_blend:
                sys.exit("--ridge-only excludes --ridge-blend and --ridge-prefit")
            # The ridge term reads the node shapes from the embedding (model.shape_in_embedding).
            hp.update(ridge_only=True, ridge_blend=1.0)
    elif args.ridge_only:
        sys.exit("--ridge-only is a layout option")
    steps = 0 if args.ridge_only else (args.steps or 300)
    batch = args.batch or (48 if task == "layout" else 64)
    khop = hp["num_layers"] if task == "layout" else None

    tr_spec, va_spec = DEFAULT_SPLITS[task]
    train_files = D.list_npz([resolve(args.data, p) for p in (tr_spec if args.train is None else args.train)])
    valid_files = D.list_npz([resolve(args.data, p) for p in (va_spec if args.valid is None else args.valid)])
    overlap = set(map(os.path.realpath, train_files)) & set(map(os.path.realpath, valid_files))
    if overlap:
        sys.exit(f"validation files are also training files: {sorted(overlap)}")
    if not train_files:
        sys.exit("no training files")
    try:
        device = D.collected_device(train_files, args.device)
    except ValueError as e:
        sys.exit(str(e))
    t0 = time.time()
    print(f"task={task} device={device} train={len(train_files)} files valid={len(valid_files)} files", flush=True)

    stats = D.feature_stats(train_files, task)
    # Graphs stay on disk and are loaded when their turn comes; a bounded
    # in-memory cache (--cache-mb) keeps the small ones.
    cache, cache_bytes = {}, 0

    def get(path):
        nonlocal cache_bytes
        if path in cache:
            return cache[path]
        g = D.load_graph_cached(path, task, khop, args.cache_dir)
        size = g.node_feat.nbytes + g.config_feat.nbytes
        if cache_bytes + size <= args.cache_mb * 2**20:
            cache[path] = g
            cache_bytes += size
        return g

    usable, graphs = [], []
    for p in train_files:
        g = get(p)
        if usable_graph(g):
            usable.append(p)
            graphs.append(lambda p=p: get(p))
            print(f"  train {g.name}: nodes={len(g.node_opcode)} configs={g.config_feat.shape[0]}", flush=True)
        else:
            print(f"  skip {g.name}: no usable runtimes", flush=True)
    if not usable:
        sys.exit("no training file has runtimes")
    valid = [D.load_graph_cached(p, task, khop, args.cache_dir) for p in valid_files]
    valid = [g for g in valid if usable_graph(g)]

    if (args.ensemble > 1 or args.early_join) and task != "layout":
        sys.exit("--ensemble and --early-join are layout options")
    if (args.ensemble > 1 or args.early_join) and hp.get("ridge_only"):
        sys.exit("--ridge-only trains no network: --ensemble and --early-join do not apply")
    if args.early_join < 0 or args.ensemble < 1:
        sys.exit("--ensemble must be >= 1 and --early-join >= 0")
    members = []
    # --ridge-only: no network trained; untrained parameters, weighted 0 by finish_ridge_term.
    network_seeds = [] if hp.get("ridge_only") else [(s, False) for s in range(args.seed, args.seed + args.ensemble)]
    network_seeds += [(s, True) for s in range(args.seed, args.seed + args.early_join)]
    if hp.get("ridge_only"):
        cfg = stats.get("cfg", (None, None))
        members.append(M.init_params(task, hp, args.seed, *stats["node"], *cfg))
    for seed, early in network_seeds:
        if len(network_seeds) > 1:
            print(f"network {len(members) + 1}/{len(network_seeds)}: {'early join, ' if early else ''}seed {seed}",
                  flush=True)
        members.append(fit(
            task,
            dict(hp, early_join=1) if early else hp,
            graphs,
            stats,
            steps=steps,
            batch=batch,
            lr=args.lr,
            loss=args.loss,
            margin=args.margin,
            weight_decay=args.weight_decay,
            seed=seed,
            log=lambda m: print(m, flush=True),
            parallel=parallel,
        ))
    if jax.process_index() != 0:
        return  # every process holds the same parameters; process 0 writes them
    final = members[0]
    if len(members) > 1:
        hp, final = ensemble_params(hp, members, [get(p) for p in usable], early_join=args.early_join)
    elif args.early_join:
        hp = dict(hp, early_join=1)
    if task == "layout":
        final = finish_ridge_term(hp, final, [get(p) for p in usable])
    train_ev = evaluate(task, hp, final, [get(p) for p in usable])
    valid_ev = evaluate(task, hp, final, valid) if valid else {}
    print("train " + metrics.format_metrics(train_ev))
    print(valid_line(valid_ev, len(valid_files)))
    def rel(p):
        if os.path.realpath(p).startswith(HERE + os.sep):
            return "costmodel/training/" + os.path.relpath(p, HERE)
        return os.path.relpath(p, args.data)

    info = {
        "device": device,
        "trained_on": [rel(p) for p in usable],
        "validated_on": [rel(p) for p in valid_files],
        "training": {
            "steps": steps,
            "batch": batch,
            "lr": args.lr,
            "loss": args.loss,
            "margin": args.margin,
            "weight_decay": args.weight_decay,
            "seed": args.seed,
            "seconds": round(time.time() - t0, 1),
            "command": "costmodel/training/train.py " + " ".join(sys.argv[1:] if argv is None else argv),
        },
        "metrics": {"train": train_ev, "valid": valid_ev},
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    X.write_hlocm(args.out, task, final, hp, info)
    print(f"wrote {args.out} in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
