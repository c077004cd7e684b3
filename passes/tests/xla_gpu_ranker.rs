//! The shipped Triton config ranker in the pass (`--gpu-tile-model
//! xla-gpu-h200-ranker`), on the committed GPU session
//! (`testdata/xla_gpu/session1/core.tar.xz`): for every program, the
//! module compiled with autotuning off and XLA's logs as the environment,
//! as a user runs it. Checked: the pass's choices are configs XLA measured
//! and near each fusion's best (the ranker was trained on this session,
//! with features from `search_space::features`: a featurizer that
//! disagreed between training and the pass, or a broken ONNX run, would
//! choose far worse); the cache keys are the kNN model's (the model changes
//! only the configs); two runs choose the same; and each fusion's choice
//! and its score are what LightGBM gave at export time on the training
//! features (`passes/models/xla_gpu_h200_ranker.choices.json`, written by
//! `xla_gpu_ranker.py --export`): featurizer parity between the training
//! data (`hlo-cost gpu-candidates`) and the pass, and ONNX Runtime's
//! scores equal LightGBM's. Skipped, visibly, without ONNX Runtime.

#[path = "../../tests/support/report.rs"]
mod report;

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::xla_gpu::{by_name, programs, session1};
use passes::tile::xla_gpu::autotuner;
use passes::tile::xla_gpu::ranker::Ranker;
use passes::tile::xla_gpu::search_space::{self, Device};
use passes::tile::xla_gpu::{select_for_autotuner, TritonConfig, XlaGpuOptions};

#[test]
fn ranker_choices_in_the_pass() {
    let session = session1();
    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("models/xla_gpu_h200_ranker.choices.json"),
        )
        .expect("choices file"),
    )
    .expect("choices JSON");
    let expected: BTreeMap<(String, String), (Vec<i64>, f64)> = expected["choices"]
        .as_array()
        .expect("choices")
        .iter()
        .map(|c| {
            let cfg = c["config"]
                .as_array()
                .expect("config")
                .iter()
                .map(|x| x.as_i64().expect("int"))
                .collect();
            (
                (
                    c["program"].as_str().expect("program").to_string(),
                    c["fusion"].as_str().expect("fusion").to_string(),
                ),
                (cfg, c["score"].as_f64().expect("score")),
            )
        })
        .collect();
    let rk = match Ranker::load("xla-gpu-h200-ranker") {
        Ok(r) => {
            report::ran();
            r
        }
        Err(e) => {
            report::skipped(&format!("the ONNX ranker cannot be loaded: {e}"));
            return;
        }
    };
    let mut parity = 0;
    let (mut n, mut unmeasured, mut sum, mut worst) = (0usize, 0usize, 0.0f64, 1.0f64);
    for program in programs(&session) {
        let prog = program.program;
        let (env, profiles) = autotuner::read_profiles(program.logs).expect("logs");
        let m = &program.module;
        let names = by_name(m);
        let run = |model: &str| {
            let opts = XlaGpuOptions {
                autotuner_env: Some(env.clone()),
                model: Some(model.into()),
                ..Default::default()
            };
            let mut explain = String::new();
            select_for_autotuner(m, &opts, &mut explain)
                .expect("select")
                .0
        };
        let ranked = run("xla-gpu-h200-ranker");
        let again = run("xla-gpu-h200-ranker");
        let knn = run("xla-gpu-h200");
        let keys = |cs: &[passes::tile::xla_gpu::AutotunerChoice]| -> Vec<(String, String)> {
            cs.iter()
                .map(|c| (c.fusion.clone(), c.hlo_fingerprint.clone()))
                .collect()
        };
        assert_eq!(keys(&ranked), keys(&knn), "{prog}: keys");
        assert!(
            ranked.iter().zip(&again).all(|(a, b)| a.config == b.config),
            "{prog}: not deterministic"
        );
        for c in &ranked {
            let Some(p) = profiles.iter().find(|p| p.name == c.fusion) else {
                continue;
            };
            let id = names[&c.fusion];
            let problem = search_space::dot_problem(m, id).expect("problem");
            let (cfg, score, _) = rk.choose(&problem, &Device::HOPPER_132).expect("choose");
            assert_eq!(cfg, c.config, "{prog} {}", c.fusion);
            if let Some((want, want_score)) = expected.get(&(prog.to_string(), c.fusion.clone())) {
                let got: [i64; 10] = cfg.into();
                assert_eq!(&got[..], &want[..], "{prog} {}: config", c.fusion);
                assert!(
                    (f64::from(score) - want_score).abs() < 1e-3,
                    "{prog} {}: score {score} vs LightGBM {want_score}",
                    c.fusion
                );
                parity += 1;
            }
            let times: Vec<(TritonConfig, i64)> = p
                .candidates
                .iter()
                .filter_map(|x| Some((x.triton?.as_logged(), x.nanos?)))
                .collect();
            let Some(best) = times.iter().map(|t| t.1).min() else {
                continue;
            };
            n += 1;
            match times.iter().find(|t| t.0 == c.config.as_logged()) {
                Some(t) => {
                    let r = t.1 as f64 / best as f64;
                    sum += r;
                    worst = worst.max(r);
                }
                None => unmeasured += 1,
            }
        }
    }
    let mean = sum / (n - unmeasured).max(1) as f64 - 1.0;
    eprintln!(
        "ranker in the pass: {n} fusions, {unmeasured} choices not measured, mean slowdown {:.2}% (max {:.0}%) on its training session",
        100.0 * mean,
        100.0 * (worst - 1.0)
    );
    assert_eq!((n, parity), (98, 98));
    assert_eq!(unmeasured, 0);
    assert!(mean < 0.02 && worst < 1.3, "mean {mean}, worst {worst}");
}
