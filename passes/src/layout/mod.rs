//! The `layout` pass: layout assignment with the layout cost model, as a
//! pipeline of stages, each in its own file: featurize ([`featurize`]) ->
//! enumerate ([`candidates`]) -> search ([`explore`], [`search`]) ->
//! measure ([`measure`], `--measure` only) -> decide ([`decide`]: the trust
//! region's threshold and the copies' price) -> apply ([`apply`],
//! [`assign`]) -> report ([`report`], [`record`], [`render`]).
//!
//! Scores are model scores (lower = predicted faster; only their order is
//! meaningful, costmodel/MODEL.md). Every pair of scores the pass compares
//! or reports side by side comes from one model call, or from a fitness
//! that is not batch-relative ([`fitness`]).
//!
//! Invariants: the entry computation's parameter and result layouts never
//! change; the same module, model and seed give the same output; a module
//! without configurable nodes is returned unchanged.

pub mod apply;
pub mod assign;
pub mod attrs;
pub mod candidates;
pub mod decide;
pub mod dims;
pub mod explore;
pub mod featurize;
pub mod fitness;
pub mod gain;
pub mod measure;
mod progress;
pub mod record;
pub mod render;
pub mod report;
pub mod search;
pub mod shapes;

use costmodel::{CostModel, Task};
use hlo::Module;

use crate::{Changed, Pass, PassContext, PassError};

pub use apply::decisions;
pub use decide::copy_share_pct;
pub use fitness::ModelFitness;

/// The layout assignment pass. Uses the model of [`crate::PassOptions::layout_model`]
/// (the embedded default when `None`) unless one is given with [`LayoutPass::with_model`].
#[derive(Default)]
pub struct LayoutPass {
    model: Option<Box<dyn CostModel>>,
}

impl LayoutPass {
    pub fn new() -> Self {
        LayoutPass { model: None }
    }
    /// A pass that scores with `model` (tests, the reference model).
    pub fn with_model(model: Box<dyn CostModel>) -> Self {
        LayoutPass { model: Some(model) }
    }
}

fn fail(message: impl Into<String>) -> PassError {
    PassError::Failed {
        pass: "layout",
        message: message.into(),
    }
}

/// Loads the layout model named by the options (`None` = the embedded
/// default ONNX model; needs the ONNX Runtime library).
pub fn load_layout_model(cx: &PassContext) -> Result<Box<dyn CostModel>, PassError> {
    let path = cx.options.layout_model.as_deref();
    let model = costmodel::onnx::load_model(path, Task::Layout, cx.options.threads)?;
    Ok(model)
}

impl Pass for LayoutPass {
    fn name(&self) -> &'static str {
        "layout"
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, PassError> {
        let spin = progress::phase(cx.options.progress, "featurizing the module");
        let Some(f) = featurize::featurize(m, cx)? else {
            return Ok(false);
        };
        let loaded;
        let model: &dyn CostModel = match &self.model {
            Some(b) => b.as_ref(),
            None => {
                loaded = load_layout_model(cx)?;
                loaded.as_ref()
            }
        };
        featurize::warn_device(model, cx);
        let spaces = candidates::spaces(m, &f.config_nodes);
        if let Some(b) = &spin {
            b.0.set_message("layout: running the model's encoder on the module");
        }
        let mut fitness = ModelFitness::for_search(model, &f, &spaces, cx)?;
        drop(spin);
        let mut searched = explore::explore(&spaces, &mut fitness, model, cx)?;
        let measured = measure::measure(m, &spaces, &mut searched, cx)?;
        let decided = decide::decide(m, &spaces, &searched, model, &measured)?;
        let verdict = decided.verdict;
        let applied = apply::apply(m, &spaces, decided.applied)?;
        let stages = report::Stages {
            spaces: &spaces,
            searched: &searched,
            measured,
            verdict,
            applied: &applied,
            model: featurize::facts(model, self.model.is_some(), cx),
        };
        report::report(m, cx, stages, &mut fitness)?;
        Ok(applied
            .assignment
            .is_some_and(|a| a.relayouted > 0 || !a.copies.is_empty()))
    }
}
