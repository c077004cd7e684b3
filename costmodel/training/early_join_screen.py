"""Leave-one-graph-out screen of an early-join layout network (not exported).

The shipped layout network (model.layout_head) sees each configuration only
through node-specific linear maps of the configurable nodes' embeddings: a
node's embedding is computed once per graph and never sees the configuration.
The early join (the Kaggle "Fast or Slow" winners' layout models; the tile
model here) joins each configuration's features to the configurable nodes
BEFORE message passing, so a node sees its neighbours' layouts:

    x[n, c] = relu(emb[n] W_e + config_feat[c, n] W_c + b)       [NC, C, H]
    x = `layers` SAGE layers (model.message_passing) over the configuration
        meta-graph: an edge producer -> consumer between two configurable
        nodes joined by a directed path of at most `meta_hops` edges whose
        inner nodes are not configurable (`meta_edges`)
    score[c] = MLP(mean_n x[n, c] ++ max_n x[n, c])

`emb` is the shipped encoder's (model.layout_encoder), trained with it. Every
step is per configuration: a score depends on the graph and its
configuration alone. Training is train.fit's (graph-fair steps, 48
configurations, AdamW, warm-up + cosine decay), the folds are cv.py's; for
each fold and seed the network's scores on every labeled graph's
deduplicated configurations are kept in OUT (a pickled dict
{(held-out graph, seed): {graph: scores}}; a rerun skips what is there), and
the summary blends them with the ridge term as train.ridge_blend does (fitted
on the fold's training graphs, inputs clipped, both in units of their spread
on the training graphs) and prints Kendall tau / top-1 slowdown per held-out
graph. `--with-scores F` adds a second network's scores (same format, e.g.
from the shipped network's fold models) to the blend, each over its spread.
MODEL.md ("Screened") has the results. The shipped form of this network is
model.ej_score (`train.py --early-join`, `cv.py --early-join`), which the
Rust head runs with the meta-graph as a third input.

    .venv/bin/python costmodel/training/early_join_screen.py --data ../shared/data/tpugraphs/npz \\
        --cache-dir /tmp/cv/cache --out /tmp/ej.npy --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import cv  # noqa: E402
import data as D  # noqa: E402
import metrics  # noqa: E402
import model as M  # noqa: E402
import train as T  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")


def meta_edges(num_nodes: int, edge_index: np.ndarray, ids: np.ndarray, hops: int) -> np.ndarray:
    """data.meta_edges (the shipped meta-graph; this screen's own sparse-matrix
    version gave the same edges on every labeled graph)."""
    return D.meta_edges(num_nodes, edge_index, ids, hops)


def init_params(hp, h, layers, seed, stats):
    """The encoder's parameters (model.init_params) and the early-join head's (`ej_*`)."""
    p = M.init_params("layout", hp, seed, *stats["node"])
    for k in ["node_w", "node_b", "pool_w", "mlp_w", "mlp_b", "out_w", "out_b"]:
        p.pop(k)
    rng = np.random.default_rng(seed + 1000)
    p["ej_emb_w"] = M._dense(rng, hp["hidden"], h)
    p["ej_cfg_w"] = M._dense(rng, M.LAYOUT_CONFIG_DIM, h)
    p["ej_b"] = np.zeros(h, np.float32)
    for layer in range(layers):
        for name in ["self", "in", "out"]:
            p[f"ej_l{layer}_{name}_w"] = M._dense(rng, h, h, 0.5)
        p[f"ej_l{layer}_b"] = np.zeros(h, np.float32)
    p["ej_mlp_w"] = M._dense(rng, 2 * h, hp["mlp_hidden"])
    p["ej_mlp_b"] = np.zeros(hp["mlp_hidden"], np.float32)
    p["ej_out_w"] = M._dense(rng, hp["mlp_hidden"], 1, 0.5)
    p["ej_out_b"] = np.zeros(1, np.float32)
    return p


def forward(p, hp, layers, node_feat, node_opcode, edge_index, node_config_ids, cedges, config_feat):
    emb = M.layout_encoder(p, hp, node_feat, node_opcode, edge_index, node_config_ids)[:, : hp["hidden"]]
    x = jax.nn.relu((emb @ p["ej_emb_w"])[:, None, :] + jnp.swapaxes(config_feat, 0, 1) @ p["ej_cfg_w"] + p["ej_b"])
    q = {f"l{layer}_{k}": p[f"ej_l{layer}_{k}"] for layer in range(layers) for k in ["self_w", "in_w", "out_w", "b"]}
    x = M.message_passing(q, x, cedges, layers)  # [NC, C, H]
    pooled = jnp.concatenate([jnp.mean(x, axis=0), jnp.max(x, axis=0)], axis=-1)
    z = jax.nn.relu(pooled @ p["ej_mlp_w"] + p["ej_mlp_b"])
    return (z @ p["ej_out_w"] + p["ej_out_b"])[:, 0]


class Trainer:
    """Compiled once per setup (a step per graph shape), reused over folds and seeds."""

    def __init__(self, hp, h, layers, steps, loss, lr=5e-4, weight_decay=0.05, margin=0.1):
        self.hp, self.h, self.layers, self.steps = hp, h, layers, steps
        sched = optax.warmup_cosine_decay_schedule(0.0, lr, max(steps // 20, 1), steps, lr * 0.05)
        self.opt = optax.chain(optax.clip_by_global_norm(1.0),
                               optax.adamw(sched, eps=T.ADAM_EPS["layout"], weight_decay=weight_decay))
        loss_of = T.LOSSES[loss]

        def fwd(p, *g):
            return forward(p, hp, layers, *g)

        @jax.jit
        def step(tp, st, consts, g, cfg, rt):
            value, grads = jax.value_and_grad(lambda tp: loss_of(fwd({**tp, **consts}, *g, cfg), rt, margin))(tp)
            upd, st = self.opt.update(grads, st, tp)
            return optax.apply_updates(tp, upd), st, value

        self.step = step
        self.score = jax.jit(fwd)

    def fit(self, graphs, stats, seed):
        p = init_params(self.hp, self.h, self.layers, seed, stats)
        frozen = {"node_mu", "node_inv_sigma"}
        tp = {k: jnp.asarray(v) for k, v in p.items() if k not in frozen}
        consts = {k: jnp.asarray(v) for k, v in p.items() if k in frozen}
        st = self.opt.init(tp)
        rng = np.random.default_rng(seed)
        order = []
        for _ in range(self.steps):
            if not order:
                order = list(rng.permutation(len(graphs)))
            g, ce = graphs[order.pop()]
            idx = T.batches_for(g, rng, 48)
            tp, st, _ = self.step(tp, st, consts, graph_args(g, ce), g.config_feat[idx], T.relative_runtime(g.runtime[idx]))
        return {k: np.asarray(v) for k, v in {**tp, **consts}.items()}

    def scores(self, p, g, ce, chunk=1024):
        out = []
        for i in range(0, g.config_feat.shape[0], chunk):
            c = g.config_feat[i : i + chunk]
            n = c.shape[0]
            if n < chunk:  # one compiled shape per graph
                c = np.concatenate([c, np.repeat(c[-1:], chunk - n, axis=0)])
            out.append(np.asarray(self.score(p, *graph_args(g, ce), c), np.float64)[:n])
        return np.concatenate(out)


def graph_args(g, ce):
    return (g.node_feat, g.node_opcode, g.edge_index, g.node_config_ids, ce)


def summary(runs: dict, graphs: dict, extra: dict | None, a_values):
    """Rows of (label, {held-out graph: (mean tau, mean top-1)}) over the seeds in `runs`."""
    names = [n for n in cv_names() if n in graphs]
    seeds = sorted({s for (_, s) in runs})
    rows = []
    ridge = {}
    for h in names:
        w, spread, lo, hi = T.ridge_fit([graphs[n] for n in graphs if n != h])
        shape = M.node_shape_features(graphs[h].node_feat)[graphs[h].node_config_ids]
        x = np.clip(np.asarray(M.weighted_tpu_features(graphs[h].config_feat, shape), np.float64), lo, hi)
        ridge[h] = x @ w / spread
    modes = {"early join": ("ej",), "the other network": ("other",), "early join + the other network": ("ej", "other")}
    for label0, mode in modes.items():
        if "other" in mode and not extra:
            continue
        for a in a_values:
            per = {}
            for h in names:
                taus, tops = [], []
                for s in seeds:
                    train = [n for n in graphs if n != h]
                    nets = ([runs[(h, s)]] if "ej" in mode else []) + ([extra[(h, s)]] if "other" in mode else [])
                    y = sum(r[h] / np.mean([r[n].std() for n in train if n in r]) for r in nets) / len(nets)
                    m = metrics.ranking_metrics(y + a * ridge[h], graphs[h].runtime)
                    taus.append(m["kendall"])
                    tops.append(m["slowdown@1"])
                per[h] = (float(np.mean(taus)), float(np.mean(tops)))
            label = label0 + (f" + ridge a={a:g}" if a else " alone")
            rows.append((label, per))
    return rows, seeds


def cv_names():
    return [os.path.basename(g)[: -len(".npz")] for g in cv.GRAPHS]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--cache-dir")
    ap.add_argument("--out", required=True, help="scores file (pickled dict, resumed)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--hidden", type=int, default=32, help="H, the early-join width")
    ap.add_argument("--layers", type=int, default=2, help="SAGE layers over the meta-graph")
    ap.add_argument("--meta-hops", type=int, default=3)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--loss", choices=sorted(T.LOSSES), default="hinge-gap")
    ap.add_argument("--with-scores", help="another network's scores in the same format, blended in the summary")
    ap.add_argument("--summary-only", action="store_true")
    args = ap.parse_args()
    if not args.out.endswith(".npy"):
        sys.exit("--out must end in .npy")

    hp = M.default_hparams("layout")
    files = {os.path.basename(g)[: -len(".npz")]: os.path.join(args.data, g) for g in cv.GRAPHS}
    for f in D.list_npz([os.path.join(args.data, "layout/xla/random/train")]):
        files.setdefault(os.path.basename(f)[: -len(".npz")], f)
    graphs, cedges = {}, {}
    for name, f in files.items():
        g = D.load_graph_cached(f, "layout", hp["num_layers"], args.cache_dir)
        if T.usable_graph(g):
            graphs[name] = g
            cedges[name] = meta_edges(len(g.node_opcode), g.edge_index, g.node_config_ids, args.meta_hops)
            print(f"{name}: {len(g.node_opcode)} nodes, {len(g.node_config_ids)} configurable, "
                  f"{len(cedges[name])} meta-graph edges", flush=True)
    runs = np.load(args.out, allow_pickle=True).item() if os.path.exists(args.out) else {}
    if not args.summary_only:
        trainer = Trainer(hp, args.hidden, args.layers, args.steps, args.loss)
        t0 = time.time()
        for h in cv_names():
            train = [n for n in graphs if n != h]
            stats = D.feature_stats([files[n] for n in train], "layout")
            for seed in args.seeds:
                if (h, seed) in runs:
                    continue
                t1 = time.time()
                p = trainer.fit([(graphs[n], cedges[n]) for n in train], stats, seed)
                runs[(h, seed)] = {n: trainer.scores(p, graphs[n], cedges[n]) for n in graphs}
                np.save(args.out, runs, allow_pickle=True)
                m = metrics.ranking_metrics(runs[(h, seed)][h], graphs[h].runtime)
                print(f"{h} seed {seed}: network alone tau {m['kendall']:.3f} top-1 {100 * m['slowdown@1']:.2f}% "
                      f"({time.time() - t1:.0f}s, total {time.time() - t0:.0f}s)", flush=True)
    runs = {k: v for k, v in runs.items() if k[1] in args.seeds}
    extra = np.load(args.with_scores, allow_pickle=True).item() if args.with_scores else None
    rows, seeds = summary(runs, graphs, extra, [0, 0.5, 1, 2])
    names = [n for n in cv_names() if n in graphs]
    print(f"\nseeds {seeds}\n| variant | " + " | ".join(f"{n}: tau / top-1" for n in names) + " | mean tau | mean top-1 |")
    print("|---|" + "---|" * (len(names) + 2))
    for label, per in rows:
        cells = [f"{per[n][0]:.3f} / {100 * per[n][1]:.2f}%" for n in names]
        print(f"| {label} | " + " | ".join(cells) + f" | {np.mean([per[n][0] for n in names]):.3f} | "
              f"{100 * np.mean([per[n][1] for n in names]):.2f}% |")


if __name__ == "__main__":
    main()
