#!/usr/bin/env python3
"""Parse speed of hlo-opt vs XLA's own HLO parser (jaxlib), side by side.

Usage: bench_vs_xla.py [--iters N] [--speed-bin PATH] [FILE...]
Defaults to BERT-base (post-optimisation) and the TpuGraphs unet_3d module
from ../shared. Our side runs `parse_speed` (cargo build --release -p hlo
--example parse_speed); XLA's side times `hlo_module_from_text` in this
process. Best of N runs each; prints MB/s and the ratio.
"""
import argparse
import os
import subprocess
import sys
import time

import bench_inputs



def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=10)
    bench_inputs.add_arguments(ap)
    args = ap.parse_args()
    files, binary = bench_inputs.inputs(args, "parse_speed")
    if not files:
        print("skipped: no input files (../shared absent)")
        return 0
    out = subprocess.run([binary, str(args.iters), *files], check=True, capture_output=True, text=True).stdout
    ours = {}
    for line in out.splitlines():
        path, size, parse_s, print_s = line.split("\t")
        ours[path] = (int(size), float(parse_s), float(print_s))

    from jax._src.lib import hlo
    print(f"{'module':<55} {'bytes':>9} {'XLA MB/s':>9} {'ours MB/s':>10} {'ratio':>6} {'print MB/s':>11}")
    for path in files:
        text = open(path, encoding="utf-8").read()
        best = float("inf")
        for _ in range(args.iters):
            t = time.perf_counter()
            hlo.hlo_module_from_text(text)
            best = min(best, time.perf_counter() - t)
        size, parse_s, print_s = ours[path]
        mb = size / 1e6
        print(f"{os.path.basename(path):<55} {size:>9} {mb / best:>9.1f} {mb / parse_s:>10.1f} "
              f"{best / parse_s:>5.2f}x {mb / print_s:>11.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
