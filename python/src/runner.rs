//! Running a module on a PJRT backend from Python (`hlo_opt.jax.compile`):
//! the path of `hlo-opt --measure` (`pjrt::prepare` legalizes the module,
//! the worker compiles it with its layouts kept), but run on the caller's
//! inputs and returning the outputs.

use std::path::PathBuf;
use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::module::Module;
use crate::BackendError;

fn backend_error(e: pjrt::PjrtError) -> PyErr {
    BackendError::new_err(e.to_string())
}

/// An array crossing the boundary: element type name (`f32`, `pred`, ...),
/// dimensions, little-endian bytes in row-major order.
type Wire<'py> = (String, Vec<i64>, Bound<'py, PyBytes>);

/// A module compiled on a PJRT plugin (in a worker process), with its layouts kept.
#[pyclass(module = "hlo_opt")]
pub struct Runner {
    backend: Mutex<pjrt::Backend>,
    id: usize,
    /// The plugin's platform (`cpu`).
    #[pyo3(get)]
    platform: String,
    /// What legalization changed for XLA (empty when nothing).
    #[pyo3(get)]
    legalized: String,
}

#[pymethods]
impl Runner {
    /// Compiles `module` on the plugin `plugin` (None: XLA's CPU plugin, found
    /// as `hlo-opt --measure=xla-cpu` finds it) with the worker `worker`
    /// (None: `pjrt::find_worker`). `layouts_kept`: the module's layouts
    /// are kept (XLA's layout assignment off), as `--measure` compiles.
    #[new]
    #[pyo3(signature = (module, *, plugin = None, worker = None, layouts_kept = true))]
    fn new(
        py: Python<'_>,
        module: &Module,
        plugin: Option<PathBuf>,
        worker: Option<PathBuf>,
        layouts_kept: bool,
    ) -> PyResult<Self> {
        let m = module.module();
        py.detach(|| {
            let plugin = pjrt::find_plugin(plugin.as_deref())?;
            let worker = match worker {
                Some(w) => w,
                None => pjrt::find_worker()?,
            };
            let mut backend = pjrt::Backend::start_with(&plugin, &worker)?;
            let (proto, pipeline, legalized) = if layouts_kept {
                let (proto, report) = pjrt::prepare(m)?;
                (proto, pjrt::Pipeline::LayoutsKept, format!("{report:?}"))
            } else {
                (
                    pjrt::proto::module_proto(m)?,
                    pjrt::Pipeline::Xla,
                    String::new(),
                )
            };
            let compiled = backend.compile(&proto, pipeline)?;
            let platform = backend.platform.clone();
            Ok(Runner {
                backend: Mutex::new(backend),
                id: compiled.id,
                platform,
                legalized,
            })
        })
        .map_err(backend_error)
    }

    /// Runs the module once on `inputs` (one per entry parameter, or per
    /// leaf of a tupled parameter) and returns its outputs (the leaves of
    /// a tuple result), each as `(type, dims, bytes)`.
    fn run<'py>(&self, py: Python<'py>, inputs: Vec<Wire<'py>>) -> PyResult<Vec<Wire<'py>>> {
        let mut arrays = Vec::with_capacity(inputs.len());
        for (k, (ty, dims, data)) in inputs.into_iter().enumerate() {
            let ty = pjrt::ElementType::from_name(&ty).ok_or_else(|| {
                pyo3::exceptions::PyValueError::new_err(format!(
                    "input {k}: element type `{ty}` is not one PJRT takes here"
                ))
            })?;
            let a = pjrt::HostArray {
                ty,
                dims,
                data: data.as_bytes().to_vec(),
            };
            if a.dims.iter().any(|&d| d < 0) || a.element_count() * ty.byte_size() != a.data.len() {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "input {k}: {} bytes for a {} array of dims {:?}",
                    a.data.len(),
                    ty.name(),
                    a.dims
                )));
            }
            arrays.push(a);
        }
        let id = self.id;
        let outputs = py
            .detach(|| {
                let mut b = self.backend.lock().unwrap_or_else(|e| e.into_inner());
                b.set_inputs(&arrays)?;
                b.outputs(id)
            })
            .map_err(backend_error)?;
        Ok(outputs
            .into_iter()
            .map(|a| (a.ty.name().to_string(), a.dims, PyBytes::new(py, &a.data)))
            .collect())
    }
}

/// The PJRT worker's main loop in this process (the `hlo-opt-pjrt-worker`
/// script the package installs); returns its exit status.
#[pyfunction]
pub fn pjrt_worker_main(py: Python<'_>) -> i32 {
    py.detach(pjrt::worker::main)
}
