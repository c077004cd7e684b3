//! The `layout` pass end to end on real modules (`testdata/layout/`):
//! snapshots of the rewritten HLO, determinism, the budget, bad input, and
//! (with `HLO_OPT_PYTHON`) XLA's own parser and CPU runtime agreeing that
//! the rewritten module computes what the input computes.

mod common;

use common::{contrary, reference, root, run_layout};
use costmodel::{ConfigBatch, CostModel, Graph, Prepared, Task};
use passes::layout::LayoutPass;
use passes::{run_pipeline, Pass, PassContext, PassOptions};

/// The explain report without its timing line (for snapshots).
fn stable_report(explain: &str) -> String {
    explain
        .lines()
        .filter(|l| !l.contains(" search scored "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Each input of `testdata/layout/` rewritten with the contrary model (which
/// prefers non-default layouts, so propagation and copies show), budget 2000,
/// seed 0: the report, then the module.
#[test]
fn snapshots_of_rewritten_modules() {
    insta::glob!("../../testdata/layout", "*.hlo", |path| {
        let text = std::fs::read_to_string(path).expect("reads");
        let (m, explain, _) = run_layout(&text, contrary(), 2000, 0);
        let out = format!("{}\n\n{}", stable_report(&explain), hlo::print_module(&m));
        insta::assert_snapshot!(out);
    });
}

#[test]
fn same_input_model_and_seed_give_byte_identical_output() {
    let text = std::fs::read_to_string(root().join("testdata/layout/transformer_bert.hlo"))
        .expect("reads");
    let (a, ..) = run_layout(&text, contrary(), 3000, 42);
    let (b, ..) = run_layout(&text, contrary(), 3000, 42);
    assert_eq!(hlo::print_module(&a), hlo::print_module(&b));
}

#[test]
fn every_array_has_a_layout_and_the_entry_signature_is_unchanged() {
    for name in [
        "convnet_unet3d.hlo",
        "transformer_bert.hlo",
        "tpugraphs_unet3d.hlo",
    ] {
        let text =
            std::fs::read_to_string(root().join("testdata/layout").join(name)).expect("reads");
        let before = hlo::parse_module(&text).expect("parses");
        let (m, ..) = run_layout(&text, contrary(), 1000, 1);
        for i in m.all_instructions() {
            fn laid_out(m: &hlo::Module, s: hlo::ShapeId) -> bool {
                match m.shape(s) {
                    hlo::Shape::Array(a) => a.rank() == 0 || a.layout.is_some(),
                    hlo::Shape::Tuple(e) => e.iter().all(|&x| laid_out(m, x)),
                    _ => true,
                }
            }
            assert!(
                laid_out(&m, m.inst(i).shape),
                "{name}: %{} has no layout",
                m.inst(i).name
            );
        }
        let sig = |m: &hlo::Module| {
            let e = m.entry_computation();
            let mut v: Vec<String> = e
                .params
                .iter()
                .map(|&p| hlo::print_shape(m, m.inst(p).shape))
                .collect();
            v.push(hlo::print_shape(m, m.inst(e.root).shape));
            v
        };
        let filled = {
            // The input's entry layouts with default layouts where it had none.
            let (m0, ..) = run_layout(&text, reference(), 1, 0);
            sig(&m0)
        };
        assert_eq!(
            sig(&m),
            filled,
            "{name}: entry parameters and root keep their layouts"
        );
        assert_eq!(
            before.entry_computation().params.len(),
            m.entry_computation().params.len()
        );
    }
}

/// A model that counts the configurations it scores.
struct Counting(
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
    costmodel::reference::ReferenceModel,
);

impl CostModel for Counting {
    fn task(&self) -> Task {
        Task::Layout
    }
    fn prepare(&self, g: &Graph) -> costmodel::Result<Prepared> {
        self.1.prepare(g)
    }
    fn score(&self, p: &Prepared, c: &ConfigBatch) -> costmodel::Result<Vec<f32>> {
        self.0
            .fetch_add(c.num_configs, std::sync::atomic::Ordering::Relaxed);
        self.1.score(p, c)
    }
}

#[test]
fn the_budget_bounds_the_configurations_scored() {
    let text =
        std::fs::read_to_string(root().join("testdata/layout/convnet_unet3d.hlo")).expect("reads");
    for budget in [1, 50, 700] {
        let n = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let model = Counting(
            n.clone(),
            costmodel::reference::ReferenceModel::new(Task::Layout),
        );
        let mut m = hlo::parse_module(&text).expect("parses");
        // explain off: no extra scoring for the report.
        let mut cx = PassContext::new(PassOptions {
            budget,
            verify_each: true,
            ..Default::default()
        });
        LayoutPass::with_model(Box::new(model))
            .run(&mut m, &mut cx)
            .expect("runs");
        let scored = n.load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            scored <= budget && scored >= 1,
            "budget {budget}: scored {scored}"
        );
    }
}

#[test]
fn a_module_without_configurable_nodes_is_returned_unchanged() {
    let text = "HloModule e\n\nENTRY %main (p: f32[4]) -> f32[4] {\n  %p = f32[4]{0} parameter(0)\n  ROOT %n = f32[4]{0} negate(%p)\n}\n";
    let mut m = hlo::parse_module(text).expect("parses");
    let before = hlo::print_module(&m);
    let mut cx = PassContext::new(PassOptions {
        verify_each: true,
        ..Default::default()
    });
    let changed = run_pipeline(&mut m, "layout", &mut cx).expect("runs without a model");
    assert!(!changed);
    assert_eq!(hlo::print_module(&m), before);
    assert!(
        cx.explain.contains("no configurable node"),
        "{}",
        cx.explain
    );
}

#[test]
fn a_model_for_the_wrong_task_is_refused_with_a_clear_message() {
    let text =
        std::fs::read_to_string(root().join("testdata/layout/convnet_unet3d.hlo")).expect("reads");
    let mut m = hlo::parse_module(&text).expect("parses");
    let mut cx = PassContext::new(PassOptions::default());
    let tile = Box::new(costmodel::reference::ReferenceModel::new(Task::Tile));
    let err = LayoutPass::with_model(tile)
        .run(&mut m, &mut cx)
        .expect_err("wrong task");
    let msg = err.to_string();
    assert!(
        msg.contains("tile model") && msg.contains("layout model"),
        "{msg}"
    );
}

#[test]
fn a_module_whose_layouts_conflict_with_its_entry_layout_is_refused() {
    let text = "HloModule c, entry_computation_layout={(f32[4,8]{1,0})->f32[4,4]{1,0}}\n\nENTRY %main (p: f32[4,8]) -> f32[4,4] {\n  %p = f32[4,8]{0,1} parameter(0)\n  ROOT %d = f32[4,4]{1,0} dot(%p, %p), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n}\n";
    // The parser or verifier may already reject it; if it parses, the pass must.
    let Ok(mut m) = hlo::parse_module(text) else {
        return;
    };
    let mut cx = PassContext::new(PassOptions::default());
    let err = LayoutPass::with_model(reference())
        .run(&mut m, &mut cx)
        .expect_err("conflict");
    let msg = err.to_string();
    assert!(msg.contains("entry_computation_layout"), "{msg}");
}

#[test]
fn missing_model_files_are_reported_not_panicked() {
    let text =
        std::fs::read_to_string(root().join("testdata/layout/convnet_unet3d.hlo")).expect("reads");
    let mut m = hlo::parse_module(&text).expect("parses");
    let mut cx = PassContext::new(PassOptions {
        layout_model: Some("/nonexistent/model.hlocm".into()),
        ..Default::default()
    });
    let err = run_pipeline(&mut m, "layout", &mut cx).expect_err("no such model");
    assert!(err.to_string().contains("model"), "{err}");
}

// That the rewritten modules compute the same results with their layouts in
// effect on XLA:CPU is checked in tests/xla_cpu_layouts.rs (through PJRT, with
// the layouts kept: compiling through jaxlib's MLIR path dropped every layout,
// so a check there could not fail on a layout bug).

/// With a measurement callback and `top_k`, the pass measures the model's
/// best candidates and the compiler default, and keeps the fastest measured
/// (here "runtime" = the number of copies in the module).
#[test]
fn measured_top_k_candidates_decide_among_the_models_best() {
    let text =
        std::fs::read_to_string(root().join("testdata/layout/convnet_unet3d.hlo")).expect("reads");
    let measured = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = measured.clone();
    let mut m = hlo::parse_module(&text).expect("parses");
    let mut cx = PassContext::new(PassOptions {
        budget: 500,
        top_k: 4,
        verify_each: true,
        measure: Some(Box::new(move |t: &str| {
            let copies = t.matches(" copy(").count() as f64;
            log.lock().ok()?.push(copies);
            Some(copies)
        })),
        ..Default::default()
    });
    LayoutPass::with_model(contrary())
        .run(&mut m, &mut cx)
        .expect("runs");
    let measured = measured.lock().expect("lock").clone();
    assert_eq!(measured.len(), 5, "top 4 and the default: {measured:?}");
    let min = measured.iter().copied().fold(f64::INFINITY, f64::min);
    let copies = hlo::print_module(&m).matches(" copy(").count() as f64;
    assert_eq!(copies, min, "kept the fastest measured; {}", cx.explain);
    assert!(
        cx.explain.contains("measured 5 candidates"),
        "{}",
        cx.explain
    );
}
