"""hlo-opt from Python: parse, verify and print XLA HLO modules, run the
layout and tile passes, featurize modules the TpuGraphs way and score them
with the learned cost models. See docs/python.md."""

import os
from typing import Any, Literal, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from . import metrics as metrics

NPZ_DTYPES: dict[str, Any]

class HloError(ValueError):
    """Invalid HLO: a parse or verifier error. ``str()`` is the message
    ``hlo-opt`` prints (``file:line:col: error: ...``, the source line and a
    caret)."""

    path: str | None
    """The file (or the ``name`` given to :func:`parse`); None when unknown."""
    line: int | None
    """1-based line of the error; None for errors without a position."""
    col: int | None
    """1-based column of the error; None for errors without a position."""

class PassError(RuntimeError):
    """A pass failed: its cost model is missing or broken, ONNX Runtime was
    not found, a measurement failed."""

class CostModelError(RuntimeError):
    """Featurization, an npz file or a cost model failed."""

class BackendError(RuntimeError):
    """The PJRT backend failed (no plugin, a compile or run error, a worker
    crash), or a compiled function's results differ from ``jax.jit``'s."""

class Module:
    """An HLO module. Immutable: :meth:`run_passes` returns a new one."""

    @property
    def name(self) -> str:
        """The module's name (``HloModule NAME``)."""
    @property
    def source_name(self) -> str:
        """The name errors give the source: a path, ``<input>``."""
    def __str__(self) -> str:
        """The module as HLO text, exactly as ``hlo-opt FILE`` prints it."""
    def to_proto(self) -> bytes:
        """The module as a serialized ``HloModuleProto`` (``hlo-opt --emit=proto``)."""
    def verify(self) -> None:
        """Runs the verifier; raises :class:`HloError` placed in the source."""
    def run_passes(
        self,
        passes: Sequence[str] | str,
        *,
        budget: int | None = None,
        seed: int | None = None,
        top_k: int | None = None,
        threads: int | None = None,
        min_gain: float | None = None,
        trust_radius: int | Literal["all"] | None = None,
        model: str | os.PathLike[str] | None = None,
        layout_model: str | os.PathLike[str] | None = None,
        tile_model: str | os.PathLike[str] | None = None,
        measure: str | None = None,
        measure_budget: float = 10.0,
        verify_each: bool = False,
        explain: bool | Literal["all", "changed"] | None = None,
    ) -> PassResult:
        """Runs passes on a copy of the module, as ``hlo-opt --pass=...``
        does with the same options (the CLI's flags, ``--trust-radius`` as
        ``trust_radius`` and so on; defaults are the CLI's): the same
        module byte for byte, the ``--explain`` report as text and as data.

        ``passes``: names in order (``["layout", "tile"]``) or ``"layout,tile"``.
        ``measure``: ``"xla-cpu"`` or ``"pjrt:PLUGIN"`` times the layout
        candidates and keeps the fastest. ``explain=True`` adds the per-node
        lines and scores (``"all"``: every node). Raises ``ValueError`` for
        bad options, :class:`PassError` when a pass fails, :class:`HloError`
        when the result does not verify (``verify_each``). The GIL is
        released while the passes run."""

class PassResult:
    """What :meth:`Module.run_passes` returns."""

    module: Module
    """The module after the passes."""
    changed: bool
    """Whether any pass changed the module."""
    explain: str
    """The ``--explain`` report (without ``explain``: its summary lines)."""
    notes: list[str]
    """What hlo-opt prints on stderr even without ``--explain``."""
    warnings: list[str]
    """Warnings about the options (also issued as Python warnings)."""
    decisions_json: str
    """:attr:`decisions` as JSON."""
    @property
    def decisions(self) -> list[dict[str, Any]]:
        """Each decision as a dict. The layout pass's is the object
        ``hlo-opt --explain-json`` writes, with the same keys
        (docs/passes.md): ``{"pass": "layout", "nodes", "space",
        "trust_region", "search", "model", "considered": [{"node", "choice",
        "default", "predicted_change_pct", "score_alone", "default_score",
        "outcome", "changed"}], "other_nodes", "measurement": {..., "seconds",
        "default", "kept"}, "decision": {"applied", "decided_by", "text",
        "predicted_change_pct", "best_score", "default_score"}, "warnings",
        "result"}``; the tile pass's ``{"pass": "tile", "kernel", "chosen",
        "score", "default", "default_score", "candidates": [[tile, score]],
        "measured", ...}``.
        Scores are model scores, lower is predicted faster; times are seconds."""

def parse(data: str | bytes, name: str | None = None, *, verify: bool = True) -> Module:
    """Parses HLO text (``str`` or ``bytes``) or a serialized
    ``HloModuleProto`` (``bytes``; told apart by content) and verifies it.
    ``name`` is what errors call the source (default ``<input>``).
    Raises :class:`HloError`; fields of a proto hlo-opt does not model are
    named in a ``UserWarning``."""

def parse_stablehlo(text: str | bytes, name: str | None = None, *, verify: bool = True) -> Module:
    """StableHLO MLIR text in the generic op form (as jax lowers it) read
    into the module XLA's own conversion gives, verified; ``str(m)`` is
    that module as HLO text. Raises HloError (line:col) on what it cannot
    read."""

def read(path: str | os.PathLike[str], *, verify: bool = True) -> Module:
    """Reads a module file, HLO text or ``HloModuleProto`` by content (as
    ``hlo-opt FILE``). Raises ``OSError`` or :class:`HloError`."""

def list_passes() -> list[tuple[str, str]]:
    """The registered passes: ``(name, description)``."""

def featurize(module: Module, task: Literal["layout", "tile"] = "layout") -> dict[str, npt.NDArray[Any]]:
    """The module's TpuGraphs arrays, equal to ``hlo-cost featurize
    --task TASK``'s npz: the same keys in the same order, dtypes, shapes
    and values (``node_feat`` f32 (n, 140), ``node_opcode`` u8 (n,),
    ``edge_index`` i64 (m, 2); layout: ``node_config_feat`` f32 (1, nc, 18)
    of -1 (the compiler default), ``node_config_ids``, ``config_runtime``,
    ``node_splits``; tile: ``config_feat`` (0, 24), ``config_runtime``,
    ``config_runtime_normalizers``). The tile task takes a module of one
    kernel. Raises ``ValueError`` or :class:`CostModelError`."""

def load_npz(path: str | os.PathLike[str], *, configs: bool = True) -> dict[str, npt.NDArray[Any]]:
    """Reads an npz file of the published TpuGraphs format (checked as
    ``hlo-cost eval`` checks it): its arrays by key, in the published dtypes.
    ``configs=False`` leaves out the configurations' features
    (``node_config_feat`` / ``config_feat``, the largest array), not read."""

def prune_khop(arrays: Mapping[str, Any], k: int) -> dict[str, npt.NDArray[Any]]:
    """The subgraph of a layout graph (``node_feat``, ``node_opcode``,
    ``edge_index``, ``node_config_ids``) induced by the nodes within ``k``
    undirected hops of its configurable nodes, renumbered in their order:
    what the layout model scores (``costmodel::prune::prune_khop``). The
    same keys; edges keep their order."""

def meta_edges(arrays: Mapping[str, Any], hops: int = 3) -> npt.NDArray[np.int64]:
    """The configurable nodes' meta-graph of a layout graph, as the
    early-join layout head takes it (``costmodel::prune::meta_edges``):
    int64 rows ``[consumer, producer]`` over positions in
    ``node_config_ids``, one per pair where the producer reaches the
    consumer by at most ``hops`` edges through non-configurable nodes;
    sorted, no self-loops."""

def save_npz(path: str | os.PathLike[str], arrays: Mapping[str, Any], *, compressed: bool = True) -> None:
    """Writes arrays with the :func:`featurize` keys as an npz file of the
    published format (the same bytes ``hlo-cost featurize`` writes for the
    same arrays); the task is told by the keys."""

def collect(
    modules: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    *,
    device: str = "xla-cpu",
    configs: int = 32,
    random_fraction: float = 0.5,
    seed: int = 0,
    budget: float | str | None = None,
    chunk: int = 8,
    measure_budget: float = 2.0,
    estimator: Literal["median", "min"] = "median",
    ray_address: str | None = None,
    allow_mixed_devices: bool = False,
    max_retries: int = 3,
) -> dict[str, Any]:
    """What ``hlo-cost collect MODULE... -o OUTPUT`` does, with the same
    settings (the flags of the same names) and the same code: samples
    layout configurations of each module (before layout assignment), times
    them on ``device`` (``"xla-cpu"``: XLA's CPU PJRT plugin, or
    ``"pjrt:PLUGIN_PATH"``) and writes ``OUTPUT/STEM.npz`` (published
    layout format: :func:`load_npz` reads it), ``STEM.collect.jsonl`` (the
    state a later call with the same settings continues) and
    ``manifest.json``. ``budget``: wall time of this call, in seconds or as
    ``"10m"``. Returns ``{"manifest": path, "modules": [each module's
    manifest entry], "not_measured": n}``.

    Raises :class:`HloError` for an invalid module, ``ValueError`` for a
    bad setting, a module without configurable node or a folder collected
    with other settings, :class:`BackendError` when the device does not
    start or a module could not be measured (the others are collected),
    ``OSError`` when the folder cannot be written. The GIL is released
    while it measures.

    ``ray_address`` (``hlo-cost collect --ray``): the fleet driver
    (:mod:`hlo_opt.fleet`, docs/fleet.md) measures one chunk per task on
    the Ray cluster at that address (``"auto"``, ``"HOST:PORT"``), each
    task on a node offering the ``hlo_opt_device`` resource with that
    node's XLA, retried on another node (``max_retries``) when its node
    dies; ``"local"``: the same driver with a local process. The same
    files, each chunk line also naming the node and its device
    fingerprint; a folder refuses measurements of another fingerprint
    unless ``allow_mixed_devices``. Returns also ``"failures"``, ``"lost"``
    (tasks whose every try failed) and ``"timing"``. Needs Ray
    (``pip install 'hlo-opt[ray]'``): ``ImportError`` saying so without it.
    Raises :class:`hlo_opt.fleet.MixedDevicesError` (a ``ValueError``)
    for a second fingerprint."""

class CostModel:
    """A learned cost model: ``"layout"`` / ``"tile"`` (the embedded
    defaults), ``"xla-cpu"`` (the built-in layout model of XLA:CPU
    runtimes), ``"reference"`` (the hand-written heuristic), or a model file
    (``.hlocm`` / ``.onnx``; ``task`` says which task, else it is tried as
    layout, then tile). ``threads``: ONNX Runtime intra-op threads (0: one
    per core)."""

    def __init__(
        self,
        spec: str | os.PathLike[str] = "layout",
        *,
        task: Literal["layout", "tile"] | None = None,
        threads: int = 0,
    ) -> None: ...
    @property
    def task(self) -> Literal["layout", "tile"]:
        """The task the model scores."""
    @property
    def device(self) -> str | None:
        """The hardware whose runtimes the model learned (``tpu``, ``xla-cpu``)."""
    def score(
        self,
        features: Mapping[str, Any],
        configs: Mapping[str, Any] | npt.ArrayLike | None = None,
        *,
        batch: int = 512,
    ) -> npt.NDArray[np.float32]:
        """One score per configuration, lower = predicted faster, equal to
        ``hlo-cost eval --predictions`` on the same arrays: the
        configurations of ``features`` (``node_config_feat`` / ``config_feat``),
        or ``configs`` (an array of them, or a dict). Batch-invariant. The
        GIL is released while the model runs. The model reads the graph's
        arrays in place (C-contiguous arrays of the published dtypes, as
        ``featurize`` and ``load_npz`` give them, are not copied; others are
        converted first): do not write to them from another thread while a
        score runs."""
