"""Leave-one-graph-out cross-validation of the layout cost model.

For each labeled graph G (default: the five usable labeled graphs under
--data) and each seed: train on all the other labeled graphs with the given
training options (those of train.py), export the model to a `.hlocm`, and
evaluate it on G the way a user would: `hlo-cost eval --json --model M G.npz`
(every configuration of the published file, the shipped Rust + ONNX Runtime
path). The reference heuristic (`--model reference`) and an old model file
(`--old-model`, e.g. the previous embedded default) are evaluated on G the same
way. Prints one table per graph (Kendall tau, ordered-pair accuracy, top-1 and
top-5 slowdown; the new model's figures are means over the seeds) and the
means over the graphs, and writes everything to OUT_DIR/cv.json.

    .venv/bin/python costmodel/training/cv.py --data ../shared/data/tpugraphs/npz \\
        --out-dir /tmp/cv --old-model /tmp/old-layout.hlocm --seeds 0 1 2

Needs `target/release/hlo-cost` (`cargo build --release --bin hlo-cost`).
`cv.py --summary OUT_DIR` prints one row per variant run into OUT_DIR (the
table of MODEL.md); `cv.py --blend OUT_DIR VARIANT DATA L...` re-scores a
run's fold models blended with the reference heuristic (`ref_blend`).
Deterministic for the same options (the models are; `seconds` are not).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hlo_opt  # noqa: E402
import numpy as np  # noqa: E402

import data as D  # noqa: E402
import export as X  # noqa: E402
import metrics  # noqa: E402
import model as M  # noqa: E402
import train as T  # noqa: E402

GRAPHS = [
    "layout/xla/default/train/unet3d.npz",
    "layout/xla/default/train/alexnet_train_batch_32.npz",
    "layout/xla/default/train/efficientnet_b7_eval_batch_1.npz",
    "layout/xla/default/train/mask_rcnn_batch_16_bf16_img1024.npz",
    "layout/xla/default/valid/unet_3d.4x4.bf16.npz",
]
METRICS = [("kendall_tau", "tau"), ("ordered_pair_accuracy", "OPA"), ("top1_slowdown", "top-1"), ("top5_slowdown", "top-5")]
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def hlo_cost_eval(binary: str, model: str, npz: str) -> dict:
    """The metrics `hlo-cost eval --json` reports for one file."""
    out = subprocess.run(
        [binary, "eval", "--json", "--threads", "1", "--model", model, npz], capture_output=True, text=True
    )
    if out.returncode != 0:
        raise RuntimeError(f"hlo-cost eval --model {model} {npz} failed: {out.stderr.strip()}")
    doc = json.loads(out.stdout)
    return {k: doc["files"][0]["metrics"][k] for k, _ in METRICS}


def mean(xs):
    xs = [x for x in xs if x is not None]
    return float(np.mean(xs)) if xs else None


def fmt(x, pct=False):
    if x is None:
        return "-"
    return f"{100 * x:.2f}%" if pct else f"{x:.3f}"


def table(results: dict, names: list[str]) -> str:
    lines = []
    head = "| model | " + " | ".join(h for _, h in METRICS) + " |"
    for g in names + ["mean"]:
        lines.append(f"\n{g}\n{head}\n|---|" + "---|" * len(METRICS))
        for who in ["new", "reference", "old"]:
            if who not in results[g]:
                continue
            m = results[g][who]
            row = [fmt(m[k], pct=k.endswith("slowdown")) for k, _ in METRICS]
            extra = ""
            if who == "new" and "kendall_tau_per_seed" in m:
                extra = "  (tau per seed: " + ", ".join(fmt(t) for t in m["kendall_tau_per_seed"]) + ")"
            lines.append(f"| {who} | " + " | ".join(row) + f" |{extra}")
    return "\n".join(lines)


def summary(out_dir: str) -> str:
    """One markdown row per variant (cv.*.json in out_dir): per-graph mean tau / top-1, means."""
    rows = []
    for f in sorted(os.listdir(out_dir)):
        if not (f.startswith("cv.") and f.endswith(".json")) or ".fold." in f:  # --folds parts: not a variant
            continue
        doc = json.load(open(os.path.join(out_dir, f)))
        res = doc["results"]
        names = [n for n in res if n != "mean"]
        if not rows:
            rows.append("| variant | " + " | ".join(f"{n}: tau / top-1" for n in names) + " | mean tau | mean top-1 |")
            rows.append("|---|" + "---|" * (len(names) + 2))
            for who in ["reference", "old"]:
                if who in res["mean"]:
                    cells = [f"{fmt(res[n][who]['kendall_tau'])} / {fmt(res[n][who]['top1_slowdown'], True)}" for n in names]
                    rows.append(f"| ({who}) | " + " | ".join(cells) + f" | {fmt(res['mean'][who]['kendall_tau'])} | "
                                f"{fmt(res['mean'][who]['top1_slowdown'], True)} |")
        cells = [f"{fmt(res[n]['new']['kendall_tau'])} / {fmt(res[n]['new']['top1_slowdown'], True)}" for n in names]
        rows.append(f"| {doc['variant']} | " + " | ".join(cells) + f" | {fmt(res['mean']['new']['kendall_tau'])} | "
                    f"{fmt(res['mean']['new']['top1_slowdown'], True)} |")
    return "\n".join(rows)


NETWORK_KEYS = ["hidden", "opcode_dim", "num_layers", "channels", "config_expand", "mlp_hidden", "tpu_features",
                "ridge_prefit"]
EJ_KEYS = ["ej_hidden", "ej_layers"]


def trained_network(out_dir: str, hp: dict, train_graphs, stats, seed: int, args, train_files) -> dict:
    """`T.fit` of one network (`hp`) on a fold's graphs, kept in OUT_DIR/networks/
    under a key of everything the training depends on (network options,
    training options, seed, training files): a rerun, or another variant with
    the same networks, loads it instead of training again (training is
    deterministic, so this is the network training would give)."""
    import hashlib

    keys = NETWORK_KEYS + (["early_join"] + EJ_KEYS if hp.get("early_join") else [])
    spec = {"net": {k: hp.get(k, 0) for k in keys}, "seed": seed, "steps": args.steps, "batch": args.batch,
            "lr": args.lr, "loss": args.loss, "margin": args.margin, "weight_decay": args.weight_decay,
            "files": sorted(os.path.basename(f) for f in train_files)}
    key = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    path = os.path.join(out_dir, "networks", f"{'ej' if hp.get('early_join') else 'net'}.{key}.npz")
    if os.path.exists(path):
        return dict(np.load(path))
    if args.require_trained:
        raise SystemExit(f"--require-trained: no trained network {path} ({spec})")
    params = T.fit("layout", hp, train_graphs, stats, steps=args.steps, batch=args.batch, lr=args.lr, loss=args.loss,
                   margin=args.margin, weight_decay=args.weight_decay, seed=seed, log=None)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.savez(path + ".tmp.npz", **params)
    os.replace(path + ".tmp.npz", path)
    with open(path[: -len(".npz")] + ".json", "w") as f:
        json.dump(spec, f, indent=1)
    return params


def reused_network(path: str, hp: dict) -> dict:
    """The network parameters of a finished run's fold model (`--reuse`); its
    network options must be this run's."""
    meta, graphs = X.read_hlocm(path)
    old = meta["hparams"]
    differ = [k for k in NETWORK_KEYS if old.get(k, 0) != hp.get(k, 0)]
    if differ:
        raise SystemExit(f"--reuse {path}: network options differ: " + ", ".join(f"{k} {old.get(k)} vs {hp.get(k)}" for k in differ))
    params = X.params_from_onnx(graphs)
    if not hp.get("ridge_prefit"):  # a ridge_blend term is refitted; a prefit one was trained with
        for k in T.RIDGE_PARAMS:
            params.pop(k, None)
    return params


def predictions(binary: str, model: str, npz: str) -> np.ndarray:
    out = subprocess.run([binary, "eval", "--json", "--predictions", "--threads", "1", "--model", model, npz],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"hlo-cost eval --model {model} {npz} failed: {out.stderr.strip()}")
    return np.asarray(json.loads(out.stdout)["files"][0]["predictions"], np.float64)


def blend_study(argv):
    """`cv.py --blend OUT_DIR VARIANT DATA L1 L2 ...`: the fold models of a finished
    run, each blended with L times the reference heuristic's score over the
    configurable nodes' total weight (what `ref_blend = L` computes inside the
    exported model): mean tau and top-1 per L over the seeds, per graph."""
    out_dir, variant, data = argv[:3]
    lambdas = [float(x) for x in argv[3:]]
    binary = os.path.join(REPO, "target", "release", "hlo-cost")
    doc = json.load(open(os.path.join(out_dir, f"cv.{variant}.json")))
    graphs, seeds = doc["options"]["graphs"], doc["options"]["seeds"]
    rows = {lam: {} for lam in lambdas}
    for rel in graphs:
        f = os.path.join(data, rel)
        name = os.path.basename(f)[: -len(".npz")]
        d = hlo_opt.load_npz(f, configs=False)
        rt = d["config_runtime"].astype(np.float64)
        elems = np.maximum(d["node_feat"][d["node_config_ids"], M.FEAT_DIMS_PRODUCT], 0.0)
        total_w = float(np.sum(np.log2(2.0 + elems.astype(np.float32))))
        ref = predictions(binary, "reference", f) / total_w
        for seed in seeds:
            s = predictions(binary, os.path.join(out_dir, f"{variant}.{name}.seed{seed}.hlocm"), f)
            for lam in lambdas:
                m = metrics.ranking_metrics(s + lam * ref, rt)
                rows[lam].setdefault(name, []).append((m["kendall"], m["slowdown@1"]))
    names = list(rows[lambdas[0]])
    print("| ref_blend | " + " | ".join(f"{n}: tau / top-1" for n in names) + " | mean tau | mean top-1 |")
    print("|---|" + "---|" * (len(names) + 2))
    for lam in lambdas:
        taus = [mean([t for t, _ in rows[lam][n]]) for n in names]
        tops = [mean([x for _, x in rows[lam][n]]) for n in names]
        cells = [f"{fmt(t)} / {fmt(x, True)}" for t, x in zip(taus, tops)]
        print(f"| {lam:g} | " + " | ".join(cells) + f" | {fmt(mean(taus))} | {fmt(mean(tops), True)} |")


def main(argv=None):
    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--summary":
        print(summary(sys.argv[2]))
        return
    if argv is None and len(sys.argv) > 5 and sys.argv[1] == "--blend":
        blend_study(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="root of the npz tree (…/tpugraphs/npz)")
    ap.add_argument("--graphs", nargs="*", default=GRAPHS, help="labeled graphs, relative to --data")
    ap.add_argument("--extra-train", nargs="*", default=["layout/xla/random/train"],
                    help="always in the training set (skipped when unusable)")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--name", default="new", help="name of this variant in cv.json")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--old-model", help="a previous model file to compare with")
    ap.add_argument("--hlo-cost", default=os.path.join(REPO, "target", "release", "hlo-cost"))
    ap.add_argument("--cache-dir", default=None, help="pruned graphs cache (default OUT_DIR/cache)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=48)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--loss", choices=sorted(T.LOSSES), default="hinge")
    ap.add_argument("--margin", type=float, default=0.1)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--hidden", type=int)
    ap.add_argument("--layers", type=int)
    ap.add_argument("--channels", type=int)
    ap.add_argument("--config-expand", type=int, choices=[1, 2])
    ap.add_argument("--tpu-features", type=int, choices=[0, 1])
    ap.add_argument("--ref-init", type=float)
    ap.add_argument("--ridge-blend", type=float)
    ap.add_argument("--ridge-prefit", type=float)
    ap.add_argument("--ensemble", type=int, default=1, metavar="N",
                    help="each seed s is an ensemble of N networks, those of seeds N*s ... N*s+N-1 "
                         "(train.ensemble_params; with --reuse, VARIANT's networks of those seeds)")
    ap.add_argument("--early-join", type=int, default=0, metavar="J",
                    help="add J early-join networks (model.ej_score; seeds J*s ... J*s+J-1) to each seed's model "
                         "(train.ensemble_params; --reuse applies to the other networks only)")
    ap.add_argument("--train-only", action="store_true",
                    help="train (and keep in OUT_DIR/networks) every fold's networks, export and evaluate nothing")
    ap.add_argument("--folds", nargs="*", metavar="GRAPH",
                    help="run only these held-out graphs (names without .npz; the training sets stay the whole "
                         "leave-one-out's); each fold's results go to OUT_DIR/cv.NAME.fold.GRAPH.json and the table "
                         "and cv.NAME.json are written once every fold has one (`--folds` alone: run none, write them)")
    ap.add_argument("--require-trained", action="store_true",
                    help="fail instead of training a network that OUT_DIR/networks lacks")
    ap.add_argument("--ridge-only", action="store_true", help="no network: the ridge ranker alone (train.py --ridge-only)")
    ap.add_argument("--reuse", metavar="VARIANT",
                    help="take each fold's network from VARIANT's finished run in OUT_DIR instead of training it "
                         "(same network options; for post-training options such as --ridge-blend)")
    args = ap.parse_args(argv)

    t_start = time.time()
    os.makedirs(args.out_dir, exist_ok=True)
    cache_dir = args.cache_dir or os.path.join(args.out_dir, "cache")
    hp = M.default_hparams("layout")
    for key, value in [("hidden", args.hidden), ("num_layers", args.layers), ("channels", args.channels),
                       ("config_expand", args.config_expand), ("tpu_features", args.tpu_features), ("ref_init", args.ref_init),
                       ("ridge_blend", args.ridge_blend), ("ridge_prefit", args.ridge_prefit)]:
        if value is not None:
            hp[key] = value
    if args.ridge_only:
        if args.ridge_blend or args.ridge_prefit or args.reuse or args.ensemble > 1 or args.early_join:
            sys.exit("--ridge-only excludes --ridge-blend, --ridge-prefit, --reuse and --ensemble")
        hp.update(ridge_only=True, ridge_blend=1.0)
    khop = hp["num_layers"]
    files = [os.path.join(args.data, g) for g in args.graphs]
    extra = D.list_npz([os.path.join(args.data, p) for p in args.extra_train])
    names = [os.path.basename(f)[: -len(".npz")] for f in files]

    graphs = {}
    for f in files + extra:
        g = D.load_graph_cached(f, "layout", khop, cache_dir)
        if T.usable_graph(g):
            graphs[f] = g
        print(f"loaded {g.name}: nodes={len(g.node_opcode)} configs={g.config_feat.shape[0]}"
              f"{'' if T.usable_graph(g) else ' (unusable: skipped)'} ({time.time() - t_start:.0f}s)", flush=True)

    baseline_path = os.path.join(args.out_dir, "baselines.json")
    baselines = json.load(open(baseline_path)) if os.path.exists(baseline_path) else {}
    results, train_seconds = {}, []
    if args.folds is not None and set(args.folds) - set(names):
        sys.exit(f"--folds: unknown graphs {sorted(set(args.folds) - set(names))} (have {names})")
    for f, name in zip(files, names):
        if args.folds is not None and name not in args.folds:
            continue
        results[name] = {}
        for who, model in [("reference", "reference"), ("old", args.old_model)]:
            if model is None or args.train_only:
                continue
            key = f"{who}:{os.path.abspath(model) if who == 'old' else model}:{name}"
            if key not in baselines:
                baselines[key] = hlo_cost_eval(args.hlo_cost, model, f)
                json.dump(baselines, open(baseline_path, "w"), indent=1)
            results[name][who] = baselines[key]
        t_fold = time.time()
        train_files = [p for p in files + extra if p != f]
        train_graphs = [graphs[p] for p in train_files if p in graphs]
        stats = D.feature_stats(train_files, "layout")
        per_seed = []
        for seed in args.seeds:
            t0 = time.time()
            if args.ridge_only:
                fold_hp, params = dict(hp), M.init_params("layout", hp, seed, *stats["node"])
            else:
                members = []
                for member_seed in range(args.ensemble * seed, args.ensemble * seed + args.ensemble):
                    if args.reuse:
                        members.append(reused_network(
                            os.path.join(args.out_dir, f"{args.reuse}.{name}.seed{member_seed}.hlocm"), hp))
                    else:
                        members.append(trained_network(args.out_dir, hp, train_graphs, stats, member_seed, args,
                                                       train_files))
                for member_seed in range(args.early_join * seed, args.early_join * seed + args.early_join):
                    members.append(trained_network(args.out_dir, dict(hp, early_join=1), train_graphs, stats,
                                                   member_seed, args, train_files))
                if args.train_only:
                    print(f"{name} seed {seed}: networks trained ({time.time() - t0:.0f}s, "
                          f"total {time.time() - t_start:.0f}s)", flush=True)
                    continue
                fold_hp, params = dict(hp), members[0]
                if len(members) > 1:
                    fold_hp, params = T.ensemble_params(fold_hp, members, train_graphs, early_join=args.early_join)
            params = T.finish_ridge_term(fold_hp, params, train_graphs)
            train_seconds.append(time.time() - t0)
            path = os.path.join(args.out_dir, f"{args.name}.{name}.seed{seed}.hlocm")
            X.write_hlocm(path, "layout", params, fold_hp, {"trained_on": [os.path.relpath(p, args.data) for p in train_files]})
            m = hlo_cost_eval(args.hlo_cost, path, f)
            per_seed.append(m)
            print(f"{name} seed {seed}: tau {fmt(m['kendall_tau'])} top-1 {fmt(m['top1_slowdown'], True)} "
                  f"(train {train_seconds[-1]:.0f}s, total {time.time() - t_start:.0f}s)", flush=True)
        if args.train_only:
            continue
        new = {k: mean([m[k] for m in per_seed]) for k, _ in METRICS}
        new["kendall_tau_per_seed"] = [m["kendall_tau"] for m in per_seed]
        new["top1_slowdown_per_seed"] = [m["top1_slowdown"] for m in per_seed]
        results[name]["new"] = new
        fold = {"results": results[name], "train_seconds": train_seconds[-len(args.seeds):],
                "wall_seconds": time.time() - t_fold}
        json.dump(fold, open(os.path.join(args.out_dir, f"cv.{args.name}.fold.{name}.json"), "w"), indent=1)
    if args.train_only:
        print(f"trained every fold's networks in {time.time() - t_start:.0f}s")
        return
    fold_wall = 0.0
    for name in names:
        part = os.path.join(args.out_dir, f"cv.{args.name}.fold.{name}.json")
        if name not in results and os.path.exists(part):
            doc = json.load(open(part))
            results[name] = doc["results"]
            train_seconds += doc["train_seconds"]
            fold_wall += doc["wall_seconds"]
    missing = [n for n in names if n not in results]
    if missing:
        print(f"folds without results yet: {missing}; cv.{args.name}.json is written once they have them")
        return
    results["mean"] = {
        who: {k: mean([results[n][who][k] for n in names]) for k, _ in METRICS}
        for who in ["new", "reference", "old"]
        if all(who in results[n] for n in names)
    }
    print(table(results, names))
    wall = time.time() - t_start + fold_wall  # with --folds: this run's and the earlier folds' runs
    print(f"\nvariant {args.name}: {len(names)} folds x {len(args.seeds)} seeds, "
          f"mean training {np.mean(train_seconds) if train_seconds else 0:.0f}s, wall {wall:.0f}s")
    out = {"variant": args.name, "hparams": hp, "options": vars(args), "results": results,
           "mean_train_seconds": float(np.mean(train_seconds)), "wall_seconds": wall}
    json.dump(out, open(os.path.join(args.out_dir, f"cv.{args.name}.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
