#!/usr/bin/env python3
"""Writes an HLO module whose entry computation runs the input's entry N times.

Usage: replicate_hlo.py IN.hlo N > OUT.hlo

Every instruction of the entry computation except the parameters is copied N
times with its name suffixed `.rK` (its operands renamed with it); the copies
share the parameters and the other computations; the new root is a tuple of
the N copies of the old root. The module header loses its
`entry_computation_layout` (the result shape changes). Used by
scripts/bench-memory to make modules larger than the corpus's with real
structure (benchmark input, not a test fixture).
"""
import re
import sys

TOKEN = re.compile(r"%?[A-Za-z_][\w.\-]*")


def main() -> None:
    path, n = sys.argv[1], int(sys.argv[2])
    lines = open(path, encoding="utf-8").read().split("\n")
    start = next(i for i, l in enumerate(lines) if l.startswith("ENTRY"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("}"))
    body = lines[start + 1 : end]
    defined = {}
    params = set()
    root = None
    for l in body:
        m = re.match(r"\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$", l)
        if not m:
            continue
        name = m.group(2)
        if re.search(r"\bparameter\(\d+\)", m.group(3)):
            params.add(name)
        else:
            defined[name] = True
        if m.group(1):
            root = (name, m.group(3))
    if root is None:
        sys.exit("no ROOT in the entry computation")
    root_shape = shape_prefix(root[1])

    def rename(line: str, k: int) -> str:
        head, sep, tail = line.partition(", metadata=")
        out = TOKEN.sub(
            lambda t: t.group(0) + f".r{k}"
            if t.group(0).lstrip("%") in defined
            else t.group(0),
            head,
        )
        return out + sep + tail

    out = []
    header = lines[0]
    first = header.split(",")[0]
    out.append(first + f"_x{n}")
    out.extend(lines[1 : start + 1])
    for l in body:
        if TOKEN.search(l) and any(l.strip().lstrip("%").startswith(p + " ") or l.strip().lstrip("%").startswith(p + "=") for p in params):
            out.append(l)
    for k in range(n):
        for l in body:
            m = re.match(r"\s*(ROOT\s+)?%?([\w.\-]+)\s*=", l)
            if not m or m.group(2) in params:
                continue
            out.append(rename(l.replace("ROOT ", "", 1), k))
    roots = ", ".join(f"{root[0]}.r{k}" for k in range(n))
    shape = "(" + ", ".join([root_shape] * n) + ")"
    out.append(f"  ROOT replicas.tuple = {shape} tuple({roots})")
    out.extend(lines[end:])
    sys.stdout.write("\n".join(out))


def shape_prefix(rhs: str) -> str:
    """The shape at the start of an instruction's right-hand side."""
    depth = 0
    for i, c in enumerate(rhs):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == " " and depth == 0:
            return rhs[:i]
    return rhs


if __name__ == "__main__":
    main()
