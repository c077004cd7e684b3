//! Python/Rust parity of the cost models: the JAX forward pass of
//! `costmodel/training/model.py` (parameters read back from the model file,
//! full unpruned graph; `training/forward.py`) and ONNX Runtime from Rust
//! (`OnnxModel`, k-hop pruned graph) agree within 1e-4 on the same graph and
//! configurations, for the embedded layout and tile models and for a small
//! early-join layout model (`testdata/costmodel/models/layout_early_join.hlocm`,
//! the command that made it is in its `model.json`: `training.command`),
//! whose meta-graph the model computes on the pruned graph and forward.py on
//! the full one (the same `costmodel::prune::meta_edges`, forward.py's through
//! `hlo_opt.meta_edges`).
//!
//! Needs `HLO_OPT_PYTHON` (a Python with the training requirements and this
//! checkout's `hlo_opt` package, set up by `scripts/test`) and the ONNX
//! Runtime library; prints "skipped: ..." and returns when one is missing.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{fixture, model_fixture, ort_available, repo, report};
use costmodel::npz::NpzGraphFile;
use costmodel::{load_model, Task};

const TOLERANCE: f32 = 1e-4;

fn python() -> Option<String> {
    match std::env::var("HLO_OPT_PYTHON") {
        Ok(p) if !p.is_empty() => report::python_has_hlo_opt(p.as_ref()).then_some(p),
        _ => {
            report::skipped("HLO_OPT_PYTHON is not set (scripts/test sets it)");
            None
        }
    }
}

/// Writes the embedded model of `task` to a temporary file for the Python side.
fn embedded_model_file(task: Task) -> PathBuf {
    let bytes = match task {
        Task::Layout => costmodel::onnx::DEFAULT_LAYOUT_MODEL,
        Task::Tile => costmodel::onnx::DEFAULT_TILE_MODEL,
    };
    let path = std::env::temp_dir().join(format!(
        "hlo-opt-parity-{}-{}.hlocm",
        task.name(),
        std::process::id()
    ));
    std::fs::write(&path, bytes).expect("write temporary model");
    path
}

fn python_scores(py: &str, model: &Path, npz: &Path, first: usize) -> Vec<f32> {
    let script = repo().join("costmodel/training/forward.py");
    let out = Command::new(py)
        .arg(&script)
        .arg("--model")
        .arg(model)
        .arg("--npz")
        .arg(npz)
        .arg("--first")
        .arg(first.to_string())
        .output()
        .expect("run forward.py");
    assert!(
        out.status.success(),
        "forward.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().parse::<f32>().expect("a score per line"))
        .collect()
}

fn check_parity(task: Task, model_file: Option<&str>, npz_name: &str, first: usize) {
    let Some(py) = python() else { return };
    if !ort_available() {
        return;
    }
    let npz = fixture(npz_name);
    let file = NpzGraphFile::open(&npz).expect("open npz");
    let model_file = model_file.map(model_fixture);
    let model = load_model(model_file.as_deref(), task, 1).expect("model");
    let prepared = model.prepare(file.graph()).expect("prepare");
    let rust = model
        .score(&prepared, &file.configs(0..first).expect("configs"))
        .expect("score");

    let py_scores = match &model_file {
        Some(path) => python_scores(&py, path, &npz, first),
        None => {
            let model_path = embedded_model_file(task);
            let scores = python_scores(&py, &model_path, &npz, first);
            let _ = std::fs::remove_file(&model_path);
            scores
        }
    };

    assert_eq!(rust.len(), first);
    assert_eq!(py_scores.len(), first);
    let max_diff = rust
        .iter()
        .zip(&py_scores)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    eprintln!(
        "{} parity on {npz_name}: max |rust - python| = {max_diff:e} over {first} configs",
        task.name()
    );
    assert!(
        max_diff <= TOLERANCE,
        "max |rust - python| = {max_diff} > {TOLERANCE}"
    );
    // The scores must actually vary, or agreement would prove little.
    let spread = rust.iter().copied().fold(f32::NEG_INFINITY, f32::max)
        - rust.iter().copied().fold(f32::INFINITY, f32::min);
    assert!(
        spread > 10.0 * TOLERANCE,
        "scores barely vary (spread {spread})"
    );
}

#[test]
fn layout_python_and_rust_agree_on_a_pruned_graph() {
    // 490 nodes, 38 configurable: k-hop pruning drops nodes on the Rust side
    // only, so this also checks that pruning is exact.
    check_parity(
        Task::Layout,
        None,
        "layout_xla_default_test_cd708819.npz",
        200,
    );
}

#[test]
fn early_join_layout_python_and_rust_agree_on_a_pruned_graph() {
    // 38 configurable nodes, 38 meta-graph edges (data.meta_edges).
    check_parity(
        Task::Layout,
        Some("layout_early_join.hlocm"),
        "layout_xla_default_test_cd708819.npz",
        200,
    );
}

#[test]
fn tile_python_and_rust_agree() {
    check_parity(Task::Tile, None, "tile_xla_test_0a8a2b24.npz", 300);
}
