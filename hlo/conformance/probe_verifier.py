#!/usr/bin/env python3
"""Asks XLA whether each HLO text module is well formed: XLA's parser and its verifier.

jaxlib's `hlo_module_from_text` is XLA's parser without the HLO verifier
(`ParseAndReturnUnverifiedModule`), and jaxlib compiles only StableHLO, whose
importer rewrites async pairs. So the verifier is reached through a PJRT
plugin: XLA's own proto of the parsed module is compiled by the XLA CPU
plugin (`xla-cpu-pjrt`, through hlo-opt's worker `hlo-opt-pjrt-worker`), whose
pipeline runs `HloVerifier` before its first pass. A verifier refusal reads
`[hlo verifier] ... Failed after pipeline-start`; a module the verifier
accepts fails later or compiles (XLA:CPU implements no async collectives:
"not supported by XLA:CPU ThunkEmitter"); other errors come from XLA's
proto reader, before the verifier.

With `--mlir`, each module is also imported into MLIR and compiled by
jaxlib's own CPU client (each in a child process: some imports abort); its
verdict judges the importer's rewrite of the module, not the module.

Usage: probe_verifier.py [--worker W] [--plugin P] [--mlir] FILE...
Prints one tab-separated line per file: name, parse verdict, then the
verifier's (and the MLIR route's) verdict with XLA's first message.
"""
import argparse
import json
import os
import struct
import subprocess
import sys


def one_line(e, n=400):
    return " | ".join(str(e).splitlines())[:n]


class Worker:
    """hlo-opt's PJRT worker (protocol in pjrt/src/worker.rs)."""

    def __init__(self, worker, plugin):
        self.argv, self.plugin = [worker], plugin
        self.start()

    def start(self):
        self.p = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        answer = self.request({"op": "init", "plugin": self.plugin}, [])
        if answer.get("ok") is False:
            raise SystemExit(f"the worker cannot load {self.plugin}: {answer.get('error')}")

    def request(self, obj, blobs):
        j = json.dumps(obj).encode()
        frame = b"HOPJ" + struct.pack("<I", len(j)) + j + struct.pack("<I", len(blobs))
        for b in blobs:
            frame += struct.pack("<Q", len(b)) + b
        self.p.stdin.write(frame)
        self.p.stdin.flush()
        window = b""
        while window != b"HOPJ":
            c = self.p.stdout.read(1)
            if not c:
                raise RuntimeError("the worker died (XLA aborted)")
            window = (window + c)[-4:]
        answer = json.loads(self.p.stdout.read(struct.unpack("<I", self.p.stdout.read(4))[0]))
        for _ in range(struct.unpack("<I", self.p.stdout.read(4))[0]):
            self.p.stdout.read(struct.unpack("<Q", self.p.stdout.read(8))[0])
        return answer

    def verdict(self, proto, options):
        try:
            a = self.request({"op": "compile"}, [proto, options])
        except RuntimeError as e:
            self.start()
            return f"verifier:ABORT {e}"
        if a.get("ok") is not False:
            self.request({"op": "free", "id": a.get("id", 0)}, [])
            return "verifier:ok (compiled)"
        msg = one_line(a.get("error"))
        if "[hlo verifier]" in msg:
            if "pipeline-start" in msg:
                return f"verifier:REFUSE {msg}"
            return f"verifier:ok (a pass's output refused: {msg})"
        if "not supported by XLA:CPU" in msg:
            return f"verifier:ok (later: {msg})"
        return f"REFUSE before the verifier (proto reader): {msg}"


def mlir_verdict(path):
    code = (
        "import sys, jax\n"
        "from jax._src.lib import hlo, xla_client\n"
        "x = xla_client._xla\n"
        "proto = hlo.hlo_module_from_text(open(sys.argv[1]).read()).as_serialized_hlo_module_proto()\n"
        "mlir = x.mlir.xla_computation_to_mlir_module(hlo.XlaComputation(proto))\n"
        "be = jax._src.xla_bridge.get_backend('cpu')\n"
        "be.compile_and_load(mlir, x.DeviceList(tuple(jax.devices('cpu')[:1])), x.CompileOptions())\n"
    )
    r = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True)
    if r.returncode == 0:
        return "mlir:ok"
    lines = [l for l in r.stderr.splitlines() if "Error" in l or "ERROR" in l or "error" in l]
    return f"mlir:REFUSE {one_line(lines[-1] if lines else r.stderr[-300:])}"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", default=os.path.join(here, "../../target/release/hlo-opt-pjrt-worker"))
    ap.add_argument("--plugin", default=None, help="default: xla_plugins/xla_cpu_pjrt of this Python")
    ap.add_argument("--mlir", action="store_true", help="also jaxlib's MLIR import + CPU compile")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    import jaxlib
    from jax._src.lib import hlo, xla_client

    plugin = args.plugin
    if plugin is None:
        import xla_plugins.xla_cpu_pjrt as p
        plugin = os.path.join(os.path.dirname(p.__file__), "xla_cpu_pjrt.so")
    options = xla_client.CompileOptions()
    options.executable_build_options.num_replicas = 1
    options.executable_build_options.num_partitions = 1
    options = options.SerializeAsString()
    worker = Worker(args.worker, plugin)
    print(f"# jaxlib {jaxlib.__version__}; verifier: {plugin}")
    for path in args.files:
        name = os.path.basename(path)
        try:
            proto = hlo.hlo_module_from_text(open(path).read()).as_serialized_hlo_module_proto()
        except Exception as e:
            print(f"{name}\tparse:REFUSE {one_line(e)}")
            continue
        cols = [name, "parse:ok", worker.verdict(proto, options)]
        if args.mlir:
            cols.append(mlir_verdict(path))
        print("\t".join(cols), flush=True)


if __name__ == "__main__":
    main()
