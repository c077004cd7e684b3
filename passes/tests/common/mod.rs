//! Shared helpers of the tests: for the layout tests, deterministic test
//! models and paths; for the XLA:GPU tests, the committed GPU session
//! ([`xla_gpu`]).
#![allow(dead_code)]

pub mod xla_gpu;

use std::path::PathBuf;

use costmodel::reference::ReferenceModel;
use costmodel::{ConfigBatch, CostModel, Graph, Prepared, Task};
use passes::layout::LayoutPass;
use passes::{Pass, PassContext, PassOptions};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The reference model with its order reversed: prefers layouts far from
/// XLA's default, so the pass changes layouts, propagates and copies.
pub struct Contrary(pub ReferenceModel);

impl Contrary {
    pub fn new() -> Self {
        Contrary(ReferenceModel::new(Task::Layout))
    }
}

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

pub fn reference() -> Box<dyn CostModel> {
    Box::new(ReferenceModel::new(Task::Layout))
}

pub fn contrary() -> Box<dyn CostModel> {
    Box::new(Contrary::new())
}

/// Options as the tests use them: verifier on, explain on.
pub fn options(budget: usize, seed: u64) -> PassOptions {
    PassOptions {
        budget,
        seed,
        verify_each: true,
        explain: true,
        ..Default::default()
    }
}

/// Parses `text`, runs the layout pass with `model`, verifies; returns the
/// module and the explain report.
pub fn run_layout(
    text: &str,
    model: Box<dyn CostModel>,
    budget: usize,
    seed: u64,
) -> (hlo::Module, String, bool) {
    let mut m = hlo::parse_module(text).expect("parses");
    let mut cx = PassContext::new(options(budget, seed));
    let changed = LayoutPass::with_model(model)
        .run(&mut m, &mut cx)
        .expect("layout pass runs");
    passes::verify_module(&m).expect("the output verifies");
    (m, cx.explain, changed)
}
