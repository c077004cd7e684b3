"""Write each XLA:CPU corpus program (the 168 training programs of
hlo_opt/cpu_corpus.py and the 26 held-out ones of xla_cpu_heldout.py) as
the two texts jax gives for it: `NAME.mlir` (StableHLO, generic op form)
and `NAME.hlo` (`lowered.as_text(dialect="hlo")`), into OUT.

    python scripts/dump_stablehlo_corpus.py OUT
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import jax  # noqa: E402

from hlo_opt import cpu_corpus  # noqa: E402
import xla_cpu_heldout  # noqa: E402


def generic(lowered) -> str:
    return lowered.compiler_ir().operation.get_asm(print_generic_op_form=True)


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    progs = cpu_corpus.programs(0, 168) + xla_cpu_heldout.programs()
    for p in progs:
        lowered = jax.jit(p.fn).lower(*p.args)
        (out / f"{p.name}.mlir").write_text(generic(lowered))
        (out / f"{p.name}.hlo").write_text(lowered.as_text(dialect="hlo"))
    print(f"{len(progs)} programs, jax {jax.__version__}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
