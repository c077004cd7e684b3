//! The ridge term of the layout model (`train.py --ridge-blend`, the shipped
//! default's design): `costmodel/training/test_ridge_blend.py` fits it after a
//! short training on real graph slices and fails unless the ridge ranker ranks
//! its training graphs, the head's ranking becomes the ridge's when the
//! network's weight is scaled away, and the exported ONNX stages score as the
//! JAX model does.
//!
//! Needs `HLO_OPT_PYTHON` (a Python with the training requirements, set by
//! `scripts/test`); records the skip (`report::skipped`) and returns without it.

#[path = "../../tests/support/report.rs"]
mod report;

use std::path::PathBuf;
use std::process::Command;

#[test]
fn ridge_blend_ranks_and_is_used_by_the_exported_head() {
    let Some(py) = std::env::var("HLO_OPT_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
    else {
        report::skipped("HLO_OPT_PYTHON is not set (scripts/test sets it)");
        return;
    };
    report::ran();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("training/test_ridge_blend.py");
    let out = Command::new(py)
        .arg(&script)
        .env("JAX_PLATFORMS", "cpu")
        .output()
        .expect("run test_ridge_blend.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.starts_with("ok: "), "{stdout}");
}
