"""Whole-corpus check of `hlo::parse_stablehlo`: for every pair NAME.mlir /
NAME.hlo in DIR (written by scripts/dump_stablehlo_corpus.py), compare the
XLA:CPU program feature row and the contraction rows that
`hlo-cost cpu-features` reads from the StableHLO with those it reads from
jax's HLO text. Prints each mismatch (column, both values) and a summary.

    python scripts/compare_stablehlo.py DIR [--hlo-cost target/release/hlo-cost]
"""

import argparse
import collections
import json
import subprocess
import sys
import tempfile
from pathlib import Path

FEATURES = None


def rows(hlo_cost: str, folder: Path) -> dict:
    """Each file's row; a file that does not read gets its error text."""
    files = sorted(list(folder.glob("*.mlir")) + list(folder.glob("*.hlo")))
    with tempfile.TemporaryDirectory() as t:
        out = Path(t) / "rows.jsonl"
        r = subprocess.run([hlo_cost, "cpu-features", *map(str, files), "-o", str(out)],
                           capture_output=True, text=True)
        if r.returncode == 0:
            return {json.loads(l)["file"]: json.loads(l) for l in out.read_text().splitlines()}
        got = {}
        for f in files:
            r = subprocess.run([hlo_cost, "cpu-features", str(f), "-o", str(out)], capture_output=True, text=True)
            got[str(f)] = json.loads(out.read_text()) if r.returncode == 0 else r.stderr.strip()
        return got


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", type=Path)
    ap.add_argument("--hlo-cost", default="target/release/hlo-cost")
    ap.add_argument("--names", default="passes/src/xla_cpu/features.rs")
    a = ap.parse_args()
    src = Path(a.names).read_text()
    names = src[src.index("FEATURE_NAMES"):].split("= [", 1)[1].split("];", 1)[0]
    names = [n.strip().strip('"') for n in names.split(",") if n.strip()]
    got = rows(a.hlo_cost, a.dir)
    same, total, cols = 0, 0, collections.Counter()
    for mlir in sorted(a.dir.glob("*.mlir")):
        total += 1
        r_m, r_h = got.get(str(mlir)), got.get(str(mlir.with_suffix(".hlo")))
        if not isinstance(r_m, dict) or not isinstance(r_h, dict):
            print(f"{mlir.stem}: no row: {(r_m if not isinstance(r_m, dict) else r_h)}"[:2000])
            cols["(error)"] += 1
            continue
        diffs = [(names[i], h, m) for i, (h, m) in enumerate(zip(r_h["features"], r_m["features"]))
                 if abs(h - m) > 1e-9]
        ops_same = r_h["ops"] == r_m["ops"]
        if not diffs and ops_same:
            same += 1
            continue
        for d in diffs:
            cols[d[0]] += 1
        what = ", ".join(f"{n}: hlo {h:.4g} mlir {m:.4g}" for n, h, m in diffs)
        if not ops_same:
            key = lambda o: o["signature"]
            order_only = sorted(r_h["ops"], key=key) == sorted(r_m["ops"], key=key)
            what += " | contractions differ" + (" (order only)" if order_only else "")
            cols["(contractions order)" if order_only else "(contractions)"] += 1
        print(f"{mlir.stem}: {what}")
    print(f"identical: {same}/{total}; columns differing (programs): {dict(cols)}")
    return 0 if same == total else 1


if __name__ == "__main__":
    raise SystemExit(main())
