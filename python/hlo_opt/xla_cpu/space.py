"""The decision space: the candidates (:data:`CANDIDATES`, the table of
passes/src/xla_cpu/candidates.rs), their compile options and names (a
module-wide candidate, followed by ``+onednn:N`` when N ops run on oneDNN),
the device a measurement describes (:func:`fingerprint`), and
:func:`observe`, the evidence of what this jaxlib's XLA:CPU does with each
candidate."""

from __future__ import annotations

import os
import platform
import re
from typing import Any, Sequence

from .. import _native

#: (name, compile options) of each candidate, the default first (it sets
#: nothing): the table of passes/src/xla_cpu/candidates.rs.
CANDIDATES: list[tuple[str, dict[str, Any]]] = [(n, dict(o)) for n, o in _native.xla_cpu_candidates()]
CANDIDATE_NAMES: list[str] = [n for n, _ in CANDIDATES]
#: Bump when the measurement protocol or the candidate set changes.
#: 2: a sample of a program under ``timing.SAMPLE_S`` is the mean of
#: back-to-back calls (1: one call).
PROTOCOL = 2


def options_of(name: str) -> dict[str, Any]:
    for n, o in CANDIDATES:
        if n == name:
            return dict(o)
    raise ValueError(f"unknown XLA:CPU candidate {name!r}; known: {', '.join(CANDIDATE_NAMES)}")


def fingerprint() -> dict[str, Any]:
    """The device a measurement describes: CPU model and features, cores,
    jaxlib version."""
    import jaxlib

    model, flags = platform.processor() or "unknown", ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model in ("unknown", "", "x86_64"):
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = line.split(":", 1)[1]
    except OSError:
        pass
    isa = sorted(f for f in flags.split() if f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "avx512_vnni", "fma"))
    return {"cpu": model, "isa": isa, "cores": os.cpu_count(), "jaxlib": jaxlib.__version__, "machine": platform.machine()}


def _with_ops(name: str, sigs: Sequence[str]) -> str:
    return f"{name}+onednn:{len(sigs)}" if sigs else name


def _module_wide(name: str) -> str:
    """The module-wide candidate of a choice named by :func:`_with_ops`."""
    return name.split("+onednn:")[0]


def observe() -> dict[str, dict[str, int]]:
    """What this jaxlib's XLA:CPU does with each candidate, as evidence
    (docs/xla-cpu.md): for a probe program with a dot, an elementwise chain
    and a reduction, the number of YNNPACK fusions (``__ynn_fusion``) in
    the optimized module and the dots, elementwise ops and reductions
    inside them. Raises ``RuntimeError`` when XLA refuses an option."""
    import jax
    import jax.numpy as jnp

    def probe(w, x, y):
        return jax.nn.relu(x @ w), jnp.sum(jnp.tanh(y * 2.0 + 1.0), axis=1)

    args = (jnp.ones((256, 256)), jnp.ones((64, 256)), jnp.ones((512, 512)))
    lowered = jax.jit(probe).lower(*args)
    out = {}
    for name, opts in CANDIDATES:
        try:
            text = lowered.compile(compiler_options=opts).as_text()
        except Exception as e:
            raise RuntimeError(f"XLA:CPU refused candidate {name} ({opts}): {e}") from e
        out[name] = _ynn_contents(text)
    return out


def _ynn_contents(text: str) -> dict[str, int]:
    """YNNPACK fusions of an optimized module's text, and the dots,
    elementwise ops and reductions in the computations they call."""
    fusions = re.findall(r"calls=(%[\w.\-]+)[^\n]*\"kind\":\"__ynn_fusion\"", text)
    counts = {"ynn_fusions": len(fusions), "dot": 0, "eltwise": 0, "reduce": 0}
    for callee in fusions:
        body = re.search(re.escape(callee) + r" [^{]*\{(.*?)\n\}", text, re.S)
        if body is None:
            continue
        ops = re.findall(r"= [\w\[\]{},:0-9 ]*? (\w[\w-]*)\(", body.group(1))
        counts["dot"] += sum(o == "dot" for o in ops)
        counts["reduce"] += sum(o == "reduce" for o in ops)
        counts["eltwise"] += sum(o in ("add", "multiply", "tanh", "maximum", "subtract", "exponential") for o in ops)
    return counts
