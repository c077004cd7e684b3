#!/usr/bin/env python3
"""Compile time and step time of held-out programs on XLA:GPU, three ways,
interleaved in one run (docs/xla-gpu.md, "Measuring"):

  a  full autotuning (XLA's default);
  b  autotuning off (`--xla_gpu_autotune_level=0`);
  c  hlo-opt's cache: compile with autotuning off while dumping the
     optimized module, `hlo-opt --pass=tile --autotune-env LOGS` writes XLA's
     per-fusion autotuning cache for its GEMM fusions (the learned model's
     choices, keyed as XLA's new autotuner keys them), then compile with
     `--xla_gpu_per_fusion_autotune_cache_dir`. Its compile time counts all
     three steps; fusions the cache does not hold (loop fusions) XLA
     autotunes as usual, and `cache_files_xla_added` counts them.

Every (program, way) compile runs in a fresh process (XLA keeps autotuning
results in memory per process), in the order a, b, c, c, b, a, ... so that
drift hits all three alike. Step time: median over --steps samples (after 3
warm-ups) of the time of 10 calls issued back to back and waited for once,
divided by 10, so that the GPU's time is measured rather than dispatch. The device key and the versions the cache needs are read once from
XLA's own autotuning logs of a probe matmul. Writes OUT/measure.json
and OUT/measure.md (the table for docs/benchmarks.md); stops starting new
rounds at --budget seconds.

Usage: gpu_measure.py --out OUT [--hlo-opt gpu-bin/hlo-opt] [--rounds 2]
                      [--steps 30] [--budget 500] [--only a,b] [--dry-run]
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import shutil
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KEEP = ""  # set in main: what goes into OUT/measure_files.tar.xz
sys.path.insert(0, HERE)

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, {here!r})
import gpu_programs, jax, numpy as np
name, steps, opts = {name!r}, {steps}, {opts!r}
prog = {{p[0]: p for p in gpu_programs.programs()}}[name]
_, fn, shapes, _ = prog
t = time.perf_counter()
c = jax.jit(fn).lower(*shapes).compile(compiler_options=opts)
compile_s = time.perf_counter() - t
rng = np.random.default_rng(0)
args = [jax.device_put((rng.standard_normal(s.shape) * 0.1).astype(s.dtype)) for s in shapes]
for _ in range(3):
    jax.block_until_ready(c(*args))
times = []
for i in range(steps):
    t = time.perf_counter()
    outs = [c(*args) for _ in range({batch})]
    jax.block_until_ready(outs)
    times.append((time.perf_counter() - t) / {batch})
print("RESULT " + json.dumps({{"compile_s": compile_s, "step_s": sorted(times)[len(times) // 2],
                              "step_min_s": min(times), "step_max_s": max(times)}}))
"""

PROBE = r"""
import jax, jax.numpy as jnp
x = jax.ShapeDtypeStruct((256, 512), jnp.bfloat16)
jax.jit(lambda a, b: a @ b).lower(x, jax.ShapeDtypeStruct((512, 256), jnp.bfloat16)).compile(
    compiler_options={{"xla_gpu_dump_autotune_results_to": {path!r},
                      "xla_gpu_dump_autotune_logs_to": {logs!r}}})
"""


def child(name, steps, opts, env=None, timeout=300):
    code = CHILD.format(here=HERE, name=name, steps=steps, opts=opts, batch=BATCH)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=timeout, env=env)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{name} {opts}: exit {r.returncode}: {r.stderr[-1500:]}")


def probe_device(tmp):
    """XLA's device key, and a logs file holding it with the codegen and
    backend versions (hlo-opt's --autotune-env)."""
    path = os.path.join(tmp, "probe.textproto")
    logs = os.path.join(tmp, "probe_logs.textproto")
    subprocess.run([sys.executable, "-c", PROBE.format(path=path, logs=logs)], check=True,
                   capture_output=True, text=True, timeout=300)
    text = open(logs).read()
    dev = re.search(r'^device: "((?:[^"\\]|\\.)*)"', text, re.M)
    if not dev:
        raise RuntimeError("no device in XLA's autotuning logs:\n" + text[:2000])
    shutil.copy(logs, os.path.join(KEEP, "probe_logs.textproto"))
    return dev.group(1), logs


def way_c(name, steps, hlo_opt, device, env_logs, tmp):
    """Level-0 compile dumping the optimized module, hlo-opt writes XLA's
    autotuning cache for its GEMM fusions, then the cached compile."""
    d = tempfile.mkdtemp(dir=tmp, prefix=f"{name}-")
    t0 = time.perf_counter()
    r0 = child(name, 1, {"xla_gpu_autotune_level": 0, "xla_dump_to": os.path.join(d, "dump")})
    mods = sorted(glob.glob(os.path.join(d, "dump", "*after_optimizations.txt")))
    if not mods:
        raise RuntimeError(f"{name}: no optimized module dumped in {d}/dump")
    cache = os.path.join(d, "cache")
    cmd = [hlo_opt, mods[-1], "--pass=tile", "--no-verify", "--explain", "--autotune-env", env_logs,
           "--autotune-cache-dir", cache, "-o", os.path.join(d, "out.hlo")]
    t1 = time.perf_counter()
    h = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if h.returncode != 0:
        raise RuntimeError(f"hlo-opt failed: {h.stderr[-1500:]}")
    t2 = time.perf_counter()
    sub = os.path.join(cache, device)
    ours = sorted(f for f in os.listdir(sub) if f.endswith(".pb")) if os.path.isdir(sub) else []
    r = child(name, steps, {"xla_gpu_per_fusion_autotune_cache_dir": cache})
    after = sorted(f for f in os.listdir(sub) if f.endswith(".pb")) if os.path.isdir(sub) else []
    keep = os.path.join(KEEP, name)
    if not os.path.isdir(os.path.join(keep, "cache")):  # for the offline key check
        os.makedirs(os.path.join(keep, "cache"), exist_ok=True)
        if os.path.isdir(cache):
            shutil.copytree(cache, os.path.join(keep, "cache"), dirs_exist_ok=True)
        shutil.copy(mods[-1], os.path.join(keep, "off_module.txt"))
        with open(os.path.join(keep, "hlo-opt.stderr.txt"), "w") as f:
            f.write(h.stderr[-200000:])
    return {"compile_s": r0["compile_s"] + (t2 - t1) + r["compile_s"],
            "compile_parts_s": [r0["compile_s"], t2 - t1, r["compile_s"]],
            "step_s": r["step_s"], "step_min_s": r["step_min_s"], "step_max_s": r["step_max_s"],
            "cache_files_ours": len(ours),
            "cache_files_xla_added": len(set(after) - set(ours)),
            "wall_s": time.perf_counter() - t0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--hlo-opt", default="gpu-bin/hlo-opt")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--budget", type=float, default=500.0)
    ap.add_argument("--only", default="")
    ap.add_argument("--dry-run", action="store_true", help="check the plan and hlo-opt only (no GPU)")
    args = ap.parse_args()
    import gpu_programs
    held = [p[0] for p in gpu_programs.programs() if p[3]]
    if args.only:
        held = [n for n in held if n in set(args.only.split(","))]
    os.makedirs(args.out, exist_ok=True)
    plan = []
    for r in range(args.rounds):
        order = ["a", "b", "c"] if r % 2 == 0 else ["c", "b", "a"]
        plan += [(r, n, w) for n in held for w in order]
    if args.dry_run:
        h = subprocess.run([args.hlo_opt, "--help"], capture_output=True, text=True)
        assert h.returncode == 0 and "--autotune-cache-dir" in h.stdout, "hlo-opt lacks the XLA:GPU flags"
        print(json.dumps({"programs": held, "plan": len(plan)}))
        return 0
    start = time.time()
    tmp = tempfile.mkdtemp(prefix="gpu-measure-")
    global KEEP
    KEEP = os.path.join(tmp, "keep")
    os.makedirs(KEEP, exist_ok=True)
    device, env_logs = probe_device(tmp)
    rows = []
    for r, name, way in plan:
        if time.time() - start > args.budget:
            rows.append({"round": r, "program": name, "way": way, "skipped": "out of time"})
            continue
        try:
            if way == "a":
                opts = {}
                if r == 0:  # XLA's own choices and keys for the offline key check
                    os.makedirs(os.path.join(KEEP, name), exist_ok=True)
                    opts["xla_gpu_dump_autotune_results_to"] = os.path.join(KEEP, name, "xla_results.textproto")
                    opts["xla_gpu_dump_autotune_logs_to"] = os.path.join(KEEP, name, "xla_logs.textproto")
                res = child(name, args.steps, opts)
            elif way == "b":
                res = child(name, args.steps, {"xla_gpu_autotune_level": 0})
            else:
                res = way_c(name, args.steps, args.hlo_opt, device, env_logs, tmp)
        except Exception as e:
            res = {"error": str(e)[:2000]}
        res.update(round=r, program=name, way=way)
        rows.append(res)
        print(json.dumps(res), flush=True)
    out = {"device": device, "rows": rows,
           "elapsed_s": round(time.time() - start, 1)}
    with open(os.path.join(args.out, "measure.json"), "w") as f:
        json.dump(out, f, indent=1)
    with tarfile.open(os.path.join(args.out, "measure_files.tar.xz"), "w:xz") as t:
        t.add(KEEP, arcname="measure_files")
    lines = ["| program | compile a (s) | compile b | compile c | step a (ms) | step b | step c | c/a step |",
             "|---|---|---|---|---|---|---|---|"]
    for n in held:
        def med(way, key):
            v = [x[key] for x in rows if x["program"] == n and x["way"] == way and key in x]
            return statistics.median(v) if v else float("nan")
        ca, cb, cc = med("a", "compile_s"), med("b", "compile_s"), med("c", "compile_s")
        sa, sb, sc = (med(w, "step_s") * 1e3 for w in "abc")
        lines.append(f"| {n} | {ca:.2f} | {cb:.2f} | {cc:.2f} | {sa:.3f} | {sb:.3f} | {sc:.3f} | {sc / sa:.3f} |")
    with open(os.path.join(args.out, "measure.md"), "w") as f:
        f.write(f"device: {device}\n\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
