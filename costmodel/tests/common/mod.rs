//! Fixture set-up shared by the npz tests: the published TpuGraphs files copied
//! into `testdata/costmodel/npz/`, per-test scratch files, the optional Python,
//! and rewriting a file through our writer.

#![allow(dead_code)]

#[path = "../../../tests/support/report.rs"]
pub mod report;
use std::path::{Path, PathBuf};

use costmodel::npz::{write_npz_with, NpzGraphFile, WriteOptions};

/// A published layout file with runtimes (1,277 nodes, 62 configurable, 20 configs).
pub const LAYOUT: &str = "layout_xla_random_openai_v0_rnn_optimized.npz";
/// A published tile file with runtimes and normalizers (2 nodes, 9 configs).
pub const TILE: &str = "tile_xla_valid_inception_v3.npz";

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `testdata/costmodel/npz/<name>`.
pub fn fixture(name: &str) -> PathBuf {
    repo().join("testdata/costmodel/npz").join(name)
}

/// `<name>` in a scratch folder of the test binary `group`, created on demand.
pub fn tmp(group: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(group);
    std::fs::create_dir_all(&dir).expect("tmp dir");
    dir.join(name)
}

/// The Python of `HLO_OPT_PYTHON`; `None` (after printing why the test is
/// skipped) when it is unset.
pub fn python() -> Option<String> {
    let py = std::env::var("HLO_OPT_PYTHON")
        .ok()
        .filter(|p| !p.is_empty());
    match py {
        None => report::skipped("HLO_OPT_PYTHON is not set"),
        Some(_) => report::ran(),
    }
    py
}

/// Writes everything `f` holds (graph, configurations, runtimes, normalizers)
/// to `out` with our writer, deflated or `stored`.
pub fn rewrite(f: &NpzGraphFile, out: &Path, stored: bool) {
    let configs = f.all_configs().expect("configs");
    let opts = WriteOptions {
        stored,
        runtime_normalizers: f.runtime_normalizers(),
    };
    write_npz_with(
        out,
        f.graph(),
        Some(&configs),
        Some(f.runtimes()),
        f.task(),
        &opts,
    )
    .expect("write");
}
