//! Benchmark of the layout pass with `--budget 10000`: the whole pass
//! (featurize, prepare, search, propagate, copies) on unet_3d.4x4.bf16
//! (TpuGraphs, 3,163 instructions; target < 2 s) and BERT-base
//! (`shared/corpus/jax/bert_base.pre.hlo`, 2,887 instructions; target < 10 s).
//!
//! The model is the embedded ONNX default when ONNX Runtime is found
//! (`ORT_DYLIB_PATH`), else the reference model; the line printed before each
//! group says which, and how many candidates per second the search scored.

use std::path::PathBuf;
use std::time::Instant;

use costmodel::{CostModel, Task};
use criterion::Criterion;
use passes::layout::LayoutPass;
use passes::{Pass, PassContext, PassOptions};

fn model() -> (Box<dyn CostModel>, &'static str) {
    if std::env::var_os("ORT_DYLIB_PATH").is_some() {
        if let Ok(m) = costmodel::onnx::load_model(None, Task::Layout, 0) {
            return (m, "embedded ONNX model");
        }
    }
    (
        Box::new(costmodel::reference::ReferenceModel::new(Task::Layout)),
        "reference model",
    )
}

fn inputs() -> Vec<(&'static str, PathBuf)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    vec![
        (
            "unet_3d",
            root.join("testdata/tpugraphs/layout_xla_default_valid_unet_3d.4x4.bf16.hlo"),
        ),
        (
            "bert_base",
            root.join("../shared/corpus/jax/bert_base.pre.hlo"),
        ),
    ]
}

fn run_once(text: &str, model: Box<dyn CostModel>) -> (f64, String) {
    let mut m = hlo::parse_module(text).expect("parses");
    let mut cx = PassContext::new(PassOptions {
        budget: 10_000,
        seed: 0,
        ..Default::default()
    });
    let t = Instant::now();
    LayoutPass::with_model(model)
        .run(&mut m, &mut cx)
        .expect("layout pass");
    (t.elapsed().as_secs_f64(), cx.explain)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("layout_budget_10000");
    g.sample_size(10);
    for (name, path) in inputs() {
        let Ok(text) = std::fs::read_to_string(&path) else {
            eprintln!("skipped {name}: {} not found", path.display());
            continue;
        };
        let (m, label) = model();
        let (secs, explain) = run_once(&text, m);
        eprintln!(
            "{name} ({label}): {secs:.2} s; {}",
            explain.lines().next().unwrap_or("")
        );
        g.bench_function(name, |b| {
            b.iter(|| {
                let (m, _) = model();
                run_once(&text, m)
            })
        });
    }
    g.finish();
}

#[path = "../../tests/support/criterion_home.rs"]
#[macro_use]
mod criterion_home;

bench_main!(bench);
