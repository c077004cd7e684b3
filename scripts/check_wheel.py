#!/usr/bin/env python3
"""Checks a release wheel of the Python package (scripts/build_wheels.sh):

- its file name and the `Tag:` lines of its WHEEL file: `cp310-abi3-` with
  manylinux tags of the architecture and of a glibc no newer than --glibc;
- its METADATA's `Requires-Python: >=3.10`;
- its one extension, `hlo_opt/_native.abi3.so`: an ELF shared object of
  that architecture (64-bit, little-endian), which needs no library outside
  the manylinux set (glibc's, libgcc_s) and no glibc symbol version newer
  than --glibc.

Usage: check_wheel.py [--arch x86_64|aarch64] [--glibc 2.17] WHEEL...
Prints what it found; exit status 1 with the reason when a check fails.
Needs only the standard library (the ELF reading is `elf_needs`, which
python/tests/test_packaging.py uses on the installed extension too).
"""

from __future__ import annotations

import argparse
import re
import struct
import sys
import zipfile

# e_machine of the ELF header.
MACHINES = {62: "x86_64", 183: "aarch64"}
# The libraries a manylinux wheel may need from the system (PEP 600's
# manylinux_2_17 list, less the X11 and GL ones).
ALLOWED_LIBS = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
    "libutil.so.1", "libgcc_s.so.1", "libcrypt.so.1", "libnsl.so.1",
    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
}

SHT_DYNAMIC = 6
SHT_GNU_VERNEED = 0x6FFFFFFE
DT_NEEDED = 1


class WheelError(Exception):
    pass


def elf_needs(data: bytes) -> tuple[str, list[str], dict[str, list[str]]]:
    """The architecture of a 64-bit little-endian ELF file, the libraries it
    needs (DT_NEEDED) and the symbol versions it needs of each
    (.gnu.version_r)."""
    if data[:4] != b"\x7fELF":
        raise WheelError("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise WheelError(f"not a 64-bit little-endian ELF file (class {data[4]}, data {data[5]})")
    (machine,) = struct.unpack_from("<H", data, 0x12)
    arch = MACHINES.get(machine, f"e_machine {machine}")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, _ = struct.unpack_from("<HHH", data, 0x3A)
    sections = []
    for i in range(shnum):
        _, sh_type, _, _, off, size, link, info, _, _ = struct.unpack_from(
            "<IIQQQQIIQQ", data, shoff + i * shentsize)
        sections.append((sh_type, off, size, link, info))

    def string(strtab: int, at: int) -> str:
        start = sections[strtab][1] + at
        return data[start:data.index(b"\0", start)].decode()

    needed: list[str] = []
    versions: dict[str, list[str]] = {}
    for sh_type, off, size, link, info in sections:
        if sh_type == SHT_DYNAMIC:
            for at in range(off, off + size, 16):
                tag, val = struct.unpack_from("<qQ", data, at)
                if tag == DT_NEEDED:
                    needed.append(string(link, val))
        elif sh_type == SHT_GNU_VERNEED:
            at = off
            for _ in range(info):
                _, cnt, file, aux, nxt = struct.unpack_from("<HHIII", data, at)
                names = versions.setdefault(string(link, file), [])
                a = at + aux
                for _ in range(cnt):
                    _, _, _, name, anext = struct.unpack_from("<IHHII", data, a)
                    names.append(string(link, name))
                    a += anext
                at += nxt
    return arch, needed, versions


def glibc_versions(versions: dict[str, list[str]]) -> list[tuple[int, ...]]:
    return sorted({tuple(int(p) for p in v[6:].split("."))
                   for names in versions.values() for v in names if v.startswith("GLIBC_")})


def check(path: str, arch: str | None, glibc: tuple[int, ...]) -> str:
    name = path.rsplit("/", 1)[-1]
    m = re.fullmatch(r"hlo_opt-[^-]+-cp310-abi3-([^-]+)\.whl", name)
    if not m:
        raise WheelError(f"{name}: not named hlo_opt-VERSION-cp310-abi3-PLATFORM.whl")
    platforms = m.group(1).split(".")
    if arch is None:
        pm = re.fullmatch(r"(?:manylinux_\d+_\d+|manylinux\d+|linux)_(\w+)", platforms[0])
        if not pm:
            raise WheelError(f"{name}: platform {platforms[0]} names no architecture")
        arch = pm.group(1)
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        info = next(n for n in names if n.endswith(".dist-info/WHEEL"))
        tags = re.findall(r"^Tag: (\S+)$", z.read(info).decode(), re.M)
        meta = z.read(info.replace("WHEEL", "METADATA")).decode()
        exts = [n for n in names if n.endswith(".so")]
        if exts != ["hlo_opt/_native.abi3.so"]:
            raise WheelError(f"{name}: extensions {exts}, expected only hlo_opt/_native.abi3.so")
        so = z.read(exts[0])
    if sorted(tags) != sorted(f"cp310-abi3-{p}" for p in platforms):
        raise WheelError(f"{name}: WHEEL tags {tags} differ from the file name's")
    for p in platforms:
        pm = re.fullmatch(r"manylinux(?:_(\d+)_(\d+)|2014)_(\w+)", p)
        if not pm:
            raise WheelError(f"{name}: platform {p} is not a manylinux tag")
        tag_glibc = (int(pm.group(1)), int(pm.group(2))) if pm.group(1) else (2, 17)
        if pm.group(3) != arch or tag_glibc > glibc:
            raise WheelError(f"{name}: platform {p}, expected manylinux for {arch}, glibc <= {fmt(glibc)}")
    if "Requires-Python: >=3.10" not in meta.splitlines():
        raise WheelError(f"{name}: METADATA does not require Python >= 3.10")
    elf_arch, needed, versions = elf_needs(so)
    if elf_arch != arch:
        raise WheelError(f"{name}: the extension is for {elf_arch}, not {arch}")
    outside = sorted(set(needed) - ALLOWED_LIBS)
    if outside:
        raise WheelError(f"{name}: the extension needs {outside}, outside the manylinux libraries")
    newest = max(glibc_versions(versions), default=())
    if newest > glibc:
        raise WheelError(f"{name}: the extension needs GLIBC_{fmt(newest)}, newer than {fmt(glibc)}")
    return (f"{name}: ok: tags {', '.join(tags)}; ELF {elf_arch}; needs {', '.join(needed)}; "
            f"newest glibc symbol GLIBC_{fmt(newest)}")


def fmt(v: tuple[int, ...]) -> str:
    return ".".join(map(str, v))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", choices=sorted(set(MACHINES.values())))
    ap.add_argument("--glibc", default="2.17", help="the oldest glibc the wheel must run on")
    ap.add_argument("wheels", nargs="+")
    args = ap.parse_args()
    glibc = tuple(int(p) for p in args.glibc.split("."))
    status = 0
    for w in args.wheels:
        try:
            print(check(w, args.arch, glibc))
        except (WheelError, OSError, zipfile.BadZipFile, struct.error, StopIteration, KeyError) as e:
            print(f"check_wheel: {w}: {e}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
