#!/usr/bin/env python3
"""Generates the test corpus testdata/jax_gen/: real modules that jax and XLA
write for the programs of `jax_programs.py` (SPMD over 8 host devices,
shard_map collectives, loops, remat, custom derivatives, sort, top-k, FFT,
RNG, linear algebra custom calls, mixed precision, small networks).

For each program, four modules, each as XLA's text and as XLA's serialized
HloModuleProto:

  <name>.pre.dbg    before optimization, with debug info (op metadata and
                    the stack frame tables: `as_text(dialect="hlo",
                    debug_info=True)`, `compiler_ir("hlo")`'s proto)
  <name>.pre        before optimization, without debug info
  <name>.post.dbg   after optimization (`compile().as_text()`, the
                    executable's HloModule proto), with debug info
  <name>.post       after optimization, without debug info (printed
                    without metadata; its proto is XLA's of that text)

Files: `<module>.hlo` (text) and `<module>.pb` (proto); any file over
GZIP_OVER bytes is stored gzip-compressed as `<file>.gz` (deterministic: no
name, mtime 0). MANIFEST.tsv lists every file. Output is deterministic for a
given jax/jaxlib: the stack frames name the programs' file as
`jax_programs.py` whatever the checkout's path.

Usage (from the repository root, with the pinned jax 0.10.2):
  .venv/bin/python hlo/conformance/gen_jax_modules.py [--out testdata/jax_gen] [--only NAME...]
"""
import argparse
import gzip
import io
import os
import subprocess
import sys

# 8 host devices for the sharded programs; set before jax is imported.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

GZIP_OVER = 16 << 10
HERE = os.path.dirname(os.path.abspath(__file__))


def load_programs():
    path = os.path.join(HERE, "jax_programs.py")
    with open(path, encoding="utf-8") as f:
        src = f.read()
    ns = {"__name__": "jax_programs"}
    exec(compile(src, "jax_programs.py", "exec"), ns)
    return ns["PROGRAMS"]


def gz(data: bytes) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as f:
        f.write(data)
    return buf.getvalue()


def modules_of(name, make):
    import jax
    from jax._src.lib import hlo

    fn, args, kw = make()
    lowered = jax.jit(fn, **kw).lower(*args)
    pre_dbg = lowered.as_text(dialect="hlo", debug_info=True)
    pre = lowered.as_text(dialect="hlo")
    pre_dbg_pb = lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()
    compiled = lowered.compile()
    post_dbg = compiled.as_text()
    module = compiled.runtime_executable().hlo_modules()[0]
    post_dbg_pb = module.as_serialized_hlo_module_proto()
    opts = hlo.HloPrintOptions()
    opts.print_metadata = False
    post = module.to_string(opts)
    out = {}
    for stage, text, pb in (("pre.dbg", pre_dbg, pre_dbg_pb), ("pre", pre, None),
                            ("post.dbg", post_dbg, post_dbg_pb), ("post", post, None)):
        if pb is None:
            # XLA's proto of the module without debug info.
            pb = hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()
        out[f"{name}.{stage}.hlo"] = text.encode()
        out[f"{name}.{stage}.pb"] = pb
    return out


def write_program(name, out):
    """Generates one program's files into `out`; returns its manifest rows."""
    import jax
    from jax._src import source_info_util

    # This script's own frames (its path depends on the checkout) stay out
    # of the modules' stack frames, as jax leaves out its own.
    source_info_util.register_exclusion(os.path.abspath(__file__))
    if len(jax.devices()) != 8:
        raise SystemExit(f"expected 8 host devices, got {len(jax.devices())}")
    make, sharded = load_programs()[name]
    rows = []
    for fname, data in sorted(modules_of(name, make).items()):
        stored = fname + ".gz" if len(data) > GZIP_OVER else fname
        payload = gz(data) if stored.endswith(".gz") else data
        for stale in (fname, fname + ".gz"):
            if stale != stored and os.path.exists(os.path.join(out, stale)):
                os.remove(os.path.join(out, stale))
        with open(os.path.join(out, stored), "wb") as f:
            f.write(payload)
        stage = fname[len(name) + 1:].rsplit(".", 1)[0]
        rows.append((stored, name, stage.split(".")[0], "yes" if stage.endswith("dbg") else "no",
                     "text" if fname.endswith(".hlo") else "proto", "yes" if sharded else "no",
                     str(len(data)), str(len(payload))))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="testdata/jax_gen")
    ap.add_argument("--only", nargs="*", help="generate these programs only (the manifest is not rewritten)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        # One program per process: XLA numbers modules (the proto's `id`)
        # with a process-wide counter, so a fresh process per program keeps
        # each program's files the same whatever else is generated.
        for r in write_program(args.worker, args.out):
            print("\t".join(r), flush=True)
        return 0
    import jax
    import jaxlib

    programs = load_programs()
    names = args.only or sorted(programs)
    unknown = [n for n in names if n not in programs]
    if unknown:
        print(f"unknown programs: {unknown}; known: {sorted(programs)}", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for name in names:
        res = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", name, "--out", args.out],
                             stdout=subprocess.PIPE, text=True)
        if res.returncode != 0:
            print(f"{name}: failed (exit {res.returncode})", file=sys.stderr)
            return 1
        got = [l.split("\t") for l in res.stdout.splitlines() if l.count("\t") == 7]
        rows.extend(got)
        print(f"{name}: {len(got)} files", flush=True)
    if not args.only:
        with open(os.path.join(args.out, "MANIFEST.tsv"), "w", encoding="utf-8") as f:
            f.write(f"# Written by hlo/conformance/gen_jax_modules.py with jax {jax.__version__}, "
                    f"jaxlib {jaxlib.__version__}, 8 host devices; do not edit.\n")
            f.write("# file\tprogram\tstage\tdebug_info\tformat\tsharded\tbytes\tstored_bytes\n")
            for r in rows:
                f.write("\t".join(r) + "\n")
    total = sum(int(r[7]) for r in rows)
    print(f"{len(names)} programs, {len(rows) // 2} modules, {len(rows)} files, {total} bytes stored")
    return 0


if __name__ == "__main__":
    sys.exit(main())
