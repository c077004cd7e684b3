//! Speed of tile selection: every kernel of BERT-base after XLA's fusion
//! (`shared/corpus/jax/bert_base.post.hlo`, 369 fusions) enumerated, ranked
//! with the embedded ONNX tile model (the reference model when ONNX Runtime
//! is unavailable) and recorded. Target: under 1 s for the whole module.
//! Skips with a message when `../shared` is absent.

use std::path::Path;

use costmodel::reference::ReferenceModel;
use costmodel::{CostModel, Task};
use criterion::Criterion;
use passes::tile::TilePass;
use passes::{Pass, PassContext, PassOptions};

fn model() -> (Box<dyn CostModel>, &'static str) {
    match costmodel::load_model(None, Task::Tile, 0) {
        Ok(m) => (m, "onnx"),
        Err(e) => {
            eprintln!("ONNX tile model unavailable ({e}); benchmarking with the reference model");
            (Box::new(ReferenceModel::new(Task::Tile)), "reference")
        }
    }
}

fn bench(c: &mut Criterion) {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus/jax/bert_base.post.hlo");
    let Ok(text) = std::fs::read_to_string(&path) else {
        eprintln!("skipped: {} is absent", path.display());
        return;
    };
    let module = hlo::parse_module(&text).expect("bert_base parses");
    let (model, label) = model();
    let mut pass = TilePass::with_model(model);
    let mut g = c.benchmark_group("tile");
    g.sample_size(10);
    g.bench_function(format!("bert_base.post all kernels ({label})"), |b| {
        b.iter(|| {
            let mut m = module.clone();
            let mut cx = PassContext::new(PassOptions::default());
            pass.run(&mut m, &mut cx).expect("tile pass runs");
            m
        })
    });
    g.finish();
}

#[path = "../../tests/support/criterion_home.rs"]
#[macro_use]
mod criterion_home;

bench_main!(bench);
