//! The xla-cpu pass from the command line and its training: `hlo-opt
//! --pass=xla-cpu --compile-options FILE` writes the chosen compile options
//! (the record's, as `--explain-json` has them), and refuses without the
//! pass; `hlo-cost cpu-features` writes one row per module; the training
//! script, run as CI runs it on the committed data
//! (`testdata/xla_cpu/jaxlib-*.tar.gz`), reproduces the built-in models
//! byte for byte with their cards, and the dot models from the committed
//! dot timings (`testdata/xla_cpu/ops-jaxlib-*.npz`) likewise (skipped,
//! visibly, without the Python of costmodel/training/requirements.txt).

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/report.rs"]
mod report;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tmp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli_xla_cpu")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("tmp dir");
    dir
}

/// A training program where every YNNPACK candidate ran about 2x faster
/// than XLA's default (jaxlib 0.10.2; its snapshot in passes/tests).
const MODULE: &str = "testdata/xla_cpu/modules/296_conv_stack_c64_hw7_k3_d4_bf16_b256.hlo";

/// The built-in 0.10.2 model with a card of margin 0 (it takes its best
/// prediction, trusted or not), in `dir`: the built-in card's margin keeps
/// XLA's default on every training program, and this test needs a decision
/// with compile options to write.
fn eager_model(dir: &Path) -> PathBuf {
    let models = repo().join("passes/models");
    let onnx = dir.join("eager.onnx");
    std::fs::copy(models.join("xla_cpu_jaxlib-0.10.2.onnx"), &onnx).expect("copy the model");
    let mut card: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(models.join("xla_cpu_jaxlib-0.10.2.json")).expect("card"),
    )
    .expect("card JSON");
    card["margin"] = serde_json::json!(0.0);
    std::fs::write(dir.join("eager.json"), card.to_string()).expect("write the card");
    onnx
}

#[test]
fn compile_options_are_the_decision_of_the_explain_json() {
    let dir = tmp("options");
    let (opts, json) = (dir.join("options.json"), dir.join("explain.json"));
    let out = Command::new(env!("CARGO_BIN_EXE_hlo-opt"))
        .args([
            MODULE,
            "--pass=xla-cpu",
            "--xla-version",
            "0.10.2",
            "-o",
            "/dev/null",
            "--xla-cpu-model",
        ])
        .arg(eager_model(&dir))
        .arg("--compile-options")
        .arg(&opts)
        .arg("--explain-json")
        .arg(&json)
        .current_dir(repo())
        .output()
        .expect("hlo-opt");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("ONNX Runtime") && !out.status.success() {
        report::skipped(&format!("ONNX Runtime is missing: {stderr}"));
        return;
    }
    report::ran();
    assert!(out.status.success(), "{stderr}");
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&opts).expect("options")).expect("JSON");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("explain")).expect("JSON");
    let decision = &report["passes"][0]["decision"];
    let pairs = decision["options"].as_array().expect("options");
    assert!(!pairs.is_empty(), "{decision}");
    let want: serde_json::Map<String, serde_json::Value> = pairs
        .iter()
        .map(|p| (p[0].as_str().expect("key").to_string(), p[1].clone()))
        .collect();
    assert_eq!(written, serde_json::Value::Object(want));
    assert_eq!(decision["xla"], "jaxlib 0.10.2");

    let out = Command::new(env!("CARGO_BIN_EXE_hlo-opt"))
        .args([
            MODULE,
            "--pass=layout",
            "-o",
            "/dev/null",
            "--compile-options",
        ])
        .arg(&opts)
        .current_dir(repo())
        .output()
        .expect("hlo-opt");
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("add --pass=xla-cpu"));

    let out = Command::new(env!("CARGO_BIN_EXE_hlo-opt"))
        .args([
            MODULE,
            "--pass=xla-cpu",
            "--xla-version",
            "0.3.0",
            "-o",
            "/dev/null",
        ])
        .current_dir(repo())
        .output()
        .expect("hlo-opt");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no built-in XLA:CPU model for jaxlib 0.3.0")
            && stderr.contains("xla_cpu_retrain"),
        "{stderr}"
    );
}

#[test]
fn cpu_features_writes_a_row_per_module() {
    let dir = tmp("features");
    let rows = dir.join("rows.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_hlo-cost"))
        .args(["cpu-features", "testdata/xla_cpu/modules", "-o"])
        .arg(&rows)
        .current_dir(repo())
        .output()
        .expect("hlo-cost");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&rows).expect("rows");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let modules = std::fs::read_dir(repo().join("testdata/xla_cpu/modules"))
        .expect("modules")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "hlo"))
        })
        .count();
    assert_eq!(lines.len(), modules);
    for l in &lines {
        assert_eq!(
            l["features"].as_array().expect("features").len(),
            passes::xla_cpu::features::NUM_FEATURES
        );
    }
    // The dots, each with its signature, eligibility and row.
    let forms = lines
        .iter()
        .find(|l| {
            l["file"]
                .as_str()
                .is_some_and(|f| f.ends_with("dot_forms.hlo"))
        })
        .expect("dot_forms.hlo's row");
    let dots: Vec<(String, bool)> = forms["ops"]
        .as_array()
        .expect("ops")
        .iter()
        .map(|d| {
            assert_eq!(
                d["features"].as_array().expect("row").len(),
                passes::xla_cpu::contractions::NUM_OP_FEATURES
            );
            (
                d["signature"].as_str().expect("signature").to_string(),
                d["eligible"].as_bool().expect("eligible"),
            )
        })
        .collect();
    let want = [
        ("f32[64,128]x[128,256] b[]x[] c[1]x[0]", true),
        ("bf16[4,16,128]x[4,32,128] b[0]x[0] c[2]x[2]", true),
        ("f32[2,8,64]x[64,256] b[]x[] c[2]x[0]", true),
        ("f32[128,256]x[16,128] b[]x[] c[0]x[1]", false),
        ("s32[64,128]x[128,128] b[]x[] c[1]x[0]", false),
    ];
    let want: Vec<(String, bool)> = want.iter().map(|(s, e)| (s.to_string(), *e)).collect();
    assert_eq!(dots, want);
    let out = Command::new(env!("CARGO_BIN_EXE_hlo-cost"))
        .args(["cpu-features", "testdata/invalid", "-o"])
        .arg(dir.join("bad.jsonl"))
        .current_dir(repo())
        .output()
        .expect("hlo-cost");
    assert!(
        !out.status.success(),
        "a module that does not parse is an error, not a row"
    );
}

/// Runs a training `script` on `data` with `args`, exporting to
/// `STEM.onnx` in a scratch folder; checks that its report holds `says` and
/// that the model, its card and its checks equal the shipped
/// `passes/models/SHIPPED_jaxlib-V.*` byte for byte.
fn retrain_and_compare(
    py: &std::ffi::OsStr,
    script: &str,
    data: &str,
    args: &[&str],
    stem: &str,
    shipped: &str,
    says: &str,
) {
    for v in ["0.10.2", "0.12.0.1"] {
        let dir = tmp(&format!("{stem}-{v}"));
        let out = Command::new(py)
            .arg(script)
            .arg(data.replace("{v}", v))
            .arg("--hlo-cost")
            .arg(env!("CARGO_BIN_EXE_hlo-cost"))
            .args(args)
            .arg("--export")
            .arg(dir.join(format!("{stem}.onnx")))
            .current_dir(repo())
            .output()
            .expect("python");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains(says), "{stdout}");
        for ext in ["onnx", "json", "choices.json"] {
            let got = std::fs::read(dir.join(format!("{stem}.{ext}"))).expect("exported");
            let want =
                std::fs::read(repo().join(format!("passes/models/{shipped}_jaxlib-{v}.{ext}")))
                    .expect("shipped");
            assert!(
                got == want,
                "jaxlib {v}: the retrained {stem}.{ext} differs from the shipped one"
            );
        }
    }
}

#[test]
fn training_reproduces_the_builtin_models() {
    let Some(py) = report::python_with(
        "lightgbm, onnxmltools",
        "costmodel/training/requirements.txt",
    ) else {
        return;
    };
    retrain_and_compare(
        &py,
        "costmodel/training/xla_cpu_model.py",
        "testdata/xla_cpu/jaxlib-{v}.tar.gz",
        // The shipped cards' variant (both jaxlibs): the variant search
        // (five leave-one-program-out runs) is left to the retrain script.
        &["--nested", "--variant", "knn-3"],
        "model",
        "xla_cpu",
        "504 programs, 14 families",
    );
}

#[test]
fn training_reproduces_the_builtin_op_models() {
    let Some(py) = report::python_with(
        "lightgbm, onnxmltools",
        "costmodel/training/requirements.txt",
    ) else {
        return;
    };
    retrain_and_compare(
        &py,
        "costmodel/training/xla_cpu_ops_model.py",
        "testdata/xla_cpu/ops-jaxlib-{v}.npz",
        &[],
        "ops",
        "xla_cpu_ops",
        "418 ops, 121 convolutions",
    );
}
