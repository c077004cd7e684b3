//! The test command's report of optional checks (`scripts/test`,
//! `scripts/test-summary`, `tests/support/report.rs`).
//!
//! Specification:
//! - the summary counts each check once (skipped if any record says so) and
//!   lists every skipped check with its reason;
//! - under CI (`CI=true`) with the shared corpus present, a skipped check
//!   fails the command; without CI, or without the corpus, it does not;
//! - no test announces a skip by printing alone (cargo hides test output):
//!   every skip goes through `report::skipped`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `scripts/test-summary` on `records` with `env`: (exit code, stdout + stderr).
fn summary(name: &str, records: &str, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("test_command")
        .join(name);
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("checks.tsv"), records).expect("write");
    let out = Command::new("bash")
        .arg(repo().join("scripts/test-summary"))
        .arg(&dir)
        .env_remove("CI")
        .envs(env.iter().copied())
        .output()
        .expect("run bash");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

const RECORDS: &str = "ran\troundtrip::a\n\
                       skipped\tverify::b\t../shared is absent\n\
                       ran\tverify::b\n\
                       ran\tc_api::c\n\
                       skipped\tc_api::d\tvalgrind is not installed\n";

#[test]
fn the_summary_counts_ran_and_skipped_checks_with_reasons() {
    let (code, text) = summary("counts", RECORDS, &[]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains(": 2 ran, 2 skipped"), "{text}");
    assert!(text.contains("  verify::b: ../shared is absent"), "{text}");
    assert!(
        text.contains("  c_api::d: valgrind is not installed"),
        "{text}"
    );
}

#[test]
fn ci_with_the_shared_corpus_fails_on_a_skipped_check() {
    let present = env!("CARGO_MANIFEST_DIR");
    let (code, text) = summary(
        "ci",
        RECORDS,
        &[("CI", "true"), ("HLO_OPT_SHARED", present)],
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("must run every optional check; 2 were skipped"),
        "{text}"
    );
    let (code, text) = summary(
        "ci_no_shared",
        RECORDS,
        &[("CI", "true"), ("HLO_OPT_SHARED", "/no/such/folder")],
    );
    assert_eq!(code, Some(0), "{text}");
    let all_ran = "ran\troundtrip::a\nran\tverify::b\n";
    let (code, text) = summary(
        "ci_all_ran",
        all_ran,
        &[("CI", "true"), ("HLO_OPT_SHARED", present)],
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains(": 2 ran, 0 skipped"), "{text}");
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = entry.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn every_skip_is_recorded_not_only_printed() {
    let mut files = Vec::new();
    for dir in [
        "tests",
        "hlo/tests",
        "costmodel/tests",
        "passes/tests",
        "ffi/tests",
    ] {
        rust_files(&repo().join(dir), &mut files);
    }
    assert!(files.len() > 20, "{} test files", files.len());
    let mut offenders = Vec::new();
    for f in files
        .iter()
        .filter(|f| !f.ends_with("tests/support/report.rs"))
    {
        let text = std::fs::read_to_string(f).expect("read");
        for (i, line) in text.lines().enumerate() {
            let l = line.trim_start();
            if (l.starts_with("println!(\"skipped") || l.starts_with("eprintln!(\"skipped"))
                || (l.starts_with("println!(") || l.starts_with("eprintln!("))
                    && l.contains("skipped:")
            {
                offenders.push(format!("{}:{}: {l}", f.display(), i + 1));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "skips printed without report::skipped:\n{}",
        offenders.join("\n")
    );
}
