//! Fuzz target: the layout and tile passes never panic on a valid module.
//!
//! Any input that parses and verifies runs through the layout pass (with the
//! reference cost model, and with its order reversed so that layouts change
//! and copies are inserted) and the tile pass (reference tile model); no ONNX
//! Runtime is needed. A pass may refuse a module with an error; when the
//! layout pass succeeds, its output must verify.
//!
//! Mutations: libFuzzer's own plus the attribute-value one of
//! `attr_mutator.rs`.
//!
//! Run (from `fuzz/`, after `seed.sh`): `RUSTC_BOOTSTRAP=1 cargo fuzz run
//! passes corpus/passes -- -dict=hlo.dict -max_total_time=600`.
#![no_main]

use costmodel::reference::ReferenceModel;
use costmodel::{ConfigBatch, CostModel, Graph, Prepared, Task};
use libfuzzer_sys::{fuzz_mutator, fuzz_target};
use passes::layout::LayoutPass;
use passes::tile::TilePass;
use passes::{Pass, PassContext, PassOptions};

mod attr_mutator;
mod rng;

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    attr_mutator::mutate(data, size, max_size, seed)
});

/// The reference layout model with its order reversed (prefers layouts far
/// from XLA's default).
struct Contrary(ReferenceModel);

impl CostModel for Contrary {
    fn task(&self) -> Task {
        self.0.task()
    }
    fn prepare(&self, g: &Graph) -> costmodel::Result<Prepared> {
        self.0.prepare(g)
    }
    fn score(&self, p: &Prepared, c: &ConfigBatch) -> costmodel::Result<Vec<f32>> {
        Ok(self.0.score(p, c)?.into_iter().map(|s| -s).collect())
    }
}

fn options() -> PassOptions {
    PassOptions {
        budget: 64,
        explain: true,
        min_gain: 0.0,
        ..PassOptions::default()
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(m) = hlo::parse_module(text) else {
        return;
    };
    if passes::verify_module(&m).is_err() {
        return;
    }
    let models: [Box<dyn CostModel>; 2] = [
        Box::new(ReferenceModel::new(Task::Layout)),
        Box::new(Contrary(ReferenceModel::new(Task::Layout))),
    ];
    for model in models {
        let mut lm = m.clone();
        let mut cx = PassContext::new(options());
        if LayoutPass::with_model(model).run(&mut lm, &mut cx).is_ok() {
            if let Err(e) = passes::verify_module(&lm) {
                panic!("the layout pass's output does not verify: {e}");
            }
        }
    }
    let mut tm = m;
    let mut cx = PassContext::new(options());
    let _ = TilePass::with_model(Box::new(ReferenceModel::new(Task::Tile))).run(&mut tm, &mut cx);
});
