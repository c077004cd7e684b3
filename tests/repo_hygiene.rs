//! What the repository tracks: sources, not build products.
//!
//! Specification: no tracked path has a `target` folder in it (cargo's build
//! folder, and criterion's reports, which the benches write under the
//! workspace's `target/criterion`). Skipped, visibly, outside a git checkout.

#[path = "support/report.rs"]
mod report;
use std::process::Command;

#[test]
fn no_build_output_is_tracked() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = match Command::new("git")
        .args(["-C", root, "ls-files", "-z"])
        .output()
    {
        Ok(out) if out.status.success() => out,
        _ => {
            report::skipped(&format!("{root} is not a git checkout (or git is missing)"));
            return;
        }
    };
    report::ran();
    let files = String::from_utf8_lossy(&out.stdout);
    let tracked: Vec<&str> = files
        .split('\0')
        .filter(|p| p.split('/').any(|c| c == "target"))
        .collect();
    assert!(
        tracked.is_empty(),
        "{} build outputs are tracked, e.g. {:?}",
        tracked.len(),
        &tracked[..tracked.len().min(5)]
    );
}
