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
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import json
import math
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from . import _native, onednn
from .timing import interleaved, paired_ratio

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


def _hlo_hash(text: str) -> str:
    # The module name line carries a unique id; the rest is the program.
    body = re.sub(r"^HloModule[^\n]*\n", "", text)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def _same(a, b) -> bool:
    import jax

    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.dtype.kind in "fc" or x.dtype.name == "bfloat16":
            # Other kernels sum in another order: relative to the result's
            # scale, 1/16 for bf16 (8 ulps), 1e-2 for f16, 1e-4 wider.
            tol = {"bfloat16": 1 / 16, "float16": 1e-2}.get(x.dtype.name, 1e-4)
            x64, y64 = x.astype(np.float64), y.astype(np.float64)
            scale = max(1.0, float(np.max(np.abs(np.nan_to_num(y64)), initial=0.0)))
            if not np.allclose(x64, y64, rtol=tol, atol=tol * scale, equal_nan=True):
                return False
        elif not np.array_equal(x, y):
            return False
    return True


def measure(lowered, args: Sequence[Any], *, candidates=None, budget_s: float = 3.0,
            min_rounds: int = 7, max_rounds: int = 301, seed: int = 0) -> dict[str, Any]:
    """Compiles each candidate of ``lowered`` and times them interleaved.

    A candidate is ``(name, compile options)``, or ``(name, compile options,
    op signatures)`` whose dots and convolutions run on oneDNN
    (:mod:`hlo_opt.onednn`).

    Returns ``{"candidates", "ratio", "runtime_ns", "compile_s", "alias",
    "ok", "control_ratio", "rounds", "repeat", "default_ns"}``: ``ratio[i]``
    is the median over rounds of candidate i's time over the default's time
    in the same round (:func:`hlo_opt.timing.interleaved`: each round runs
    every executable once, in a shuffled order, short programs ``repeat``
    times per sample); a candidate whose optimized module equals an earlier one's is
    that one's alias and shares its measurement; ``ok`` is False where a
    candidate failed to compile or computed other results than the default.
    """
    import jax

    cands = CANDIDATES if candidates is None else candidates
    names = [c[0] for c in cands]
    exes, alias, compile_s, ok, hashes = {}, [], [], [], {}
    for i, (name, opts, *sigs) in enumerate(cands):
        t = time.perf_counter()
        try:
            exe = _compile(lowered, opts, sigs[0] if sigs else ())
        except Exception as e:  # a refused option is a failed candidate
            compile_s.append(time.perf_counter() - t)
            alias.append(i)
            ok.append(False)
            print(f"  {name}: compile failed: {str(e)[:160]}")
            continue
        compile_s.append(time.perf_counter() - t)
        h = _hlo_hash(exe.as_text())
        first = hashes.setdefault(h, i)
        alias.append(first)
        ok.append(True)
        if first == i:
            exes[i] = exe
    if 0 not in exes:
        raise RuntimeError("the default compile failed")
    control = lowered.compile()
    args = jax.device_put(args)
    want = exes[0](*args)
    for i in list(exes):
        if i and not _same(exes[i](*args), want):
            ok[i] = False
            print(f"  {names[i]}: results differ from the default's: not a valid choice")
            del exes[i]
    runners = [(i, exes[i]) for i in exes] + [(-1, control)]
    times, run = interleaved([functools.partial(e, *args) for _, e in runners], budget_s=budget_s,
                             min_rounds=min_rounds, max_rounds=max_rounds, seed=seed)
    times = {i: t for (i, _), t in zip(runners, times)}
    base = times[0]
    ratio = np.full(len(names), np.nan)
    for i in exes:
        ratio[i] = paired_ratio(times[i], base)
    for i, a in enumerate(alias):
        if ok[i] and a != i:
            ratio[i] = ratio[a]
            ok[i] = ok[a]
    default_ns = float(np.median(base)) * 1e9
    return {
        "candidates": names,
        "ratio": ratio,
        "runtime_ns": np.where(np.isnan(ratio), -1, np.round(ratio * default_ns)).astype(np.int64),
        "compile_s": np.asarray(compile_s),
        "alias": np.asarray(alias, dtype=np.int64),
        "ok": np.asarray(ok, dtype=bool),
        "control_ratio": paired_ratio(times[-1], base),
        "rounds": run["rounds"],
        "repeat": run["repeat"],
        "default_ns": default_ns,
    }


def _atomic_write(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _meta_of(path: Path) -> dict[str, Any] | None:
    try:
        with np.load(path) as z:
            return json.loads(str(z["meta"]))
    except Exception:
        return None


def save(path: Path, result: dict[str, Any], meta: dict[str, Any]) -> None:
    """One program's measurement as an npz (written atomically). With
    ``runs_ratio``, ``runs_ok``, ``runs_control`` and ``runs_default_ns`` in
    ``result`` (several measurements pooled, :func:`pool`), those too."""
    runs = {k: np.asarray(result[k]) for k in ("runs_ratio", "runs_ok", "runs_control", "runs_default_ns")
            if k in result}

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            np.savez(
                f,
                candidates=np.asarray(result["candidates"]),
                ratio=result["ratio"],
                runtime_ns=result["runtime_ns"],
                compile_s=result["compile_s"],
                alias=result["alias"],
                ok=result["ok"],
                meta=np.asarray(json.dumps(meta, sort_keys=True)),
                **runs,
            )

    _atomic_write(path, write)


def _runs_of(path: Path) -> dict[str, np.ndarray]:
    """The measurements an npz holds, one row each: ``runs_*`` when it
    pools several, else its one measurement. One that does not read as
    such is an error naming it (remove it, and the program is measured afresh)."""
    try:
        with np.load(path) as z:
            if "runs_ratio" in z.files:
                runs = {k: z[k] for k in ("runs_ratio", "runs_ok", "runs_control", "runs_default_ns")}
            else:
                meta = json.loads(str(z["meta"]))
                runs = dict(runs_ratio=z["ratio"][None, :].astype(float), runs_ok=z["ok"][None, :].astype(bool),
                            runs_control=np.asarray([meta["control_ratio"]], dtype=float),
                            runs_default_ns=np.asarray([meta["default_ns"]], dtype=float))
    except Exception as e:  # a damaged or foreign file: say which
        raise RuntimeError(f"{path}: cannot read its earlier measurements ({e}): remove it to measure afresh") from None
    k = runs["runs_ratio"].shape[0] if runs["runs_ratio"].ndim == 2 else -1
    if k < 1 or runs["runs_ok"].shape != runs["runs_ratio"].shape or \
            runs["runs_control"].shape != (k,) or runs["runs_default_ns"].shape != (k,):
        raise RuntimeError(f"{path}: its earlier measurements have inconsistent shapes: remove it to measure afresh")
    return runs


def pool(earlier: dict[str, np.ndarray], res: dict[str, Any]) -> dict[str, Any]:
    """``res`` (one :func:`measure`) pooled with the ``earlier``
    measurements of the same program (:func:`_runs_of`): a candidate is
    valid when it was in every one, and its ratio is the geometric mean of
    its ratios (NaN where not valid); the control's ratio and the default's
    time are the geometric mean and the median of theirs. The runs are kept
    as ``runs_*`` rows."""
    if earlier["runs_ratio"].shape[1] != len(res["ratio"]):
        raise ValueError(f"{earlier['runs_ratio'].shape[1]} candidates measured before, {len(res['ratio'])} now")
    runs_ratio = np.vstack([earlier["runs_ratio"], np.asarray(res["ratio"], dtype=float)[None, :]])
    runs_ok = np.vstack([earlier["runs_ok"], np.asarray(res["ok"], dtype=bool)[None, :]])
    runs_control = np.append(earlier["runs_control"], res["control_ratio"])
    runs_default_ns = np.append(earlier["runs_default_ns"], res["default_ns"])
    ok = runs_ok.all(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(ok, np.exp(np.log(np.where(runs_ok, runs_ratio, 1.0)).mean(axis=0)), np.nan)
    default_ns = float(np.median(runs_default_ns))
    return dict(res, ratio=ratio, ok=ok, default_ns=default_ns,
                control_ratio=float(np.exp(np.log(runs_control).mean())),
                runtime_ns=np.where(ok, np.round(ratio * default_ns), -1).astype(np.int64),
                runs_ratio=runs_ratio, runs_ok=runs_ok, runs_control=runs_control, runs_default_ns=runs_default_ns)


def _measurements_held(path: Path, fp: dict[str, Any], allow_mixed_devices: bool) -> int:
    """How many measurements of this device, XLA and protocol ``path``
    holds (0: none, or of an older protocol, to measure again); an error
    when it holds one of another device, unless ``allow_mixed_devices``."""
    if not path.exists():
        return 0
    meta = _meta_of(path)
    if meta is not None and meta.get("protocol") == PROTOCOL and meta.get("device") == fp:
        return int(meta.get("collections", 1))
    if meta is not None and meta.get("device") != fp and not allow_mixed_devices:
        raise RuntimeError(
            f"{path} was measured on {meta.get('device')}, this is {fp}: "
            "use another folder (or allow_mixed_devices=True)")
    return 0


def _collect_one(out: Path, name: str, lowered, args, about: dict[str, Any], fp: dict[str, Any],
                 budget_s: float, seed: int, held: int = 0) -> None:
    """Measures one program into ``out/NAME.npz`` (its HLO text beside it,
    as ``NAME.hlo``), both written atomically; with ``held`` measurements
    of it there already, pooled with them (:func:`pool`)."""
    hlo = lowered.as_text(dialect="hlo")
    _atomic_write(out / f"{name}.hlo", lambda tmp: Path(tmp).write_text(hlo))
    t = time.perf_counter()
    earlier = _runs_of(out / f"{name}.npz") if held else None  # read first: a damaged file costs no run
    res = measure(lowered, args, budget_s=budget_s, seed=seed + held)
    if earlier is not None:
        res = pool(earlier, res)
    meta = dict(about, program=name, device=fp, protocol=PROTOCOL, control_ratio=res["control_ratio"],
                rounds=res["rounds"], repeat=res["repeat"], default_ns=res["default_ns"], collections=held + 1)
    save(out / f"{name}.npz", res, meta)
    best = int(np.nanargmin(np.where(res["ok"], res["ratio"], np.nan)))
    print(f"{name}: default {res['default_ns'] / 1e6:.3f} ms, best {res['candidates'][best]} "
          f"x{res['ratio'][best]:.3f}, control x{res['control_ratio']:.3f}, {res['rounds']} rounds, "
          f"{'' if not held else f'measurement {held + 1}, '}{time.perf_counter() - t:.1f} s", flush=True)


def _collect_all(items, out: str | os.PathLike, budget_s: float, seed: int, allow_mixed_devices: bool,
                 deadline: float | None, collections: int = 1) -> list[str]:
    """Measures each ``(name, prepare)`` of ``items`` into ``out``, where
    ``prepare()`` gives ``(lowered, args, about)`` and is called only for a
    program that holds fewer than ``collections`` measurements
    (:func:`_measurements_held`). Each pass over ``items`` measures every
    program short of the pass once more, so a program's measurements are a
    pass apart in time. Returns the names measured now, once per
    measurement. Past ``deadline`` no further program is started once one
    has been."""
    if collections < 1:
        raise ValueError(f"collections must be at least 1, not {collections}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fp = fingerprint()
    items = list(items)
    done: list[str] = []
    for n in range(collections):
        for name, prepare in items:
            held = _measurements_held(out / f"{name}.npz", fp, allow_mixed_devices)
            if held > n:
                continue
            if deadline is not None and done and time.monotonic() > deadline:
                return done
            lowered, args, about = prepare()
            _collect_one(out, name, lowered, args, about, fp, budget_s, seed, held)
            done.append(name)
    return done


def collect(programs: Iterable[Any], out: str | os.PathLike, *, budget_s: float = 3.0, seed: int = 0,
            allow_mixed_devices: bool = False, deadline: float | None = None, collections: int = 1) -> list[str]:
    """Measures each program (objects with ``name``, ``fn``, ``args`` and
    optionally ``family``, ``dtype``, ``batch``) into ``out``; returns the
    names measured now, once per measurement. A program whose npz records
    ``collections`` measurements (or more) of this device, XLA and protocol
    is skipped; one short of it is measured again, in a later pass over the
    programs, and its npz pools the measurements (:func:`pool`: the ratios'
    geometric mean; what one session's timing cannot see, such as a
    candidate's ratio moving by several percent from one day to the next,
    averages out). One that records another device is an error unless
    ``allow_mixed_devices``. Past ``deadline`` (a ``time.monotonic()``
    value) no further program is started, once one has been measured by
    this call: a later call goes on."""
    import jax

    def prepare(p):
        about = {"family": getattr(p, "family", ""), "dtype": getattr(p, "dtype", ""),
                 "batch": getattr(p, "batch", 0)}
        return jax.jit(p.fn).lower(*p.args), p.args, about

    return _collect_all(((p.name, functools.partial(prepare, p)) for p in programs), out, budget_s, seed,
                        allow_mixed_devices, deadline, collections)


def collect_modules(paths: Iterable[str | os.PathLike], out: str | os.PathLike, *, budget_s: float = 3.0,
                    seed: int = 0, allow_mixed_devices: bool = False, deadline: float | None = None,
                    collections: int = 1) -> list[str]:
    """:func:`collect` for StableHLO module files (``jax.jit(f).lower(...)
    .as_text()``, either MLIR form), each run on seeded random arguments of
    its ``main``'s types (:func:`hlo_opt.stablehlo.random_args`) and named
    by its file's stem. A file that cannot be read or run as a function of
    arrays is an error naming it, before anything is measured."""
    from . import stablehlo

    paths = [Path(p) for p in paths]
    stems = [p.stem for p in paths]
    if dup := sorted({s for s in stems if stems.count(s) > 1}):
        raise ValueError(f"module files share the names {', '.join(dup)}: each one's measurement is STEM.npz")

    def load(p: Path):
        try:
            return stablehlo.lowered_from_text(p.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise ValueError(f"{p}: {e}") from None

    def prepare(p: Path):
        lowered, specs = load(p)
        floats = sorted({s.dtype for s in specs if s.dtype.startswith(("float", "bfloat"))})
        about = {"family": "", "dtype": ",".join(floats), "batch": 0, "source": str(p)}
        return lowered, stablehlo.random_args(specs, seed), about

    for p in paths:
        load(p)  # every file checked first; none kept (memory stays one module's)
    return _collect_all(((p.stem, functools.partial(prepare, p)) for p in paths), out, budget_s, seed,
                        allow_mixed_devices, deadline, collections)


class Compiled:
    """``jax.jit(f)`` compiled by jaxlib's own XLA:CPU with the kernels
    hlo-opt chose. Call it as ``f``: the same pytrees, scalars and donated
    buffers as ``jax.jit(f)`` (it is jax's own compiled executable)."""

    def __init__(self, executable, lowered, decision: dict[str, Any], notes: list[str],
                 measured: dict[str, Any] | None, onednn_ops: Sequence[str] = ()):
        self._exe = executable
        self._onednn = list(onednn_ops)
        self.lowered = lowered
        #: The pass's decision (chosen, options, reason, predictions, model, xla).
        self.decision = decision
        #: What the model's use deserves saying (another CPU than its own).
        self.notes = notes
        #: With ``measure``: the candidates measured, their ratios to the default.
        self.measured = measured

    @property
    def choice(self) -> str:
        """The candidate that runs: ``default`` (XLA's own choice), a
        module-wide candidate (``ynn:none``, ...), either followed by
        ``+onednn:N`` when N distinct dots and convolutions run on oneDNN."""
        return self.measured["chosen"] if self.measured else self.decision["chosen"]

    @property
    def options(self) -> dict[str, Any]:
        """The compile options it was compiled with."""
        return options_of(_module_wide(self.choice))

    @property
    def onednn(self) -> list[str]:
        """The signatures of the dots and convolutions that run on oneDNN."""
        return list(self._onednn)

    def explain(self) -> str:
        d = self.decision
        lines = [f"xla-cpu: model {d['model']} ({d['xla']}, trained on {d['trained_cpu']})"]
        if d.get("cached"):
            lines.append(f"xla-cpu: the choice kept in {d['cached']} (same module, jaxlib, CPU, model and "
                         "hlo-opt), not made again")
        if v := d.get("verified"):
            lines.append(f"xla-cpu: the models chose {v['model_choice']}: {v['model_reason']}")
            searched = set(v.get("searched", []))
            for name, r, st in zip(v["candidates"], v["ratio"], v["status"]):
                how = "searched" if name in searched else "verified"
                lines.append(f"  {how} {name:<32} " + (st if math.isnan(r) else f"x{r:.3f} of the default")
                             + ("" if st == "timed" or math.isnan(r) else f" ({st})"))
            for name, r in zip(v.get("contenders", []), v.get("final", [])):
                lines.append(f"  again    {name:<32} x{r:.3f} of the default")
            lines.append(f"xla-cpu: verified on these arguments, chose {d['chosen']}: {d['reason']}")
        else:
            lines.append(f"xla-cpu: chose {d['chosen']}: {d['reason']}")
        dots = d.get("onednn", [])
        if d.get("op_model"):
            sent = [x for x in dots if x["onednn"]]
            lines.append(f"xla-cpu: per-op model {d['op_model']}: {len(sent)} of {len(dots)} distinct dots and "
                         "convolutions to oneDNN")
            for x in sent:
                lines.append(f"  {x['signature']:<48} x{x['count']:<2} predicted {x['change_pct']:+.1f}% "
                             f"(needs {x['required_gain_pct']:.1f}%)")
        if self.measured:
            m = self.measured
            for name, r in zip(m["candidates"], m["ratio"]):
                lines.append(f"  measured {name:<24} x{r:.3f} of the default")
            lines.append(f"xla-cpu: measured and kept {m['chosen']} ({m['why']})")
        return "\n".join(lines + self.notes)

    #: The static arguments it was compiled for (``jit_options``'
    #: ``static_argnums`` / ``static_argnames``), if any.
    static: "_Static | None" = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.static is not None:
            args, kwargs = self.static.dynamic(args, kwargs)
        return self._exe(*args, **kwargs)


@dataclasses.dataclass(frozen=True)
class _Static:
    """The arguments ``jax.jit(f, static_argnums=..., static_argnames=...)``
    compiles in: jax's executable takes the others only."""

    nums: frozenset
    names: frozenset
    #: ``(position or name, value)`` of each, as compiled.
    values: tuple

    @classmethod
    def of(cls, f, jit_options, args, kwargs) -> "_Static | None":
        import inspect

        opts = jit_options or {}
        nums, names = opts.get("static_argnums"), opts.get("static_argnames")
        if nums is None and names is None:
            return None
        nums = {nums} if isinstance(nums, int) else set(nums or ())
        names = {names} if isinstance(names, str) else set(names or ())
        nums = {i + len(args) if i < 0 else i for i in nums}
        try:
            params = inspect.signature(f).parameters.values()
        except (TypeError, ValueError):  # no signature: the numbers and names as given
            params = []
        positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        for i, name in enumerate(positional):
            if name in names:
                nums.add(i)
            if i in nums:
                names.add(name)
        static = cls(frozenset(nums), frozenset(names), ())
        return dataclasses.replace(static, values=static._seen(args, kwargs))

    def _seen(self, args, kwargs) -> tuple:
        return (tuple((i, args[i]) for i in sorted(self.nums) if i < len(args))
                + tuple((k, kwargs[k]) for k in sorted(self.names) if k in kwargs))

    def dynamic(self, args, kwargs) -> tuple[tuple, dict]:
        """``args`` and ``kwargs`` without the static ones, which must be
        those compiled for."""
        seen = self._seen(args, kwargs)
        if seen != self.values:
            raise ValueError(f"hlo_opt: compiled for the static arguments {_show(self.values)}, called with "
                             f"{_show(seen)}: compile again for these (jax.jit would retrace)")
        return (tuple(a for i, a in enumerate(args) if i not in self.nums),
                {k: v for k, v in kwargs.items() if k not in self.names})


def _show(values) -> str:
    return ", ".join(f"{'argument ' if isinstance(k, int) else ''}{k}={v!r}" for k, v in values) or "none"


def _copy_args(args):
    import jax

    return jax.tree_util.tree_map(lambda x: x.copy() if hasattr(x, "copy") else x, args)


def printed(lowered) -> bytes:
    """The StableHLO of ``lowered`` as the decision reads it: the generic op
    form, as bytes (read as UTF-8 by the reader). jax verified the module
    when it lowered it: printing it again without MLIR's verifier is 10-20%
    cheaper, as bytes a further 15%, and in the module's own scope (the
    same text: it has no parent) 5-10% more. The decision reads shapes,
    not the elements of constants: those of more than 16 (weights closed
    over by the function) are not printed (a 4 MB one took 30 ms to print
    and 0.6 s to read; splats are kept)."""
    return lowered.compiler_ir().operation.get_asm(print_generic_op_form=True, assume_verified=True, binary=True,
                                                   use_local_scope=True, large_elements_limit=16)


def _module_of(lowered):
    """The module XLA compiles for ``lowered``: read from its StableHLO
    (generic op form; about a tenth of the cost of jax's own conversion,
    docs/formats.md), or, for what that reader does not know yet, from
    jax's HLO text."""
    from . import HloError, parse, parse_stablehlo

    try:
        return parse_stablehlo(printed(lowered), name="<jax>")
    except HloError:
        return parse(lowered.as_text(dialect="hlo"), name="<jax>")


def decide(lowered, *, model: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """The xla-cpu pass's decision for a lowered ``jax.jit`` function."""
    import jaxlib

    from . import PassError

    module = _module_of(lowered)
    try:
        text, notes = _native.xla_cpu_decide(module, jaxlib=jaxlib.__version__, model=model)
    except PassError as e:
        # A model for another XLA: keep XLA's default, and say why.
        return ({"chosen": "default", "options": [], "reason": f"kept XLA's default: {e}",
                 "predictions": [], "model": model or "built-in", "xla": f"jaxlib {jaxlib.__version__}",
                 "trained_cpu": "?"}, [str(e)])
    return json.loads(text), list(notes)


def compile(f, *args, model: str | None = None, measure: int | str = 0, check: bool = True,
            verify: float = 0.5, jit_options: dict[str, Any] | None = None,
            cache_dir: str | os.PathLike | None = None, **kwargs: Any) -> Compiled:
    """``jax.jit(f, **jit_options).lower(*args, **kwargs)``, the XLA:CPU
    kernels chosen by the model (the default kept unless the predicted
    gain beats the model's error), compiled with jaxlib's own client.

    ``verify``: seconds (at least 5 rounds) to time, against the default and
    interleaved on copies of ``args``, what the decision says is worth it:
    the model's choice, the model card's portfolio (the module-wide
    candidates that came closest to the best on the training programs) and
    every eligible op on oneDNN, then the module-wide candidates one
    YNNPACK kind from the fastest module-wide one. The fastest, and those
    within 1.05x of it, are timed again in fresh rounds; the fastest of
    that run is kept only when it runs at most 0.98x the default's time.
    Each candidate costs one more compile. ``verify=0``: trust the model.
    ``check``: a candidate other than the default must give the default's
    results on ``args`` (within the dtype's tolerance), else it is not kept.
    ``measure=K`` (``"all"``): compile the default and the K best predicted
    candidates (every candidate) and keep the fastest only when it beats the
    default by more than a control's spread (autotuning).
    ``cache_dir`` (else ``$HLO_OPT_CACHE_DIR``; neither: no cache): a choice
    that was verified or measured is kept there, keyed by the module, the
    jaxlib, the CPU, the model and this build of hlo-opt; the same program
    compiled again (another process, another day) takes it without
    deciding, compiling candidates or timing them (:class:`ChoiceCache`)."""
    import warnings

    lowered, plain = _lowered(f, (args, kwargs), jit_options)
    # What the executables take: the arguments but the static ones.
    static = _Static.of(f, jit_options, args, kwargs)
    args_kwargs = static.dynamic(args, kwargs) if static else (args, kwargs)
    cache = ChoiceCache.of(cache_dir, plain, model)
    if cache is not None and (cached := cache.compiled(lowered)) is not None:
        cached.static = static
        return cached
    st = _decide_while_compiling(lowered, plain, model, verify=bool(verify and not measure))
    for n in st.notes[:st.warned]:
        warnings.warn(n, stacklevel=3)
    if measure:
        pick, exe, decision, measured = _by_measure(st, measure, args_kwargs)
    elif verify:
        pick, exe, decision, measured = _by_verify(st, args_kwargs, verify, check)
    else:
        pick, exe, decision, measured = st.model_pick, None, st.decision, None
    compiled = _finish(st, pick, exe, decision, measured, args_kwargs, check)
    compiled.static = static
    if cache is not None:
        cache.store(compiled)
    return compiled


class ChoiceCache:
    """The choices ``compile`` verified or measured, one JSON file per key
    in a folder: ``xla_cpu-KEY.json`` holds the choice (candidate and oneDNN
    ops), the decision with its ``verified`` record and the measurement.
    The key is a SHA-256 of the module jax lowered (without donation), the
    jaxlib version, the CPU (model, ISA, cores), the model (built-in, or
    the file's SHA-256) and this build of hlo-opt (its version and native
    library's size and time): any of them changed, the choice is made
    again. A file that does not read as such a choice is ignored with a
    warning and written anew; one that cannot be written is a warning."""

    FORMAT = 1

    def __init__(self, folder: Path, key: str):
        self.path = folder / f"xla_cpu-{key[:32]}.json"
        self.key = key

    @classmethod
    def of(cls, cache_dir, plain, model) -> "ChoiceCache | None":
        folder = cache_dir if cache_dir is not None else os.environ.get("HLO_OPT_CACHE_DIR")
        if not folder:
            return None
        import importlib.metadata

        from . import _native

        # MLIR bytecode: the whole module, constants included, and several
        # times faster to write than its text.
        module = io.BytesIO()
        plain.compiler_ir().operation.write_bytecode(module)
        native = os.stat(_native.__file__)
        if model is None:
            model_id = "built-in"
        else:
            try:
                model_id = hashlib.sha256(Path(model).read_bytes()).hexdigest()
            except OSError:
                model_id = str(model)  # a built-in name, or an error the decision reports
        fp = fingerprint()
        parts = dict(module=hashlib.sha256(module.getvalue()).hexdigest(), jaxlib=fp["jaxlib"], cpu=fp["cpu"],
                     isa=fp["isa"], cores=fp["cores"], model=model_id,
                     hlo_opt=importlib.metadata.version("hlo_opt"), native=[native.st_size, native.st_mtime_ns],
                     format=cls.FORMAT)
        key = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
        return cls(Path(folder).expanduser(), key)

    def compiled(self, lowered) -> "Compiled | None":
        """The cached choice compiled for ``lowered``; None when there is
        none (or it is unusable: then a warning says why)."""
        import warnings

        if not self.path.exists():
            return None
        try:
            entry = json.loads(self.path.read_text())
            if entry.get("format") != self.FORMAT or entry.get("key") != self.key:
                raise ValueError("another key or format")
            choice, sigs = entry["choice"], tuple(entry["onednn"])
            if not isinstance(choice, str) or not all(isinstance(x, str) for x in sigs):
                raise ValueError("not a choice")
            opts = options_of(_module_wide(choice))
            if sigs and (why := onednn.supported()):
                raise ValueError(why)
            decision, measured = dict(entry["decision"]), entry["measured"]
        except Exception as e:  # noqa: BLE001 - any unreadable entry is a miss
            warnings.warn(f"xla-cpu: ignoring the cached choice {self.path}: {e}", stacklevel=3)
            return None
        if choice == "default":
            exe = lowered.compile()  # fails as jax.jit's own compile would
        else:
            try:
                exe = _compile(lowered, opts, sigs)
            except Exception as e:  # noqa: BLE001 - XLA's errors have no common type
                # Kept by a run whose XLA took it: decide again rather than fail.
                warnings.warn(f"xla-cpu: the cached choice {choice} of {self.path} no longer compiles "
                              f"({type(e).__name__}: {e}); choosing again", stacklevel=3)
                return None
        decision["cached"] = str(self.path)
        return Compiled(exe, lowered, decision, [], measured, sigs)

    def store(self, compiled: "Compiled") -> None:
        """Keeps ``compiled``'s choice when it was verified or measured."""
        import warnings

        if "verified" not in compiled.decision and not compiled.measured:
            return
        entry = dict(format=self.FORMAT, key=self.key, choice=compiled.choice, onednn=compiled.onednn,
                     decision=compiled.decision, measured=compiled.measured)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(self.path, lambda tmp: Path(tmp).write_text(json.dumps(entry, indent=1)))
        except OSError as e:
            warnings.warn(f"xla-cpu: could not keep the choice in {self.path}: {e}", stacklevel=3)


def _lowered(f, args_kwargs, jit_options):
    """``jax.jit(f, **jit_options)`` lowered for the arguments, and the same
    without donation (what measuring and checking run many times: the same
    kernels, and the caller's buffers stay theirs)."""
    import jax

    args, kwargs = args_kwargs
    jit_options = dict(jit_options or {})
    lowered = jax.jit(f, **jit_options).lower(*args, **kwargs)
    keep = {k: v for k, v in jit_options.items() if not k.startswith("donate")}
    plain = lowered if keep == jit_options else jax.jit(f, **keep).lower(*args, **kwargs)
    return lowered, plain


@dataclasses.dataclass
class _Staged:
    """What :func:`compile` has after its first stage: the decision, and
    the executables compiled while it was made."""

    lowered: Any
    plain: Any
    decision: dict[str, Any]
    notes: list[str]
    warned: int  # the notes that are warnings (those of the decision)
    model_pick: tuple[str, dict[str, Any], tuple[str, ...]]
    default_exe: Any
    base: Any = None  # the default without donation (verify)
    cands: list = dataclasses.field(default_factory=list)  # verify's candidates
    built: list = dataclasses.field(default_factory=list)  # and their executables


def _decide_while_compiling(lowered, plain, model, verify: bool) -> _Staged:
    """The model decides while XLA compiles the default, then, with
    ``verify``, the candidates it times (compiles release the GIL): when
    the default is kept without verify, the decision costs no wall time."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, min(2, os.cpu_count() or 1))) as pool:
        speculative = pool.submit(lowered.compile)
        decision, notes = decide(lowered, model=model)
        warned = len(notes)
        model_pick = _model_pick(decision, notes)
        st = _Staged(lowered, plain, decision, notes, warned, model_pick, None)
        if verify:
            st.cands = _verify_space(decision, model_pick, lowered)
            base = speculative if plain is lowered else pool.submit(plain.compile)
            building = [pool.submit(_build, low, opts) for low, opts in _variants(plain, st.cands)]
            st.base, st.built = base.result(), [b.result() for b in building]
        st.default_exe = speculative.result()
    return st


def _by_measure(st: _Staged, measure, args_kwargs):
    """``measure``: the candidates compiled and timed here, the fastest kept
    beyond the control's noise. Returns (pick, its executable or None,
    decision, the measurement's record)."""
    cands = _measured_space(st.decision, st.model_pick, measure, st.lowered)
    res = measure_candidates(st.plain, _copy_args(args_kwargs), cands)
    pick = cands[[c[0] for c in cands].index(res["chosen"])]
    measured = dict(candidates=[c[0] for c in cands], ratio=[float(r) for r in res["ratio"]],
                    chosen=res["chosen"], why=res["why"], control=res["control_ratio"])
    return pick, None, st.decision, measured


def _by_verify(st: _Staged, args_kwargs, budget_s: float, check: bool):
    """``verify``: the candidates compiled in the first stage timed against
    the default (their results checked there). Returns (pick, its
    executable or None, the decision with the ``verified`` record, None)."""
    pick, record, exe = _verify(st.base, st.cands, st.built, args_kwargs, budget_s, check,
                                expand=functools.partial(_build_all, st.plain))
    record.update(model_choice=st.model_pick[0], model_reason=st.decision["reason"])
    decision = dict(st.decision, verified=record, reason=record["why"])
    if st.plain is not st.lowered:
        exe = None  # timed without donation: compiled again, with it
    return pick, exe, decision, None


def _finish(st: _Staged, pick, exe, decision, measured, args_kwargs, check: bool) -> Compiled:
    """The executable of ``pick`` (the default's, the one timed, or compiled
    now); a pick that was not verified must give the default's results
    (``check``), else the default is kept."""
    name, opts, sigs = pick
    if name == "default":
        exe = st.default_exe
    elif exe is None:
        exe = _compile(st.lowered, opts, sigs)
    if name != "default" and check and "verified" not in decision and not _same_results(
            st.lowered, st.plain, st.default_exe, exe, pick, args_kwargs):
        exe, name, sigs = st.default_exe, "default", ()
        if measured:
            measured["chosen"], measured["why"] = "default", "the faster candidate's results differed"
        else:
            decision = dict(decision, reason="its results differed from the default's")
    if not measured and decision["chosen"] != name:
        decision = dict(decision, chosen=name)
    return Compiled(exe, st.lowered, decision, st.notes, measured, sigs)


def _same_results(lowered, plain, default_exe, exe, pick, args_kwargs) -> bool:
    """``check`` of a pick ``verify`` did not run: its executable gives the
    default's results on copies of the arguments (without donation where
    the caller donates); else a warning."""
    import warnings

    name, opts, sigs = pick
    want_exe = default_exe if plain is lowered else plain.compile()
    got_exe = exe if plain is lowered else _compile(plain, opts, sigs)
    a, b = _copy_args(args_kwargs), _copy_args(args_kwargs)
    if _same(got_exe(*a[0], **a[1]), want_exe(*b[0], **b[1])):
        return True
    warnings.warn(f"xla-cpu: {name} gave other results than XLA's default on these arguments; "
                  "kept the default", stacklevel=3)
    return False


#: A candidate is kept by ``verify`` when it runs at most this fraction of
#: the default's time.
VERIFY_KEEP = 0.98


def _verify_space(decision, model_pick, lowered):
    """What ``verify`` times against the default: the model's choice, the
    card's portfolio (the decision's ``verify`` list), and every eligible
    dot and convolution on oneDNN, each once."""
    cands = [model_pick] if model_pick[0] != "default" else []
    cands += [(n, options_of(n), ()) for n in decision.get("verify", [])]
    if not onednn.supported():
        every = tuple(dict.fromkeys(d.signature for d in onednn.contractions(lowered) if d.eligible))
        if every:
            cands.append((_with_ops("default", every) + " (every op)", {}, every))
    out, seen = [], set()
    for c in cands:
        if (key := (json.dumps(c[1], sort_keys=True), tuple(sorted(c[2])))) not in seen and c[0] != "default":
            seen.add(key)
            out.append(c)
    return out


#: A candidate whose first run, and then its second, takes more than this
#: times the default's second run is not timed further (a bf16 program
#: without YNNPACK can run 16x slower: five rounds of it would cost more
#: than all the rest). A first run alone decides nothing: oneDNN makes its
#: kernels then, and a first run of a good candidate was seen at 2.2x.
FIRST_RUN_CUT = 1.5
#: ... when that run took longer than this: shorter ones cost little to
#: time, and a first run of a short program is noisy.
FIRST_RUN_FLOOR_S = 0.02


def _variants(plain, cands):
    """Each candidate's lowering (its ops rewritten to oneDNN, in this
    thread: the rewrite parses MLIR) and compile options."""
    return [(onednn.lowered_with(plain, c[2])[0] if c[2] else plain, c[1]) for c in cands]


def _build_all(plain, cands):
    """Each candidate of ``cands`` compiled (:func:`_build`), two at a time."""
    from concurrent.futures import ThreadPoolExecutor

    variants = _variants(plain, cands)
    with ThreadPoolExecutor(max(1, min(2, os.cpu_count() or 1))) as pool:
        return list(pool.map(lambda v: _build(*v), variants))


def _build(low, opts):
    """``low`` compiled with ``opts``, or the error of an option this XLA
    refuses."""
    try:
        return low.compile(compiler_options=opts) if opts else low.compile()
    except Exception as e:
        return e


#: ``verify``'s last stage times again, with the default, the candidates
#: whose ratio came within this factor of the fastest one's (at most
#: :data:`FINAL_MAX`, the fastest first), and keeps the fastest of that
#: stage: close candidates trade places from one short timing to the next.
CONTEND_WITHIN = 1.05
FINAL_MAX = 3

#: ``verify`` also times the module-wide candidates one YNNPACK kind away
#: from the fastest module-wide one it screened, when that one ran within
#: this ratio of the default (a step of local search: in leave-one-family-out
#: cross-validation it took the portfolio's mean slowdown from 0.75% to
#: 0.26% (0.10.2) and from 0.65% to 0.18% (0.12.0.1), for 1.7 and 1.1 more
#: compiles on average).
LOCAL_SEARCH_WITHIN = 1.02


def _verify(base, cands, exes, args_kwargs, budget_s: float, check: bool, expand=None):
    """``verify``: of the candidates ``cands`` (``(name, options, op
    signatures)``) and their executables ``exes``, those that are another
    valid executable and not far slower in their first run
    (:func:`_verify_check`) run interleaved with ``base`` (the default) for
    ``budget_s``. With ``expand`` (candidates -> their executables), the
    neighbours of the fastest module-wide one (:func:`_neighbours`) are
    compiled and timed with it in fresh rounds. When the fastest of all
    ran at :data:`VERIFY_KEEP` or better, it and those within
    :data:`CONTEND_WITHIN` of it (the contenders) run again with the
    default in fresh rounds, and the fastest of that stage is kept when it
    runs at :data:`VERIFY_KEEP` or better there. Returns the
    pick, the record (candidates, ratio, status, searched, contenders,
    final, confirmed, chosen, why) and the pick's executable (None for the
    default)."""
    default = ("default", {}, ())
    st = _verify_check(base, cands, exes, args_kwargs, check)
    ratio = list(st["first"])
    _screen(base, exes, st, ratio, args_kwargs, budget_s, range(len(cands)))
    centre, near = _neighbours(cands, ratio, st["status"]) if expand is not None else (None, [])
    if near:
        first = len(cands)
        cands, exes = cands + near, exes + list(expand(near))
        st = _verify_check(base, cands, exes, args_kwargs, check, st)
        ratio += st["first"][first:]
        _screen(base, exes, st, ratio, args_kwargs, budget_s, [centre, *range(first, len(cands))])
    status, live = st["status"], [i for i, s in enumerate(st["status"]) if s == "timed"]
    record = dict(candidates=[c[0] for c in cands], ratio=ratio, status=status, searched=[c[0] for c in near])
    if not live:
        return default, dict(record, chosen="default", why="kept XLA's default: no candidate compiled to another "
                             "executable with the default's results and its speed"), None
    best = min(live, key=lambda i: ratio[i])
    if ratio[best] > VERIFY_KEEP:
        return default, dict(record, chosen="default", why=f"kept XLA's default: the fastest verified, "
                             f"{cands[best][0]}, ran x{ratio[best]:.3f} of its time (kept at most x{VERIFY_KEEP})"), None
    contenders = sorted((i for i in live if ratio[i] <= ratio[best] * CONTEND_WITHIN), key=lambda i: ratio[i])
    contenders = contenders[:FINAL_MAX]
    # As many rounds per executable as one candidate alone would get.
    final = _paired_ratios([exes[i] for i in contenders], base, args_kwargs, budget_s * (len(contenders) + 1) / 2)
    k = min(range(len(contenders)), key=lambda j: final[j])
    pick, again = contenders[k], final[k]
    name = cands[pick][0]
    record.update(contenders=[cands[i][0] for i in contenders], final=list(final), confirmed=again)
    among = f" (the fastest of {len(contenders)} timed again)" if len(contenders) > 1 else ""
    if again > VERIFY_KEEP:
        return default, dict(record, chosen="default", why=f"kept XLA's default: {name} ran x{ratio[pick]:.3f}, "
                             f"then x{again:.3f} of its time when timed again{among} (kept at most x{VERIFY_KEEP})"), None
    return cands[pick], dict(record, chosen=name, why=f"{name} ran x{ratio[pick]:.3f}, then x{again:.3f} of the "
                             f"default's time on these arguments{among}"), exes[pick]


def _screen(base, exes, st, ratio, args_kwargs, budget_s: float, among) -> None:
    """Times the candidates ``among`` that :func:`_verify_check` left
    ``timed`` interleaved with ``base`` into ``ratio``; one that shares an
    executable takes its twin's ratio (1 for the default's)."""
    live = [i for i in among if st["status"][i] == "timed"]
    for i, r in zip(live, _paired_ratios([exes[i] for i in live], base, args_kwargs, budget_s) if live else []):
        ratio[i] = r
    for i, j in st["same_as"].items():
        ratio[i] = 1.0 if j < 0 else ratio[j]


def _neighbours(cands, ratio, status):
    """The fastest timed module-wide candidate of ``cands`` (no oneDNN ops),
    when it ran within :data:`LOCAL_SEARCH_WITHIN` of the default, and the
    module-wide candidates one YNNPACK kind away from it that ``cands``
    does not hold: ``(its index, [(name, options, ()), ...])``."""
    wide = [i for i, c in enumerate(cands)
            if status[i] == "timed" and not c[2] and c[0].startswith("ynn:") and c[0] in CANDIDATE_NAMES]
    if not wide:
        return None, []
    centre = min(wide, key=lambda i: ratio[i])
    if not ratio[centre] <= LOCAL_SEARCH_WITHIN:
        return None, []
    kinds = _kinds(cands[centre][0])
    have = {c[0] for c in cands if not c[2]}
    near = [n for n in CANDIDATE_NAMES if n.startswith("ynn:") and len(_kinds(n) ^ kinds) == 1 and n not in have]
    return centre, [(n, options_of(n), ()) for n in near]


def _kinds(name: str) -> set[str]:
    """The YNNPACK kinds of a module-wide candidate (``ynn:dot+reduce``:
    {dot, reduce}; ``ynn:none``: none)."""
    rest = name.removeprefix("ynn:")
    return set() if rest == "none" else set(rest.split("+"))


def _verify_check(base, cands, exes, args_kwargs, check: bool, state=None):
    """Runs the default twice and each candidate's executable once (twice
    when its first run is slow). Returns the state: each candidate's ratio
    to the default's second run (``first``: its faster run; NaN where it did
    not run), its ``status`` (``timed``; ``the default's executable`` or
    ``X's executable`` when its optimized module is that one's, which shares
    its time; ``did not compile``; ``other results`` than the default's,
    with ``check``; ``slow in two runs``, both beyond :data:`FIRST_RUN_CUT`
    and :data:`FIRST_RUN_FLOOR_S`), and ``same_as``:
    which earlier one (-1: the default) each shared executable is. Given
    the ``state`` of a prefix of ``cands``, runs only the rest."""
    import jax

    def run(exe):
        b = _copy_args(args_kwargs)
        t = time.perf_counter()
        out = jax.block_until_ready(exe(*b[0], **b[1]))
        return out, time.perf_counter() - t

    if state is None:
        want, _ = run(base)
        state = dict(want=want, took=run(base)[1], seen={_hlo_hash(base.as_text()): -1},
                     first=[], status=[], same_as={})
    first, status, same_as, seen = state["first"], state["status"], state["same_as"], state["seen"]
    for i in range(len(status), len(exes)):
        first.append(float("nan"))
        exe = exes[i]
        if isinstance(exe, Exception):
            status.append(f"did not compile: {str(exe)[:120]}")
            continue
        h = _hlo_hash(exe.as_text())
        if h in seen:
            same_as[i] = seen[h]
            status.append("the default's executable" if seen[h] < 0 else f"{cands[seen[h]][0]}'s executable")
            continue
        seen[h] = i
        got, took = run(exe)
        if check and not _same(got, state["want"]):
            first[i] = took / max(state["took"], 1e-9)
            status.append("other results")
            continue
        if took / max(state["took"], 1e-9) > FIRST_RUN_CUT and took > FIRST_RUN_FLOOR_S:
            took = min(took, run(exe)[1])
        first[i] = took / max(state["took"], 1e-9)
        status.append("slow in two runs" if first[i] > FIRST_RUN_CUT and took > FIRST_RUN_FLOOR_S else "timed")
    return state


def _paired_ratios(exes, base, args_kwargs, budget_s: float, min_rounds: int = 5) -> list[float]:
    """Per executable of ``exes``, the median over interleaved rounds of its
    time over ``base``'s in the same round (:func:`hlo_opt.timing.interleaved`),
    on copies of the arguments (donated buffers stay the caller's)."""
    args, kwargs = args_kwargs
    a = _copy_args(args)
    times, _ = interleaved([functools.partial(e, *a, **kwargs) for e in [base, *exes]], budget_s=budget_s,
                           min_rounds=min_rounds, warmup=1)
    return [paired_ratio(t, times[0]) for t in times[1:]]


def _compile(lowered, opts: dict[str, Any], sigs: Sequence[str] = ()):
    """``lowered`` compiled with the compile options ``opts``, the ops
    ``sigs`` on oneDNN."""
    if sigs:
        lowered = lowered.with_onednn(sigs) if isinstance(lowered, _Bound) else onednn.lowered_with(lowered, sigs)[0]
    return lowered.compile(compiler_options=opts) if opts else lowered.compile()


def _with_ops(name: str, sigs: Sequence[str]) -> str:
    return f"{name}+onednn:{len(sigs)}" if sigs else name


def _module_wide(name: str) -> str:
    """The module-wide candidate of a choice named by :func:`_with_ops`."""
    return name.split("+onednn:")[0]


def _model_pick(decision: dict[str, Any], notes: list[str]) -> tuple[str, dict[str, Any], tuple[str, ...]]:
    """The model's choice as (name, compile options, oneDNN ops)."""
    sigs = tuple(d["signature"] for d in decision.get("onednn", []) if d["onednn"])
    if sigs and (why := onednn.supported()):
        notes.append(why)
        sigs = ()
    base = _module_wide(decision["chosen"])
    return _with_ops(base, sigs), options_of(base), sigs


def _measured_space(decision, model_pick, measure, lowered):
    """The candidates ``measure`` compiles and times: the default, the
    model's choice, and the module-wide candidates (``"all"``: every one,
    and every eligible op on oneDNN; K: the K best predicted)."""
    if measure is True or measure == "all":
        names = list(CANDIDATE_NAMES)
    elif isinstance(measure, int) and measure > 0:
        preds = sorted((p for p in decision["predictions"] if p["candidate"] != "default"),
                       key=lambda p: p["change_pct"])
        names = ["default"] + ([p["candidate"] for p in preds] or CANDIDATE_NAMES[1:])[:measure]
    else:
        raise ValueError(f"measure={measure!r}: a number of candidates (the best predicted), or \"all\"")
    cands = [(n, options_of(n), ()) for n in names]
    if model_pick[2]:
        cands.append(model_pick)
    if (measure is True or measure == "all") and not onednn.supported():
        every = tuple(dict.fromkeys(d.signature for d in onednn.contractions(lowered) if d.eligible))
        if every and every != model_pick[2]:
            cands.append((_with_ops("default", every) + " (every op)", {}, every))
    return cands


def measure_candidates(lowered, args_kwargs, cands, budget_s: float = 2.0) -> dict[str, Any]:
    """``measure`` over ``cands`` with keyword arguments, and the keep rule:
    the fastest valid candidate when its ratio is below 1 by more than the
    control's distance from 1 (and at least 2%)."""
    args, kwargs = args_kwargs
    res = measure(_Bound(lowered, kwargs), args, candidates=cands, budget_s=budget_s)
    ratio = np.where(res["ok"], res["ratio"], np.inf)
    best = int(np.argmin(ratio))
    noise = max(0.02, abs(res["control_ratio"] - 1.0))
    if best and ratio[best] < 1.0 - noise:
        chosen, why = cands[best][0], f"x{ratio[best]:.3f} of the default, beyond the control's spread {noise:.3f}"
    else:
        chosen, why = "default", f"no candidate beat the default by more than the control's spread {noise:.3f}"
    return dict(res, chosen=chosen, why=why)


class _Bound:
    """A lowered function whose executables take ``kwargs`` too."""

    def __init__(self, lowered, kwargs):
        self._lowered, self._kwargs = lowered, kwargs

    def with_onednn(self, sigs):
        return _Bound(onednn.lowered_with(self._lowered, sigs)[0], self._kwargs)

    def compile(self, compiler_options=None):
        exe = self._lowered.compile(compiler_options=compiler_options) if compiler_options else self._lowered.compile()
        kw = self._kwargs
        return _WithKwargs(exe, kw)


class _WithKwargs:
    def __init__(self, exe, kwargs):
        self._exe, self._kwargs = exe, kwargs

    def as_text(self):
        return self._exe.as_text()

    def __call__(self, *args):
        return self._exe(*args, **self._kwargs)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hlo_opt.xla_cpu collect OUT``: measure the generated
    training corpus (hlo_opt.cpu_corpus) on this machine into OUT, or with
    ``--modules FILE...`` those StableHLO modules (``hlo-cost collect
    --kernels`` runs this), resuming what an earlier run left
    (scripts/xla_cpu_retrain runs it, then the featurizer and the
    training)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m hlo_opt.xla_cpu", description=main.__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="measure the generated corpus, or StableHLO modules, into OUT")
    c.add_argument("out")
    c.add_argument("--modules", nargs="+", metavar="FILE",
                   help="StableHLO module files (jax.jit(f).lower(...).as_text()) instead of the generated corpus")
    c.add_argument("--count", type=int, default=168, help="generated programs (default 168: 12 per family)")
    c.add_argument("--seed", type=int, default=0, help="the corpus's programs, or the modules' arguments")
    c.add_argument("--budget-s", type=float, default=2.0, help="seconds of timing per program")
    c.add_argument("--budget", type=float, metavar="SECONDS",
                   help="start no further program after this many seconds, once one is measured (a later run goes on)")
    c.add_argument("--collections", type=int, default=1, metavar="N",
                   help="measure each program until it holds N measurements, taken in separate passes over the "
                        "programs; its labels are their geometric mean (default 1; a rerun with a larger N adds "
                        "measurements to what is there)")
    c.add_argument("--allow-mixed-devices", action="store_true")
    sub.add_parser("observe", help="what this jaxlib's XLA:CPU does with each candidate (docs/xla-cpu.md)")
    a = ap.parse_args(argv)
    if a.command == "observe":
        import jaxlib

        print(f"jaxlib {jaxlib.__version__}")
        for name, counts in observe().items():
            print(f"{name:24} {json.dumps(counts)}")
        return 0
    if a.count < 1 or a.collections < 1 or not (a.budget_s > 0) or (a.budget is not None and not a.budget > 0):
        ap.error("--count and --collections must be at least 1, and --budget-s and --budget positive")
    deadline = None if a.budget is None else time.monotonic() + a.budget
    common = dict(budget_s=a.budget_s, seed=a.seed, allow_mixed_devices=a.allow_mixed_devices, deadline=deadline,
                  collections=a.collections)
    try:
        if a.modules:
            done = collect_modules(a.modules, a.out, **common)
        else:
            from . import cpu_corpus

            done = collect(cpu_corpus.programs(a.seed, a.count), a.out, **common)
    except (ValueError, RuntimeError) as e:
        print(f"python -m hlo_opt.xla_cpu: error: {e}", file=sys.stderr)
        return 1
    again = f" ({len(done)} measurements)" if len(done) != len(set(done)) else ""
    print(f"measured {len(set(done))} programs now{again}; {a.out} holds {len(list(Path(a.out).glob('*.npz')))}")
    return 0


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


if __name__ == "__main__":
    raise SystemExit(main())
