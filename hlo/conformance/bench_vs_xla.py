#!/usr/bin/env python3
"""Parse speed of hlo-opt vs XLA's own HLO parser (jaxlib), interleaved in one run.

Usage: bench_vs_xla.py [--rounds R] [--iters N] [--speed-bin PATH] [--baseline-bin PATH] [FILE...]
Defaults to BERT-base (post-optimisation) and the TpuGraphs unet_3d module
from ../shared. Each round runs our side (`parse_speed`, cargo build
--release -p hlo --example parse_speed; best of N in one process), then, with
--baseline-bin, an older build of it (the same way), then XLA's side
(`hlo_module_from_text`, best of N in this process); the best over R rounds
is kept, so every side sees the same machine load. Prints MB/s and the ratio
(XLA's time / ours; > 1 means we are faster).
"""
import argparse
import os
import subprocess
import sys
import time

import bench_inputs


def ours(binary, iters, files):
    """{path: (bytes, parse seconds, print seconds)} from one run of `binary`."""
    out = subprocess.run([binary, str(iters), *files], check=True, capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        path, size, parse_s, print_s = line.split("\t")
        res[path] = (int(size), float(parse_s), float(print_s))
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--baseline-bin", default=None, help="an older parse_speed, timed alongside")
    bench_inputs.add_arguments(ap)
    args = ap.parse_args()
    files, binary = bench_inputs.inputs(args, "parse_speed")
    if not files:
        print("skipped: no input files (../shared absent)")
        return 0
    from jax._src.lib import hlo

    texts = {p: open(p, encoding="utf-8").read() for p in files}
    inf = float("inf")
    best = {p: {"ours": inf, "print": inf, "base": inf, "xla": inf} for p in files}
    for _ in range(args.rounds):
        for p, (_, parse_s, print_s) in ours(binary, args.iters, files).items():
            best[p]["ours"] = min(best[p]["ours"], parse_s)
            best[p]["print"] = min(best[p]["print"], print_s)
        if args.baseline_bin:
            for p, (_, parse_s, _) in ours(args.baseline_bin, args.iters, files).items():
                best[p]["base"] = min(best[p]["base"], parse_s)
        for p in files:
            for _ in range(args.iters):
                t = time.perf_counter()
                hlo.hlo_module_from_text(texts[p])
                best[p]["xla"] = min(best[p]["xla"], time.perf_counter() - t)

    base_head = f" {'baseline':>9} {'ratio':>6}" if args.baseline_bin else ""
    print(f"{'module':<55} {'bytes':>9} {'XLA MB/s':>9} {'ours MB/s':>10} {'ratio':>6}{base_head} {'print MB/s':>11}")
    for p in files:
        b = best[p]
        mb = len(texts[p].encode()) / 1e6
        base = f" {mb / b['base']:>9.1f} {b['xla'] / b['base']:>5.2f}x" if args.baseline_bin else ""
        print(f"{os.path.basename(p):<55} {len(texts[p].encode()):>9} {mb / b['xla']:>9.1f} {mb / b['ours']:>10.1f} "
              f"{b['xla'] / b['ours']:>5.2f}x{base} {mb / b['print']:>11.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
