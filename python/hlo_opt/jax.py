"""JAX integration (needs ``jax``; ``pip install .[jax]``).

``module(f, *args)`` is the HLO module ``jax.jit(f)`` lowers to for these
arguments (before XLA's optimizations: what the layout pass takes).
``compile(f, *args, passes=[...])`` runs passes on it and compiles the
rewritten module on a PJRT plugin with its layouts kept, the path
``hlo-opt --measure`` times candidates on (XLA's CPU plugin by default), and
returns a callable with ``f``'s signature.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

import jax

from . import BackendError, Module, PassResult, _native, parse

# PJRT element type names (pjrt::ElementType::name) and numpy dtypes.
_TYPES = {
    "pred": np.dtype(bool),
    "s8": np.dtype(np.int8),
    "s16": np.dtype(np.int16),
    "s32": np.dtype(np.int32),
    "s64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16),
    "u32": np.dtype(np.uint32),
    "u64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(jax.numpy.bfloat16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "c64": np.dtype(np.complex64),
    "c128": np.dtype(np.complex128),
}
_NAMES = {dtype: name for name, dtype in _TYPES.items()}


def _lower(f: Callable[..., Any], args: Sequence[Any]) -> Any:
    # keep_unused: one entry parameter per argument leaf, used or not.
    return jax.jit(f, keep_unused=True).lower(*args)


def module(f: Callable[..., Any], *args: Any) -> Module:
    """The HLO module of ``jax.jit(f)`` for ``args`` (arrays or
    ``jax.ShapeDtypeStruct``s), parsed and verified."""
    lowered = _lower(f, args)
    name = getattr(f, "__name__", "f")
    return parse(lowered.as_text(dialect="hlo"), name=f"<jax {name}>")


class Compiled:
    """A jitted function run through hlo-opt: its module after ``passes``,
    compiled on a PJRT plugin with the module's layouts in effect. Call it
    with arguments of the shapes and dtypes it was compiled for."""

    def __init__(self, f, lowered, result: PassResult | None, original: Module, runner, check: bool, rtol, atol):
        self._f = f
        self._in_tree = lowered.in_tree
        self._out_tree = lowered.out_tree
        self._in_avals = jax.tree_util.tree_leaves(lowered.in_avals)
        self._runner = runner
        self._check = check
        self._rtol, self._atol = rtol, atol
        #: The module before the passes (what ``jax.jit`` compiles).
        self.original = original
        #: The passes' result (``None`` without passes): module, report, decisions.
        self.result = result

    @property
    def module(self) -> Module:
        """The module that runs."""
        return self.result.module if self.result is not None else self.original

    def __call__(self, *args: Any) -> Any:
        leaves, tree = jax.tree_util.tree_flatten((args, {}))
        if tree != self._in_tree:
            raise TypeError(f"arguments of structure {tree}; compiled for {self._in_tree}")
        inputs = []
        for k, (leaf, aval) in enumerate(zip(leaves, self._in_avals)):
            a = np.ascontiguousarray(np.asarray(leaf, dtype=aval.dtype))
            if a.shape != tuple(aval.shape):
                raise ValueError(f"argument leaf {k}: shape {a.shape}; compiled for {tuple(aval.shape)}")
            name = _NAMES.get(a.dtype)
            if name is None:
                raise TypeError(f"argument leaf {k}: dtype {a.dtype} has no PJRT element type")
            inputs.append((name, list(a.shape), a.tobytes()))
        outs = []
        for ty, dims, data in self._runner.run(inputs):
            outs.append(np.frombuffer(data, dtype=_TYPES[ty]).reshape(dims))
        result = jax.tree_util.tree_unflatten(self._out_tree, outs)
        if self._check:
            self._check = False
            self._compare(args, result)
        return result

    def _compare(self, args: Sequence[Any], got: Any) -> None:
        want = jax.jit(self._f)(*args)
        got_leaves = jax.tree_util.tree_leaves(got)
        want_leaves = jax.tree_util.tree_leaves(want)
        if len(got_leaves) != len(want_leaves):
            raise BackendError(f"{len(got_leaves)} results; jax.jit gives {len(want_leaves)}")
        for k, (g, w) in enumerate(zip(got_leaves, want_leaves)):
            w = np.asarray(w)
            if g.shape != w.shape or g.dtype != w.dtype:
                raise BackendError(
                    f"result {k}: {g.dtype}{list(g.shape)}; jax.jit gives {w.dtype}{list(w.shape)}"
                )
            wide = np.complex128 if g.dtype.kind == "c" else np.float64
            g64, w64 = g.astype(wide), w.astype(wide)
            if not np.allclose(g64, w64, rtol=self._rtol, atol=self._atol, equal_nan=True):
                worst = float(np.max(np.abs(g64 - w64)))
                raise BackendError(
                    f"result {k} differs from jax.jit's beyond rtol={self._rtol}, atol={self._atol} "
                    f"(largest difference {worst:g}): the rewritten module computes something else"
                )


def compile(
    f: Callable[..., Any],
    *args: Any,
    passes: Sequence[str] | str | None = None,
    backend: str = "cpu",
    plugin: str | None = None,
    check: bool = True,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    **options: Any,
) -> Compiled:
    """``jax.jit(f)`` for ``args``, with hlo-opt's choices.

    ``backend="cpu"`` (the default, ``passes`` unset or ``["xla-cpu"]``):
    the XLA:CPU kernels (YNNPACK or XLA's own per program, a oneDNN matmul
    or not per dot) are chosen by the xla-cpu models for this jaxlib and
    compiled by jaxlib's own CPU client, the XLA ``jax.jit`` uses; XLA's
    default is kept unless the predicted gain beats the model's error, and
    a choice other than the default is timed against it on ``args`` and
    kept only when faster. Returns ``hlo_opt.xla_cpu.Compiled``, called as
    ``f``. Keywords: ``model`` (a model file), ``measure=K`` (time the K
    best predicted candidates and the default on ``args``, keep the
    fastest beyond noise), ``check``, ``verify`` (seconds of that timing;
    0 trusts the model), ``jit_options`` (``jax.jit``'s
    keywords: ``donate_argnums``, ``static_argnums``, ...), ``cache_dir``
    (else ``$HLO_OPT_CACHE_DIR``: verified choices kept there and taken
    again for the same program, jaxlib, CPU and model without deciding or
    timing) and ``kwargs`` (keyword arguments of ``f``). docs/xla-cpu.md.

    ``passes=["layout", ...]`` or ``plugin=``: the module after hlo-opt's
    passes, compiled on a PJRT plugin with its layouts kept (XLA's CPU
    plugin, ``pip install xla-cpu-pjrt``, unless ``plugin`` names one);
    ``options`` are ``Module.run_passes``' keywords. With ``check``, the
    first call compares its results with ``jax.jit(f)``'s and raises
    ``BackendError`` when they differ beyond ``rtol``/``atol``.

    ``backend="gpu"`` (jax with a GPU): ``passes=["tile"]`` only. The Triton
    GEMM tiles of XLA:GPU are chosen by hlo-opt's learned model and handed
    to XLA as its autotuning cache (``hlo_opt.xla_gpu.make_cache``; keyword
    ``cache_dir`` keeps it, else a temporary folder; ``model`` names the tile
    model); returns jax's compiled function, which XLA built with those
    tiles."""
    if backend == "gpu":
        return _compile_gpu(f, args, passes, options)
    if backend != "cpu" and plugin is None:
        raise ValueError(f"backend {backend!r}: only \"cpu\" is built in; name another PJRT plugin with plugin=")
    wanted = [passes] if isinstance(passes, str) else (["xla-cpu"] if passes is None else list(passes))
    if plugin is None and wanted == ["xla-cpu"]:
        from . import xla_cpu

        return xla_cpu.compile(f, *args, check=check, **options)
    if "xla-cpu" in wanted:
        raise ValueError('passes: "xla-cpu" runs alone (jaxlib compiles it), not with PJRT-plugin passes')
    passes = wanted
    lowered = _lower(f, args)
    name = getattr(f, "__name__", "f")
    original = parse(lowered.as_text(dialect="hlo"), name=f"<jax {name}>")
    result = original.run_passes(list(passes) if not isinstance(passes, str) else passes, **options) if passes else None
    runner = _native.Runner(result.module if result is not None else original, plugin=plugin)
    return Compiled(f, lowered, result, original, runner, check, rtol, atol)


def _compile_gpu(f: Callable[..., Any], args: Sequence[Any], passes: Any, options: dict) -> Any:
    import tempfile

    from . import xla_gpu

    wanted = [passes] if isinstance(passes, str) else list(passes or ())
    if wanted != ["tile"]:
        raise ValueError(
            f'backend="gpu": passes={wanted!r}; only ["tile"] runs on XLA:GPU (Triton GEMM tiles '
            "through XLA's autotuning cache, docs/xla-gpu.md)")
    cache_dir = options.pop("cache_dir", None)
    model = options.pop("model", None)
    if options:
        raise TypeError(f'backend="gpu": unknown options {sorted(options)} (cache_dir, model)')
    if jax.default_backend() != "gpu":
        raise BackendError(f'backend="gpu": jax runs on {jax.default_backend()!r} here, not a GPU')
    cache_dir = cache_dir or tempfile.mkdtemp(prefix="hlo-opt-tiles-")
    xla_gpu.make_cache(f, *args, cache_dir=cache_dir, model=model)
    return xla_gpu.compile(f, *args, cache_dir=cache_dir)


__all__ = ["Compiled", "compile", "module"]
