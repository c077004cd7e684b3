//! The prepared GPU collection (scripts/gpu_collect.py, docs/xla-gpu.md)
//! checked without a GPU: its dry run lowers every program of the corpus
//! (30 or more collected, the held-out ones apart, names distinct), checks
//! the smoke test's flag sets and packs stand-in outputs into at most 8
//! files of at most 15 MiB. The Python package's GPU check
//! (scripts/gpu_python_check.py) applies its rules to XLA's own files from
//! an H200 in its dry run: one cache file per choice, fingerprints read from
//! XLA's logs. Needs `HLO_OPT_PYTHON` (a Python with jax, and this
//! checkout's hlo_opt package for the second); skipped with a message
//! otherwise.

#[path = "support/report.rs"]
mod report;

use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn gpu_collection_dry_run_packs_within_limits() {
    let Ok(python) = std::env::var("HLO_OPT_PYTHON") else {
        report::skipped("HLO_OPT_PYTHON is not set (the GPU scripts' dry run needs jax)");
        return;
    };
    report::ran();
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gpu_collect_dry_run");
    let _ = std::fs::remove_dir_all(&out);
    let res = Command::new(&python)
        .arg(repo.join("scripts/gpu_collect.py"))
        .args(["--dry-run", "--out"])
        .arg(&out)
        .current_dir(&repo)
        .output()
        .expect("run gpu_collect.py");
    assert!(
        res.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&res.stdout),
        String::from_utf8_lossy(&res.stderr)
    );
    let files: Vec<_> = std::fs::read_dir(&out)
        .expect("out")
        .filter_map(Result::ok)
        .collect();
    assert!(files.len() <= 8, "{} files", files.len());
    for f in &files {
        let len = f.metadata().expect("metadata").len();
        assert!(len <= 15 * 1024 * 1024, "{:?}: {len} bytes", f.path());
    }
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).expect("summary"))
            .expect("json");
    let programs = summary["programs"].as_array().expect("programs");
    assert!(programs.len() >= 30, "{} programs", programs.len());
    assert!(programs
        .iter()
        .all(|p| !p.as_str().unwrap_or("held_").starts_with("held_")));
    // The stand-in dumps are larger than one file may be: packing split them.
    let packed = summary["packed"].as_array().expect("packed");
    assert!(packed.len() >= 3, "{packed:?}");
    assert!(summary["dropped_from_pack"]
        .as_array()
        .is_some_and(Vec::is_empty));
}

#[test]
fn gpu_python_check_dry_run_holds_on_xla_files() {
    let Ok(python) = std::env::var("HLO_OPT_PYTHON") else {
        report::skipped("HLO_OPT_PYTHON is not set (the Python GPU check needs the package)");
        return;
    };
    if !report::python_has_hlo_opt(python.as_ref()) {
        return;
    }
    report::ran();
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let res = Command::new(&python)
        .arg(repo.join("scripts/gpu_python_check.py"))
        .arg("--dry-run")
        .current_dir(&repo)
        .output()
        .expect("run gpu_python_check.py");
    let stdout = String::from_utf8_lossy(&res.stdout);
    assert!(
        res.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let line: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    // The module holds two Triton GEMM fusions; the log two profiles.
    assert_eq!(line["choices"], 2, "{line}");
    assert_eq!(line["cache_files"], 2, "{line}");
    assert_eq!(line["logged_fingerprints"], 2, "{line}");
    assert_eq!(line["ok"], true, "{line}");
    // Without a GPU (as here) the real check says so and exits 2.
    let res = Command::new(&python)
        .arg(repo.join("scripts/gpu_python_check.py"))
        .current_dir(&repo)
        .output()
        .expect("run gpu_python_check.py");
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert_eq!(res.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("needs jax on a GPU") && !stderr.contains("Traceback"),
        "{stderr}"
    );
}
