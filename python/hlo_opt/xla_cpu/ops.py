"""Per-op labels for the oneDNN choice: each dot and convolution timed alone.

A program-level label says what one whole program gained; it does not
transfer to an architecture the model never saw (docs/xla-cpu.md). An op's
label does: a dot or convolution of a given shape and type runs the same
kernels in any program. So each distinct op (its signature,
:mod:`hlo_opt.onednn`) is compiled alone twice by jaxlib's own XLA:CPU,
once as XLA's default (YNNPACK or its own kernels, by XLA's rules) and once
as a oneDNN matmul or convolution, and the two run interleaved with a
second default executable as the control. The label is the median over
rounds of oneDNN's time over the default's in the same round.

``collect(signatures, out)`` appends one JSON line per op to
``out.partial.jsonl`` as it goes (a rerun skips what is there; the device
must be the same), then writes ``out`` (an ``.npz``) atomically:
signatures, ratio, control ratio, default time, rounds, each op's HLO
module (``hlo-cost cpu-features`` reads its op-model row from it), and the
device.

``python -m hlo_opt.xla_cpu.ops collect FEATURES.jsonl OUT.npz [--grid N]``
takes the signatures from ``hlo-cost cpu-features`` output (the dots and
convolutions of the training programs) and adds N generated dots
(log-uniform sizes, f32 and bf16, plain, flattened, batched and transposed
forms) and ``--conv-grid M`` generated convolutions.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from .. import onednn
from ..timing import interleaved, paired_ratio
from .measuring import _same
from .space import fingerprint
from .store import _atomic_write

_SIG = re.compile(r"(\w+)\[([\d,]*)\]x\[([\d,]*)\] b\[([\d,]*)\]x\[([\d,]*)\] c\[([\d,]*)\]x\[([\d,]*)\]")


def parse_signature(sig: str) -> tuple[str, list[int], list[int], list[int], list[int], list[int], list[int]]:
    m = _SIG.fullmatch(sig)
    if not m:
        raise ValueError(f"not a dot signature: {sig!r}")
    ints = [[int(v) for v in g.split(",")] if g else [] for g in m.groups()[1:]]
    return (m[1], *ints)


_CONV_SIG = re.compile(r"conv (\w+)\[([\d,]*)\]x\[([\d,]*)\] (\w+)_(\w+)->(\w+) s\[([\d,]*)\] "
                       r"p\[([-\d_,]*)\] ld\[([\d,]*)\] rd\[([\d,]*)\] g(\d+)")


def lowered_conv(sig: str):
    """``jax.jit`` of the convolution ``sig`` alone, lowered, and its
    arguments."""
    import jax
    import jax.numpy as jnp

    m = _CONV_SIG.fullmatch(sig)
    if not m:
        raise ValueError(f"not a convolution signature: {sig!r}")
    dtype, a, b, il, kl, ol, st, pad, ld, rd, g = m.groups()

    def ints(t):
        return [int(v) for v in t.split(",")] if t else []

    a, b = ints(a), ints(b)
    dt = {"f32": jnp.float32, "bf16": jnp.bfloat16}[dtype]
    spatial = len(il) - 2

    def spec(labels, first, second):
        return (labels.index(first), labels.index(second), *(labels.index(str(i)) for i in range(spatial)))

    dn = jax.lax.ConvDimensionNumbers(spec(il, "b", "f"), spec(kl, "o", "i"), spec(ol, "b", "f"))
    pads = [tuple(int(v) for v in p.split("_")) for p in pad.split(",")] if pad else []
    ka, kb = jax.random.split(jax.random.key(0))
    fan_in = int(np.prod([b[kl.index(str(i))] for i in range(spatial)])) * b[kl.index("i")]
    x = jax.random.normal(ka, a, jnp.float32).astype(dt)
    k = (jax.random.normal(kb, b, jnp.float32) / np.sqrt(max(1, fan_in))).astype(dt)

    def f(x, k):
        return jax.lax.conv_general_dilated(x, k, ints(st), pads, lhs_dilation=ints(ld), rhs_dilation=ints(rd),
                                            dimension_numbers=dn, feature_group_count=int(g))

    return jax.jit(f).lower(x, k), (x, k)


def lowered_op(sig: str):
    """``jax.jit`` of the op ``sig`` (a dot or a convolution) alone,
    lowered, and its arguments."""
    return lowered_conv(sig) if sig.startswith("conv ") else lowered_dot(sig)


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


def measure_op(sig: str, *, budget_s: float = 0.6, min_rounds: int = 9, max_rounds: int = 201,
                seed: int = 0) -> dict[str, Any]:
    """Times the op ``sig`` as XLA's default and as a oneDNN matmul or
    convolution, interleaved with a control; raises ValueError for a form
    oneDNN does not take."""
    lowered, args = lowered_op(sig)
    found = onednn.contractions(lowered)
    if len(found) != 1 or found[0].signature != sig:
        raise ValueError(f"{sig}: jax lowered another op ({[d.signature for d in found]})")
    if not found[0].eligible:
        raise ValueError(f"{sig}: oneDNN does not take this form")
    rewritten, n = onednn.lowered_with(lowered, [sig])
    exes = [lowered.compile(), rewritten.compile(), lowered.compile()]
    target = onednn.CONV_TARGET if sig.startswith("conv ") else onednn.TARGET
    if target not in exes[1].as_text():
        raise RuntimeError(f"{sig}: the oneDNN custom call did not reach the optimized module")
    ok = _same(exes[1](*args), exes[0](*args))
    times, run = interleaved([functools.partial(e, *args) for e in exes], budget_s=budget_s,
                             min_rounds=min_rounds, max_rounds=max_rounds, seed=seed)
    return {"signature": sig, "ratio": paired_ratio(times[1], times[0]),
            "control": paired_ratio(times[2], times[0]), "default_ns": float(np.median(times[0]) * 1e9),
            "rounds": run["rounds"], "repeat": run["repeat"], "ok": bool(ok), "hlo": lowered.as_text(dialect="hlo")}


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


def conv_grid(n: int, seed: int = 0) -> list[str]:
    """``n`` generated convolution signatures: 2-D (NHWC, HWIO) and 1-D
    (NWC, WIO), windows 1 to 7, strides 1 and 2, rhs dilations 1 and 2,
    'SAME'-like padding, 8 to 256 features, f32 and bf16 (2^12 to 2^31
    flops)."""
    rng = np.random.default_rng(seed + 1)
    out: list[str] = []
    while len(out) < n:
        two_d = bool(rng.random() < 0.7)
        batch = int(2 ** rng.integers(0, 7))
        size = int(rng.choice([7, 14, 28, 56])) if two_d else int(rng.choice([16, 64, 256, 1024]))
        cin, cout = (int(2 ** rng.integers(3, 9)) for _ in range(2))
        k = int(rng.choice([1, 3, 5, 7]))
        stride = int(rng.choice([1, 1, 2]))
        dil = int(rng.choice([1, 1, 2])) if k > 1 else 1
        dtype = "bf16" if rng.random() < 0.5 else "f32"
        lo = (k - 1) * dil // 2
        hi = (k - 1) * dil - lo
        sp = 2 if two_d else 1
        outs = (size + lo + hi - (k - 1) * dil - 1) // stride + 1
        flops = 2.0 * batch * outs ** sp * cout * cin * k ** sp
        if outs < 1 or not 2 ** 12 <= flops <= 2 ** 31:
            continue
        lhs = [batch] + [size] * sp + [cin]
        rhs = [k] * sp + [cin, cout]
        labels = ("b01f_01io->b01f" if two_d else "b0f_0io->b0f")

        def j(v):
            return ",".join(str(x) for x in v)

        sig = (f"conv {dtype}[{j(lhs)}]x[{j(rhs)}] {labels} s[{j([stride] * sp)}] "
               f"p[{','.join([f'{lo}_{hi}'] * sp)}] ld[{j([1] * sp)}] rd[{j([dil] * sp)}] g1")
        if sig not in out:
            out.append(sig)
    return out


def collect(signatures: Iterable[str], out: str | os.PathLike, *, budget_s: float = 0.6) -> Path:
    """Measures every signature not yet in ``out``'s partial file, then
    writes ``out`` (npz) atomically. Returns its path."""
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
                row = measure_op(sig, budget_s=budget_s)
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

    ap = argparse.ArgumentParser(prog="python -m hlo_opt.xla_cpu.ops", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="time each dot and convolution alone, XLA's default vs oneDNN")
    c.add_argument("features", help="hlo-cost cpu-features output (JSON lines with the programs' ops)")
    c.add_argument("out", help="the .npz to write")
    c.add_argument("--grid", type=int, default=0, help="also this many generated dots")
    c.add_argument("--conv-grid", type=int, default=0, help="also this many generated convolutions")
    c.add_argument("--budget", type=float, default=0.6, help="seconds of runs per op")
    a = ap.parse_args(argv)
    sigs = []
    with open(a.features) as f:
        for line in f:
            sigs += [d["signature"] for d in json.loads(line).get("ops", []) if d["eligible"]]
    sigs += grid(a.grid) + conv_grid(a.conv_grid)
    out = collect(sigs, a.out, budget_s=a.budget)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
