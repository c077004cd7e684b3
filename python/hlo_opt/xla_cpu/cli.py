"""The command line, ``python -m hlo_opt.xla_cpu``: ``collect`` (the
generated corpus or StableHLO modules measured into a folder) and
``observe``."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Sequence

from .space import observe
from .store import collect, collect_modules


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hlo_opt.xla_cpu collect OUT``: measure the generated
    training corpus (hlo_opt.cpu_corpus) on this machine into OUT, or with
    ``--modules FILE...`` those StableHLO modules (``hlo-cost collect
    --kernels`` runs this), resuming what an earlier run left
    (scripts/xla_cpu_retrain runs it, then the featurizer and the
    training)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m hlo_opt.xla_cpu", description=main.__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="measure the generated corpus, or StableHLO modules, into OUT")
    c.add_argument("out")
    c.add_argument("--modules", nargs="+", metavar="FILE",
                   help="StableHLO module files (jax.jit(f).lower(...).as_text()) instead of the generated corpus")
    c.add_argument("--count", type=int, default=504,
                   help="generated programs (default 504: 36 per family, the built-in models' corpus; the first N "
                        "of a larger count are the N of a smaller one)")
    c.add_argument("--seed", type=int, default=0, help="the corpus's programs, or the modules' arguments")
    c.add_argument("--budget-s", type=float, default=2.0, help="seconds of timing per program")
    c.add_argument("--budget", type=float, metavar="SECONDS",
                   help="start no further program after this many seconds, once one is measured (a later run goes on)")
    c.add_argument("--collections", type=int, default=1, metavar="N",
                   help="measure each program until it holds N measurements, taken in separate passes over the "
                        "programs; its labels are their geometric mean (default 1; a rerun with a larger N adds "
                        "measurements to what is there)")
    c.add_argument("--allow-mixed-devices", action="store_true")
    sub.add_parser("observe", help="what this jaxlib's XLA:CPU does with each candidate (docs/xla-cpu.md)")
    a = ap.parse_args(argv)
    if a.command == "observe":
        import jaxlib

        print(f"jaxlib {jaxlib.__version__}")
        for name, counts in observe().items():
            print(f"{name:24} {json.dumps(counts)}")
        return 0
    if a.count < 1 or a.collections < 1 or not (a.budget_s > 0) or (a.budget is not None and not a.budget > 0):
        ap.error("--count and --collections must be at least 1, and --budget-s and --budget positive")
    deadline = None if a.budget is None else time.monotonic() + a.budget
    common = dict(budget_s=a.budget_s, seed=a.seed, allow_mixed_devices=a.allow_mixed_devices, deadline=deadline,
                  collections=a.collections)
    try:
        if a.modules:
            done = collect_modules(a.modules, a.out, **common)
        else:
            from .. import cpu_corpus

            done = collect(cpu_corpus.programs(a.seed, a.count), a.out, **common)
    except (ValueError, RuntimeError) as e:
        print(f"python -m hlo_opt.xla_cpu: error: {e}", file=sys.stderr)
        return 1
    again = f" ({len(done)} measurements)" if len(done) != len(set(done)) else ""
    print(f"measured {len(set(done))} programs now{again}; {a.out} holds {len(list(Path(a.out).glob('*.npz')))}")
    return 0
