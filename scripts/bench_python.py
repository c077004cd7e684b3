#!/usr/bin/env python3
"""Parse, featurize and score from Python against the same steps in Rust,
in-process, interleaved in one run (docs/benchmarks.md).

Usage: .venv/bin/python scripts/bench_python.py [--rounds R] [--iters N] [FILE...]

Defaults to BERT-base before XLA's optimizations (what the layout pass and
model take; the post-optimisation module has no configurable node outside
fusions) and the TpuGraphs unet_3d module, from ../shared. Each round runs
the Rust side (costmodel's `pipeline_speed` example: best of N in one
process) and then the Python side (best of N in this process); the best over
R rounds is kept for each, so both see the same machine load. Steps:
parse = `hlo_opt.parse(text)` (read + verify) vs `hlo::load_bytes` +
`verify`; featurize = `hlo_opt.featurize(m)` (to numpy) vs
`costmodel::features::featurize`; score = `CostModel("layout").score(f)`
(from numpy) vs `prepare` + `score`, one ONNX Runtime thread each. Prints seconds and the ratio Python /
Rust (1.00 = no overhead).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import hlo_opt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # scripts/ -> the checkout
DEFAULT_FILES = [
    os.path.join(ROOT, "..", "shared", "corpus", "jax", "bert_base.pre.hlo"),
    os.path.join(ROOT, "..", "shared", "data", "tpugraphs", "hlo", "layout_xla_default_valid_unet_3d.4x4.bf16.hlo"),
]


def rust_side(binary: str, iters: int, files: list[str]) -> dict[str, tuple[float, float, float]]:
    out = subprocess.run([binary, str(iters), *files], check=True, capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        path, p, f, s = line.split("\t")
        res[path] = (float(p), float(f), float(s))
    return res


def best_of(iters: int, f):
    """Best time of ``iters`` calls. As in Rust (``pipeline_speed``'s
    ``best_of``), a call's result is freed after it is timed, when the next
    one replaces it: freeing (a module's arenas, an array's buffer) is not
    timed, and each call has the memory the previous one gave back, where
    keeping every result would time fresh pages on this side only."""
    best, last = float("inf"), None
    for _ in range(iters):
        t = time.perf_counter()
        value = f()
        best = min(best, time.perf_counter() - t)
        last = value  # the previous result is freed here, untimed
    return best, last


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    files = args.files or [f for f in DEFAULT_FILES if os.path.exists(f)]
    if not files:
        print("skipped: no input files (../shared absent)")
        return 0
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    binary = os.path.join(target, "release", "examples", "pipeline_speed")
    subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "costmodel", "--example", "pipeline_speed"],
                   cwd=ROOT, check=True)
    texts = {p: open(p, encoding="utf-8").read() for p in files}
    model = hlo_opt.CostModel("layout", threads=1)  # as pipeline_speed
    inf = float("inf")
    best = {p: {k: inf for k in ("rp", "rf", "rs", "pp", "pf", "ps")} for p in files}
    for _ in range(args.rounds):
        for p, (rp, rf, rs) in rust_side(binary, args.iters, files).items():
            b = best[p]
            b["rp"], b["rf"], b["rs"] = min(b["rp"], rp), min(b["rf"], rf), min(b["rs"], rs)
        for p in files:
            b = best[p]
            t, m = best_of(args.iters, lambda: hlo_opt.parse(texts[p], name=p))
            b["pp"] = min(b["pp"], t)
            t, feats = best_of(args.iters, lambda: hlo_opt.featurize(m))
            b["pf"] = min(b["pf"], t)
            t, _ = best_of(args.iters, lambda: model.score(feats))
            b["ps"] = min(b["ps"], t)
    print(f"{'module':<50} {'step':<10} {'Rust s':>10} {'Python s':>10} {'Python/Rust':>12}")
    for p in files:
        b = best[p]
        for step, r, y in (("parse", "rp", "pp"), ("featurize", "rf", "pf"), ("score", "rs", "ps")):
            print(f"{os.path.basename(p):<50} {step:<10} {b[r]:>10.5f} {b[y]:>10.5f} {b[y] / b[r]:>11.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
