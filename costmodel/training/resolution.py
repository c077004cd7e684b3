"""Adds `log_runtime_resolution` (MODEL.md) to a calibrated layout model that
predates it, from the model's own scores of its training graphs.

    hlo-cost eval --model M.hlocm --json --predictions GRAPH.npz... > scores.json
    .venv/bin/python costmodel/training/resolution.py M.hlocm scores.json [--write]

Prints the resolution (metrics.log_runtime_resolution with the model's
`log_runtime_per_score`; the same computation train.py makes for new models,
there on its deduplicated configurations) and, with `--write`, rewrites
model.json inside the model file; the other entries keep their bytes.
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile

import hlo_opt
import numpy as np

import metrics


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help=".hlocm file with log_runtime_per_score")
    ap.add_argument("scores", help="hlo-cost eval --json --predictions output of the model on its training graphs")
    ap.add_argument("--write", action="store_true", help="store the value in the model file's model.json")
    args = ap.parse_args(argv)
    with zipfile.ZipFile(args.model) as z:
        entries = [(i, z.read(i.filename)) for i in z.infolist()]
    meta = json.loads(dict((i.filename, b) for i, b in entries)["model.json"])
    k = meta.get("log_runtime_per_score")
    if not (isinstance(k, (int, float)) and k > 0):
        sys.exit(f"{args.model}: no log_runtime_per_score, so its scores have no runtime scale")
    with open(args.scores) as f:
        report = json.load(f)
    scored = []
    for g in report["files"]:
        if "predictions" not in g:
            sys.exit(f"{g.get('path')}: no predictions (run hlo-cost eval with --predictions)")
        runtime = np.asarray(hlo_opt.load_npz(g["path"], configs=False)["config_runtime"], np.float64)
        scored.append((np.asarray(g["predictions"], np.float64), np.log(runtime)))
        print(f"  {g['path']}: {len(runtime)} configurations")
    if not scored:
        sys.exit("no graphs")
    r = metrics.log_runtime_resolution(scored, float(k))
    print(f"log_runtime_resolution {r:.6f}: no change predicted to gain less than {(1 - np.exp(-r)) * 100:.2f}%")
    if args.write:
        meta["log_runtime_resolution"] = r
        with zipfile.ZipFile(args.model, "w") as z:
            for info, data in entries:
                z.writestr(info, (json.dumps(meta, indent=2) + "\n").encode() if info.filename == "model.json" else data)
        print(f"wrote {args.model}")


if __name__ == "__main__":
    main()
