#!/usr/bin/env python3
"""XLA:GPU Triton GEMM tile data: XLA's own autotuner, logged (docs/xla-gpu.md).

One command on a GPU machine (scripts/gpu_collect.sh runs it), within a
wall-clock budget, writing everything under OUT:

1. smoke: which autotuning flags and formats this XLA honours, on one bf16
   matmul, each in a fresh process (XLA_FLAGS is read once per process):
   dump results (text) and logs, a per-fusion cache directory, loading the
   dumped results with `--xla_gpu_require_complete_aot_autotune_results`
   (a compile that succeeds proves XLA found every key), and the same for
   the per-fusion directory. Files, sizes and first lines go to smoke.txt.
2. off: every program compiled with `--xla_gpu_autotune_level=0` (XLA's
   choice without autotuning), its optimized HLO kept.
3. tune: every program compiled with autotuning, logs and results dumped per
   program (`compiler_options`), exhaustive tiling search for the programs
   that fit the first part of the budget, the default search space after;
   the optimized HLO and the module before the autotuner pass kept.

Each phase runs in worker processes that the parent stops at the phase's
deadline (what finished stays; what did not is listed in summary.json).
Outputs are packed into at most 8 files of at most 15 MiB (packing drops
the largest dumps first and says so).

Usage: gpu_collect.py --out OUT [--budget SECONDS] [--only a,b] [--dry-run]
                      [--max-files 8] [--exhaustive-frac 0.25]
  --dry-run: no GPU: checks the corpus (lowers every program on the
  default backend), the flag sets, and the packing of OUT, with stand-in
  files. `worker` is the internal entry of a phase's worker process.
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

MAX_FILES = 8  # --max-files lowers it when another script shares OUT
MAX_BYTES = 15 * 1024 * 1024

# The flags the smoke test tries, each a fresh process.
SMOKE_RUNS_SESSION1 = [
    ("dump", ["--xla_gpu_dump_autotune_results_to={d}/results.textproto",
              "--xla_gpu_dump_autotune_logs_to={d}/logs.textproto",
              "--xla_gpu_per_fusion_autotune_cache_dir={d}/cache",
              "--xla_dump_to={d}/dump", "--xla_dump_hlo_pass_re=.*utotun.*"]),
    ("dump_binary", ["--xla_gpu_dump_autotune_results_to={d}/results.pb",
                     "--xla_gpu_dump_autotune_logs_to={d}/logs.pb"]),
    ("exhaustive", ["--xla_gpu_exhaustive_tiling_search=true",
                    "--xla_gpu_dump_autotune_logs_to={d}/logs_exhaustive.textproto"]),
    ("level0", ["--xla_gpu_autotune_level=0"]),
    ("load_results", ["--xla_gpu_load_autotune_results_from={d}/results.textproto",
                      "--xla_gpu_require_complete_aot_autotune_results=true"]),
    ("load_cache_dir", ["--xla_gpu_per_fusion_autotune_cache_dir={d}/cache",
                        "--xla_gpu_experimental_autotune_cache_mode=AUTOTUNE_CACHE_MODE_READ",
                        "--xla_gpu_require_complete_aot_autotune_results=true"]),
]


# Session 1 ran the list above (its findings: docs/xla-gpu.md). What is left
# to learn: the binary field numbers of a cuBLAS choice (a large bf16 GEMM,
# where cuBLAS wins, with its results dumped in binary) and whether XLA
# reads a cache entry hlo-opt wrote (the measurement's (c) shows it).
SMOKE_RUNS = [
    ("cublas_binary", ["--xla_gpu_dump_autotune_results_to={d}/results_big.pb",
                       "--xla_gpu_dump_autotune_logs_to={d}/logs_big.textproto",
                       "--xla_gpu_per_fusion_autotune_cache_dir={d}/cache_big"]),
]


def flag_sets(d):
    return [(name, [f.format(d=d) for f in flags]) for name, flags in SMOKE_RUNS]


def provenance():
    info = {"python": sys.version.split()[0], "platform": platform.platform()}
    try:
        import jax
        import jaxlib
        info.update(jax=jax.__version__, jaxlib=jaxlib.__version__)
        info["devices"] = [str(d) for d in jax.devices()]
        info["device_kind"] = [getattr(d, "device_kind", "") for d in jax.devices()]
        info["backend"] = jax.default_backend()
    except Exception as e:  # recorded, not fatal
        info["jax_error"] = str(e)
    try:
        import importlib.metadata as md
        info["packages"] = {p: md.version(p) for p in
                            ("jax-cuda13-plugin", "jax-cuda13-pjrt", "jax-cuda12-plugin",
                             "jax-cuda12-pjrt", "triton", "torch") if _has(md, p)}
    except Exception:
        pass
    try:
        info["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
             "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e:
        info["nvidia_smi"] = f"unavailable: {e}"
    return info


def _has(md, p):
    try:
        md.version(p)
        return True
    except Exception:
        return False


def compile_program(fn, args, options):
    import jax
    t0 = time.perf_counter()
    lowered = jax.jit(fn).lower(*args)
    compiled = lowered.compile(compiler_options=options) if options else lowered.compile()
    return compiled, time.perf_counter() - t0


def worker(args):
    """Compiles the listed programs in one process (phase `mode`)."""
    import gpu_programs
    progs = {p[0]: p for p in gpu_programs.programs()}
    out = args.out
    for name in args.programs.split(","):
        _, fn, shapes, _ = progs[name]
        opts = {}
        if args.mode == "tune":
            for sub in ("logs", "results"):
                os.makedirs(os.path.join(out, sub), exist_ok=True)
            opts["xla_gpu_dump_autotune_logs_to"] = os.path.join(out, "logs", name + ".textproto")
            opts["xla_gpu_dump_autotune_results_to"] = os.path.join(out, "results", name + ".textproto")
            if args.exhaustive:
                opts["xla_gpu_exhaustive_tiling_search"] = True
            opts["xla_dump_to"] = os.path.join(out, "dump", name)
            opts["xla_dump_hlo_pass_re"] = ".*utotun.*"
        elif args.mode == "off":
            opts["xla_gpu_autotune_level"] = 0
        try:
            compiled, secs = compile_program(fn, shapes, opts)
            os.makedirs(os.path.join(out, "hlo"), exist_ok=True)
            with open(os.path.join(out, "hlo", f"{name}.{args.mode}.hlo"), "w") as f:
                f.write(compiled.as_text())
            status = {"program": name, "mode": args.mode, "compile_s": round(secs, 3),
                      "exhaustive": bool(args.exhaustive)}
        except Exception as e:
            status = {"program": name, "mode": args.mode, "error": str(e)[:2000]}
        prune_dump(os.path.join(out, "dump", name))
        print("DONE " + json.dumps(status), flush=True)


def keep_dump_file(fn):
    """The dump files kept: modules around the autotuner pass and the optimized module."""
    return fn.endswith(".txt") and ("utotun" in fn or fn.endswith("after_optimizations.txt"))


def prune_dump(d):
    for root, _, files in os.walk(d):
        for fn in files:
            if not keep_dump_file(fn):
                os.remove(os.path.join(root, fn))


def run_phase(mode, names, out, deadline, exhaustive=False, log=None):
    """Runs `names` in worker processes until `deadline`; returns (done, statuses)."""
    done, statuses, todo = [], [], list(names)
    while todo and time.time() < deadline - 5:
        cmd = [sys.executable, os.path.abspath(__file__), "worker", "--mode", mode,
               "--programs", ",".join(todo), "--out", out] + (["--exhaustive"] if exhaustive else [])
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log or subprocess.DEVNULL, text=True)
        try:
            for line in p.stdout:
                if line.startswith("DONE "):
                    st = json.loads(line[5:])
                    statuses.append(st)
                    done.append(st["program"])
                    todo.remove(st["program"])
                    print(f"  {mode}: {st}", flush=True)
                if time.time() > deadline:
                    break
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        if p.returncode not in (0, None) and todo and time.time() < deadline - 5:
            # The worker died on todo[0] (a crash, not an exception): skip it.
            statuses.append({"program": todo[0], "mode": mode, "error": f"worker exit {p.returncode}"})
            todo.pop(0)
        elif time.time() >= deadline - 5:
            break
    return done, statuses, todo


SMOKE_PROGRAM = """
import jax, jax.numpy as jnp, time, json
f = lambda x, w: jnp.maximum(x @ w, 0)
x = jax.ShapeDtypeStruct((8192, 8192), jnp.bfloat16)
w = jax.ShapeDtypeStruct((8192, 8192), jnp.bfloat16)
t = time.perf_counter()
c = jax.jit(f).lower(x, w).compile()
print(json.dumps({"compile_s": round(time.perf_counter() - t, 3)}))
print(c.as_text())
"""


def smoke(out, deadline, log):
    d = os.path.join(out, "smoke")
    os.makedirs(d, exist_ok=True)
    lines = []
    for name, flags in flag_sets(d):
        if time.time() > deadline:
            lines.append(f"== {name}: not run (out of time)")
            continue
        env = dict(os.environ, XLA_FLAGS=" ".join(flags))
        t = time.time()
        try:
            r = subprocess.run([sys.executable, "-c", SMOKE_PROGRAM], env=env, capture_output=True,
                               text=True, timeout=max(10, min(120, deadline - time.time())))
            rc, so, se = r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired:
            rc, so, se = "timeout", "", ""
        with open(os.path.join(d, f"{name}.stdout.txt"), "w") as f:
            f.write(so)
        with open(os.path.join(d, f"{name}.stderr.txt"), "w") as f:
            f.write(se[-200000:])
        lines.append(f"== {name}: exit {rc} in {time.time() - t:.1f}s; XLA_FLAGS={' '.join(flags)}")
        lines.append("   " + (so.splitlines()[0] if so else "(no stdout)"))
        for l in se.splitlines():
            if any(k in l for k in ("nknown flag", "rror", "utotun", "ersion")):
                lines.append("   stderr: " + l[:300])
    prune_dump(os.path.join(d, "dump"))
    for root, _, files in sorted(os.walk(d)):
        for fn in sorted(files):
            p = os.path.join(root, fn)
            if fn.endswith((".stdout.txt", ".stderr.txt")):
                continue
            lines.append(f"file {os.path.relpath(p, d)} {os.path.getsize(p)} bytes")
            if fn.endswith(".pb"):
                with open(p, "rb") as f:
                    lines.append("   hex: " + f.read(400).hex())
            if fn.endswith(".textproto") and os.path.getsize(p) < 2_000_000:
                with open(p, errors="replace") as f:
                    head = f.read(1500)
                lines += ["   | " + l for l in head.splitlines()[:25]]
    with open(os.path.join(out, "smoke.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[:80]), flush=True)


def pack(out, pack_dir, max_files=MAX_FILES):
    """Packs OUT's folders into at most max_files files of at most MAX_BYTES."""
    os.makedirs(pack_dir, exist_ok=True)
    groups = [("core", ["summary.json", "provenance.json", "smoke.txt", "logs", "results", "hlo"]),
              ("smoke", ["smoke"]), ("dumps", ["dump"])]
    written, dropped = [], []
    for gname, members in groups:
        files = []
        for m in members:
            p = os.path.join(out, m)
            if os.path.isfile(p):
                files.append(p)
            for root, _, fs in os.walk(p) if os.path.isdir(p) else []:
                files += [os.path.join(root, f) for f in sorted(fs)]
        files.sort(key=lambda p: (os.path.getsize(p), p))
        part, batch = 0, []
        while files:
            target = os.path.join(pack_dir, f"{gname}{'' if part == 0 else part}.tar.xz")
            batch = files
            while True:
                with tarfile.open(target, "w:xz") as t:
                    for p in batch:
                        t.add(p, arcname=os.path.relpath(p, out))
                if os.path.getsize(target) <= MAX_BYTES or len(batch) == 1:
                    break
                batch = batch[: max(1, len(batch) * 2 // 3)]
            if os.path.getsize(target) > MAX_BYTES:
                dropped.append(os.path.relpath(batch[0], out))
                os.remove(target)
                files = files[1:]
                continue
            written.append(target)
            files = files[len(batch):]
            part += 1
            if len(written) >= max_files - 1 and files:
                dropped += [os.path.relpath(p, out) for p in files]
                files = []
        if len(written) >= max_files - 1:
            break
    return written, dropped


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd")
    w = sub.add_parser("worker")
    w.add_argument("--mode", required=True, choices=["off", "tune"])
    w.add_argument("--programs", required=True)
    w.add_argument("--out", required=True)
    w.add_argument("--exhaustive", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--budget", type=float, default=540.0, help="wall-clock seconds in all")
    ap.add_argument("--only", default="", help="comma-separated program names")
    ap.add_argument("--skip-done", nargs="*", default=[], metavar="SUMMARY",
                    help="summary.json of earlier sessions: programs tuned there are skipped")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--max-files", type=int, default=MAX_FILES,
                    help="files written under OUT, summary.json included (at most 8)")
    ap.add_argument("--exhaustive-frac", type=float, default=0.25,
                    help="share of the budget for exhaustive tiling searches")
    args = ap.parse_args()
    if not 2 <= args.max_files <= MAX_FILES:
        ap.error(f"--max-files must be within 2..{MAX_FILES}")
    if args.cmd == "worker":
        return worker(args)
    if not args.out:
        ap.error("--out is required")
    start = time.time()
    end = start + args.budget
    work = os.path.join(args.out, "work")
    os.makedirs(work, exist_ok=True)
    import gpu_programs
    progs = [p for p in gpu_programs.programs() if not p[3]]
    if args.only:
        keep = set(args.only.split(","))
        unknown = keep - {p[0] for p in gpu_programs.programs()}
        if unknown:
            sys.exit(f"unknown programs: {sorted(unknown)}")
        progs = [p for p in progs if p[0] in keep]
    done = set()
    for path in args.skip_done:
        with open(path) as f:
            done |= {t["program"] for t in json.load(f).get("tune", []) if "error" not in t}
    progs = [p for p in progs if p[0] not in done]
    names = [p[0] for p in progs]
    summary = {"programs": names, "skipped_done": sorted(done), "budget_s": args.budget,
               "flags": dict(SMOKE_RUNS)}
    with open(os.path.join(work, "provenance.json"), "w") as f:
        json.dump(provenance(), f, indent=1)
    if args.dry_run:
        import jax
        for name, fn, shapes, _ in gpu_programs.programs():
            jax.jit(fn).lower(*shapes)
        for name, flags in flag_sets(os.path.join(work, "smoke")):
            assert all(f.startswith("--xla_") and "=" in f for f in flags), (name, flags)
        # Stand-in outputs, to check the packing.
        for sub_dir in ("logs", "results", "hlo", "dump/x", "smoke"):
            os.makedirs(os.path.join(work, sub_dir), exist_ok=True)
        for i, n in enumerate(names):
            with open(os.path.join(work, "logs", n + ".textproto"), "w") as f:
                f.write("logs {\n  fusion_name: \"%s\"\n}\n" % n)
            with open(os.path.join(work, "dump", "x", f"big{i}.txt"), "wb") as f:
                f.write(os.urandom(600_000))
        with open(os.path.join(work, "smoke.txt"), "w") as f:
            f.write("dry run\n")
        summary["dry_run"] = True
    else:
        log = open(os.path.join(work, "workers.stderr.txt"), "w")
        smoke(work, start + 0.1 * args.budget, log)
        done_off, st_off, left_off = run_phase("off", names, work, start + 0.35 * args.budget, log=log)
        ex_deadline = start + (0.35 + args.exhaustive_frac) * args.budget
        done_ex, st_ex, rest = run_phase("tune", names, work, ex_deadline, exhaustive=True, log=log)
        done_t, st_t, left_t = run_phase("tune", rest, work, end - 25, log=log)
        summary.update(off=st_off, off_not_run=left_off, tune=st_ex + st_t, tune_not_run=left_t)
        log.close()
    summary["elapsed_s"] = round(time.time() - start, 1)
    with open(os.path.join(work, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    written, dropped = pack(work, args.out, args.max_files)
    summary["packed"] = [os.path.basename(p) for p in written]
    summary["dropped_from_pack"] = dropped
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)
    total = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    files = os.listdir(args.out)
    print(f"packed {len(files)} files, {total} bytes in {args.out}: {sorted(files)}; dropped {len(dropped)}")
    assert len(files) <= args.max_files, files
    return 0


if __name__ == "__main__":
    sys.exit(main())
