"""Experiment (docs/xla-cpu.md, "Leave-one-program-out"): would a per-op
label for the YNNPACK choice make the program model's leave-one-program-out
slowdown fall? Each distinct dot of the training programs is timed alone
with jaxlib's own client under XLA's default, `ynn:dot` and `ynn:none`
(interleaved, with a second default executable as the control; resumable:
rows already in OUT are kept), then the program model is cross-validated
leave-one-program-out with and without three features per program from
those labels: its dots' time-weighted ratio under `ynn:dot` and under
`ynn:none`, and their share of the program's time. The labels are the
measured ones, not a model's predictions, so this is an upper bound.

    .venv/bin/python scripts/xla_cpu_ynn_probe.py testdata/xla_cpu/jaxlib-0.10.2.tar.gz OUT.jsonl

29 Nov 2026, jaxlib 0.10.2, 264 dots in about 4 minutes: 7.25% without,
6.63% with (gbm-medium, margin 0).
"""

from __future__ import annotations

import copy
import functools
import json
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "costmodel" / "training"))
import xla_cpu_model as M  # noqa: E402


def measure(sigs: list[str], out: Path) -> dict[str, dict]:
    """Each dot of ``sigs`` timed alone (rows appended to ``out``)."""
    from hlo_opt import xla_cpu
    from hlo_opt.timing import interleaved, paired_ratio
    from hlo_opt.xla_cpu import ops

    rows = {}
    if out.exists():
        rows = {r["signature"]: r for r in map(json.loads, out.read_text().splitlines())}
    with out.open("a") as f:
        for i, sig in enumerate(s for s in sigs if s not in rows):
            lowered, args = ops.lowered_dot(sig)
            exes = [lowered.compile(), lowered.compile(compiler_options=xla_cpu.options_of("ynn:dot")),
                    lowered.compile(compiler_options=xla_cpu.options_of("ynn:none")), lowered.compile()]
            times, run = interleaved([functools.partial(e, *args) for e in exes], budget_s=0.3, min_rounds=9,
                                     max_rounds=151, seed=0)
            row = dict(signature=sig, ynn=paired_ratio(times[1], times[0]), eigen=paired_ratio(times[2], times[0]),
                       control=paired_ratio(times[3], times[0]), default_ns=float(np.median(times[0]) * 1e9),
                       rounds=run["rounds"])
            f.write(json.dumps(row) + "\n")
            f.flush()
            rows[sig] = row
            print(f"[{i + 1}] {sig}: ynn:dot x{row['ynn']:.2f}, ynn:none x{row['eigen']:.2f}, "
                  f"control x{row['control']:.3f}", flush=True)
    return rows


def op_features(program: dict, dots: list[dict], labels: dict[str, dict]) -> list[float]:
    """The program's dots' time-weighted ratio under ynn:dot and ynn:none
    (logs) and their share of its default time."""
    w = wy = we = 0.0
    for d in dots:
        if (lab := labels.get(d["signature"])) is not None:
            t = d["count"] * lab["default_ns"]
            w, wy, we = w + t, wy + t * lab["ynn"], we + t * lab["eigen"]
    if not w:
        return [0.0, 0.0, 0.0]
    return [math.log(wy / w), math.log(we / w), min(1.0, w / program["meta"]["default_ns"])]


def main(argv=None) -> int:
    data, out = Path(sys.argv[1]), Path(sys.argv[2])
    with tempfile.TemporaryDirectory() as scratch:
        dirs = M.unpack([data], Path(scratch))
        feats = M.featurize(ROOT / "target" / "release" / "hlo-cost", dirs, Path(scratch) / "f.jsonl")
        programs = M.load(dirs, feats)
        dots = {Path(r["file"]).stem: [d for d in r.get("ops", []) if not d["signature"].startswith("conv ")]
                for r in map(json.loads, feats.read_text().splitlines())}
    labels = measure(list(dict.fromkeys(d["signature"] for ds in dots.values() for d in ds)), out)
    with_ops = copy.deepcopy(programs)
    for p in with_ops:
        p["features"] = p["features"] + op_features(p, dots[p["name"]], labels)
    for name, progs in (("program features", programs), ("plus the dots' labels", with_ops)):
        preds = M.lofo_predictions(progs, "gbm-medium", group="name")
        r = M.evaluate(progs, preds, M.candidate_errors(progs, preds), 0.0)
        print(f"leave-one-program-out, gbm-medium, margin 0, {name}: mean top-1 slowdown {100 * r['mean']:.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
