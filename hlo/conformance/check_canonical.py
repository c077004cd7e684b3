#!/usr/bin/env python3
"""Canonical printing of hlo-opt checked against XLA's own (jaxlib).

For each original module FILE and hlo-opt's canonical text of it
(PRINTED_DIR/<name of FILE>: every computation printed with
`CanonicalOptions::fingerprint()`, the entry prefixed `ENTRY `, blocks joined
by blank lines), XLA parses FILE (`hlo_module_from_text`) and prints it with
`HloPrintOptions.fingerprint()`. That text is a header and then one block a
computation, blocks separated by blank lines. The blocks of the two, sorted,
must be identical byte for byte.

The keys hlo-opt computes are of modules XLA printed (its dumps), so the
inputs of the comparison are XLA's own text of each module: first
`check_canonical.py --normalize-to DIR FILE...` writes XLA's `to_string()`
of every FILE it parses into DIR (the caller prints those canonically),
then the check runs on DIR's files.

Usage: check_canonical.py --normalize-to DIR FILE...
       check_canonical.py --printed-dir DIR FILE...   (exit 1 if any differs)
Prints one line per failure and a summary `canonical: N of M modules match`.
Modules XLA cannot parse, or prints differently on two reads (constants with
elided values get fresh ones), are reported as `skipped`. `--known NAME`
marks a module whose difference the caller documents (reported, not failed).
"""
import argparse
import difflib
import os
import sys


def blocks(text: str) -> list:
    parts = [b for b in text.split("\n\n") if b.strip()]
    return sorted(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--printed-dir")
    ap.add_argument("--normalize-to")
    ap.add_argument("--known", action="append", default=[], metavar="NAME")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    from jaxlib import _hlo  # the pinned jaxlib's HloPrintOptions

    if args.normalize_to:
        written = 0
        for path in args.files:
            with open(path, encoding="utf-8") as f:
                original = f.read()
            try:
                text = _hlo.hlo_module_from_text(original).to_string()
            except Exception:
                continue
            with open(os.path.join(args.normalize_to, os.path.basename(path)), "w",
                      encoding="utf-8") as f:
                f.write(text)
            written += 1
        print(f"normalized: {written} of {len(args.files)} modules")
        return 0
    if not args.printed_dir:
        ap.error("give --printed-dir or --normalize-to")
    ok = failed = skipped = known = 0
    for path in args.files:
        name = os.path.basename(path)
        with open(path, encoding="utf-8") as f:
            original = f.read()
        try:
            opts = _hlo.HloPrintOptions.fingerprint()
            expected = _hlo.hlo_module_from_text(original).to_string(opts)
            again = _hlo.hlo_module_from_text(original).to_string(opts)
        except Exception as e:
            skipped += 1
            print(f"skipped: {name}: XLA rejects the original: {str(e).splitlines()[0][:120]}")
            continue
        if again != expected:
            skipped += 1
            print(f"skipped: {name}: XLA's canonical text differs between two reads")
            continue
        # The first block is the module header (`HloModule , entry_computation_layout=...`).
        want = blocks(expected.split("\n\n", 1)[1] if "\n\n" in expected else "")
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
            got = blocks(f.read())
        if got == want:
            ok += 1
            continue
        if name in args.known:
            known += 1
            print(f"known difference: {name}")
            continue
        failed += 1
        print(f"FAIL {name}: canonical text differs")
        missing = [b for b in want if b not in got]
        extra = [b for b in got if b not in want]
        if missing and extra:
            diff = difflib.unified_diff(missing[0].splitlines(), extra[0].splitlines(),
                                        "xla", "hlo-opt", lineterm="", n=1)
            for line in list(diff)[:20]:
                print("    " + line[:200])
        else:
            print(f"    {len(want)} blocks from XLA, {len(got)} from hlo-opt")
    total = ok + failed + known
    print(f"canonical: {ok} of {total} modules match ({known} known differences, {skipped} skipped)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
