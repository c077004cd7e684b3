//! The layout pass decides as it did before incremental scoring (issue 29):
//! `hlo-opt --pass=layout` with the embedded default model prints, byte for
//! byte, what main printed when it scored every configuration with the whole
//! head (`testdata/layout/decisions/`, its README says how they were made):
//! at default options on every module of `testdata/layout/` (the trust
//! region's search is exhaustive on tpugraphs_unet3d; elsewhere it combines
//! the gaining single changes, of which there are none, and keeps the
//! compiler default as main did), with `--trust-radius all` on every module
//! of `testdata/layout/` (today's unbounded search, exhaustive on
//! tpugraphs_unet3d, genetic elsewhere: the same path as before incremental
//! scoring, which on transformer_bert ended elsewhere when the incremental
//! sums' rounding reordered a near-tie), and on the shared corpus's mlp.pre
//! (exhaustive at default options) and bert_base.pre (`--trust-radius all`,
//! genetic; skipped without `../shared`).
//!
//! Needs ONNX Runtime (the embedded model); records a skip without it.

use std::path::PathBuf;
use std::process::Command;

#[path = "support/report.rs"]
mod report;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn ort_available() -> bool {
    match costmodel::onnx::environment() {
        Ok(_) => true,
        Err(e) => {
            report::skipped(&format!("ONNX Runtime unavailable: {e}"));
            false
        }
    }
}

/// Runs the layout pass on `input` with `flags`; its output must equal the
/// recorded `decisions/expected`.
fn decides_as_recorded(input: &PathBuf, flags: &[&str], expected: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_hlo-opt"))
        .arg("--pass=layout")
        .args(flags)
        .arg(input)
        .current_dir(repo())
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{input:?} {flags:?}: {err}");
    let want_path = repo().join("testdata/layout/decisions").join(expected);
    let want = std::fs::read_to_string(&want_path).expect("recorded output");
    let got = String::from_utf8_lossy(&out.stdout);
    assert!(
        got == want,
        "{input:?} {flags:?}: the output differs from {want_path:?} (main's decision before incremental scoring)"
    );
}

#[test]
fn the_embedded_model_decides_as_before_on_the_layout_modules() {
    if !ort_available() {
        return;
    }
    report::ran();
    for name in ["transformer_bert", "convnet_unet3d", "tpugraphs_unet3d"] {
        let input = repo().join(format!("testdata/layout/{name}.hlo"));
        decides_as_recorded(&input, &[], &format!("{name}.default.hlo"));
        decides_as_recorded(
            &input,
            &["--trust-radius", "all"],
            &format!("{name}.trust-radius-all.hlo"),
        );
    }
}

#[test]
fn the_embedded_model_decides_as_before_on_the_shared_mlp() {
    let input = repo().join("../shared/corpus/jax/mlp.pre.hlo");
    if !input.exists() {
        report::skipped("../shared/corpus/jax/mlp.pre.hlo absent");
        return;
    }
    if !ort_available() {
        return;
    }
    report::ran();
    decides_as_recorded(&input, &[], "shared_jax_mlp.pre.default.hlo");
}

#[test]
fn the_unbounded_search_decides_as_before_on_the_shared_bert_base() {
    let input = repo().join("../shared/corpus/jax/bert_base.pre.hlo");
    if !input.exists() {
        report::skipped("../shared/corpus/jax/bert_base.pre.hlo absent");
        return;
    }
    if !ort_available() {
        return;
    }
    report::ran();
    decides_as_recorded(
        &input,
        &["--trust-radius", "all"],
        "shared_jax_bert_base.pre.trust-radius-all.hlo",
    );
}
