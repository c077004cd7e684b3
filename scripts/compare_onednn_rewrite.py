"""Compares hlo_opt.onednn's rewrite with the one of an earlier commit, on
the held-out XLA:CPU programs, generated ones and the test probes: the same
ops found (signatures, eligibility), the same rewritten modules (as MLIR
prints them), and the time of each way in, summed over the programs.

    .venv/bin/python scripts/compare_onednn_rewrite.py --ref b66e76d --generated 60 --every 1

``--every K`` rewrites every K-th eligible signature of each program (1: all).
The earlier module is read with ``git show REF:python/hlo_opt/onednn.py``.
"""
import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, "scripts")
sys.path.insert(0, "python/tests")

import jax  # noqa: E402
import jaxlib  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import xla_cpu_heldout as H  # noqa: E402
from hlo_opt import onednn, stablehlo  # noqa: E402
from hlo_opt.cpu_corpus import programs  # noqa: E402


def earlier(ref: str):
    src = subprocess.run(["git", "show", f"{ref}:python/hlo_opt/onednn.py"], check=True, capture_output=True,
                         text=True).stdout
    path = Path(tempfile.mkdtemp()) / "onednn_earlier.py"
    path.write_text(src)
    # A module of the package, so that its relative imports resolve.
    spec = importlib.util.spec_from_file_location("hlo_opt.onednn_earlier", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["hlo_opt.onednn_earlier"] = mod
    spec.loader.exec_module(mod)
    return mod


def way_in(mod, lowered, sigs):
    """The earlier module's way in: text, or the module if it has one."""
    if hasattr(mod, "module_with"):
        return mod.module_with(lowered.compiler_ir(), sigs)
    text, n = mod.rewrite(lowered.as_text(), sigs)
    return stablehlo.parse(text), n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--generated", type=int, default=60)
    ap.add_argument("--every", type=int, default=1)
    a = ap.parse_args()
    old = earlier(a.ref)
    import test_xla_cpu as T

    k = jax.random.PRNGKey(5)
    w = {"a": jnp.ones((3, 3, 16, 32)), "b": jnp.ones((3, 16, 16)), "dw": jnp.ones((3, 3, 1, 16))}
    progs = [(p.name, p.fn, p.args) for p in H.programs()]
    progs += [(p.name, p.fn, p.args) for p in programs(seed=0, count=a.generated)]
    progs += [("attention_bf16", T.attention_mlp, T.attention_inputs(jnp.bfloat16)),
              ("attention_f32", T.attention_mlp, T.attention_inputs(jnp.float32)),
              ("conv_net", T.conv_net, (w, jax.random.normal(k, (2, 8, 8, 16)), jax.random.normal(k, (2, 32, 16))))]
    differ, ops, t_old, t_new = 0, 0, 0.0, 0.0
    for name, fn, args in progs:
        lowered = jax.jit(fn).lower(*args)
        text = lowered.as_text()
        before = old.contractions(text)
        now = onednn.contractions(lowered)
        if [(c.signature, c.eligible, c.transpose_b) for c in before] != \
                [(c.signature, c.eligible, c.transpose_b) for c in now]:
            differ += 1
            print(f"{name}: other ops found\n  {before}\n  {now}")
            continue
        sigs = [c.signature for c in now if c.eligible][::a.every]
        if not sigs:
            continue
        t0 = time.perf_counter()
        m_old, n_old = way_in(old, lowered, sigs)
        t1 = time.perf_counter()
        m_new, n_new = onednn.module_with(lowered.compiler_ir(), sigs)
        t2 = time.perf_counter()
        t_old, t_new = t_old + t1 - t0, t_new + t2 - t1
        if n_old != n_new or str(m_old) != str(m_new):
            differ += 1
            print(f"{name}: other modules ({n_old} and {n_new} ops rewritten)")
        ops += n_new
        assert lowered.as_text() == text, "jax's own module changed"
    print(f"jaxlib {jaxlib.__version__}: {len(progs)} programs, {ops} ops rewritten, {differ} differ; "
          f"way in at {a.ref} {t_old * 1e3:.1f} ms, now {t_new * 1e3:.1f} ms")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
