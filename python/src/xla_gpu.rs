//! `xla_gpu_cache`: the XLA:GPU tile decision for a module XLA compiled with
//! autotuning off, keyed as XLA's new autotuner keys it, and written as its
//! per-fusion cache (what `hlo-opt --pass=tile --autotune-env` does,
//! through the same `passes::tile::xla_gpu::select_for_autotuner`).

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::module::Module;
use crate::PassError;

/// One fusion's choice as Python sees it (see [`xla_gpu_cache`]).
type CacheChoice = (String, String, [i64; 10], String);

/// For every Triton GEMM fusion of `module`: (fusion name, XLA's
/// `hlo_fingerprint`, the chosen Triton config as the 10 integers of the
/// model files, why). `env` is the text of a logs or results file XLA
/// wrote on the GPU; with `cache_dir` the entries are written there.
#[pyfunction]
#[pyo3(signature = (module, env, cache_dir = None, model = None))]
pub fn xla_gpu_cache(
    py: Python<'_>,
    module: &Module,
    env: &str,
    cache_dir: Option<PathBuf>,
    model: Option<String>,
) -> PyResult<(Vec<CacheChoice>, Vec<String>)> {
    use passes::tile::xla_gpu::{autotuner::Environment, select_for_autotuner, XlaGpuOptions};
    let env = Environment::from_text(env).map_err(|e| PassError::new_err(format!("env: {e}")))?;
    let opts = XlaGpuOptions {
        autotuner_env: Some(env),
        cache_dir,
        model,
        ..XlaGpuOptions::default()
    };
    let m = module.module();
    let (choices, lines) = py
        .detach(|| {
            let mut explain = String::new();
            select_for_autotuner(m, &opts, &mut explain)
        })
        .map_err(PassError::new_err)?;
    Ok((
        choices
            .into_iter()
            .map(|c| (c.fusion, c.hlo_fingerprint, c.config.into(), c.why))
            .collect(),
        lines,
    ))
}
