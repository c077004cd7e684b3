//! The set-up builds once (README.md, "Set-up: two commands"):
//! `scripts/test` compiles nothing that `scripts/quickstart` built.
//!
//! Specification:
//! - every artifact the test command's `cargo test` needs (its arguments
//!   read from `scripts/test`, with `--no-run`) is one the quickstart's
//!   `cargo build` (read from `scripts/quickstart`) makes: the same file
//!   (by device and inode: `cargo build` lists a library by the copy it
//!   links into `target/release/`, `cargo test` by its hashed name in
//!   `deps/`), so the same crate, features, profile and dependencies, the C
//!   library `libhlo_opt.{a,so}` included;
//! - both commands, run now, compile nothing (`--message-format=json`:
//!   every artifact `fresh`): the suite that runs this test has just built
//!   what both need, and neither needs more.
//!
//! Cheap: two cargo runs that only compare fingerprints. It runs where the
//! whole suite was built, as `scripts/test` builds it (`HLO_OPT_FULL_SUITE=1`,
//! set by `scripts/test` without arguments); elsewhere it is skipped, since
//! the commands would compile what that run left out.

#[path = "support/report.rs"]
mod report;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The arguments of the `cargo SUB ...` line of a script (SUB first), its
/// own arguments (`"$@"`) left out.
fn cargo_args(script: &str, sub: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo().join(script)).expect("read the script");
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(&format!("cargo {sub} ")))
        .unwrap_or_else(|| panic!("{script} runs `cargo {sub}`"));
    let line = line.split(" || ").next().unwrap_or(line);
    shlex::split(line)
        .expect("a shell line")
        .into_iter()
        .skip(1)
        .filter(|w| w != "$@")
        .collect()
}

/// The artifacts a cargo command lists (`--message-format=json`): their
/// file names, and those not fresh (compiled by this run).
fn artifacts(args: &[String]) -> (BTreeSet<String>, Vec<String>) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(args)
        .arg("--message-format=json")
        .current_dir(repo())
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "cargo {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut files = BTreeSet::new();
    let mut compiled = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        if msg["fresh"] != true {
            compiled.push(format!(
                "{} ({})",
                msg["package_id"].as_str().unwrap_or("?"),
                msg["target"]["name"].as_str().unwrap_or("?")
            ));
        }
        for f in msg["filenames"].as_array().into_iter().flatten() {
            if let Some(f) = f.as_str() {
                files.insert(f.to_string());
            }
        }
    }
    (files, compiled)
}

#[test]
fn the_test_command_builds_nothing_the_quickstart_did_not() {
    let quickstart = cargo_args("scripts/quickstart", "build");
    let mut test = cargo_args("scripts/test", "test");
    test.retain(|a| a != "--no-fail-fast");
    test.push("--no-run".into());
    // Whatever else they build, the two agree on what they build from.
    for flag in ["--workspace", "--release"] {
        assert!(
            quickstart.iter().any(|a| a == flag),
            "quickstart: {quickstart:?}"
        );
        assert!(test.iter().any(|a| a == flag), "test: {test:?}");
    }
    if std::env::var("HLO_OPT_FULL_SUITE").as_deref() != Ok("1") {
        report::skipped(
            "not the whole suite as scripts/test builds it (HLO_OPT_FULL_SUITE=1): the cargo commands would compile what this run left out",
        );
        return;
    }
    report::ran();
    let (built, compiled) = artifacts(&quickstart);
    assert!(
        compiled.is_empty(),
        "scripts/quickstart's `cargo {}` compiled what the test suite did not build:\n{}",
        quickstart.join(" "),
        compiled.join("\n")
    );
    let (needed, compiled) = artifacts(&test);
    assert!(compiled.is_empty(), "{}", compiled.join("\n"));
    // One file under two names is one artifact.
    let identity = |f: &String| std::fs::metadata(f).ok().map(|m| (m.dev(), m.ino()));
    let built_ids: BTreeSet<(u64, u64)> = built.iter().filter_map(identity).collect();
    let needed_ids: BTreeMap<&String, Option<(u64, u64)>> =
        needed.iter().map(|f| (f, identity(f))).collect();
    let missing: Vec<&String> = needed_ids
        .iter()
        .filter(|(_, id)| id.is_none_or(|id| !built_ids.contains(&id)))
        .map(|(f, _)| *f)
        .collect();
    assert!(
        missing.is_empty(),
        "scripts/test builds {} artifacts the quickstart does not (different features or profile?):\n{}",
        missing.len(),
        missing
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The C library the README's C example links.
    for lib in ["libhlo_opt.a", "libhlo_opt.so"] {
        assert!(
            built
                .iter()
                .any(|f| f.ends_with(&format!("/release/{lib}"))),
            "the quickstart does not build target/release/{lib}"
        );
    }
}
