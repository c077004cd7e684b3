"""Trains a GNN cost model on TpuGraphs npz files and writes a `.hlocm` model file.

Reproduce the default models from the repository root (deterministic, CPU):

    .venv/bin/python costmodel/training/train.py --task layout \
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
    "layout": (
        ["layout/xla/default/train/unet3d.npz", "layout/xla/random/train"],
        ["layout/xla/default/valid/unet_3d.4x4.bf16.npz"],
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

        def f(p, g_feat, g_op, g_edge, g_ids, cfg):
            emb = M.layout_encoder(p, hp, g_feat, g_op, g_edge, g_ids)
            return M.layout_head(p, hp, emb, cfg)

    else:

        def f(p, g_feat, g_op, g_edge, g_ids, cfg):
            del g_ids
            return M.tile_forward(p, hp, g_feat, g_op, g_edge, cfg)

    return f


def pairwise_hinge(scores, runtime, margin):
    """Mean over ordered pairs (i faster than j) of max(0, margin - (s_j - s_i))."""
    faster = (runtime[:, None] < runtime[None, :]).astype(jnp.float32)
    diff = scores[None, :] - scores[:, None]  # s_j - s_i
    loss = jax.nn.relu(margin - diff) * faster
    return loss.sum() / jnp.maximum(faster.sum(), 1.0)


def list_mle(scores, runtime):
    """ListMLE with lower score = faster: likelihood of the fastest-first order."""
    s = -scores[jnp.argsort(runtime)]
    tail = jax.lax.cumlogsumexp(s[::-1])[::-1]  # logsumexp(s[i:])
    return jnp.mean(tail - s)


def dense_rank(runtime):
    """Ranks with ties kept equal (the losses only need the order)."""
    return jnp.asarray(np.unique(runtime, return_inverse=True)[1].reshape(-1), jnp.float32)


def batches_for(g: D.GraphData, rng: np.random.Generator, batch: int):
    c = g.config_feat.shape[0]
    if c <= batch:
        return np.arange(c)
    return np.sort(rng.choice(c, size=batch, replace=False))


def evaluate(task, hp, params, graphs):
    """Per-graph metrics over all (deduplicated) configurations of each graph."""
    fwd = jax.jit(forward_fn(task, hp))
    out = {}
    for g in graphs:
        s = np.asarray(
            fwd(params, g.node_feat, g.node_opcode, g.edge_index, g.node_config_ids, g.config_feat), np.float64
        )
        out[g.name] = metrics.ranking_metrics(s, g.runtime)
    return out


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
    ap.add_argument("--loss", choices=["hinge", "listmle"], default="hinge")
    ap.add_argument("--margin", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hidden", type=int, default=None)
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--attn-dim", type=int, default=None)
    ap.add_argument("--channels", type=int, default=None, help="layout head channels K")
    ap.add_argument("--config-expand", type=int, choices=[1, 2], default=None)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--cache-mb", type=float, default=2048, help="keep loaded graphs in memory up to this size")
    ap.add_argument("--eval-every", type=int, default=0)
    args = ap.parse_args(argv)

    task = args.task
    hp = M.default_hparams(task)
    if args.hidden:
        hp["hidden"] = args.hidden
    if args.layers:
        hp["num_layers"] = args.layers
    if task == "layout":
        for key, value in [("attn_dim", args.attn_dim), ("channels", args.channels), ("config_expand", args.config_expand)]:
            if value is not None:
                hp[key] = value
    steps = args.steps or 300
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
    t0 = time.time()
    print(f"task={task} train={len(train_files)} files valid={len(valid_files)} files", flush=True)

    stats = D.feature_stats(train_files, task)
    node_mu, node_inv = stats["node"]
    cfg_mu, cfg_inv = stats.get("cfg", (None, None))
    params = M.init_params(task, hp, args.seed, node_mu, node_inv, cfg_mu, cfg_inv)
    frozen = {"node_mu", "node_inv_sigma", "cfg_mu", "cfg_inv_sigma"}
    trainable = {k: jnp.asarray(v) for k, v in params.items() if k not in frozen}
    consts = {k: jnp.asarray(v) for k, v in params.items() if k in frozen}

    sched = optax.warmup_cosine_decay_schedule(0.0, args.lr, max(steps // 20, 1), steps, args.lr * 0.05)
    opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(sched, weight_decay=args.weight_decay))
    opt_state = opt.init(trainable)
    fwd = forward_fn(task, hp)

    def loss_fn(tp, g_feat, g_op, g_edge, g_ids, cfg, rt):
        s = fwd({**tp, **consts}, g_feat, g_op, g_edge, g_ids, cfg)
        if args.loss == "hinge":
            return pairwise_hinge(s, rt, args.margin)
        return list_mle(s, rt)

    @jax.jit
    def step_fn(tp, st, g_feat, g_op, g_edge, g_ids, cfg, rt):
        loss, grads = jax.value_and_grad(loss_fn)(tp, g_feat, g_op, g_edge, g_ids, cfg, rt)
        upd, st = opt.update(grads, st, tp)
        return optax.apply_updates(tp, upd), st, loss

    # Graph stream with a bounded cache; files without runtimes (test splits) are skipped.
    cache, cache_bytes = {}, 0

    def get(path):
        nonlocal cache_bytes
        if path in cache:
            return cache[path]
        g = D.load_graph(path, task, khop)
        size = g.node_feat.nbytes + g.config_feat.nbytes
        if cache_bytes + size <= args.cache_mb * 2**20:
            cache[path] = g
            cache_bytes += size
        return g

    usable = []
    for p in train_files:
        g = get(p)
        if g.config_feat.shape[0] >= 2 and np.ptp(g.runtime) > 0:
            usable.append(p)
            print(f"  train {g.name}: nodes={len(g.node_opcode)} configs={g.config_feat.shape[0]}", flush=True)
        else:
            print(f"  skip {g.name}: no usable runtimes", flush=True)
    if not usable:
        sys.exit("no training file has runtimes")
    valid = [D.load_graph(p, task, khop) for p in valid_files]
    valid = [g for g in valid if g.config_feat.shape[0] >= 2 and np.ptp(g.runtime) > 0]

    rng = np.random.default_rng(args.seed)
    order = []
    losses = []
    for step in range(steps):
        if not order:
            order = list(rng.permutation(len(usable)))
        g = get(usable[order.pop()])
        idx = batches_for(g, rng, batch)
        trainable, opt_state, loss = step_fn(
            trainable,
            opt_state,
            g.node_feat,
            g.node_opcode,
            g.edge_index,
            g.node_config_ids,
            g.config_feat[idx],
            dense_rank(g.runtime[idx]),
        )
        losses.append(float(loss))
        if (step + 1) % 50 == 0 or step == steps - 1:
            print(f"step {step + 1}/{steps} loss {np.mean(losses[-50:]):.4f} ({time.time() - t0:.0f}s)", flush=True)
        if args.eval_every and (step + 1) % args.eval_every == 0 and valid:
            ev = evaluate(task, hp, {**trainable, **consts}, valid)
            print("  valid " + metrics.format_metrics(ev), flush=True)

    final = {k: np.asarray(v, np.float32) for k, v in {**trainable, **consts}.items()}
    train_ev = evaluate(task, hp, final, [get(p) for p in usable])
    valid_ev = evaluate(task, hp, final, valid) if valid else {}
    print("train " + metrics.format_metrics(train_ev))
    print("valid " + metrics.format_metrics(valid_ev))
    def rel(p):
        if os.path.realpath(p).startswith(HERE + os.sep):
            return "costmodel/training/" + os.path.relpath(p, HERE)
        return os.path.relpath(p, args.data)

    info = {
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
