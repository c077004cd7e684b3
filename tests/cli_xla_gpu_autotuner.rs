//! XLA:GPU's new autotuner (jax 0.11's XLA) end to end, on what XLA wrote
//! on an H200 (`testdata/xla_gpu/session1`, docs/xla-gpu.md).
//!
//! Specification:
//! - `hlo-opt --pass=tile --autotune-env LOGS --autotune-cache-dir DIR` on a
//!   module XLA compiled with autotuning off writes one cache entry per GEMM
//!   fusion at `DIR/<device>/<fingerprint>.pb`, and the fingerprints are
//!   exactly those XLA's own autotuning logs give the program's GEMM
//!   fusions; each entry decodes to XLA's key (device, fingerprint,
//!   codegen version) and a Triton config the program's data measured;
//!   the module itself is left as it was;
//! - an environment file without XLA's device and versions is refused;
//! - `hlo-cost gpu-tile-model` runs the leave-one-program-out
//!   cross-validation from the committed data, the learned choice beats
//!   XLA's autotuning-off choice by far, and the model it writes is the
//!   builtin one byte for byte (the shipped model is reproducible);
//! - the same for the default model, the ranker: `hlo-cost gpu-candidates`
//!   then `costmodel/training/xla_gpu_ranker.py` cross-validate it from the
//!   committed data, it beats XLA's autotuning-off choice by far, and its
//!   export is the builtin ONNX byte for byte with the same choices.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use passes::tile::xla_gpu::autotuner;
use prost::Message as _;

#[path = "support/report.rs"]
mod report;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tmp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli_xla_gpu_autotuner")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("tmp dir");
    dir
}

fn session() -> BTreeMap<String, Vec<u8>> {
    autotuner::read_tar_xz(
        &repo().join("testdata/xla_gpu/session1/core.tar.xz"),
        256 << 20,
    )
    .expect("core.tar.xz")
    .into_iter()
    .collect()
}

#[test]
fn cache_entries_are_keyed_as_xla_keys_them() {
    let files = session();
    let dir = tmp("cache");
    let prog = "block_bf16_b4_s256_d768";
    let module = dir.join("off.hlo");
    std::fs::write(&module, &files[&format!("hlo/{prog}.off.hlo")]).expect("test step");
    let logs = dir.join("logs.textproto");
    std::fs::write(&logs, &files[&format!("logs/{prog}.textproto")]).expect("test step");
    let cache = dir.join("cache");
    // Given as the README gives it, with a trailing slash.
    let cache_arg = format!("{}/", cache.display());
    let out = Command::new(env!("CARGO_BIN_EXE_hlo-opt"))
        .args([
            module.to_str().expect("test step"),
            "--pass=tile",
            "--no-verify",
            "--explain",
        ])
        .args([
            "--autotune-env",
            logs.to_str().expect("test step"),
            "--autotune-cache-dir",
            &cache_arg,
        ])
        .args(["-o", dir.join("out.hlo").to_str().expect("test step")])
        .output()
        .expect("test step");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The folder of the entries, printed with one separator.
    assert!(
        stderr.contains(&format!("to {}/", cache.display())) && !stderr.contains("cache//"),
        "{stderr}"
    );
    // The default model: the ranker over XLA's generated candidates.
    assert!(
        stderr.contains("configurations from the ranker xla-gpu-h200-ranker"),
        "{stderr}"
    );
    // XLA's own keys for the program's GEMM fusions.
    let (env, profiles) = autotuner::read_profiles(
        std::str::from_utf8(&files[&format!("logs/{prog}.textproto")]).expect("test step"),
    )
    .expect("test step");
    let xla: Vec<&autotuner::Profile> = profiles
        .iter()
        .filter(|p| p.hlo_text.contains("__triton_gemm"))
        .collect();
    assert!(xla.len() >= 4, "{} GEMM fusions", xla.len());
    let mut ours: Vec<String> = std::fs::read_dir(cache.join(&env.device))
        .expect("test step")
        .map(|e| {
            e.expect("test step")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    ours.sort();
    let mut want: Vec<String> = xla
        .iter()
        .map(|p| format!("{}.pb", p.hlo_fingerprint))
        .collect();
    want.sort();
    want.dedup();
    assert_eq!(ours, want);
    for p in &xla {
        let bytes = std::fs::read(
            cache
                .join(&env.device)
                .join(format!("{}.pb", p.hlo_fingerprint)),
        )
        .expect("test step");
        let e = autotuner::AutotuneEntry::decode(&bytes[..]).expect("test step");
        let key = e.key.expect("test step");
        assert_eq!(key.target.as_ref().expect("test step").device, env.device);
        assert_eq!(
            key.environment.expect("test step").codegen_version,
            env.codegen_version
        );
        let v = e.value.expect("test step");
        assert_eq!(
            v.optimal_backend_version,
            env.backend_version("TRITON").expect("test step")
        );
        let c = v
            .optimal_config
            .expect("test step")
            .backend_config
            .expect("test step")
            .triton
            .expect("test step");
        assert!(
            p.candidates
                .iter()
                .any(|x| x.triton == Some(c) && x.nanos.is_some()),
            "{}: {c:?} was never measured on it",
            p.name
        );
    }
    // The module is left as XLA wrote it.
    let before = hlo::print_module(
        &hlo::parse_module(
            std::str::from_utf8(&files[&format!("hlo/{prog}.off.hlo")]).expect("test step"),
        )
        .expect("test step"),
    );
    let after = hlo::print_module(
        &hlo::parse_module(&std::fs::read_to_string(dir.join("out.hlo")).expect("test step"))
            .expect("test step"),
    );
    assert_eq!(before, after);
}

#[test]
fn an_environment_without_xla_keys_is_refused() {
    let dir = tmp("badenv");
    let env = dir.join("env.textproto");
    std::fs::write(&env, "entries { }\n").expect("test step");
    let out = Command::new(env!("CARGO_BIN_EXE_hlo-opt"))
        .args([
            "testdata/xla_gpu/triton_gemm.hlo",
            "--pass=tile",
            "--autotune-env",
            env.to_str().expect("test step"),
        ])
        .args([
            "--autotune-cache-dir",
            dir.join("c").to_str().expect("test step"),
        ])
        .current_dir(repo())
        .output()
        .expect("test step");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("--autotune-env") && stderr.contains("device"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn model_cross_validation_runs_and_reproduces_the_builtin_model() {
    let dir = tmp("model");
    let model = dir.join("model.json");
    let out = Command::new(env!("CARGO_BIN_EXE_hlo-cost"))
        .args([
            "gpu-tile-model",
            "--session",
            "testdata/xla_gpu/session1/core.tar.xz",
            "-o",
            model.to_str().expect("test step"),
        ])
        .current_dir(repo())
        .output()
        .expect("test step");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let knn = mean_slowdown(&stdout, "kNN (k=3)");
    let off = mean_slowdown(&stdout, "XLA, autotuning off");
    // Choices XLA never measured count at the fusion's slowest measured
    // time (kNN: 16.3% mean, 3 such choices, 28 Nov 2026).
    assert!(
        knn < 20.0 && off > 100.0,
        "kNN {knn}% vs autotuning off {off}%\n{stdout}"
    );
    assert!(stdout.contains("chosen: k = 3"), "{stdout}");
    let built = std::fs::read(&model).expect("test step");
    let shipped =
        std::fs::read(repo().join("passes/models/xla_gpu_h200_knn.json")).expect("test step");
    assert!(
        built == shipped,
        "the builtin model differs from what gpu-tile-model writes"
    );
}

/// The mean top-1 slowdown (column 4) of `method`'s row in a cross-validation
/// table the model commands print.
fn mean_slowdown(table: &str, method: &str) -> f64 {
    let line = table
        .lines()
        .find(|l| l.starts_with(&format!("| {method}")))
        .unwrap_or_else(|| panic!("no row `{method}` in\n{table}"));
    line.split('|')
        .nth(4)
        .expect("a table row")
        .trim()
        .trim_end_matches('%')
        .parse()
        .expect("a percentage")
}

#[test]
fn ranker_cross_validation_runs_and_reproduces_the_builtin_ranker() {
    let Some(py) = report::python_with(
        "lightgbm, onnxmltools",
        "costmodel/training/requirements.txt",
    ) else {
        return;
    };
    let dir = tmp("ranker");
    let cands = dir.join("cands.json");
    let out = Command::new(env!("CARGO_BIN_EXE_hlo-cost"))
        .args([
            "gpu-candidates",
            "--session",
            "testdata/xla_gpu/session1/core.tar.xz",
            "-o",
        ])
        .arg(&cands)
        .current_dir(repo())
        .output()
        .expect("hlo-cost");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let onnx = dir.join("xla_gpu_h200_ranker.onnx");
    let out = Command::new(&py)
        .arg("costmodel/training/xla_gpu_ranker.py")
        .arg(&cands)
        .args(["--variants", "lambdarank-600x15", "--export"])
        .arg(&onnx)
        .current_dir(repo())
        .output()
        .expect("python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    let ranker = mean_slowdown(&stdout, "ranker: lambdarank-600x15");
    let off = mean_slowdown(&stdout, "XLA, autotuning off");
    // 3.7% against 677.9% (28 Nov 2026, docs/xla-gpu.md).
    assert!(
        ranker < 5.0 && off > 100.0,
        "ranker {ranker}% vs autotuning off {off}%\n{stdout}"
    );
    let models = repo().join("passes/models");
    assert!(
        std::fs::read(&onnx).expect("exported")
            == std::fs::read(models.join("xla_gpu_h200_ranker.onnx")).expect("builtin"),
        "the builtin ranker differs from what xla_gpu_ranker.py --export writes"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("xla_gpu_h200_ranker.choices.json")).expect("exported"),
        std::fs::read_to_string(models.join("xla_gpu_h200_ranker.choices.json")).expect("builtin"),
        "the ranker's choices differ from the builtin ones"
    );
}

/// `hlo-cost gpu-tiles --session` converts the committed session: one npz
/// per autotuned Triton GEMM fusion (98), each with every candidate XLA
/// logged (Triton and cuBLAS/cuDNN rows), times in ns, XLA's best index the
/// fastest unfailed one, and the key XLA gave it.
#[test]
fn gpu_tiles_converts_the_session() {
    let dir = tmp("tiles");
    let out = Command::new(env!("CARGO_BIN_EXE_hlo-cost"))
        .args([
            "gpu-tiles",
            "--session",
            "testdata/xla_gpu/session1/core.tar.xz",
            "-o",
            dir.to_str().expect("test step"),
        ])
        .current_dir(repo())
        .output()
        .expect("test step");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("wrote 98 files"), "{stderr}");
    assert!(!stderr.contains("is not XLA's"), "{stderr}");
    let files = session();
    let logs = std::str::from_utf8(&files["logs/mlp_bf16_b2048.textproto"]).expect("test step");
    let (_, profiles) = autotuner::read_profiles(logs).expect("test step");
    let p = profiles
        .iter()
        .find(|p| p.name == "gemm_fusion_dot_general.4")
        .expect("test step");
    let path = dir.join("mlp_bf16_b2048.gemm_fusion_dot_general.4.npz");
    let mut npz = npyz::npz::NpzArchive::open(&path).expect("npz");
    macro_rules! arr {
        ($n:expr) => {
            npz.by_name($n)
                .expect("read")
                .unwrap_or_else(|| panic!("{} missing", $n))
        };
    }
    let rt: Vec<i64> = arr!("config_runtime").into_vec().expect("test step");
    let failed: Vec<u8> = arr!("config_failed").into_vec().expect("test step");
    let best: Vec<i64> = arr!("xla_best_index").into_vec().expect("test step");
    let feat: Vec<f32> = arr!("config_feat").into_vec().expect("test step");
    let gemm: Vec<i64> = arr!("gemm_shape").into_vec().expect("test step");
    let meta: Vec<u8> = arr!("meta_json").into_vec().expect("test step");
    assert_eq!(rt.len(), p.candidates.len());
    assert_eq!(feat.len(), 10 * rt.len());
    for (k, c) in p.candidates.iter().enumerate() {
        assert_eq!(rt[k], c.nanos.unwrap_or(-1));
        assert_eq!(failed[k] == 1, c.nanos.is_none());
        assert_eq!(feat[10 * k + 9] == 1.0, c.triton.is_some());
    }
    let b = best[0] as usize;
    assert!(rt.iter().zip(&failed).all(|(&t, &f)| f == 1 || t >= rt[b]));
    assert_eq!(gemm, [1, 2048, 1024, 1024, 16]);
    let meta: serde_json::Value = serde_json::from_slice(&meta).expect("test step");
    assert_eq!(meta["hlo_fingerprint"], p.hlo_fingerprint.as_str());
}

/// A model file that is not a tile model, or is missing, is refused with a
/// message naming it, not a panic.
#[test]
fn a_bad_tile_model_is_refused() {
    let files = session();
    let dir = tmp("badmodel");
    let module = dir.join("off.hlo");
    std::fs::write(&module, &files["hlo/odd_bf16.off.hlo"]).expect("test step");
    let env = dir.join("logs.textproto");
    std::fs::write(&env, &files["logs/odd_bf16.textproto"]).expect("test step");
    let bad = dir.join("model.json");
    std::fs::write(
        &bad,
        "{\"kind\": \"something else\", \"k\": 3, \"records\": []}",
    )
    .expect("test step");
    for model in [bad.to_str().expect("test step"), "/nonexistent/model.json"] {
        let out = Command::new(env!("CARGO_BIN_EXE_hlo-opt"))
            .args([
                module.to_str().expect("test step"),
                "--pass=tile",
                "--no-verify",
            ])
            .args([
                "--autotune-env",
                env.to_str().expect("test step"),
                "--gpu-tile-model",
                model,
            ])
            .args([
                "--autotune-cache-dir",
                dir.join("c").to_str().expect("test step"),
            ])
            .output()
            .expect("test step");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{model}: {stderr}");
        assert!(
            stderr.contains("tile model") || stderr.contains("nonexistent"),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
