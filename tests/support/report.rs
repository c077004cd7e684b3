//! Visible optional checks: tests that need something outside the repository
//! (`../shared`, the `.venv` Python with jaxlib, ONNX Runtime, valgrind, a C
//! compiler) record whether they ran or were skipped, and why.
//!
//! Every crate's tests include this file (`#[path]`), so there is one
//! format: with `HLO_OPT_TEST_REPORT` set to a folder (as `scripts/test` sets
//! it) each record is one line appended to `<folder>/checks.tsv`:
//! `ran<TAB>check` or `skipped<TAB>check<TAB>why` (one `write` per line, on a
//! file opened for appending, so concurrent tests do not mix lines). `check`
//! is `<test binary>::<test>`, the test being the name libtest gives the
//! thread the test runs on; a test that records several times counts once
//! (as skipped if any record says so).
//! `scripts/test` counts them at the end and, under CI with `../shared`
//! present, fails when a check was skipped. A skip is also printed on stderr
//! (`skipped: check: why`) for `cargo test -- --nocapture`.
#![allow(dead_code)]

use std::io::Write;

fn record(line: &str) {
    let Some(dir) = std::env::var_os("HLO_OPT_TEST_REPORT") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let _ = std::fs::create_dir_all(&dir);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("checks.tsv"));
    match file {
        Ok(mut f) => {
            if let Err(e) = f.write_all(format!("{line}\n").as_bytes()) {
                eprintln!("cannot record `{line}` in {}: {e}", dir.display());
            }
        }
        Err(e) => eprintln!("cannot record `{line}` in {}: {e}", dir.display()),
    }
}

/// `<test binary>::<test>` of the calling test.
fn check_name() -> String {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|stem| match stem.rsplit_once('-') {
            Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_string(),
            _ => stem,
        })
        .unwrap_or_else(|| "tests".into());
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("main");
    format!("{binary}::{test}")
}

/// The calling test's optional check ran (what it needs was there).
pub fn ran() {
    record(&format!("ran\t{}", check_name()));
}

/// The calling test's optional check was skipped because of `why`.
pub fn skipped(why: &str) {
    let why = why.replace(['\t', '\n'], " ");
    let check = check_name();
    eprintln!("skipped: {check}: {why}");
    record(&format!("skipped\t{check}\t{why}"));
}

/// Whether the Python `py` imports this checkout's `hlo_opt` package, which
/// the training code (`costmodel/training`) reads data through; records a
/// skip saying how to install it when not (or when an older install lacks
/// `hlo_opt.prune_khop`, which training needs).
pub fn python_has_hlo_opt(py: &std::ffi::OsStr) -> bool {
    let ok = std::process::Command::new(py)
        .args([
            "-c",
            "import sys, hlo_opt; sys.exit(0 if hasattr(hlo_opt, 'prune_khop') else 1)",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skipped(
            "the Python lacks this checkout's hlo_opt package, which costmodel/training reads \
             data through (bash scripts/test installs it; or pip install --no-build-isolation .)",
        );
    }
    ok
}

/// `HLO_OPT_PYTHON` when it is set and imports `modules` (comma-separated,
/// e.g. `lightgbm, onnxmltools`); otherwise records a skip saying which
/// (`requirements` names the file that pins them) and gives `None`.
pub fn python_with(modules: &str, requirements: &str) -> Option<std::ffi::OsString> {
    let Some(py) = std::env::var_os("HLO_OPT_PYTHON").filter(|p| !p.is_empty()) else {
        skipped("HLO_OPT_PYTHON is not set");
        return None;
    };
    let ok = std::process::Command::new(&py)
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skipped(&format!("the Python lacks {modules} ({requirements})"));
        return None;
    }
    ran();
    Some(py)
}
