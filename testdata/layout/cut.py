"""Cuts a small, real module out of a large HLO module (how the inputs of
this folder were made; see README.md).

Usage: cut.py IN.hlo OUT.hlo N [OPCODES]

Keeps, from the entry computation, the first N instructions whose opcode is
in OPCODES (default: convolution,dot) together with everything they
(transitively) use, and every computation those instructions call. The new
root is a tuple of the N kept instructions. Unused entry parameters are
kept (parameter numbers stay as they are). Header attributes that name the
old result (entry_computation_layout, input_output_alias) are dropped;
instructions are otherwise copied verbatim, so the cut is as real as its
source.
"""

import re
import sys

INST = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
REF = re.compile(r"%?([\w.\-]+)")


def opcode_of(rhs):
    # shape then opcode(...): skip the shape, which may be a tuple.
    depth = 0
    i = 0
    while i < len(rhs):
        c = rhs[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == " " and depth == 0:
            break
        i += 1
    m = re.match(r"\s*([a-z][a-z\-]*)\(", rhs[i:])
    return m.group(1) if m else None


def main():
    src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    wanted = set((sys.argv[4] if len(sys.argv) > 4 else "convolution,dot").split(","))
    lines = open(src).read().split("\n")
    # Split into header and computations.
    comps = []  # (name, header line, body lines, is_entry)
    header = None
    cur = None
    for line in lines:
        if line.startswith("HloModule"):
            header = line
            continue
        m = re.match(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$", line)
        if m and cur is None:
            cur = [m.group(2), line, [], bool(m.group(1))]
            continue
        if line.strip() == "}" and cur is not None:
            comps.append(cur)
            cur = None
            continue
        if cur is not None:
            cur[2].append(line)
    comp_names = {c[0] for c in comps}
    entry = [c for c in comps if c[3]][0]
    defs = {}
    order = []
    for line in entry[2]:
        m = INST.match(line)
        if m:
            defs[m.group(2)] = line
            order.append(m.group(2))
    picked = [name for name in order if opcode_of(INST.match(defs[name]).group(3)) in wanted][:n]
    if not picked:
        sys.exit("no instruction with the wanted opcodes")
    keep, callees = set(), set()
    work = list(picked)
    while work:
        x = work.pop()
        if x in keep:
            continue
        keep.add(x)
        rhs = INST.match(defs[x]).group(3)
        rhs = re.sub(r",?\s*control-predecessors=\{[^}]*\}", "", rhs)
        for r in REF.findall(rhs):
            if r in defs and r not in keep:
                work.append(r)
            elif r in comp_names:
                callees.add(r)
    # Parameters always stay.
    for name in order:
        if opcode_of(INST.match(defs[name]).group(3)) == "parameter":
            keep.add(name)
    # Transitive callees.
    by_name = {c[0]: c for c in comps}
    work = list(callees)
    while work:
        c = work.pop()
        for line in by_name[c][2]:
            for r in REF.findall(line):
                if r in comp_names and r not in callees and r != c:
                    callees.add(r)
                    work.append(r)
    header = re.sub(r",\s*entry_computation_layout=\{.*?\}(?=,\s*\w+=|$)", "", header)
    header = re.sub(r",\s*input_output_alias=\{.*?\}(?=,\s*\w+=|$)", "", header)
    out = [header, ""]
    for c in comps:
        if c[3] or c[0] not in callees:
            continue
        out += [c[1]] + c[2] + ["}", ""]
    shapes = []
    body = []
    for name in order:
        if name not in keep:
            continue
        line = defs[name]
        line = re.sub(r"^(\s*)ROOT\s+", r"\1", line)
        line = re.sub(r",?\s*control-predecessors=\{[^}]*\}", "", line)
        body.append(line)
    for name in picked:
        rhs = INST.match(defs[name]).group(3)
        shapes.append(rhs.split(" ")[0])
    sig = re.sub(r"\)\s*->.*\{\s*$", ") -> (" + ", ".join(shapes) + ") {", entry[1])
    out.append(sig)
    out += body
    out.append("  ROOT %cut.root = (" + ", ".join(shapes) + ") tuple(" + ", ".join("%" + p for p in picked) + ")")
    out += ["}", ""]
    open(dst, "w").write("\n".join(out))


if __name__ == "__main__":
    main()
