//! `xla_cpu_decide`: the xla-cpu pass's decision for a module (the same
//! `passes::xla_cpu::decide` as `hlo-opt --pass=xla-cpu`), as JSON, for
//! `hlo_opt.jax.compile(..., backend="cpu")`; and the candidate table.

use pyo3::prelude::*;

use crate::module::Module;
use crate::PassError;

/// The decision record (JSON text: chosen, options, reason, predictions,
/// model, xla, trained_cpu) and the notes (a model trained on another CPU).
/// An XLA version the model was not trained for raises `PassError`.
#[pyfunction]
#[pyo3(signature = (module, jaxlib = None, model = None, cpu = None))]
pub fn xla_cpu_decide(
    py: Python<'_>,
    module: &Module,
    jaxlib: Option<String>,
    model: Option<String>,
    cpu: Option<String>,
) -> PyResult<(String, Vec<String>)> {
    use passes::xla_cpu::{decide, load_model, XlaCpuOptions};
    let opts = XlaCpuOptions { model, jaxlib, cpu };
    let m = module.module();
    let (record, notes) = py
        .detach(|| {
            let (model, notes) = load_model(&opts)?;
            decide(m, &model).map(|r| (r, notes))
        })
        .map_err(PassError::new_err)?;
    let json = serde_json::to_string(&record).map_err(|e| PassError::new_err(e.to_string()))?;
    Ok((json, notes))
}

/// `(name, [(option, value), ...])` of every candidate, the default first.
#[pyfunction]
pub fn xla_cpu_candidates() -> Vec<(String, Vec<(String, String)>)> {
    passes::xla_cpu::candidates::all()
        .into_iter()
        .map(|c| (c.name(), c.options()))
        .collect()
}
