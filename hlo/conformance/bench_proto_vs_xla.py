#!/usr/bin/env python3
"""HloModuleProto speed of hlo-opt vs XLA (jaxlib), interleaved in one run.

Usage: bench_proto_vs_xla.py [--rounds R] [--iters N] [--baseline-bin PATH] [FILE.hlo...]

For each module (default: BERT-base post-optimisation and the TpuGraphs
unet_3d module from ../shared, as bench_vs_xla.py), XLA's own proto of it
(`as_serialized_hlo_module_proto()`) is written to a temporary file, removed
at the end. Each round runs our side (`proto_speed`, cargo build --release -p
hlo --example proto_speed; best of N in one process), then, with
--baseline-bin, an older build of it (the same way), then XLA's side (best of
N in this process); the best over R rounds is kept, so every side sees the
same machine load. Compared:
  proto -> module  ours `proto::from_bytes_lossy`  vs XLA `HloModule.from_serialized_hlo_module_proto`
  module -> proto  ours `proto::to_bytes`          vs XLA `as_serialized_hlo_module_proto`
  text -> proto    ours parse + `to_bytes`         vs XLA `hlo_module_from_text` + `as_serialized_hlo_module_proto`
Prints MB/s of the proto (text for text -> proto) and the ratio (XLA time / ours).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import bench_inputs



def best(iters, f):
    b = float("inf")
    for _ in range(iters):
        t = time.perf_counter()
        f()
        b = min(b, time.perf_counter() - t)
    return b


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--baseline-bin", default=None, help="an older proto_speed, timed alongside")
    bench_inputs.add_arguments(ap)
    args = ap.parse_args()
    files, binary = bench_inputs.inputs(args, "proto_speed")
    if not files:
        print("skipped: no input files (../shared absent)")
        return 0
    from jax._src.lib import hlo

    base_head = f" {'baseline':>9} {'ratio':>7}" if args.baseline_bin else ""
    print(f"{'module':<48} {'op':<16} {'MB':>6} {'XLA MB/s':>9} {'ours MB/s':>10} {'ratio':>7}{base_head}")
    with tempfile.TemporaryDirectory(prefix="bench-proto-") as tmp:
        for path in files:
            text = open(path, encoding="utf-8").read()
            module = hlo.hlo_module_from_text(text)
            pb = module.as_serialized_hlo_module_proto()
            pb_path = os.path.join(tmp, "module.pb")
            with open(pb_path, "wb") as f:
                f.write(pb)
            ours = [float("inf")] * 3
            base = [float("inf")] * 3
            xla = [float("inf")] * 3
            for _ in range(args.rounds):
                out = subprocess.run([binary, str(args.iters), path, pb_path], check=True,
                                     capture_output=True, text=True).stdout.split("\t")
                ours = [min(a, float(b)) for a, b in zip(ours, out[1:4])]
                if args.baseline_bin:
                    out = subprocess.run([args.baseline_bin, str(args.iters), path, pb_path], check=True,
                                         capture_output=True, text=True).stdout.split("\t")
                    base = [min(a, float(b)) for a, b in zip(base, out[1:4])]
                xla[0] = min(xla[0], best(args.iters, lambda: hlo.HloModule.from_serialized_hlo_module_proto(pb)))
                xla[1] = min(xla[1], best(args.iters, module.as_serialized_hlo_module_proto))
                xla[2] = min(xla[2], best(args.iters,
                                          lambda: hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()))
            name = os.path.basename(path)
            for k, (op, size) in enumerate([("proto -> module", len(pb)), ("module -> proto", len(pb)),
                                            ("text -> proto", len(text.encode()))]):
                mb = size / 1e6
                b = f" {mb / base[k]:>9.1f} {xla[k] / base[k]:>6.2f}x" if args.baseline_bin else ""
                print(f"{name:<48} {op:<16} {mb:>6.2f} {mb / xla[k]:>9.1f} {mb / ours[k]:>10.1f} "
                      f"{xla[k] / ours[k]:>6.2f}x{b}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
