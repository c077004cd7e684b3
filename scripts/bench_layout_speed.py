#!/usr/bin/env python3
"""The layout pass's cost next to XLA:CPU's compile time of the same module, in one run.

Usage: .venv/bin/python scripts/bench_layout_speed.py [--rounds R] [--bin PATH]
           [--baseline-bin PATH] [--synthetic-copies N] [FILE...]

Modules (default): the shared corpus's Gemma 4 2B module
(../shared/corpus/xla/valid/hlo_gemma4_2b_bf16__0.hlo, 3,570 configurable
nodes), BERT (testdata/layout/transformer_bert.hlo, 50; and
../shared/corpus/jax/bert_base.pre.hlo when present) and a synthetic module of
about 10,000 configurable nodes: transformer_bert's entry replicated N = 205
times (scripts/replicate_hlo.py; 205 copies: 10,045 configurable nodes). Each round runs, per module, `hlo-opt
--pass=layout --explain` at default options (this build, then with
--baseline-bin an older one), then compiles the module with XLA:CPU in this
process (jaxlib: the HLO text parsed by XLA, converted to MLIR outside the
timing, then `compile_and_load` on the CPU client, timed); every side sees the
same machine load. Reports per module the best wall and CPU seconds (user +
sys; the pass's from its own rusage, XLA's from this process's) over the
rounds, the pass's peak resident memory, and the ratios pass / XLA compile.
The issue-29 target: the pass at most 5% of XLA:CPU's compile time on Gemma.
"""
import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared")


def default_files(tmp: str, copies: int) -> list:
    files = []
    gemma = os.path.join(SHARED, "corpus/xla/valid/hlo_gemma4_2b_bf16__0.hlo")
    if os.path.exists(gemma):
        files.append(gemma)
    else:
        print("note: ../shared absent: no Gemma 4 module", file=sys.stderr)
    bert = os.path.join(ROOT, "testdata/layout/transformer_bert.hlo")
    files.append(bert)
    bert_base = os.path.join(SHARED, "corpus/jax/bert_base.pre.hlo")
    if os.path.exists(bert_base):
        files.append(bert_base)
    if copies > 0:
        synth = os.path.join(tmp, f"transformer_bert_x{copies}.hlo")
        with open(synth, "w", encoding="utf-8") as out:
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts/replicate_hlo.py"), bert, str(copies)],
                           check=True, stdout=out)
        files.append(synth)
    return files


def run_pass(binary: str, path: str) -> dict:
    """Wall and CPU seconds, peak RSS (MiB) of one `hlo-opt --pass=layout`, as GNU time
    measures them (a child's own rusage would count the memory of this process,
    which it is forked from); its report's first line."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        p = subprocess.run(["/usr/bin/time", "-o", tf.name, "-f", "%e %U %S %M",
                            binary, "--pass=layout", "--explain", path, "-o", os.devnull],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            raise SystemExit(f"{binary} failed on {path}: {p.stderr}")
        wall, user, sys_s, rss = tf.read().split()[-4:]
    first = next((l for l in p.stderr.splitlines() if l.startswith("layout: ") and "configurable nodes" in l), "")
    nodes = re.search(r"layout: (\d+) configurable nodes", first)
    return {"wall": float(wall), "cpu": float(user) + float(sys_s), "rss": int(rss) / 1024,
            "nodes": int(nodes.group(1)) if nodes else None, "line": first}


def xla_compile(text: str) -> dict:
    """Wall and CPU seconds of XLA:CPU compiling `text` (parse and MLIR conversion untimed)."""
    import jax
    from jax._src.lib import hlo, xla_client as xc

    comp = xc.XlaComputation(hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto())
    mlir = xc._xla.mlir.xla_computation_to_mlir_module(comp)
    dev = jax.devices("cpu")[0]
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    exe = dev.client.compile_and_load(mlir, [dev], xc.CompileOptions())
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    del exe
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {"wall": wall, "cpu": cpu}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/hlo-opt"))
    ap.add_argument("--baseline-bin", default=None, help="an older hlo-opt, timed alongside")
    ap.add_argument("--synthetic-copies", type=int, default=205,
                    help="copies of transformer_bert's entry in the synthetic module (0: none)")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = args.files or default_files(tmp, args.synthetic_copies)
        texts = {p: open(p, encoding="utf-8").read() for p in files}
        sides = [("new", args.bin)] + ([("base", args.baseline_bin)] if args.baseline_bin else [])
        best = {p: {} for p in files}
        info = {}

        def keep(p, side, r):
            b = best[p].setdefault(side, {"wall": float("inf"), "cpu": float("inf"), "rss": 0.0})
            b["wall"] = min(b["wall"], r["wall"])
            b["cpu"] = min(b["cpu"], r["cpu"])
            b["rss"] = max(b["rss"], r.get("rss", 0.0))

        for rnd in range(args.rounds):
            for p in files:
                for side, binary in sides:
                    r = run_pass(binary, p)
                    info.setdefault(p, r)
                    keep(p, side, r)
                keep(p, "xla", xla_compile(texts[p]))
                print(f"round {rnd + 1}: {os.path.basename(p)} done", file=sys.stderr, flush=True)

    print(f"{'module':<38} {'nodes':>6} {'XLA compile s':>14} {'pass s':>13} {'pass/XLA':>15} {'RSS MiB':>8}"
          + (f" {'baseline s':>13} {'base/XLA':>15} {'RSS MiB':>8}" if args.baseline_bin else ""))
    print(f"{'':<38} {'':>6} {'wall / CPU':>14} {'wall / CPU':>13} {'wall / CPU':>15} {'':>8}"
          + (f" {'wall / CPU':>13} {'wall / CPU':>15} {'':>8}" if args.baseline_bin else ""))
    for p in files:
        x, n = best[p]["xla"], best[p]["new"]

        def cols(s):
            pct = f"{100 * s['wall'] / x['wall']:.2f}% / {100 * s['cpu'] / x['cpu']:.2f}%"
            return f" {s['wall']:>6.2f} / {s['cpu']:<5.2f} {pct:>15} {s['rss']:>8.0f}"

        line = f"{os.path.basename(p)[:38]:<38} {info[p]['nodes'] or 0:>6} {x['wall']:>6.2f} / {x['cpu']:<5.2f}" + cols(n)
        if args.baseline_bin:
            line += cols(best[p]["base"])
        print(line)
    print(f"(best of {args.rounds} rounds; pass = hlo-opt --pass=layout at default options, "
          f"XLA = jaxlib's CPU client compile_and_load; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f} at the end)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
