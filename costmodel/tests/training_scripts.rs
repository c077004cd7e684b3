//! The training pipeline's own checks, each a Python script under
//! `costmodel/training/` that exits non-zero on a failure and prints `ok: ...`:
//! - `test_data_parallel.py`: data-parallel training (`train.py
//!   --data-parallel`) gives the same model as one device: a few steps with
//!   each batch split over two host CPU devices
//!   (`XLA_FLAGS=--xla_force_host_platform_device_count=2`) and on one device,
//!   every parameter within float tolerance.
//! - `test_multi_process.py`: multi-process training (`train.py --data-parallel
//!   --coordinator ... --num-processes 2`, two processes on localhost joined by
//!   `jax.distributed`, one host CPU device each) gives the one-process model.
//! - `test_ridge_blend.py`: the ridge term of the layout model (`train.py
//!   --ridge-blend`, the shipped default's design) ranks its training graphs,
//!   the head's ranking becomes the ridge's when the network's weight is
//!   scaled away, and the exported ONNX stages score as the JAX model does.
//! - `test_xla_gpu_ranker.py`: the XLA:GPU ranker's cross-validation
//!   scoring (`xla_gpu_ranker.py`): an unmeasured choice counts at the
//!   fusion's slowest measured time, slowdowns over the fastest measured.
//!
//! Need `HLO_OPT_PYTHON` (a Python with the training requirements, set by
//! `scripts/test`); each records the skip (`report::skipped`) and returns
//! without it.

#[path = "../../tests/support/report.rs"]
mod report;

use std::path::PathBuf;
use std::process::Command;

/// Runs `training/SCRIPT` with `envs`; fails the test unless it exits 0 and
/// says `ok: `.
fn run_training_script(script: &str, envs: &[(&str, &str)]) {
    let Some(py) = std::env::var("HLO_OPT_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
    else {
        report::skipped("HLO_OPT_PYTHON is not set (scripts/test sets it)");
        return;
    };
    if !report::python_has_hlo_opt(py.as_ref()) {
        return;
    }
    report::ran();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("training")
        .join(script);
    let out = Command::new(py)
        .arg(&path)
        .env("JAX_PLATFORMS", "cpu")
        .envs(envs.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("run {script}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.starts_with("ok: "), "{stdout}");
}

#[test]
fn two_devices_train_the_same_parameters_as_one() {
    run_training_script(
        "test_data_parallel.py",
        &[("XLA_FLAGS", "--xla_force_host_platform_device_count=2")],
    );
}

#[test]
fn two_processes_train_the_same_parameters_as_one() {
    run_training_script("test_multi_process.py", &[]);
}

#[test]
fn ridge_blend_ranks_and_is_used_by_the_exported_head() {
    run_training_script("test_ridge_blend.py", &[]);
}

#[test]
fn xla_gpu_ranker_counts_unmeasured_choices_at_the_slowest_time() {
    run_training_script("test_xla_gpu_ranker.py", &[]);
}
