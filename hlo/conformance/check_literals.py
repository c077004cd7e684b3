#!/usr/bin/env python3
"""The literal values of hlo-opt's HloModuleProto against XLA's (jaxlib).

For each pair FILE OURS (an HLO text module and the HloModuleProto hlo-opt
wrote for it), a fresh XLA process parses FILE and serializes it
(`as_serialized_hlo_module_proto`); every instruction's `literal` (a
constant's values, a custom call's `literal=`) must hold the same values,
byte for byte, as the literal of the instruction of the same name in OURS.
Only the value fields are compared (the literal's shape is written by the
shape code and checked by check_proto.py), tuple literals element by
element.

This is what checks hlo-opt's values for elided literals `{...}`: XLA's
parser fills them from counters that live as long as the process, so each
module is parsed in a process of its own, and XLA prints large constants
elided, so check_proto.py's comparison of XLA's text cannot see them.

Usage: check_literals.py FILE OURS [FILE OURS ...]; exit 1 on any difference.
Modules XLA rejects are skipped (reported). Summary line:
`literal values: N of M literals match (K modules, S skipped)`.
"""
import subprocess
import sys


def varint(b, i):
    r = s = 0
    while True:
        if i >= len(b):
            raise ValueError("truncated varint")
        x = b[i]
        i += 1
        r |= (x & 0x7F) << s
        s += 7
        if x < 0x80:
            return r, i


def fields(b):
    """The (field number, wire type, value) of one message's wire format."""
    i, out = 0, []
    while i < len(b):
        key, i = varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise ValueError(f"wire type {wt}")
        out.append((f, wt, v))
    return out


def values(lit):
    """A LiteralProto's values: its fields other than the shape (1), tuple
    literals (10) as nested lists."""
    out = []
    for f, _, v in fields(lit):
        if f == 10:
            out.append(("tuple", values(v)))
        elif f != 1:
            out.append((f, v.hex() if isinstance(v, bytes) else v))
    return out


def literals(pb):
    """Instruction name -> literal values, over HloModuleProto.computations
    (3) . instructions (2) . literal (8)."""
    res = {}
    for f, _, comp in fields(pb):
        if f != 3:
            continue
        for g, _, inst in fields(comp):
            if g != 2:
                continue
            fs = fields(inst)
            name = next((v for (k, _, v) in fs if k == 1), b"").decode()
            for k, _, v in fs:
                if k == 8:
                    res[name] = values(v)
    return res


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--xla-proto":
        from jax._src.lib import hlo  # pinned jaxlib (see requirements.txt)

        with open(sys.argv[2], encoding="utf-8") as f:
            m = hlo.hlo_module_from_text(f.read())
        sys.stdout.buffer.write(m.as_serialized_hlo_module_proto())
        return 0
    args = sys.argv[1:]
    if not args or len(args) % 2:
        print(__doc__)
        return 2
    total = matched = failed = skipped = 0
    for path, ours_path in zip(args[::2], args[1::2]):
        # A fresh process per module: XLA's fill counters start at 0.
        res = subprocess.run([sys.executable, __file__, "--xla-proto", path],
                             capture_output=True)
        if res.returncode != 0:
            # Nothing to compare with (the text conformance test reports it).
            skipped += 1
            why = res.stderr.decode(errors="replace").strip().splitlines()
            why = [l for l in why if "error" in l] or why or ["?"]
            print(f"skipped: {path}: XLA rejects it: {why[-1][:200]}")
            continue
        xla = literals(res.stdout)
        with open(ours_path, "rb") as f:
            ours = literals(f.read())
        for name, want in xla.items():
            total += 1
            have = ours.get(name)
            if have == want:
                matched += 1
                continue
            failed += 1
            print(f"FAIL {path}: %{name}: XLA's literal {str(want)[:200]}, ours {str(have)[:200]}")
        for name in ours.keys() - xla.keys():
            failed += 1
            print(f"FAIL {path}: %{name}: a literal XLA's proto does not have")
    print(f"literal values: {matched} of {total} literals match "
          f"({len(args) // 2} modules, {skipped} skipped)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
