#!/usr/bin/env python3
"""Conformance of hlo-opt's printer with XLA's own HLO parser (jaxlib).

For each original module FILE and our printed text of it (PRINTED_DIR/<name of
FILE>), parse both with XLA (`hlo_module_from_text`) and compare XLA's
`to_string()` of the two: they must be identical, i.e. XLA reads our text as
the same module as the original.

Usage: check_xla.py --printed-dir DIR FILE...   (exit 1 if any module differs)
Prints one line per failure and a summary `conformance: N of M modules match`.
Modules XLA itself cannot parse, or prints differently on two reads of the
same text, are reported as `skipped`; `--known NAME` marks a module whose
difference the caller documents (reported, not failed).
"""
import argparse
import difflib
import os
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--printed-dir", required=True)
    ap.add_argument("--quiet", action="store_true", help="no diff excerpts")
    ap.add_argument("--known", action="append", default=[], metavar="NAME",
                    help="module expected to differ (documented in the caller); reported, not failed")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    from jax._src.lib import hlo  # pinned jaxlib (see requirements.txt)

    ok = failed = skipped = known = 0
    for path in args.files:
        name = os.path.basename(path)
        with open(path, encoding="utf-8") as f:
            original = f.read()
        try:
            expected = hlo.hlo_module_from_text(original).to_string()
            again = hlo.hlo_module_from_text(original).to_string()
        except Exception as e:  # XLA rejects the original: nothing to compare
            skipped += 1
            print(f"skipped: {name}: XLA rejects the original: {str(e).splitlines()[0][:120]}")
            continue
        if again != expected:  # e.g. elided constants `{...}` filled with fresh values
            skipped += 1
            print(f"skipped: {name}: XLA's own text of the original differs between two reads")
            continue
        printed_path = os.path.join(args.printed_dir, name)
        if not os.path.exists(printed_path):
            if name in args.known:
                known += 1
                print(f"known difference: {name}: hlo-opt does not parse it")
            else:
                failed += 1
                print(f"FAIL {name}: hlo-opt produced no output")
            continue
        with open(printed_path, encoding="utf-8") as f:
            printed = f.read()
        try:
            actual = hlo.hlo_module_from_text(printed).to_string()
        except Exception as e:
            failed += 1
            print(f"FAIL {name}: XLA rejects our printed text: {str(e).splitlines()[0][:300]}")
            continue
        if actual == expected:
            ok += 1
            continue
        if name in args.known:
            known += 1
            print(f"known difference: {name}")
            continue
        failed += 1
        print(f"FAIL {name}: XLA reads our text as a different module")
        if not args.quiet:
            diff = list(difflib.unified_diff(expected.splitlines(), actual.splitlines(), "original", "ours", n=0, lineterm=""))
            for line in diff[2:8]:
                print("    " + line[:300])
    total = ok + failed + known
    print(f"conformance: {ok} of {total} modules match ({known} known differences, {skipped} skipped)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
