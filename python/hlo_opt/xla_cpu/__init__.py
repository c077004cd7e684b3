"""XLA:CPU kernel choices, measured with jaxlib's own CPU client.

XLA:CPU sends dots, elementwise chains and reductions to YNNPACK fusions
(``__ynn_fusion``) or to its own kernels according to one compile option,
``xla_cpu_experimental_ynn_fusion_type`` (a comma-separated list of
``LIBRARY_FUSION_TYPE_*`` names; empty: XLA's own kernels everywhere). The
decision space here is every subset of {DOT, ELTWISE, REDUCE}
(:data:`CANDIDATES`); XLA's default is one of them (docs/xla-cpu.md).

``measure(lowered)`` compiles each candidate from one ``jax.jit(...).lower``
and times them interleaved, against the default and a second executable of
the default (the control, whose true ratio is 1). ``collect(programs, out)``
does that per program into ``out/NAME.npz`` and ``out/NAME.hlo``, written
atomically, skipping programs already measured on this machine with this
XLA: an interrupted run loses at most the program it was measuring.

The stages, one module each; each imports only from those above it:

- :mod:`.space`: the candidates, their options and names, the device's
  fingerprint, ``observe``;
- :mod:`.measuring`: ``measure``, and ``compile``'s ``measure=``;
- :mod:`.store`: the npz files, pooling, ``collect``;
- :mod:`.decision`: jax's module as the pass reads it, ``decide``;
- :mod:`.verify`: ``compile``'s ``verify``;
- :mod:`.compiled`: ``Compiled``, what ``compile`` returns;
- :mod:`.cache`: ``ChoiceCache``, the choices kept on disk;
- :mod:`.compiling`: ``compile``, the one-liner, as its stages;
- :mod:`.cli`: ``python -m hlo_opt.xla_cpu``;
- :mod:`.ops`: per-op labels for the oneDNN choice
  (``python -m hlo_opt.xla_cpu.ops``).
"""

from __future__ import annotations

from .space import CANDIDATE_NAMES, CANDIDATES, PROTOCOL, fingerprint, observe, options_of
from .measuring import measure, measure_candidates
from .store import collect, collect_modules, pool, save
from .decision import decide, printed
from .verify import CONTEND_WITHIN, FINAL_MAX, FIRST_RUN_CUT, FIRST_RUN_FLOOR_S, LOCAL_SEARCH_WITHIN, VERIFY_KEEP
from .compiled import Compiled
from .cache import ChoiceCache
from .compiling import compile
from .cli import main

__all__ = [
    "CANDIDATES", "CANDIDATE_NAMES", "PROTOCOL", "options_of", "fingerprint", "observe",
    "measure", "measure_candidates",
    "save", "pool", "collect", "collect_modules",
    "printed", "decide",
    "VERIFY_KEEP", "FIRST_RUN_CUT", "FIRST_RUN_FLOOR_S", "CONTEND_WITHIN", "FINAL_MAX", "LOCAL_SEARCH_WITHIN",
    "Compiled", "ChoiceCache", "compile", "main",
]
