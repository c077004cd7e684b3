"""XLA:GPU Triton GEMM tiles chosen by hlo-opt's learned model and handed
to XLA as its own autotuning cache (docs/xla-gpu.md).

On a GPU machine::

    import hlo_opt.xla_gpu as xg
    choices = xg.make_cache(step, *example_args, cache_dir="tiles")
    compiled = xg.compile(step, *example_args, cache_dir="tiles")
    # or any later run: XLA_FLAGS=--xla_gpu_per_fusion_autotune_cache_dir=tiles

`make_cache` compiles the program once with autotuning off (fast), reads
the optimized module XLA dumped, and writes one cache entry per Triton GEMM
fusion, keyed exactly as XLA's autotuner keys it; XLA then takes those
configs instead of autotuning them. `choose` is the same decision on a
module you already have (no GPU needed).
"""

from __future__ import annotations

import glob as _glob
import os as _os
import tempfile as _tempfile
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from . import _native
from ._native import BackendError, Module, parse

CONFIG_FIELDS = ("block_m", "block_n", "block_k", "split_k", "num_stages", "num_warps",
                 "num_ctas", "is_tma_allowed", "is_warp_specialization_allowed", "group_size")


@dataclass(frozen=True)
class Choice:
    """One GEMM fusion's decision: its name, XLA's key, the Triton config."""

    fusion: str
    hlo_fingerprint: str
    config: dict
    why: str


def choose(module: Module, env: str, cache_dir: Optional[str] = None,
           model: Optional[str] = None) -> list[Choice]:
    """The Triton config of every GEMM fusion of `module` (a module XLA
    compiled with autotuning off), and, with `cache_dir`, XLA's cache
    entries for them. `env` is the text of an autotuning logs or results
    file XLA wrote on that GPU (device key, codegen and Triton versions).
    `model`: a builtin name (``"xla-gpu-h200-ranker"``, the default;
    ``"xla-gpu-h200"``, kNN), a JSON file from ``hlo-cost gpu-tile-model``
    or a ranker ``.onnx`` file. Raises `PassError`."""
    choices, _ = _native.xla_gpu_cache(module, env,
                                       None if cache_dir is None else _os.fspath(cache_dir), model)
    return [Choice(f, fp, {k: (bool(v) if k.startswith("is_") else int(v))
                           for k, v in zip(CONFIG_FIELDS, cfg)}, why)
            for f, fp, cfg, why in choices]


_PROBE_SHAPE = (256, 512, 256)


def _need_gpu(what: str) -> None:
    import jax

    if jax.default_backend() != "gpu":
        raise BackendError(f"{what} needs jax on a GPU; jax runs on {jax.default_backend()!r} here")


def environment() -> str:
    """XLA's autotuning environment on this machine's GPU: the logs of one
    small bf16 matmul compiled with autotuning (a second or two)."""
    import jax
    import jax.numpy as jnp

    _need_gpu("hlo_opt.xla_gpu.environment")
    m, k, n = _PROBE_SHAPE
    with _tempfile.TemporaryDirectory() as d:
        path = _os.path.join(d, "env.textproto")
        jax.jit(lambda a, b: a @ b).lower(
            jax.ShapeDtypeStruct((m, k), jnp.bfloat16), jax.ShapeDtypeStruct((k, n), jnp.bfloat16)
        ).compile(compiler_options={"xla_gpu_dump_autotune_logs_to": path})
        with open(path, encoding="utf-8") as f:
            return f.read()


def optimized_modules(fn: Any, *args: Any, **compiler_options: Any) -> list[Module]:
    """The optimized modules XLA writes for ``jax.jit(fn)`` on `args` with
    autotuning off (what `make_cache` decides on)."""
    import jax

    _need_gpu("hlo_opt.xla_gpu.optimized_modules")
    with _tempfile.TemporaryDirectory() as d:
        opts = {"xla_gpu_autotune_level": 0, "xla_dump_to": d, **compiler_options}
        jax.jit(fn).lower(*args).compile(compiler_options=opts)
        paths = sorted(_glob.glob(_os.path.join(d, "*after_optimizations.txt")))
        if not paths:
            raise RuntimeError(f"XLA dumped no optimized module into {d}")
        out = []
        for p in paths:
            with open(p, encoding="utf-8") as f:
                out.append(parse(f.read(), _os.path.basename(p), verify=False))
        return out


def make_cache(fn: Any, *args: Any, cache_dir: str, model: Optional[str] = None,
               env: Optional[str] = None) -> list[Choice]:
    """Writes XLA's per-fusion autotuning cache for ``jax.jit(fn)`` on
    `args` into `cache_dir`, with the learned model's Triton configs; then
    compile with ``--xla_gpu_per_fusion_autotune_cache_dir=cache_dir``
    (`compile` does). Needs a GPU."""
    _need_gpu("hlo_opt.xla_gpu.make_cache")
    env = environment() if env is None else env
    out: list[Choice] = []
    for module in optimized_modules(fn, *args):
        out += choose(module, env, cache_dir, model)
    return out


def compile(fn: Any, *args: Any, cache_dir: str) -> Any:  # noqa: A001 (jax's word)
    """``jax.jit(fn).lower(*args).compile(...)`` reading XLA's autotuning
    cache from `cache_dir` (fusions it lacks are autotuned as usual)."""
    import jax

    _need_gpu("hlo_opt.xla_gpu.compile")
    return jax.jit(fn).lower(*args).compile(
        compiler_options={"xla_gpu_per_fusion_autotune_cache_dir": _os.fspath(cache_dir)})


__all__: Sequence[str] = ["Choice", "choose", "compile", "environment", "make_cache",
                          "optimized_modules"]
