"""Benchmark: the XLA:CPU decision's cost against XLA:CPU's compile time, on
the held-out programs (scripts/xla_cpu_heldout.py): ``xla_cpu.decide`` (jax's
StableHLO read by hlo_opt.parse_stablehlo, features, both models) and the
same decision from jax's HLO text (``as_text(dialect="hlo")``, as before),
each the best of 5, over ``lowered.compile()`` after ``jax.clear_caches()``
(best of 2), and whether both give the same decision. The way in is timed
too: the model's oneDNN ops rewritten into a copy of the module
(``onednn.lowered_with``; its module-wide choice is compile options, free).

    .venv/bin/python scripts/bench_xla_cpu_decision.py
"""
import json, sys, time
sys.path.insert(0, "scripts")
import jax, numpy as np
import xla_cpu_heldout as H
from hlo_opt import _native, xla_cpu, parse, onednn
def best(f, n=5):
    b = 1e9
    for _ in range(n):
        t = time.perf_counter(); f(); b = min(b, time.perf_counter() - t)
    return b
xla_cpu.decide(jax.jit(H.programs()[0].fn).lower(*H.programs()[0].args))
new, old, way, same = [], [], [], 0
for p in H.programs():
    lo = jax.jit(p.fn).lower(*p.args)
    comp = []
    for _ in range(2):
        jax.clear_caches(); lo = jax.jit(p.fn).lower(*p.args)
        t = time.perf_counter(); lo.compile(); comp.append(time.perf_counter() - t)
    c = min(comp)
    d_new = best(lambda: xla_cpu.decide(lo))
    d_old = best(lambda: _native.xla_cpu_decide(parse(lo.as_text(dialect="hlo"), name="<jax>"), jaxlib=__import__("jaxlib").__version__, model=None))
    new.append(d_new / c); old.append(d_old / c)
    ours, notes = xla_cpu.decide(lo)
    sigs = xla_cpu.decision._model_pick(ours, notes)[2]
    w = best(lambda: onednn.lowered_with(lo, sigs)) if sigs else 0.0
    way.append((d_new + w) / c)
    # The same decision both ways (the StableHLO read with large constants
    # elided, jax's HLO text with every element).
    theirs = json.loads(_native.xla_cpu_decide(parse(lo.as_text(dialect="hlo"), name="<jax>"), jaxlib=__import__("jaxlib").__version__, model=None)[0])
    same += ours == theirs
    print(f"{p.name:28} compile {c*1e3:7.1f} ms  decide via StableHLO {d_new*1e3:6.2f} ms ({100*d_new/c:.2f}%)  via jax's HLO {d_old*1e3:6.2f} ms ({100*d_old/c:.2f}%)  {'same' if ours == theirs else 'DIFFERENT'} decision  way in ({len(sigs)} ops) {w*1e3:5.2f} ms, with the decision {100*(d_new+w)/c:.2f}%", flush=True)
print(f"median {100*np.median(new):.2f}% (max {100*max(new):.2f}%) vs {100*np.median(old):.2f}% (max {100*max(old):.2f}%); the same decision on {same}/{len(new)}; "
      f"with the way in: median {100*np.median(way):.2f}% (max {100*max(way):.2f}%, {sum(x > 0.02 for x in way)} over 2%)")
