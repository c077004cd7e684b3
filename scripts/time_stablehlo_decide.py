"""Times, on the 26 held-out XLA:CPU programs, what `xla_cpu.decide` pays to
get a module's text: jax's MLIR-to-HLO conversion
(`lowered.as_text(dialect="hlo")`) against printing the StableHLO in the
generic op form, next to XLA's compile (`lowered.compile()`). Min of 5 runs
each; writes one JSON line per program.

    python scripts/time_stablehlo_decide.py OUT.jsonl
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import jax  # noqa: E402

import xla_cpu_heldout  # noqa: E402


def best(fn, n=5):
    t = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return min(t) * 1e3


def compile_fresh(p) -> float:
    """One XLA compile of a fresh lowering (a Lowered caches its executable)."""
    jax.clear_caches()  # else jax hands back the executable it compiled before
    lowered = jax.jit(p.fn).lower(*p.args)
    t0 = time.perf_counter()
    lowered.compile()
    return (time.perf_counter() - t0) * 1e3


def main() -> int:
    with open(sys.argv[1], "w") as out:
        for p in xla_cpu_heldout.programs():
            lowered = jax.jit(p.fn).lower(*p.args)
            row = {
                "name": p.name,
                "hlo_text_ms": best(lambda: lowered.as_text(dialect="hlo")),
                "stablehlo_generic_ms": best(
                    lambda: lowered.compiler_ir().operation.get_asm(print_generic_op_form=True)),
                "stablehlo_pretty_ms": best(lambda: lowered.as_text()),
                "compile_ms": min(compile_fresh(p) for _ in range(3)),
            }
            out.write(json.dumps(row) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
