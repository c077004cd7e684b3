//! Conformance with XLA's own parser: our printed text of each module must be
//! read by XLA (jaxlib, via `hlo/conformance/check_xla.py`) as the same module
//! as the original. Runs over `testdata/hlo`, and over the whole shared corpus
//! when `../shared` exists. Needs `HLO_OPT_PYTHON` (a Python with the pinned
//! jaxlib; `scripts/test` sets it); skipped with a message otherwise.

mod common;
#[path = "../../tests/support/report.rs"]
mod report;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// Modules of the shared corpus known to differ, with the reason. Empty:
/// XLA reads every printed module as the same module as the original (`send`
/// and `recv-done` take their data shape from the operand, as in XLA).
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[];

/// Prints every file into a fresh folder under the target dir and runs the
/// checker; returns its summary line.
fn check(label: &str, files: &[PathBuf]) -> Option<String> {
    let Ok(python) = std::env::var("HLO_OPT_PYTHON") else {
        report::skipped("HLO_OPT_PYTHON is not set (XLA conformance needs jaxlib)");
        return None;
    };
    report::ran();
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("conformance-{label}"));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).expect("create output folder");
    let mut args = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).expect("readable module");
        let name = f.file_name().expect("file name");
        match hlo::parse_module_named(&text, &f.display().to_string()) {
            Ok(m) => {
                std::fs::write(out.join(name), hlo::print_module(&m)).expect("write printed module")
            }
            Err(e) => println!("not parsed by hlo-opt: {e}"),
        }
        args.push(f.clone());
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/check_xla.py");
    let res = Command::new(&python)
        .arg(&script)
        .arg("--printed-dir")
        .arg(&out)
        .args(KNOWN_DIFFERENCES.iter().flat_map(|(n, _)| ["--known", n]))
        .args(&args)
        .output()
        .expect("run check_xla.py");
    let stdout = String::from_utf8_lossy(&res.stdout);
    println!("{stdout}");
    assert!(
        res.status.success(),
        "XLA conformance failed for {label}:\n{stdout}\n{}",
        String::from_utf8_lossy(&res.stderr)
    );
    stdout.lines().last().map(str::to_string)
}

#[test]
fn testdata_conforms_to_xla() {
    let files = hlo_files(&testdata().join("hlo"));
    assert!(!files.is_empty());
    check("testdata", &files);
}

#[test]
fn shared_corpus_conforms_to_xla() {
    let Some(shared) = shared() else {
        report::skipped("../shared is absent");
        return;
    };
    let files = hlo_files_in(&shared, &SHARED_VALID);
    check("shared", &files);
}
