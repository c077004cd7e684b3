"""The measurements on disk: one program's as ``out/NAME.npz`` (its HLO
text beside it, ``NAME.hlo``), written atomically; several measurements of
a program pooled (:func:`pool`); and collecting, which measures each
program that holds fewer measurements of this device, XLA and protocol
than asked (:func:`collect`, :func:`collect_modules`)."""

from __future__ import annotations

import functools
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from .measuring import measure
from .space import PROTOCOL, fingerprint


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
    from .. import stablehlo

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
