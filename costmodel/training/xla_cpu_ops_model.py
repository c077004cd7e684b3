"""The XLA:CPU op model: learns, from dots and convolutions timed alone on
this CPU (`python -m hlo_opt.xla_cpu.ops collect`: one .npz per jaxlib), the
log runtime ratio of a oneDNN matmul or convolution over XLA's default
kernel for the op, and the margin the per-op decision needs; reports K-fold
cross-validation over the ops; exports the model as ONNX with its card
(JSON) for `hlo-opt --pass=xla-cpu`.

    python costmodel/training/xla_cpu_ops_model.py OPS.npz [--export passes/models/xla_cpu_ops_jaxlib-X.onnx]

The rows come from `hlo-cost cpu-features` (--hlo-cost, default
target/release/hlo-cost) run on each op's HLO module stored in the npz:
the Rust featurizer the pass uses (passes/src/xla_cpu/contractions.rs), so
training and the pass read the same rows. Needs numpy and lightgbm
(--export: onnxmltools), pinned in costmodel/training/requirements.txt.

The decision it trains for: send an op to oneDNN only when the predicted
gain beats `margin` times the model's cross-validated error. Its outcome on
an op is the measured ratio when sent, 1 otherwise; the oracle's is
min(1, ratio). Cross-validation picks the variant and the margin by the
mean slowdown against the oracle, and among settings within SAFETY of the
best, the largest margin.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

VARIANTS = {
    "gbm-small": dict(n_estimators=200, learning_rate=0.05, num_leaves=7, min_child_samples=5,
                      subsample=0.8, subsample_freq=1, colsample_bytree=0.8),
    "gbm-medium": dict(n_estimators=400, learning_rate=0.03, num_leaves=15, min_child_samples=5,
                       subsample=0.8, subsample_freq=1, colsample_bytree=0.8),
}
MARGINS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
#: Mean slowdowns within 2 percentage points are a tie, broken toward the
#: larger margin: an op sent to oneDNN that runs slower costs the program
#: more than a gain left on the table (the 2% a chosen program may lose).
SAFETY = 0.02
FOLDS = 10


def load(npz: Path, hlo_cost: Path) -> dict:
    with np.load(npz) as z:
        sigs = [str(s) for s in z["signatures"]]
        ratio, control, ok = z["ratio"].astype(float), z["control"].astype(float), z["ok"].astype(bool)
        hlos = [str(h) for h in z["hlo"]]
        default_ns = z["default_ns"].astype(float)
        device = json.loads(str(z["device"]))
    with tempfile.TemporaryDirectory(prefix="xla_cpu_ops.") as d:
        for i, h in enumerate(hlos):
            (Path(d) / f"{i:05d}.hlo").write_text(h)
        out = Path(d) / "features.jsonl"
        subprocess.run([str(hlo_cost), "cpu-features", d, "-o", str(out)], check=True, capture_output=True)
        rows = {}
        for line in out.read_text().splitlines():
            r = json.loads(line)
            rows[int(Path(r["file"]).stem)] = r["ops"]
    x, keep = [], []
    for i, sig in enumerate(sigs):
        found = [d for d in rows[i] if d["signature"] == sig]
        if len(found) != 1 or not found[0]["eligible"]:
            raise SystemExit(f"{npz}: op {i} ({sig}): the featurizer sees {[d['signature'] for d in rows[i]]}")
        if ok[i]:  # an op whose oneDNN results differed is never sent
            x.append(found[0]["features"])
            keep.append(i)
    keep = np.asarray(keep)
    return dict(sigs=[sigs[i] for i in keep], x=np.asarray(x, dtype=np.float32), y=np.log(ratio[keep]),
                control=control[keep], default_ns=default_ns[keep], device=device, dropped=int((~ok).sum()))


def fit(x, y, variant, seed=0):
    import lightgbm as lgb

    m = lgb.LGBMRegressor(random_state=seed, verbose=-1, deterministic=True, force_row_wise=True, n_jobs=1,
                          **VARIANTS[variant])
    m.fit(x, y)
    return m


def folds(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).permutation(n) % FOLDS


def cv_predictions(data, variant):
    f = folds(len(data["y"]))
    pred = np.zeros_like(data["y"])
    for k in range(FOLDS):
        test = f == k
        pred[test] = fit(data["x"][~test], data["y"][~test], variant).predict(data["x"][test])
    return pred


def evaluate(data, pred, error, margin):
    ratio = np.exp(data["y"])
    send = -pred > margin * error
    outcome = np.where(send, ratio, 1.0)
    oracle = np.minimum(1.0, ratio)
    slow = outcome / oracle - 1.0
    return dict(mean=float(slow.mean()), max=float(slow.max()), sent=int(send.sum()), ops=len(ratio),
                gain_geomean=float(math.exp(-np.log(outcome).mean())),
                oracle_gain_geomean=float(math.exp(-np.log(oracle).mean())),
                losses=int((send & (ratio > 1.02)).sum()))


def export(data, variant, margin, error, cv, path: Path):
    from lgbm_onnx import lightgbm_onnx

    model = fit(data["x"], data["y"], variant)
    path.write_bytes(lightgbm_onnx(model.booster_, data["x"].shape[1], f"xla-cpu-op-model {variant}, {len(data['y'])} ops",
                                   "xla_cpu_op_model"))
    dev = data["device"]
    card = dict(xla=f"jaxlib {dev['jaxlib']}", cpu=dev["cpu"], isa=dev.get("isa", []), cores=dev.get("cores", 0),
                ops=len(data["y"]), convolutions=sum(s.startswith("conv ") for s in data["sigs"]), error=round(float(error), 6), margin=margin,
                cv={k: round(float(v), 6) for k, v in cv.items()}, variant=variant,
                conv_forms=sorted({s.split()[2] for s in data["sigs"] if s.startswith("conv ")}))
    path.with_suffix(".json").write_text(json.dumps(card, indent=1, sort_keys=True) + "\n")
    pred = model.predict(data["x"])
    checks = [dict(signature=s, features=[float(v) for v in x], pred=round(float(p), 5),
                   send=bool(-p > margin * error)) for s, x, p in zip(data["sigs"], data["x"], pred)]
    path.with_suffix(".choices.json").write_text(json.dumps(checks, indent=0) + "\n")
    return card


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", type=Path, help="the .npz of `python -m hlo_opt.xla_cpu.ops collect`")
    ap.add_argument("--hlo-cost", type=Path, default=Path("target/release/hlo-cost"))
    ap.add_argument("--variant", choices=sorted(VARIANTS), help="skip the variant search")
    ap.add_argument("--export", type=Path, help="write the model (.onnx), its card (.json) and checks")
    a = ap.parse_args(argv)
    data = load(a.data, a.hlo_cost)
    ratio = np.exp(data["y"])
    convs = np.array([s.startswith("conv ") for s in data["sigs"]])
    print(f"{len(ratio)} ops, {int(convs.sum())} convolutions ({data['dropped']} dropped: results differed); "
          f"oneDNN faster on "
          f"{int((ratio < 0.98).sum())}, slower on {int((ratio > 1.02).sum())}; median control error "
          f"{100 * np.median(np.abs(data['control'] - 1)):.1f}%")
    results = {}
    for variant in ([a.variant] if a.variant else sorted(VARIANTS)):
        pred = cv_predictions(data, variant)
        error = float(np.sqrt(np.mean((pred - data["y"]) ** 2)))
        for m in MARGINS:
            r = evaluate(data, pred, error, m)
            results[(variant, m)] = (r, error)
            print(f"{variant:11} margin {m:4}: mean slowdown vs oracle {100 * r['mean']:.2f}% (max {100 * r['max']:.0f}%), "
                  f"gain geomean {r['gain_geomean']:.3f}x of oracle {r['oracle_gain_geomean']:.3f}x, "
                  f"sent {r['sent']}/{r['ops']}, {r['losses']} losses; rmse {error:.3f}")
    floor = min(r["mean"] for r, _ in results.values())
    (variant, margin), (best, error) = max(((k, v) for k, v in results.items() if v[0]["mean"] <= floor + SAFETY),
                                           key=lambda kv: (kv[0][1], -kv[1][0]["mean"]))
    print(f"chosen: {variant}, margin {margin}: {best}")
    if a.export:
        card = export(data, variant, margin, error, best, a.export)
        print(f"wrote {a.export} and its card: {json.dumps(card)[:300]}")


if __name__ == "__main__":
    sys.exit(main())
