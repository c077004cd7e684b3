"""Data-parallel training gives the one-device model (within float tolerance).

Trains the layout model a few steps on a real graph slice from testdata twice, with
each batch split across a 2-device mesh and on 1 device, same seed, and checks
that every parameter agrees. Needs 2 host devices: run with
XLA_FLAGS=--xla_force_host_platform_device_count=2 (this script sets it when
unset). Run by `costmodel/tests/training_scripts.rs`; exits non-zero on a
mismatch. Fast (a few seconds of compilation, 6 steps).

    .venv/bin/python costmodel/training/test_data_parallel.py
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import jax  # noqa: E402
import numpy as np  # noqa: E402

import data as D  # noqa: E402
import model as M  # noqa: E402
import train as T  # noqa: E402

TESTDATA = os.path.join(HERE, "..", "..", "testdata")
GRAPHS = [os.path.join(TESTDATA, "costmodel", "npz", "layout_xla_mask_rcnn_unsorted_ids.npz")]


# The setup both data-parallel checks train with (test_multi_process.py too).
OPTS = dict(steps=6, batch=8, lr=1e-3, loss="hinge", margin=0.1, weight_decay=0.05, seed=3, log=None)


def small_hparams() -> dict:
    hp = M.default_hparams("layout")
    hp.update(hidden=16, channels=8, mlp_hidden=16)
    return hp


def compare(one: dict, two: dict, init: dict, what: str) -> str:
    """Exits non-zero unless every parameter of `two` equals `one`'s within float
    tolerance and training moved at least half of them from `init`; returns
    the summary line."""
    if sorted(one) != sorted(two):
        sys.exit(f"parameter names differ: {sorted(set(one) ^ set(two))}")
    worst, moved = 0.0, 0
    for k in sorted(one):
        a, b = one[k], two[k]
        worst = max(worst, float(np.max(np.abs(a - b) / (np.abs(a) + 1e-3))))
        moved += int(not np.array_equal(a, init[k]))
        # Float tolerance after 6 Adam steps of lr 1e-3: a tenth of one step.
        # (A parameter with no gradient in exact arithmetic, like the output
        # bias under a ranking loss, moves by rounding noise only.)
        if not np.allclose(a, b, rtol=1e-4, atol=1e-4):
            sys.exit(f"parameter {k}: {what} differ by up to {np.max(np.abs(a - b)):.3g}")
    if moved < len(one) // 2:
        sys.exit(f"only {moved} of {len(one)} parameters changed in training: the test proves nothing")
    return f"ok: {len(one)} parameters ({moved} trained) agree on {what} (largest relative difference {worst:.2e})"


def main():
    devices = jax.devices()
    if len(devices) < 2:
        sys.exit(f"needs 2 devices, found {len(devices)} (XLA_FLAGS={os.environ.get('XLA_FLAGS')})")
    hp = small_hparams()
    graphs = [D.load_graph(p, "layout", hp["num_layers"]) for p in GRAPHS]
    stats = D.feature_stats(GRAPHS, "layout")
    one = T.fit("layout", hp, graphs, stats, parallel=T.DataParallel(devices[:1]), **OPTS)
    two = T.fit("layout", hp, graphs, stats, parallel=T.DataParallel(devices[:2]), **OPTS)
    print(compare(one, two, M.init_params("layout", hp, OPTS["seed"], *stats["node"]), "1 and 2 devices"))


if __name__ == "__main__":
    main()
