//! `hlo_opt.collect`: what `hlo-cost collect` does (`hlo_opt::collect`, the
//! same code), its outcome as data and its failures as exceptions.

use std::path::PathBuf;
use std::time::Duration;

use hlo_opt_tools::collect::{parse_duration, run_with, ErrorKind, Estimator, Message, Settings};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

use crate::BackendError;

/// Measures sampled layout configurations of `modules` on a PJRT device
/// and writes published-format npz files, a state per module and
/// `manifest.json` into `output`, as `hlo-cost collect` does. Returns the
/// run's outcome as JSON text (the Python half decodes it); raises when a
/// setting, an input, the folder's state or the device is bad, or when a
/// module failed (after the others were collected).
#[pyfunction]
#[pyo3(signature = (modules, output, *, device, configs, random_fraction, seed, budget, chunk, measure_budget, estimator))]
#[allow(clippy::too_many_arguments)] // the CLI's flags, one each
pub fn collect(
    py: Python<'_>,
    modules: Vec<PathBuf>,
    output: PathBuf,
    device: String,
    configs: usize,
    random_fraction: f64,
    seed: u64,
    budget: Option<&Bound<'_, PyAny>>,
    chunk: usize,
    measure_budget: f64,
    estimator: &str,
) -> PyResult<String> {
    if modules.is_empty() {
        return Err(PyValueError::new_err("no module to collect"));
    }
    // Seconds, or a duration as `--budget` takes it (90s, 10m, 1h30m).
    let budget = match budget {
        None => None,
        Some(b) => Some(match b.extract::<f64>() {
            Ok(x) if x.is_finite() && (0.0..=1e9).contains(&x) => Duration::from_secs_f64(x),
            Ok(x) => {
                return Err(PyValueError::new_err(format!(
                    "budget {x}: expected seconds from 0 to 1e9"
                )))
            }
            Err(_) => parse_duration(&b.extract::<String>().map_err(|_| {
                PyValueError::new_err("budget: give seconds or a duration such as \"10m\"")
            })?)
            .map_err(PyValueError::new_err)?,
        }),
    };
    let settings = Settings {
        device,
        estimator: Estimator::parse(estimator).map_err(PyValueError::new_err)?,
        configs,
        random_fraction,
        seed,
        chunk,
        measure_budget,
        budget,
    };
    let outcome = py
        .detach(|| {
            run_with(&modules, &output, &settings, false, &mut |_: Message<
                '_,
            >| {})
        })
        .map_err(|e| match e.kind {
            ErrorKind::Settings | ErrorKind::Input | ErrorKind::State => {
                PyValueError::new_err(e.message)
            }
            ErrorKind::Device => BackendError::new_err(e.message),
            ErrorKind::Io => PyOSError::new_err(e.message),
        })?;
    if !outcome.failures.is_empty() {
        return Err(BackendError::new_err(outcome.failures.join("\n")));
    }
    let doc = serde_json::json!({
        "manifest": outcome.manifest.display().to_string(),
        "modules": outcome.modules,
        "not_measured": outcome.not_measured,
    });
    Ok(doc.to_string())
}
