"""The installed package is what the release wheels are
(scripts/build_wheels.sh, docs/python.md "Wheels"): one abi3 extension for
CPython >= 3.10, an ELF file of this machine's architecture that needs no
library outside the manylinux set; and scripts/check_wheel.py, which checks
the release wheels, refuses a wheel that is not one of them.
"""

from __future__ import annotations

import importlib.metadata
import platform
import re
import sys
import zipfile
from pathlib import Path

import pytest

import hlo_opt
from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import check_wheel  # noqa: E402

EXTENSION = Path(hlo_opt._native.__file__)


def test_the_installed_package_is_one_abi3_extension_for_cpython_3_10_and_newer() -> None:
    dist = importlib.metadata.distribution("hlo-opt")
    assert Path(dist.locate_file("hlo_opt/_native.abi3.so")) == EXTENSION
    tags = re.findall(r"^Tag: (\S+)$", dist.read_text("WHEEL") or "", re.M)
    assert tags and all(t.startswith("cp310-abi3-") for t in tags), tags
    assert dist.metadata["Requires-Python"] == ">=3.10"
    assert [str(f) for f in dist.files or [] if str(f).endswith(".so")] == ["hlo_opt/_native.abi3.so"]


def test_the_extension_is_of_this_machine_and_needs_only_manylinux_libraries() -> None:
    arch, needed, versions = check_wheel.elf_needs(EXTENSION.read_bytes())
    assert arch == platform.machine()
    assert "libc.so.6" in needed and set(needed) <= check_wheel.ALLOWED_LIBS, needed
    assert check_wheel.glibc_versions(versions), versions  # its glibc symbol versions were read


def wheel(folder: Path, platforms: str, extension: bytes, python: str = ">=3.10") -> str:
    """A wheel file holding `extension` as hlo_opt's, tagged for `platforms`."""
    folder.mkdir(exist_ok=True)
    path = folder / f"hlo_opt-0.1.0-cp310-abi3-{platforms}.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("hlo_opt/__init__.py", "")
        z.writestr("hlo_opt/_native.abi3.so", extension)
        tags = "".join(f"Tag: cp310-abi3-{p}\n" for p in platforms.split("."))
        z.writestr("hlo_opt-0.1.0.dist-info/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n{tags}")
        z.writestr("hlo_opt-0.1.0.dist-info/METADATA", f"Name: hlo-opt\nRequires-Python: {python}\n")
    return str(path)


def test_check_wheel_takes_a_manylinux_wheel_and_refuses_any_other(tmp_path: Path) -> None:
    so = EXTENSION.read_bytes()
    arch = platform.machine()
    newest = check_wheel.glibc_versions(check_wheel.elf_needs(so)[2])[-1]
    ok = wheel(tmp_path, f"manylinux_2_17_{arch}", so)
    assert check_wheel.check(ok, None, newest).startswith(Path(ok).name + ": ok")
    other = "aarch64" if arch == "x86_64" else "x86_64"
    refused = {
        "newer than": (ok, newest[:-1] + (newest[-1] - 1,)),  # a symbol newer than the baseline
        "not a manylinux tag": (wheel(tmp_path, f"linux_{arch}", so), newest),
        f"is for {arch}, not {other}": (wheel(tmp_path, f"manylinux_2_17_{other}", so), newest),
        "Python >= 3.10": (wheel(tmp_path / "py", f"manylinux_2_17_{arch}", so, ">=3.8"), newest),
        "not an ELF file": (wheel(tmp_path / "elf", f"manylinux_2_17_{arch}", b"#!/bin/sh\n"), newest),
    }
    for why, (path, glibc) in refused.items():
        with pytest.raises(check_wheel.WheelError, match=re.escape(why)):
            check_wheel.check(path, None, glibc)
