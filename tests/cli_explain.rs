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
//! - the README's other reports are snapshot-tested too: `--explain=all
//!   --trust-radius all`, the tile pass's `--explain --top-k 3`, and
//!   `--measure=xla-cpu --explain` with its measured times and the decision
//!   they make redacted (they vary run to run); there each ratio is checked
//!   to equal its time over the compiler default's, and the rank lines to
//!   name the nodes each rank changes.
//!
//! Needs ONNX Runtime (`ORT_DYLIB_PATH`, as `scripts/test` sets it);
//! skipped visibly without it (and the measured report without XLA's CPU
//! plugin).

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

/// The report of a successful run of `args`, the search's timing line left out.
fn report_of_run(args: &[&str]) -> String {
    let o = hlo_opt(args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    stderr(&o)
        .lines()
        .filter(|l| !l.contains(" search scored "))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn readme_explain_all_beyond_the_trust_region() {
    if !have_ort() {
        return;
    }
    insta::assert_snapshot!(report_of_run(&[
        BERT,
        "--pass=layout",
        "--explain=all",
        "--trust-radius",
        "all",
        "-o",
        "/dev/null",
    ]));
}

#[test]
fn readme_tile_explain() {
    if !have_ort() {
        return;
    }
    insta::assert_snapshot!(report_of_run(&[
        "testdata/tile/modules/mlp.post.hlo",
        "--pass=tile",
        "--explain",
        "--top-k",
        "3",
        "-o",
        "/dev/null",
    ]));
}

/// One measured line, `  WHO: T ms, R x default[, kept]`: (who, T, R, kept).
fn measured_line(line: &str) -> Option<(String, f64, f64, bool)> {
    let (who, rest) = line.strip_prefix("  ")?.split_once(": ")?;
    let (t, rest) = rest.split_once(" ms, ")?;
    let (r, rest) = rest.split_once(" x default")?;
    Some((
        who.to_string(),
        t.parse().ok()?,
        r.parse().ok()?,
        rest == ", kept",
    ))
}

/// The measured report with what varies between runs redacted: the times,
/// ratios and rounds, and the decision they make.
fn redact_measured(report: &str) -> String {
    let mut out = String::new();
    for line in report.lines() {
        let line = if let Some((who, ..)) = measured_line(line) {
            format!("  {who}: [T] ms, [R] x default")
        } else if line.starts_with("measured on ") {
            "measured on [PLATFORM (PLUGIN, PJRT VERSION)]: [ROUNDS]; control/default [R], spread [S]".into()
        } else if let Some((head, _)) = line
            .starts_with("layout: measured ")
            .then(|| line.rsplit_once("): "))
            .flatten()
        {
            format!("{head}): [DECISION]")
        } else if line.starts_with("layout: decision: ") {
            "layout: decision: [DECISION]".into()
        } else if line.starts_with("layout: result: ") {
            "layout: result: [RESULT]".into()
        } else {
            line.to_string()
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[test]
fn readme_measured_report_adds_up() {
    if !have_ort() {
        return;
    }
    if let Err(e) = pjrt::find_plugin(None) {
        report::skipped(&e.to_string());
        return;
    }
    let report = report_of_run(&[
        BERT,
        "--pass=layout",
        "--measure=xla-cpu",
        "--top-k",
        "3",
        "--measure-budget",
        "5",
        "--explain",
        "-o",
        "/dev/null",
    ]);
    let measured: Vec<_> = report.lines().filter_map(measured_line).collect();
    assert_eq!(measured.len(), 4, "{report}");
    let default = measured
        .iter()
        .find(|(who, ..)| who == "compiler default")
        .expect("the default is measured");
    for (who, t, r, _) in &measured {
        // Printed to 3 decimals each: equal within their rounding.
        let implied = t / default.1;
        assert!(
            (implied - r).abs() <= 0.0005 + 0.0005 * (1.0 + implied) / default.1 + 1e-9,
            "{who}: {t} ms / {} ms = {implied:.4}, printed {r}\n{report}",
            default.1
        );
    }
    assert_eq!(
        measured.iter().filter(|m| m.3).count(),
        1,
        "one candidate is kept: {report}"
    );
    // The ranks say which nodes each changes, so equal predictions differ.
    let ranks = report
        .lines()
        .find(|l| l.starts_with("layout: considered for measurement: "))
        .expect("the ranks");
    assert!(ranks.contains("nodes changed: %"), "{ranks}");
    insta::assert_snapshot!(redact_measured(&report));
}
