#!/usr/bin/env python3
"""The Python package's XLA:GPU path on a real GPU (docs/python.md,
"XLA:GPU tiles from Python"), as a user runs it: `hlo_opt.xla_gpu.make_cache`
on a held-out program, then `hlo_opt.xla_gpu.compile` with the cache, with
XLA's autotuning logs dumped to see what it still autotuned.

Checks, for each program given (default: the first held-out one of
gpu_programs.py):
  - make_cache returns one choice per Triton GEMM fusion and writes exactly
    one cache file per choice, named by the choice's fingerprint;
  - the program compiled with the cache computes what `jax.jit` computes
    (relative max error <= 2e-2 for 16-bit floats, 1e-3 otherwise);
  - XLA autotuned none of the fusions the cache holds (their fingerprints
    are absent from the autotuning logs it writes while compiling).
Prints one JSON line per program and exits non-zero when a check fails.
Without a GPU it exits 2 with the package's BackendError message.
--dry-run checks the same rules without a GPU on what XLA wrote on an H200
(testdata/xla_gpu: a module compiled with autotuning off and an
autotuning log): `choose` with a cache directory, one file per choice.

Usage: gpu_python_check.py [--programs NAME,...] [--model NAME|PATH] [--dry-run]
"""
import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def logged_fingerprints(path):
    """The hlo_fingerprint of every instruction profile in XLA's autotuning
    logs (text proto)."""
    if not os.path.exists(path):
        return set()
    out = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            t = line.strip()
            if t.startswith("hlo_fingerprint:"):
                out.add(t.split(":", 1)[1].strip().strip('"'))
    return out


def cache_problems(choices, cache):
    """The rules on what make_cache returned and wrote (empty: all hold)."""
    files = sorted(os.path.basename(p)[: -len(".pb")]
                   for _, _, fs in os.walk(cache) for p in fs if p.endswith(".pb"))
    fps = sorted(c.hlo_fingerprint for c in choices)
    problems = []
    if not choices:
        problems.append("no choice made")
    if files != fps:
        problems.append(f"cache files {files} != choices {fps}")
    return files, problems


def dry_run(model):
    """The checks that need no GPU, on XLA's own files from an H200."""
    import hlo_opt
    import hlo_opt.xla_gpu as xg

    data = os.path.join(HERE, "..", "testdata", "xla_gpu")
    with open(os.path.join(data, "gated_mlp_bf16_b1024.off.hlo"), encoding="utf-8") as f:
        module = hlo_opt.parse(f.read(), "gated_mlp_bf16_b1024.off.hlo", verify=False)
    env_path = os.path.join(data, "h200_env.textproto")
    with open(env_path, encoding="utf-8") as f:
        env = f.read()
    with tempfile.TemporaryDirectory() as d:
        choices = xg.choose(module, env, cache_dir=d, model=model)
        files, problems = cache_problems(choices, d)
    logged = logged_fingerprints(env_path)
    if not logged:
        problems.append(f"no hlo_fingerprint read from {env_path}")
    r = dict(program="dry-run", choices=len(choices), cache_files=len(files),
             logged_fingerprints=len(logged), ok=not problems, problems=problems)
    print(json.dumps(r), flush=True)
    return 0 if r["ok"] else 1


def check(prog, model):
    import jax
    import numpy as np
    import hlo_opt.xla_gpu as xg

    name, fn, shapes, _ = prog
    with tempfile.TemporaryDirectory() as d:
        cache = os.path.join(d, "cache")
        t = time.perf_counter()
        choices = xg.make_cache(fn, *shapes, cache_dir=cache, model=model)
        make_s = time.perf_counter() - t
        files, problems = cache_problems(choices, cache)
        cached = {c.hlo_fingerprint for c in choices}
        logs = os.path.join(d, "logs.textproto")
        t = time.perf_counter()
        compiled = jax.jit(fn).lower(*shapes).compile(compiler_options={
            "xla_gpu_per_fusion_autotune_cache_dir": cache,
            "xla_gpu_dump_autotune_logs_to": logs})
        compile_s = time.perf_counter() - t
        autotuned = logged_fingerprints(logs)
        rng = np.random.default_rng(0)
        args = [jax.device_put((rng.standard_normal(s.shape) * 0.1).astype(s.dtype))
                for s in shapes]
        want = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
        got = jax.tree_util.tree_leaves(compiled(*args))
        err = 0.0
        for w, g in zip(want, got):
            w = np.asarray(w, dtype=np.float64)
            g = np.asarray(g, dtype=np.float64)
            err = max(err, float(np.max(np.abs(w - g)) / (np.max(np.abs(w)) + 1e-12)))
        tol = 2e-2 if any(np.dtype(s.dtype).itemsize == 2 for s in shapes) else 1e-3
        if autotuned & cached:
            problems.append(f"XLA autotuned cached fusions {sorted(autotuned & cached)}")
        if len(want) != len(got) or err > tol:
            problems.append(f"results differ from jax.jit: max rel error {err:.3g} > {tol}")
        return dict(program=name, choices=len(choices), cache_files=len(files),
                    autotuned_anyway=len(autotuned & cached),
                    autotuned_other=len(autotuned - cached), max_rel_error=err,
                    make_cache_s=round(make_s, 3), compile_with_cache_s=round(compile_s, 3),
                    configs=[[c.fusion, c.config["block_m"], c.config["block_n"],
                              c.config["block_k"], c.config["num_stages"],
                              c.config["num_warps"]] for c in choices],
                    ok=not problems, problems=problems)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", help="comma-separated gpu_programs.py names "
                    "(default: the first held-out program)")
    ap.add_argument("--model", help="--gpu-tile-model: a builtin name or a path")
    ap.add_argument("--dry-run", action="store_true",
                    help="the checks that need no GPU, on testdata/xla_gpu")
    args = ap.parse_args(argv)
    if args.dry_run:
        return dry_run(args.model)
    import gpu_programs
    import hlo_opt

    progs = {p[0]: p for p in gpu_programs.programs()}
    if args.programs:
        names = [n for n in args.programs.split(",") if n]
        unknown = [n for n in names if n not in progs]
        if unknown:
            sys.exit(f"--programs: unknown {unknown}; known: {sorted(progs)}")
    else:
        names = [next(p[0] for p in progs.values() if p[3])]
    status = 0
    for n in names:
        try:
            r = check(progs[n], args.model)
        except hlo_opt.BackendError as e:
            print(f"gpu_python_check: {e}", file=sys.stderr)
            return 2
        print(json.dumps(r), flush=True)
        status |= 0 if r["ok"] else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
