"""Per-op labels for the oneDNN choice: each dot signature timed alone.

A program-level label says what one whole program gained; it does not
transfer to an architecture the model never saw (docs/xla-cpu.md). A dot's
label does: a dot of a given shape and type runs the same kernels in any
program. So each distinct dot (its signature, :mod:`hlo_opt.onednn`) is
compiled alone twice by jaxlib's own XLA:CPU, once as XLA's default
(YNNPACK or its own kernels, by XLA's rules) and once as a oneDNN matmul,
and the two run interleaved with a second default executable as the
control. The label is the median over rounds of oneDNN's time over the
default's in the same round.

``collect(signatures, out)`` appends one JSON line per dot to
``out.partial.jsonl`` as it goes (a rerun skips what is there; the device
must be the same), then writes ``out`` (an ``.npz``) atomically:
signatures, ratio, control ratio, default time, rounds, each dot's HLO
module (``hlo-cost cpu-features`` reads its dot-model row from it), and the
device.

``python -m hlo_opt.xla_cpu_dots collect FEATURES.jsonl OUT.npz [--grid N]``
takes the signatures from ``hlo-cost cpu-features`` output (the dots of the
training programs) and adds N generated ones (log-uniform sizes, f32 and
bf16, plain, flattened, batched and transposed forms).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from . import onednn

_SIG = re.compile(r"(\w+)\[([\d,]*)\]x\[([\d,]*)\] b\[([\d,]*)\]x\[([\d,]*)\] c\[([\d,]*)\]x\[([\d,]*)\]")


def parse_signature(sig: str) -> tuple[str, list[int], list[int], list[int], list[int], list[int], list[int]]:
    m = _SIG.fullmatch(sig)
    if not m:
        raise ValueError(f"not a dot signature: {sig!r}")
    ints = [[int(v) for v in g.split(",")] if g else [] for g in m.groups()[1:]]
    return (m[1], *ints)


def lowered_dot(sig: str):
    """``jax.jit`` of the dot ``sig`` alone, lowered, and its arguments."""
    import jax
    import jax.numpy as jnp

    dtype, a, b, lb, rb, lc, rc = parse_signature(sig)
    dt = {"f32": jnp.float32, "bf16": jnp.bfloat16}[dtype]
    ka, kb = jax.random.split(jax.random.key(0))
    x = jax.random.normal(ka, a, jnp.float32).astype(dt)
    y = (jax.random.normal(kb, b, jnp.float32) / np.sqrt(max(1, int(np.prod([b[i] for i in rc]))))).astype(dt)

    def f(x, y):
        return jax.lax.dot_general(x, y, ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb))))

    return jax.jit(f).lower(x, y), (x, y)


def measure_dot(sig: str, *, budget_s: float = 0.6, min_rounds: int = 9, max_rounds: int = 201,
                seed: int = 0) -> dict[str, Any]:
    """Times the dot ``sig`` as XLA's default and as a oneDNN matmul,
    interleaved with a control; raises ValueError for a form oneDNN does not
    take."""
    import jax

    from .xla_cpu import _same

    lowered, args = lowered_dot(sig)
    found = onednn.dots(lowered.as_text())
    if len(found) != 1 or found[0].signature != sig:
        raise ValueError(f"{sig}: jax lowered another dot ({[d.signature for d in found]})")
    if not found[0].eligible:
        raise ValueError(f"{sig}: oneDNN's matmul does not take this form")
    rewritten, n = onednn.lowered_with(lowered, [sig])
    exes = [lowered.compile(), rewritten.compile(), lowered.compile()]
    if "__onednn$matmul" not in exes[1].as_text():
        raise RuntimeError(f"{sig}: the oneDNN custom call did not reach the optimized module")
    ok = _same(exes[1](*args), exes[0](*args))
    for _ in range(2):
        for e in exes:
            jax.block_until_ready(e(*args))
    t = time.perf_counter()
    for e in exes:
        jax.block_until_ready(e(*args))
    per_round = time.perf_counter() - t
    rounds = int(min(max_rounds, max(min_rounds, budget_s / max(per_round, 1e-9))))
    rng = np.random.default_rng(seed)
    times: list[list[float]] = [[], [], []]
    for _ in range(rounds):
        for k in rng.permutation(3):
            t = time.perf_counter()
            jax.block_until_ready(exes[k](*args))
            times[k].append(time.perf_counter() - t)
    base = np.asarray(times[0])
    return {"signature": sig, "ratio": float(np.median(np.asarray(times[1]) / base)),
            "control": float(np.median(np.asarray(times[2]) / base)), "default_ns": float(np.median(base) * 1e9),
            "rounds": rounds, "ok": bool(ok), "hlo": lowered.as_text(dialect="hlo")}


def grid(n: int, seed: int = 0) -> list[str]:
    """``n`` generated dot signatures: log-uniform M, N, K in [1, 4096]
    (at most 2^31 flops), f32 and bf16; plain, left operand of rank 3,
    batched (1-2 batch dimensions), and transposed right operand."""
    rng = np.random.default_rng(seed)
    out: list[str] = []
    while len(out) < n:
        m, k, nn = (int(2 ** rng.uniform(0, 12)) for _ in range(3))
        dtype = "bf16" if rng.random() < 0.5 else "f32"
        form = rng.choice(["plain", "flat", "batch", "batch2"])
        tb = bool(rng.random() < 0.3)
        if form == "plain":
            lhs, lb = [m, k], []
        elif form == "flat":
            s = int(2 ** rng.uniform(1, 6))
            m = max(1, m // s)
            lhs, lb = [s, m, k], []
        else:
            bs = [int(2 ** rng.uniform(0, 5))] + ([int(2 ** rng.uniform(0, 4))] if form == "batch2" else [])
            lhs, lb = bs + [m, k], list(range(len(bs)))
        bdims = [lhs[i] for i in lb]
        rhs = bdims + ([nn, k] if tb else [k, nn])
        flops = 2 * float(np.prod(lhs)) * nn
        if flops > 2 ** 31 or flops < 2 ** 10:
            continue
        lc = [len(lhs) - 1]
        rc = [len(rhs) - 1 if tb else len(rhs) - 2]
        sig = onednn.signature(dtype, lhs, rhs, lb, lb, lc, rc)
        if sig not in out:
            out.append(sig)
    return out


def collect(signatures: Iterable[str], out: str | os.PathLike, *, budget_s: float = 0.6) -> Path:
    """Measures every signature not yet in ``out``'s partial file, then
    writes ``out`` (npz) atomically. Returns its path."""
    from .xla_cpu import _atomic_write, fingerprint

    out = Path(out)
    partial = out.with_name(out.name + ".partial.jsonl")
    device = fingerprint()
    done: dict[str, dict[str, Any]] = {}
    if partial.exists():
        for line in partial.read_text().splitlines():
            row = json.loads(line)
            if "device" in row:
                if row["device"] != device:
                    raise RuntimeError(f"{partial} was measured on {row['device']}, this is {device}")
                continue
            done[row["signature"]] = row
    else:
        partial.write_text(json.dumps({"device": device}) + "\n")
    todo = [s for s in dict.fromkeys(signatures) if s not in done]
    with partial.open("a") as f:
        for i, sig in enumerate(todo):
            t = time.perf_counter()
            try:
                row = measure_dot(sig, budget_s=budget_s)
            except ValueError as e:
                print(f"  skipped: {e}", flush=True)
                continue
            f.write(json.dumps(row) + "\n")
            f.flush()
            os.fsync(f.fileno())
            done[sig] = row
            print(f"[{i + 1}/{len(todo)}] {sig}: oneDNN x{row['ratio']:.3f}, control x{row['control']:.3f}, "
                  f"{row['rounds']} rounds, {time.perf_counter() - t:.1f} s", flush=True)
    rows = list(done.values())

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, signatures=np.array([r["signature"] for r in rows]),
                     ratio=np.array([r["ratio"] for r in rows]), control=np.array([r["control"] for r in rows]),
                     default_ns=np.array([r["default_ns"] for r in rows]),
                     rounds=np.array([r["rounds"] for r in rows]), ok=np.array([r["ok"] for r in rows]),
                     hlo=np.array([r["hlo"] for r in rows]),
                     device=np.array(json.dumps(device)))

    _atomic_write(out, write)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m hlo_opt.xla_cpu_dots", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="time each dot alone, XLA's default vs a oneDNN matmul")
    c.add_argument("features", help="hlo-cost cpu-features output (JSON lines with the programs' dots)")
    c.add_argument("out", help="the .npz to write")
    c.add_argument("--grid", type=int, default=0, help="also this many generated dots")
    c.add_argument("--budget", type=float, default=0.6, help="seconds of runs per dot")
    a = ap.parse_args(argv)
    sigs = []
    with open(a.features) as f:
        for line in f:
            sigs += [d["signature"] for d in json.loads(line).get("dots", []) if d["eligible"]]
    sigs += grid(a.grid)
    out = collect(sigs, a.out, budget_s=a.budget)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
