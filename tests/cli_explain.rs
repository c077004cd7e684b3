//! The layout pass's `--explain`, as the quickstart shows it
//! (`scripts/quickstart`: the embedded model on
//! testdata/layout/transformer_bert.hlo), read as a compiler engineer's
//! report.
//!
//! Specification:
//! - the report names the space (exactly or as a power of ten, never capped),
//!   the trust region, the model with its error and the threshold (once),
//!   each change considered with its own predicted change in percent
//!   (negative is faster) and the model's error beside it, the decision and
//!   who made it (snapshot: `snapshots/cli_explain__quickstart_explain.snap`,
//!   the timing line left out);
//! - `--explain-json FILE` writes the same report as JSON for tools;
//! - `--trust-radius all` applying a configuration beyond the region where
//!   the model's error was measured says so in a warning, with or without
//!   `--explain`.
//!
//! Needs ONNX Runtime (`ORT_DYLIB_PATH`, as `scripts/test` sets it);
//! skipped visibly without it.

#[path = "support/report.rs"]
mod report;
use std::process::{Command, Output};

const BERT: &str = "testdata/layout/transformer_bert.hlo";

fn hlo_opt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hlo-opt"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("hlo-opt runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn have_ort() -> bool {
    if std::env::var_os("ORT_DYLIB_PATH").is_none() {
        report::skipped("ORT_DYLIB_PATH is not set (the layout pass needs ONNX Runtime)");
        return false;
    }
    report::ran();
    true
}

fn out_path(name: &str) -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli_explain");
    std::fs::create_dir_all(&dir).expect("tmp dir");
    dir.join(name).display().to_string()
}

#[test]
fn quickstart_explain() {
    if !have_ort() {
        return;
    }
    let out = out_path("bert.layout.hlo");
    let o = hlo_opt(&["--pass=layout", "--explain", BERT, "-o", &out]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report: String = stderr(&o)
        .lines()
        .filter(|l| !l.contains(" search scored "))
        .map(|l| format!("{l}\n"))
        .collect();
    insta::assert_snapshot!(report);
}

#[test]
fn explain_json_carries_the_decision_for_tools() {
    if !have_ort() {
        return;
    }
    let json_path = out_path("bert.explain.json");
    let out = out_path("bert.json-run.hlo");
    let o = hlo_opt(&[
        "--pass=layout",
        "--explain-json",
        &json_path,
        BERT,
        "-o",
        &out,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&json_path).expect("the JSON report");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let layout = &doc["passes"][0];
    assert_eq!(layout["pass"], "layout");
    assert_eq!(layout["nodes"], 50);
    assert_eq!(layout["decision"]["applied"], false);
    assert_eq!(layout["decision"]["decided_by"], "trust region");
    let error = layout["model"]["error_pct"]
        .as_f64()
        .expect("the model's error");
    assert!((error - 27.73).abs() < 0.01, "{error}");
    let considered = layout["considered"].as_array().expect("considered");
    // No single change gains the model's error alone: the search's best is
    // the best single change, which the check reverts.
    assert_eq!(considered.len(), 1, "{text}");
    for c in considered {
        assert_eq!(c["outcome"], "reverted", "{c}");
        let p = c["predicted_change_pct"].as_f64().expect("a prediction");
        // Reverted: predicted faster, but by less than the model's error.
        assert!(p < 0.0 && p > -error, "{c}");
    }
    // The space is not capped at the largest f32 (3.4e38).
    let log10 = layout["space"]["log10"].as_f64().expect("log10");
    assert!(log10 > 39.0, "{log10}");
}

#[test]
fn leaving_the_trust_region_is_warned_about() {
    if !have_ort() {
        return;
    }
    let out = out_path("bert.all.hlo");
    // Without --explain too: a warning is not an explanation.
    let o = hlo_opt(&["--pass=layout", "--trust-radius", "all", BERT, "-o", &out]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("layout: warning: the applied configuration changes ")
            && err
                .contains("the model's error was measured on configurations that change at most 3"),
        "{err}"
    );
    // Inside the region: no warning.
    let o = hlo_opt(&["--pass=layout", BERT, "-o", &out]);
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
}
