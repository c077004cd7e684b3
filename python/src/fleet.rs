//! The pieces of `hlo_opt.collect` that `hlo_opt.fleet` schedules over Ray
//! or local processes (`hlo_opt_tools::collect::fleet`): a planned program
//! whose chunks any machine measures, and a machine's device fingerprint.
//! JSON values travel as text; the Python half decodes them.

use std::path::PathBuf;

use hlo_opt_tools::collect::fleet::{fingerprint, Program};
use hlo_opt_tools::collect::{Estimator, Settings};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

use crate::BackendError;

/// One module of a layout collection, planned as `hlo-cost collect` plans
/// it (same module, seed and settings: the same configurations).
#[pyclass(module = "hlo_opt._native")]
pub struct CollectProgram {
    program: Program,
}

#[pymethods]
impl CollectProgram {
    #[new]
    #[pyo3(signature = (path, output, *, configs, random_fraction, seed, chunk, measure_budget, estimator))]
    #[allow(clippy::too_many_arguments)] // the CLI's flags, one each
    fn new(
        py: Python<'_>,
        path: PathBuf,
        output: PathBuf,
        configs: usize,
        random_fraction: f64,
        seed: u64,
        chunk: usize,
        measure_budget: f64,
        estimator: &str,
    ) -> PyResult<Self> {
        if !(1..=100_000).contains(&configs) {
            return Err(PyValueError::new_err(format!(
                "--configs {configs}: expected 1 to 100000"
            )));
        }
        if !(0.0..=1.0).contains(&random_fraction) {
            return Err(PyValueError::new_err(format!(
                "--random-fraction {random_fraction}: expected a number from 0 to 1"
            )));
        }
        if !(measure_budget.is_finite() && (0.0..=3600.0).contains(&measure_budget)) {
            return Err(PyValueError::new_err(format!(
                "--measure-budget {measure_budget}: expected seconds from 0 to 3600"
            )));
        }
        let settings = Settings {
            device: String::new(), // the header is made per device (`header`)
            estimator: Estimator::parse(estimator).map_err(PyValueError::new_err)?,
            configs,
            random_fraction,
            seed,
            chunk,
            measure_budget,
            budget: None,
        };
        let program = py
            .detach(|| Program::plan(&path, &output, &settings))
            .map_err(PyValueError::new_err)?;
        Ok(CollectProgram { program })
    }

    #[getter]
    fn stem(&self) -> String {
        self.program.stem().to_string()
    }

    #[getter]
    fn planned(&self) -> usize {
        self.program.planned()
    }

    /// The state file's header line (JSON text) for a collection on `device`.
    fn header(&self, device: &str) -> String {
        self.program.header(device).to_string()
    }

    /// Measures plan indices `configs` in one chunk on this machine's
    /// `device`; returns the chunk's state line (JSON text).
    fn measure(&self, py: Python<'_>, device: &str, configs: Vec<usize>) -> PyResult<String> {
        py.detach(|| self.program.measure(device, &configs))
            .map(|v| v.to_string())
            .map_err(BackendError::new_err)
    }

    /// Writes `STEM.npz` from the state file; returns the manifest entry
    /// (JSON text).
    fn publish(&mut self, py: Python<'_>, device: &str) -> PyResult<String> {
        let program = &mut self.program;
        py.detach(|| program.publish(device))
            .map(|v| v.to_string())
            .map_err(PyOSError::new_err)
    }
}

/// This machine's fingerprint for `device` (JSON text).
#[pyfunction]
pub fn device_fingerprint(py: Python<'_>, device: &str) -> PyResult<String> {
    py.detach(|| fingerprint(device))
        .map(|v| v.to_string())
        .map_err(BackendError::new_err)
}
