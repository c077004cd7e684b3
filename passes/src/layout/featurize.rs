//! Featurize: the module as a TpuGraphs graph (`costmodel::features`); its
//! configurable nodes are the pass's. Also what the report says about the
//! model, and the warning when it was trained on another device than the
//! one `--measure` measures on.

use std::fmt::Write as _;

use costmodel::features::Featurized;
use costmodel::{CostModel, Task};
use hlo::Module;

use super::report::ModelFacts;
use crate::{PassContext, PassError};

/// The module's features; `None` (and a note) when it has no configurable
/// node.
pub(super) fn featurize(m: &Module, cx: &mut PassContext) -> Result<Option<Featurized>, PassError> {
    let f = costmodel::features::featurize(m, Task::Layout)?;
    if f.config_nodes.is_empty() {
        let _ = writeln!(
            cx.explain,
            "layout: the module has no configurable node (convolution, dot or reshape outside fusions); unchanged"
        );
        return Ok(None);
    }
    Ok(Some(f))
}

/// Warns when the model's device is not the measurer's.
pub(super) fn warn_device(model: &dyn CostModel, cx: &mut PassContext) {
    let Some(measurer) = cx.options.measurer.as_mut() else {
        return;
    };
    if let (Some(md), Some(dd)) = (model.device(), measurer.device()) {
        if md != dd {
            let note = format!(
                "layout: warning: the layout model was trained on {md} measurements, but --measure measures on {dd}: its ranking of the candidates may not hold there (train one for {dd}: hlo-cost collect, train.py --device {dd}, --layout-model)"
            );
            let _ = writeln!(cx.explain, "{note}");
            cx.notes.push(note);
        }
    }
}

/// The model as the report names it: given to the pass, a file, or the
/// embedded default.
pub(super) fn facts(model: &dyn CostModel, given: bool, cx: &PassContext) -> ModelFacts {
    let name = match (given, &cx.options.layout_model) {
        (true, _) => "the model given to the pass".to_string(),
        (false, Some(path)) => path.display().to_string(),
        (false, None) => "the embedded default model".to_string(),
    };
    ModelFacts {
        name,
        device: model.device(),
        calibration: model.log_runtime_per_score(),
        resolution: model.log_runtime_resolution(),
    }
}
