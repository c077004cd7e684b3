//! A model file records the device whose runtimes it learned (`model.json`
//! `device`, MODEL.md): the embedded default says `tpu` (it names none, the
//! TpuGraphs meaning), the built-in `xla-cpu` model `xla-cpu`, a collected
//! model its device; a `device` that is not
//! a non-empty string is refused. Needs ONNX Runtime ("skipped" otherwise).

mod common;

use common::{layout_with_json, ort_available};
use costmodel::onnx::{OnnxModel, DEFAULT_LAYOUT_MODEL};
use costmodel::{CostModel, Task};

#[test]
fn a_model_records_the_device_it_was_trained_for() {
    if !ort_available() {
        return;
    }
    let m = OnnxModel::from_bytes(DEFAULT_LAYOUT_MODEL, "default", Task::Layout, 1).expect("loads");
    assert_eq!(m.info().device, "tpu");
    assert_eq!(m.device().as_deref(), Some("tpu"));
    // The built-in `xla-cpu` model, loaded by its name: an XLA:CPU layout
    // model, calibrated for the layout pass's trust region.
    let m = OnnxModel::load(Some(std::path::Path::new("xla-cpu")), Task::Layout, 1)
        .expect("the built-in xla-cpu model loads by name");
    assert_eq!(m.device().as_deref(), Some("xla-cpu"));
    assert!(m.log_runtime_resolution().is_some_and(|r| r > 0.0));
    let bytes = layout_with_json(|j| j["device"] = "xla-cpu".into());
    let m = OnnxModel::from_bytes(&bytes, "cpu.hlocm", Task::Layout, 1).expect("loads");
    assert_eq!(m.device().as_deref(), Some("xla-cpu"));
    for bad in [serde_json::json!(5), serde_json::json!("")] {
        let bytes = layout_with_json(|j| j["device"] = bad.clone());
        let e = OnnxModel::from_bytes(&bytes, "bad.hlocm", Task::Layout, 1)
            .expect_err("refused")
            .to_string();
        assert!(e.contains("`device` must be a non-empty string"), "{e}");
    }
}

/// `log_runtime_per_score` (MODEL.md): the embedded default carries its
/// calibration (the layout pass's predicted gain needs it); a model without
/// it reports none; zero, negative or non-numeric values are refused.
#[test]
fn a_model_records_how_its_scores_map_to_runtime() {
    if !ort_available() {
        return;
    }
    let m = OnnxModel::from_bytes(DEFAULT_LAYOUT_MODEL, "default", Task::Layout, 1).expect("loads");
    let k = m
        .log_runtime_per_score()
        .expect("the default is calibrated");
    assert!(k > 0.0 && k < 1.0, "{k}");
    let bytes = layout_with_json(|j| {
        j.as_object_mut()
            .expect("object")
            .remove("log_runtime_per_score");
    });
    let m = OnnxModel::from_bytes(&bytes, "plain.hlocm", Task::Layout, 1).expect("loads");
    assert_eq!(m.log_runtime_per_score(), None);
    for bad in [
        serde_json::json!(0.0),
        serde_json::json!(-0.1),
        serde_json::json!("0.1"),
    ] {
        let bytes = layout_with_json(|j| j["log_runtime_per_score"] = bad.clone());
        let e = OnnxModel::from_bytes(&bytes, "bad.hlocm", Task::Layout, 1)
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains("`log_runtime_per_score` must be a positive number"),
            "{e}"
        );
    }
}

/// `log_runtime_resolution` (MODEL.md): the embedded default carries it
/// (the layout pass's floor on the gains it acts on); read from model.json
/// when present (a number >= 0), absent otherwise; negative or non-numeric
/// values are refused.
#[test]
fn a_model_records_how_far_its_predicted_ratios_can_be_trusted() {
    if !ort_available() {
        return;
    }
    let m = OnnxModel::from_bytes(DEFAULT_LAYOUT_MODEL, "default", Task::Layout, 1).expect("loads");
    let r = m.log_runtime_resolution().expect("the default records it");
    assert!(r > 0.0 && r < 2.0, "{r}");
    let bytes = layout_with_json(|j| j["log_runtime_resolution"] = serde_json::json!(0.25));
    let m = OnnxModel::from_bytes(&bytes, "r.hlocm", Task::Layout, 1).expect("loads");
    assert_eq!(m.log_runtime_resolution(), Some(0.25));
    let bytes = layout_with_json(|j| {
        j.as_object_mut()
            .expect("object")
            .remove("log_runtime_resolution");
    });
    let m = OnnxModel::from_bytes(&bytes, "plain.hlocm", Task::Layout, 1).expect("loads");
    assert_eq!(m.log_runtime_resolution(), None);
    for bad in [serde_json::json!(-0.1), serde_json::json!("0.1")] {
        let bytes = layout_with_json(|j| j["log_runtime_resolution"] = bad.clone());
        let e = OnnxModel::from_bytes(&bytes, "bad.hlocm", Task::Layout, 1)
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains("`log_runtime_resolution` must be a number >= 0"),
            "{e}"
        );
    }
}
