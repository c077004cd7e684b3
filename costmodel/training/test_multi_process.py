"""Multi-process data-parallel training (`train.py --data-parallel --coordinator`)
gives the one-process model (within float tolerance).

Starts two `train.py` processes on localhost joined by `jax.distributed`
(coordinator on a free local port, one host CPU device each, so every batch is
split across the two processes), trains a few steps on a real graph slice from
testdata, and compares the model process 0 writes with one trained here on one
device without data parallelism (same seed, same options). Also checks that
both processes saw 2 processes and 2 devices, and that only process 0 wrote a
model. Run by `costmodel/tests/training_scripts.rs`; exits non-zero on a
mismatch, a failed process, or a process still running after the time limit
(killed). About 20-40 s, mostly compilation.

    .venv/bin/python costmodel/training/test_multi_process.py
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import data as D  # noqa: E402
import export as X  # noqa: E402
import model as M  # noqa: E402
import test_data_parallel as P  # noqa: E402
import train as T  # noqa: E402

TESTDATA = os.path.normpath(os.path.join(HERE, "..", "..", "testdata"))
GRAPH = os.path.relpath(P.GRAPHS[0], TESTDATA)
# train.py's flags for P.small_hparams() and P.OPTS.
FLAGS = ["--steps", "6", "--batch", "8", "--hidden", "16", "--channels", "8", "--mlp-hidden", "16", "--lr", "1e-3",
         "--seed", "3", "--loss", "hinge", "--margin", "0.1", "--weight-decay", "0.05"]
TIMEOUT_S = 300


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_two_processes(out_dir: str) -> list[str]:
    """Runs the two train.py processes; returns their outputs (stdout + stderr)."""
    port = free_port()
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=1", JAX_PLATFORMS="cpu")
    procs = []
    for pid in (0, 1):
        cmd = [sys.executable, os.path.join(HERE, "train.py"), "--task", "layout", "--data", TESTDATA,
               "--train", GRAPH, "--out", os.path.join(out_dir, f"p{pid}.hlocm"), *FLAGS, "--data-parallel",
               "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", str(pid)]
        log = open(os.path.join(out_dir, f"p{pid}.log"), "w+")
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log))
    outputs, failed = [], []
    for pid, (p, log) in enumerate(procs):
        try:
            rc = p.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for q, _ in procs:
                q.kill()
                q.wait()
            rc = f"killed after {TIMEOUT_S} s"
        log.seek(0)
        outputs.append(log.read())
        log.close()
        if rc != 0:
            failed.append(f"process {pid}: exit {rc}\n{outputs[-1]}")
    if failed:
        sys.exit("\n".join(failed))
    return outputs


def main():
    with tempfile.TemporaryDirectory() as out_dir:
        outputs = run_two_processes(out_dir)
        for pid, text in enumerate(outputs):
            if "data-parallel over 2 devices, 2 processes" not in text:
                sys.exit(f"process {pid} did not join a 2-process, 2-device run:\n{text}")
        if os.path.exists(os.path.join(out_dir, "p1.hlocm")):
            sys.exit("process 1 wrote a model (only process 0 may)")
        _, stages = X.read_hlocm(os.path.join(out_dir, "p0.hlocm"))
        two = X.params_from_onnx(stages)

    hp = P.small_hparams()
    graphs = [D.load_graph(p, "layout", hp["num_layers"]) for p in P.GRAPHS]
    stats = D.feature_stats(P.GRAPHS, "layout")
    one = T.fit("layout", hp, graphs, stats, **P.OPTS)
    print(P.compare(one, two, M.init_params("layout", hp, P.OPTS["seed"], *stats["node"]), "1 process and 2 processes"))


if __name__ == "__main__":
    main()
