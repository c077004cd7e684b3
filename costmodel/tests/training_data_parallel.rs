//! Data-parallel training (`train.py --data-parallel`) gives the same model as
//! one device: `costmodel/training/test_data_parallel.py` trains a few steps
//! with each batch split over two host CPU devices
//! (`XLA_FLAGS=--xla_force_host_platform_device_count=2`) and on one device,
//! and fails unless every parameter agrees within float tolerance.
//!
//! Needs `HLO_OPT_PYTHON` (a Python with the training requirements, set by
//! `scripts/test`); records the skip (`report::skipped`) and returns without it.

#[path = "../../tests/support/report.rs"]
mod report;

use std::path::PathBuf;
use std::process::Command;

#[test]
fn two_devices_train_the_same_parameters_as_one() {
    let Some(py) = std::env::var("HLO_OPT_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
    else {
        report::skipped("HLO_OPT_PYTHON is not set (scripts/test sets it)");
        return;
    };
    report::ran();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("training/test_data_parallel.py");
    let out = Command::new(py)
        .arg(&script)
        .env("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
        .env("JAX_PLATFORMS", "cpu")
        .output()
        .expect("run test_data_parallel.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.starts_with("ok: "), "{stdout}");
}
