"""Shared helpers of the Python package's tests, and the record of each
test file's outcome in scripts/test's report (tests/support/report.rs's format:
`ran<TAB>check` or `skipped<TAB>check<TAB>why` in $HLO_OPT_TEST_REPORT/checks.tsv),
so that a skipped optional check (no jax, no PJRT plugin) shows in the summary."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TESTDATA = ROOT / "testdata"


def binary(name: str) -> Path:
    """A release binary of this checkout (built by `cargo test --release`)."""
    exe = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release" / name
    if not exe.is_file():
        pytest.fail(f"{exe} is missing: run `cargo build --release` first")
    return exe


def cli(name: str, *args: str | os.PathLike, check: bool = False) -> subprocess.CompletedProcess:
    """Runs a CLI of this checkout; stdout and stderr as bytes."""
    return subprocess.run(
        [str(binary(name)), *map(str, args)], capture_output=True, check=check
    )


def plugin_available() -> bool:
    """Whether XLA's CPU PJRT plugin (the `xla-cpu-pjrt` package) is installed."""
    import importlib.util

    try:
        return importlib.util.find_spec("xla_plugins.xla_cpu_pjrt") is not None
    except ImportError:
        return False


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    folder = os.environ.get("HLO_OPT_TEST_REPORT")
    if not folder:
        return
    # One check per test file: it ran when its tests ran, and counts as
    # skipped when any of them was (scripts/test-summary's rule).
    check = f"pytest::{report.nodeid.split('::', 1)[0]}"
    if report.when == "call" and report.passed:
        line = f"ran\t{check}\n"
    elif report.skipped:
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        line = f"skipped\t{check}\t{reason}\n"
    else:
        return
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "checks.tsv"), "a", encoding="utf-8") as f:
        f.write(line)
