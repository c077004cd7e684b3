"""Benchmark: what a kept choice (``hj.compile(..., cache_dir=...)``) saves.
For each held-out program (scripts/xla_cpu_heldout.py) in a fresh process
each: XLA's own compile (``jax.jit(f).lower(...).compile()``), then
``hj.compile`` with an empty cache folder (decides, verifies, keeps the
choice), then, in another fresh process, ``hj.compile`` with that folder
(takes the kept choice). Times are wall seconds; the ratios are over
XLA's compile in the same process.

    .venv/bin/python scripts/bench_xla_cpu_cache.py [NAME...]
"""
import json
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time, warnings
sys.path.insert(0, "scripts")
warnings.simplefilter("ignore")
import jax
import xla_cpu_heldout as H
import hlo_opt.jax as hj
p = {q.name: q for q in H.programs()}[sys.argv[1]]
t = time.perf_counter(); jax.jit(p.fn).lower(*p.args).compile(); xla = time.perf_counter() - t
jax.clear_caches()
t = time.perf_counter(); c = hj.compile(p.fn, *p.args, cache_dir=sys.argv[2]); took = time.perf_counter() - t
print(json.dumps(dict(xla=xla, took=took, choice=c.choice, cached="cached" in c.decision)))
"""


def run(name, folder):
    out = subprocess.run([sys.executable, "-c", CHILD, name, folder], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    sys.path.insert(0, "scripts")
    import xla_cpu_heldout as H

    names = sys.argv[1:] or [p.name for p in H.programs()]
    print(f"{'program':28} {'XLA s':>7} {'first s':>8} {'(x XLA)':>8} {'again s':>8} {'(x XLA)':>8}  choice")
    for name in names:
        with tempfile.TemporaryDirectory() as folder:
            a, b = run(name, folder), run(name, folder)
        assert not a["cached"] and b["cached"] and a["choice"] == b["choice"], (a, b)
        print(f"{name:28} {a['xla']:7.3f} {a['took']:8.3f} {a['took'] / a['xla']:7.1f}x {b['took']:8.3f} "
              f"{b['took'] / b['xla']:7.1f}x  {a['choice']}", flush=True)


if __name__ == "__main__":
    main()
