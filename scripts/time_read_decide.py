"""Times the native half of the XLA:CPU decision on the 26 held-out
programs (scripts/xla_cpu_heldout.py): `hlo_opt.parse_stablehlo` of the
module as `xla_cpu.decide` prints it (`xla_cpu.printed`), and
`_native.xla_cpu_decide` on the result. Medians of 41 calls per module,
summed over the modules. Run it with two builds of the package alternated
(PYTHONPATH=an unpacked wheel) to compare them in one sitting, and the
same build twice as the control.

    .venv-next/bin/python scripts/time_read_decide.py LABEL
"""
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import jax  # noqa: E402
import jaxlib  # noqa: E402

import xla_cpu_heldout  # noqa: E402
from hlo_opt import _native, parse_stablehlo, xla_cpu  # noqa: E402


def main() -> int:
    label = sys.argv[1] if len(sys.argv) > 1 else "this build"
    read = decide = 0.0
    for p in xla_cpu_heldout.programs():
        text = xla_cpu.printed(jax.jit(p.fn).lower(*p.args))
        a, b = [], []
        for _ in range(41):
            t0 = time.perf_counter()
            m = parse_stablehlo(text, name="<jax>")
            t1 = time.perf_counter()
            _native.xla_cpu_decide(m, jaxlib=jaxlib.__version__, model=None)
            a.append(t1 - t0)
            b.append(time.perf_counter() - t1)
        read += statistics.median(a)
        decide += statistics.median(b)
    print(f"{label}: read {read * 1e3:.2f} ms, native decide {decide * 1e3:.2f} ms "
          f"(sums of medians over {len(xla_cpu_heldout.programs())} modules)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
