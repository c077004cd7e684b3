#!/usr/bin/env python3
"""The layout pass's decisions against a baseline build's (issue 29's done-when).

Usage: python3 scripts/layout_decisions_sweep.py --baseline BIN [--baseline-all BIN]
           [--bin BIN] [--modes default,seed7,all] [--jobs N] [FILE...]

Runs `hlo-opt --pass=layout --explain-json` of this build (--bin, default
target/release/hlo-opt) and of a baseline build on each module, in three
modes: default options, `--seed 7`, and `--trust-radius all` (against
--baseline-all when given: the unbounded search is held to the build before
incremental scoring). Modules (default): testdata/layout/*.hlo,
../shared/corpus/jax/*.pre.hlo and the shared corpus's Gemma 4 2B and
llama3 8B modules (those under ../shared when present).

Per run it reads the search method, the configurations scored and the
decision from the JSON report, and the output module. The verdict, per
issue 29: where the baseline's search was exhaustive, the output module must
be the same (the same configuration); elsewhere the predicted change of the
applied configuration (0 when the compiler default is kept; negative is
faster) must be at most the baseline's (+0.005, the text report's rounding). Prints a Markdown table;
exits 1 when a row fails, 0 otherwise.
"""
import argparse
import concurrent.futures
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared")
MODES = {"default": [], "seed7": ["--seed", "7"], "all": ["--trust-radius", "all"]}


def default_files() -> list:
    files = sorted(glob.glob(os.path.join(ROOT, "testdata/layout/*.hlo")))
    files += sorted(glob.glob(os.path.join(SHARED, "corpus/jax/*.pre.hlo")))
    for big in ["hlo_gemma4_2b_bf16__0.hlo", "hlo_llama3_8b_bf16_activation_offloading_1x8__0.hlo"]:
        path = os.path.join(SHARED, "corpus/xla/valid", big)
        if os.path.exists(path):
            files.append(path)
    if len(files) <= 3:
        print("note: ../shared absent: testdata modules only", file=sys.stderr)
    return files


def run(binary: str, path: str, flags: list) -> dict:
    """One `hlo-opt --pass=layout` run: the search method, the configurations
    scored, the decision (from its JSON report; from its --explain text for
    builds without --explain-json, such as main before incremental scoring),
    the output module's digest and the wall time."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        out = os.path.join(tmp, "out.hlo")
        start = time.monotonic()
        proc = subprocess.run(
            ["nice", "-n", "10", binary, "--pass=layout", "--explain-json", report, *flags, path, "-o", out],
            capture_output=True, text=True)
        text = None
        if proc.returncode == 2 and "--explain-json" in proc.stderr:
            start = time.monotonic()
            proc = subprocess.run(
                ["nice", "-n", "10", binary, "--pass=layout", "--explain", *flags, path, "-o", out],
                capture_output=True, text=True)
            text = proc.stderr
        wall = time.monotonic() - start
        if proc.returncode != 0:
            raise SystemExit(f"{binary} {flags} {path}: exit {proc.returncode}: {proc.stderr[-2000:]}")
        with open(out, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()[:12]
        if text is None:
            with open(report, encoding="utf-8") as f:
                layout = next(p for p in json.load(f)["passes"] if p["pass"] == "layout")
            decision = layout["decision"]
            applied = bool(decision.get("applied"))
            method, scored = layout["search"]["method"], layout["search"]["scored"]
            change = (decision.get("predicted_change_pct") or 0.0) if applied else 0.0
        else:
            found = re.search(r"(exhaustive|genetic|trivial)[^;]*? search scored ([\d,]+)", text)
            if not found:
                raise SystemExit(f"{binary} {flags} {path}: no search line in its --explain report")
            method, scored = found.group(1), int(found.group(2).replace(",", ""))
            found = re.search(r"model score \S+ vs \S+ for the compiler default \(([+-]?[\d.]+)%", text)
            applied = found is not None
            change = float(found.group(1)) if applied else 0.0
    return {
        "method": method,
        "scored": scored,
        "applied": applied,
        # The applied configuration's predicted change (percent, negative is
        # faster); the compiler default's is 0.
        "change": change,
        "module": digest,
        "wall": wall,
    }


def short_method(m: str) -> str:
    if m.startswith("trust-region"):
        return "combinations (exhaustive)" if "every combination" in m else "combinations (genetic)"
    return m.split(" ")[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/hlo-opt"))
    ap.add_argument("--baseline", required=True, help="the baseline hlo-opt (default options and --seed 7)")
    ap.add_argument("--baseline-all", help="the baseline for --trust-radius all (default: --baseline)")
    ap.add_argument("--modes", default="default,seed7,all")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    files = args.files or default_files()
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            raise SystemExit(f"--modes: unknown mode {m!r} (default, seed7, all)")
    jobs = []
    for path in files:
        for mode in modes:
            base = args.baseline_all if (mode == "all" and args.baseline_all) else args.baseline
            jobs.append((path, mode, base))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda j: (run(j[2], j[0], MODES[j[1]]), run(args.bin, j[0], MODES[j[1]])), jobs))
    print("| module | mode | baseline: search, scored | new: search, scored | baseline: applied change | new: applied change | same module | verdict |")
    print("|---|---|---|---|---|---|---|---|")
    failed = 0
    for (path, mode, _), (b, n) in zip(jobs, results):
        same = b["module"] == n["module"]
        if b["method"] == "exhaustive":
            ok = same
            why = "same configuration" if ok else "CHANGED (baseline exhaustive)"
        else:
            # Reports without --explain-json round the change to 0.01%.
            ok = n["change"] <= b["change"] + 0.005
            if same:
                why = "same configuration"
            elif ok:
                why = "as good or better"
            else:
                why = "WORSE"
        failed += not ok
        name = os.path.basename(path).removesuffix(".hlo")
        fmt = lambda r: f"{r['change']:+.3f}%" if r["applied"] else "kept default"
        print(f"| {name} | {mode} | {short_method(b['method'])}, {b['scored']:,} | "
              f"{short_method(n['method'])}, {n['scored']:,} | {fmt(b)} | {fmt(n)} | "
              f"{'yes' if same else 'no'} | {why} |")
    print(f"\n{len(jobs)} rows, {failed} failing", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
