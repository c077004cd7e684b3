//! `hlo_opt._native`: the Rust half of the Python package `hlo_opt`.
//!
//! A thin layer: every function here converts Python values, calls the
//! library crates (`hlo`, `passes`, `costmodel`, `pjrt`) with the GIL
//! released ([`Python::detach`]) for anything that takes time, and turns
//! their errors into Python exceptions. The pure-Python half
//! (`python/hlo_opt/`) adds dtype normalization, the JAX glue and the
//! docstrings of the `.pyi` stubs.
//!
//! Invariants: no panic reaches Python (pyo3 turns a panic into
//! `PanicException`, and the library crates return errors for bad input);
//! a [`Module`] is immutable: passes return a new one.

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

mod arrays;
mod collect;
mod fleet;
mod module;
mod runner;
mod xla_cpu;
mod xla_gpu;

/// mimalloc: the readers allocate many small strings and vectors (a
/// quarter of the StableHLO read was the system malloc and free).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

create_exception!(
    hlo_opt,
    HloError,
    PyValueError,
    "Invalid HLO: a parse or verifier error. `.path`, `.line`, `.col` locate it \
     (None when unknown); str() is the message hlo-opt prints."
);
create_exception!(
    hlo_opt,
    PassError,
    PyRuntimeError,
    "A pass failed (its cost model missing, ONNX Runtime not found, a measurement failed)."
);
create_exception!(
    hlo_opt,
    CostModelError,
    PyRuntimeError,
    "Featurization, an npz file or a cost model failed."
);
create_exception!(
    hlo_opt,
    BackendError,
    PyRuntimeError,
    "The PJRT backend failed: no plugin, a compile or run error, a worker crash."
);

/// An `hlo` error as [`HloError`], with its position.
pub(crate) fn hlo_error(py: Python<'_>, e: &hlo::Error) -> PyErr {
    hlo_error_after(py, "", e)
}

/// [`hlo_error`] with `prefix` before the rendered message.
pub(crate) fn hlo_error_after(py: Python<'_>, prefix: &str, e: &hlo::Error) -> PyErr {
    let err = HloError::new_err(format!("{prefix}{}", e.render()));
    let (path, line, col) = match e {
        hlo::Error::Parse { pos, .. } => (Some(pos.file.clone()), Some(pos.line), Some(pos.col)),
        hlo::Error::Verify { at: Some(at), .. } => {
            (Some(at.0.file.clone()), Some(at.0.line), Some(at.0.col))
        }
        hlo::Error::InFile { file, .. } => (Some(file.clone()), None, None),
        _ => (None, None, None),
    };
    let value = err.value(py);
    // Setting attributes on a fresh exception object cannot fail but for
    // memory; the error itself is still raised then.
    let _ = value.setattr("path", path);
    let _ = value.setattr("line", line);
    let _ = value.setattr("col", col);
    err
}

/// A cost-model error as a Python exception (bad input: `ValueError`).
pub(crate) fn costmodel_error(e: &costmodel::CostModelError) -> PyErr {
    match e {
        costmodel::CostModelError::Input(_) => PyValueError::new_err(e.to_string()),
        _ => CostModelError::new_err(e.to_string()),
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("HloError", py.get_type::<HloError>())?;
    m.add("PassError", py.get_type::<PassError>())?;
    m.add("CostModelError", py.get_type::<CostModelError>())?;
    m.add("BackendError", py.get_type::<BackendError>())?;
    m.add_class::<module::Module>()?;
    m.add_class::<module::PassResult>()?;
    m.add_function(wrap_pyfunction!(module::parse, m)?)?;
    m.add_function(wrap_pyfunction!(module::parse_stablehlo, m)?)?;
    m.add_function(wrap_pyfunction!(module::read, m)?)?;
    m.add_function(wrap_pyfunction!(module::list_passes, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::featurize, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::load_npz, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::save_npz, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::prune_khop, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::meta_edges, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::ranking_metrics, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::kendall_tau, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::ordered_pair_accuracy, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::top_k_slowdown, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::kaggle_tile_score, m)?)?;
    m.add_class::<arrays::CostModel>()?;
    m.add_function(wrap_pyfunction!(collect::collect, m)?)?;
    m.add_class::<fleet::CollectProgram>()?;
    m.add_function(wrap_pyfunction!(fleet::device_fingerprint, m)?)?;
    m.add_class::<runner::Runner>()?;
    m.add_function(wrap_pyfunction!(runner::pjrt_worker_main, m)?)?;
    m.add_function(wrap_pyfunction!(xla_gpu::xla_gpu_cache, m)?)?;
    m.add_function(wrap_pyfunction!(xla_cpu::xla_cpu_decide, m)?)?;
    m.add_function(wrap_pyfunction!(xla_cpu::xla_cpu_candidates, m)?)?;
    Ok(())
}
