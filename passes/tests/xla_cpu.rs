//! The xla-cpu pass (`passes::xla_cpu`): its features and decision on each
//! module of `testdata/xla_cpu/modules/` (a snapshot per file: adding a
//! case is adding a file); the built-in models give, on every program of
//! their training data (`testdata/xla_cpu/jaxlib-*.tar.gz`), the
//! predictions and choices LightGBM gave at export time
//! (`passes/models/xla_cpu_jaxlib-*.choices.json`): featurizer parity
//! between training (`hlo-cost cpu-features`) and the pass, and ONNX
//! Runtime's predictions equal LightGBM's; a model for another jaxlib is
//! refused, another CPU is warned about. Skipped, visibly, without ONNX
//! Runtime.

#[path = "../../tests/support/report.rs"]
mod report;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use passes::xla_cpu::{self, features, model::KernelModel, XlaCpuOptions};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn model(jaxlib: &str) -> Option<std::sync::Arc<KernelModel>> {
    let opts = XlaCpuOptions {
        jaxlib: Some(jaxlib.into()),
        cpu: Some("Intel(R) Xeon(R) Processor".into()),
        ..XlaCpuOptions::default()
    };
    match xla_cpu::load_model(&opts) {
        Ok((m, _)) => {
            report::ran();
            Some(m)
        }
        Err(e) => {
            report::skipped(&format!("the XLA:CPU model cannot be loaded: {e}"));
            None
        }
    }
}

/// Every `NAME.hlo` of a training archive, by program name.
fn archive_modules(jaxlib: &str) -> BTreeMap<String, String> {
    let path = root().join(format!("testdata/xla_cpu/jaxlib-{jaxlib}.tar.gz"));
    let file = std::fs::File::open(&path).expect("training archive");
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut out = BTreeMap::new();
    for entry in tar.entries().expect("entries") {
        let mut entry = entry.expect("entry");
        let name = entry.path().expect("path").to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".hlo") {
            let mut text = String::new();
            entry.read_to_string(&mut text).expect("utf-8 module");
            out.insert(stem.rsplit('/').next().unwrap_or(stem).to_string(), text);
        }
    }
    out
}

#[test]
fn builtin_models_predict_what_lightgbm_predicted_at_export() {
    for b in xla_cpu::model::BUILTINS {
        let Some(m) = model(b.jaxlib) else { return };
        let modules = archive_modules(b.jaxlib);
        let choices: Vec<serde_json::Value> = serde_json::from_str(
            &std::fs::read_to_string(root().join(format!(
                "passes/models/xla_cpu_jaxlib-{}.choices.json",
                b.jaxlib
            )))
            .expect("choices file"),
        )
        .expect("choices JSON");
        assert_eq!(
            choices.len(),
            modules.len(),
            "{}: one choice per training program",
            b.name
        );
        for c in &choices {
            let name = c["program"].as_str().expect("program");
            let text = &modules[name];
            let module = hlo::parse_module(text).expect("training module parses");
            let record = xla_cpu::decide(&module, &m).expect("decision");
            assert_eq!(
                record.chosen,
                c["chosen"].as_str().expect("chosen"),
                "{}: {name}",
                b.name
            );
            let want: Vec<f64> = c["pred"]
                .as_array()
                .expect("pred")
                .iter()
                .map(|v| v.as_f64().expect("f64"))
                .collect();
            let row = features::program_features(&module);
            let got = m
                .predict(&row, &xla_cpu::candidates::all())
                .expect("predictions");
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() < 1e-3,
                    "{}: {name}: candidate {i}: ONNX {g}, LightGBM {w}",
                    b.name
                );
            }
        }
    }
}

#[test]
fn features_and_decisions_of_the_test_modules() {
    let Some(m) = model("0.10.2") else { return };
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("testdata/xla_cpu/modules"))
        .expect("modules")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "hlo"))
        .collect();
    files.sort();
    assert!(files.len() >= 3);
    for f in files {
        let module = hlo::parse_module(&std::fs::read_to_string(&f).expect("read")).expect("parse");
        let row = features::program_features(&module);
        let named: Vec<String> = features::FEATURE_NAMES
            .iter()
            .zip(row)
            .map(|(n, v)| format!("{n} = {v:.4}"))
            .collect();
        let record = xla_cpu::decide(&module, &m).expect("decision");
        let text = format!("{}\n\n{}", named.join("\n"), xla_cpu::report(&record, true));
        insta::assert_snapshot!(
            f.file_name().expect("name").to_string_lossy().into_owned(),
            text
        );
    }
}

#[test]
fn a_model_for_another_jaxlib_is_refused_and_another_cpu_is_warned_about() {
    let opts = XlaCpuOptions {
        model: Some("xla-cpu-jaxlib-0.10.2".into()),
        jaxlib: Some("0.12.0.1".into()),
        cpu: None,
    };
    let err = xla_cpu::load_model(&opts).err().expect("refused");
    assert!(
        err.contains("was trained on jaxlib 0.10.2, not jaxlib 0.12.0.1"),
        "{err}"
    );
    let err = xla_cpu::load_model(&XlaCpuOptions {
        jaxlib: Some("0.4.1".into()),
        ..XlaCpuOptions::default()
    })
    .err()
    .expect("no model");
    assert!(
        err.contains("no built-in XLA:CPU model for jaxlib 0.4.1")
            && err.contains("xla-cpu-jaxlib-0.10.2"),
        "{err}"
    );
    let opts = XlaCpuOptions {
        jaxlib: Some("0.10.2".into()),
        cpu: Some("AMD EPYC 9654".into()),
        ..XlaCpuOptions::default()
    };
    match xla_cpu::load_model(&opts) {
        Ok((_, notes)) => {
            report::ran();
            assert!(
                notes
                    .iter()
                    .any(|n| n.contains("warning") && n.contains("this CPU is `AMD EPYC 9654`")),
                "{notes:?}"
            );
        }
        Err(e) => report::skipped(&format!("the XLA:CPU model cannot be loaded: {e}")),
    }
}

#[test]
fn builtin_op_models_predict_what_lightgbm_predicted_at_export() {
    use xla_cpu::op_model::{OpModel, BUILTIN_OPS};
    for b in BUILTIN_OPS {
        let m = match OpModel::builtin_for_xla(&format!("jaxlib {}", b.jaxlib)) {
            Ok(Some(m)) => m,
            Ok(None) => panic!("{}: no built-in op model for its own jaxlib", b.name),
            Err(e) => {
                report::skipped(&format!("the XLA:CPU op model cannot be loaded: {e}"));
                return;
            }
        };
        report::ran();
        let choices: Vec<serde_json::Value> = serde_json::from_str(
            &std::fs::read_to_string(root().join(format!(
                "passes/models/xla_cpu_ops_jaxlib-{}.choices.json",
                b.jaxlib
            )))
            .expect("choices file"),
        )
        .expect("choices JSON");
        assert_eq!(
            choices.len(),
            m.card.ops,
            "{}: one check per training op",
            b.name
        );
        let dots: Vec<xla_cpu::contractions::Contraction> = choices
            .iter()
            .map(|c| {
                let f: Vec<f64> = c["features"]
                    .as_array()
                    .expect("features")
                    .iter()
                    .map(|v| v.as_f64().expect("f64"))
                    .collect();
                xla_cpu::contractions::Contraction {
                    signature: c["signature"].as_str().expect("signature").into(),
                    eligible: true,
                    count: 1,
                    features: f.try_into().expect("one row of the dot features"),
                }
            })
            .collect();
        let got = m
            .predict(&dots.iter().collect::<Vec<_>>())
            .expect("predictions");
        let (err, margin) = (m.card.error, m.card.margin);
        for (c, g) in choices.iter().zip(got) {
            let w = c["pred"].as_f64().expect("pred");
            let sig = c["signature"].as_str().unwrap_or("?");
            assert!(
                (g - w).abs() < 1e-3,
                "{}: {sig}: ONNX {g}, LightGBM {w}",
                b.name
            );
            if (-g - margin * err).abs() > 1e-3 {
                assert_eq!(
                    -g > margin * err,
                    c["send"].as_bool().expect("send"),
                    "{}: {sig}",
                    b.name
                );
            }
        }
    }
}

#[test]
fn an_op_model_beside_a_program_model_path_is_used() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("xla_cpu_own_model");
    let _ = std::fs::create_dir_all(&dir);
    let models = root().join("passes/models");
    for (from, to) in [
        ("xla_cpu_jaxlib-0.10.2.onnx", "model.onnx"),
        ("xla_cpu_jaxlib-0.10.2.json", "model.json"),
        ("xla_cpu_ops_jaxlib-0.10.2.onnx", "ops.onnx"),
        ("xla_cpu_ops_jaxlib-0.10.2.json", "ops.json"),
    ] {
        std::fs::copy(models.join(from), dir.join(to)).expect("copy");
    }
    let opts = XlaCpuOptions {
        model: Some(dir.join("model.onnx").display().to_string()),
        jaxlib: Some("0.10.2".into()),
        cpu: Some("Intel(R) Xeon(R) Processor".into()),
    };
    let m = match xla_cpu::load_model(&opts) {
        Ok((m, _)) => m,
        Err(e) => return report::skipped(&format!("the XLA:CPU model cannot be loaded: {e}")),
    };
    report::ran();
    let f = root().join("testdata/xla_cpu/modules/015_gated_mlp_d256_h768_s32_bf16_b64.hlo");
    let module = hlo::parse_module(&std::fs::read_to_string(f).expect("read")).expect("parse");
    let record = xla_cpu::decide(&module, &m).expect("decision");
    let own = dir.join("ops.onnx").display().to_string();
    assert_eq!(record.op_model.as_deref(), Some(own.as_str()));
    assert_eq!(record.onednn.iter().filter(|d| d.onednn).count(), 2);
    // A broken op model beside it is an error, not a silent fallback.
    std::fs::write(dir.join("ops.json"), "{").expect("write");
    let err = xla_cpu::decide(&module, &m).expect_err("refused");
    assert!(err.contains("the op model's card"), "{err}");
}

#[test]
fn the_decision_lists_the_cards_portfolio_to_verify_and_a_bad_portfolio_is_refused() {
    let Some(m) = model("0.10.2") else { return };
    assert_eq!(
        m.card.portfolio.len(),
        4,
        "the shipped card has its portfolio"
    );
    let text = std::fs::read_to_string(root().join("testdata/xla_cpu/modules/dot_forms.hlo"))
        .expect("read");
    let module = hlo::parse_module(&text).expect("parse");
    let record = xla_cpu::decide(&module, &m).expect("decision");
    // The model's choice first unless it is the default, then the
    // portfolio, each once.
    let mut want: Vec<String> = Vec::new();
    for n in std::iter::once(record.chosen.clone()).chain(m.card.portfolio.iter().cloned()) {
        if n != "default" && !want.contains(&n) {
            want.push(n);
        }
    }
    assert_eq!(record.verify, want);
    assert!(
        xla_cpu::report(&record, false).contains(&format!(
            "to time against the default where it can run: {}",
            want.join(", ")
        )),
        "{}",
        xla_cpu::report(&record, false)
    );
    let b = KernelModel::builtin_for("0.10.2").expect("built-in");
    let bad = b.card.replacen("\"ynn:none\",\n", "\"ynn:fast\",\n", 1);
    assert_ne!(bad, b.card, "the card lists ynn:none in its portfolio");
    let err = KernelModel::from_parts(b.onnx, &bad, "bad card")
        .err()
        .expect("refused");
    assert!(err.contains("\"ynn:fast\" in its portfolio"), "{err}");
}
