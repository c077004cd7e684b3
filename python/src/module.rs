//! `Module`, `parse`, `read` and `Module.run_passes`: what `hlo-opt FILE
//! [--pass=...]` does, through the same library calls (`hlo::load_bytes`,
//! `passes::options`).

use std::ffi::CString;
use std::path::PathBuf;

use pyo3::exceptions::{PyOSError, PyTypeError, PyUserWarning, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::{hlo_error, PassError};

/// An HLO module (immutable: passes return a new one).
#[pyclass(frozen, module = "hlo_opt")]
pub struct Module {
    pub(crate) loaded: hlo::Loaded,
}

impl Module {
    pub(crate) fn module(&self) -> &hlo::Module {
        &self.loaded.module
    }
}

/// Emits `message` as a Python `UserWarning`.
fn warn(py: Python<'_>, message: &str) -> PyResult<()> {
    let text = CString::new(message.replace('\0', "\u{FFFD}"))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    PyErr::warn(py, &py.get_type::<PyUserWarning>(), &text, 1)
}

/// Reads `bytes` named `name` and verifies it unless `verify` is false.
fn load(py: Python<'_>, bytes: Vec<u8>, name: &str, verify: bool) -> PyResult<Module> {
    let name = name.to_string();
    let loaded = py.detach(move || {
        let loaded = hlo::load_bytes(bytes, &name)?;
        if verify {
            loaded.verify()?;
        }
        Ok::<_, hlo::Error>(loaded)
    });
    let loaded = loaded.map_err(|e| hlo_error(py, &e))?;
    if let Some(w) = loaded.warning() {
        warn(py, &w)?;
    }
    Ok(Module { loaded })
}

/// Parses HLO text (`str` or `bytes`) or a serialized `HloModuleProto`
/// (`bytes`, told apart by content) and verifies it.
#[pyfunction]
#[pyo3(signature = (data, name = None, *, verify = true))]
pub fn parse(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    name: Option<String>,
    verify: bool,
) -> PyResult<Module> {
    let bytes = if let Ok(s) = data.cast::<PyString>() {
        s.to_str()?.as_bytes().to_vec()
    } else if let Ok(b) = data.cast::<PyBytes>() {
        b.as_bytes().to_vec()
    } else {
        return Err(PyTypeError::new_err(
            "parse() takes HLO text as str, or bytes (text or a serialized HloModuleProto)",
        ));
    };
    load(py, bytes, name.as_deref().unwrap_or("<input>"), verify)
}

/// Reads StableHLO MLIR text in the generic op form (as jax lowers it:
/// `lowered.compiler_ir().operation.get_asm(print_generic_op_form=True)`),
/// a `str` or UTF-8 `bytes` (`get_asm(..., binary=True)`, which spares
/// Python a decode), into the module XLA's own conversion would give
/// (`hlo::parse_stablehlo`), and verifies it. Its text is that module as
/// HLO text.
#[pyfunction]
#[pyo3(signature = (text, name = None, *, verify = true))]
pub fn parse_stablehlo(
    py: Python<'_>,
    text: &Bound<'_, PyAny>,
    name: Option<String>,
    verify: bool,
) -> PyResult<Module> {
    let text: &str = if let Ok(s) = text.cast::<PyString>() {
        s.to_str()?
    } else if let Ok(b) = text.cast::<PyBytes>() {
        std::str::from_utf8(b.as_bytes()).map_err(|e| {
            PyValueError::new_err(format!("parse_stablehlo: the bytes are not UTF-8: {e}"))
        })?
    } else {
        return Err(PyTypeError::new_err(
            "parse_stablehlo() takes MLIR text as str or UTF-8 bytes",
        ));
    };
    // Both are immutable Python objects, held for the call.
    let hlo = py
        .detach(|| hlo::stablehlo_to_hlo_text(text))
        .map_err(|e| hlo_error(py, &e))?;
    load(
        py,
        hlo.into_bytes(),
        name.as_deref().unwrap_or("<stablehlo>"),
        verify,
    )
}

/// Reads a module file (HLO text or `HloModuleProto`, by content) and verifies it.
#[pyfunction]
#[pyo3(signature = (path, *, verify = true))]
pub fn read(py: Python<'_>, path: PathBuf, verify: bool) -> PyResult<Module> {
    let name = path.display().to_string();
    let bytes = std::fs::read(&path).map_err(|e| PyOSError::new_err(format!("{name}: {e}")))?;
    load(py, bytes, &name, verify)
}

/// The registered passes: `(name, description)` pairs.
#[pyfunction]
pub fn list_passes() -> Vec<(&'static str, &'static str)> {
    passes::list_passes().to_vec()
}

/// What `Module.run_passes` returns.
#[pyclass(frozen, module = "hlo_opt")]
pub struct PassResult {
    #[pyo3(get)]
    module: Py<Module>,
    #[pyo3(get)]
    changed: bool,
    /// The `--explain` text (with `explain=False`: the summary lines only).
    #[pyo3(get)]
    explain: String,
    /// What hlo-opt prints on stderr even without `--explain`.
    #[pyo3(get)]
    notes: Vec<String>,
    /// Warnings about the options (threads capped, a pass listed twice).
    #[pyo3(get)]
    warnings: Vec<String>,
    /// `passes::explain::Record`s as JSON.
    #[pyo3(get)]
    decisions_json: String,
}

#[pymethods]
impl PassResult {
    fn __repr__(&self) -> String {
        format!("<hlo_opt.PassResult changed={}>", self.changed)
    }
}

/// The pass list of `run_passes`: `"layout,tile"` or `["layout", "tile"]`.
fn pass_list(passes: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = passes.cast::<PyString>() {
        return Ok(s.to_str()?.to_string());
    }
    let names: Vec<String> = passes.extract().map_err(|_| {
        PyTypeError::new_err("passes: a list of pass names, or a comma-separated str")
    })?;
    if let Some(bad) = names.iter().find(|n| n.contains(',')) {
        return Err(PyValueError::new_err(format!(
            "pass name `{bad}` contains a comma; give the names as separate list items"
        )));
    }
    Ok(names.join(","))
}

/// `trust_radius`: a number of nodes or `"all"`.
fn radius(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Option<usize>>> {
    let Some(v) = value else { return Ok(None) };
    if let Ok(s) = v.extract::<String>() {
        return if s == "all" {
            Ok(Some(None))
        } else {
            Err(PyValueError::new_err(format!(
                "trust_radius `{s}`: give a number of nodes (0 or more) or \"all\""
            )))
        };
    }
    let n: i64 = v.extract().map_err(|_| {
        PyTypeError::new_err("trust_radius: a number of nodes (0 or more) or \"all\"")
    })?;
    usize::try_from(n).map(|n| Some(Some(n))).map_err(|_| {
        PyValueError::new_err(format!(
            "trust_radius {n}: give a number of nodes (0 or more) or \"all\""
        ))
    })
}

/// `explain`: `False`, `True` (changed nodes) or `"all"` (every node).
fn explain_mode(value: &Bound<'_, PyAny>) -> PyResult<(bool, bool)> {
    if let Ok(b) = value.extract::<bool>() {
        return Ok((b, false));
    }
    match value.extract::<String>().as_deref() {
        Ok("all") => Ok((true, true)),
        Ok("changed") => Ok((true, false)),
        _ => Err(PyValueError::new_err(
            "explain: False, True (the changed nodes) or \"all\" (every node)",
        )),
    }
}

/// A count argument that must not be negative.
fn count(name: &str, v: Option<i64>) -> PyResult<Option<usize>> {
    v.map(|n| {
        usize::try_from(n).map_err(|_| PyValueError::new_err(format!("{name} {n}: give 0 or more")))
    })
    .transpose()
}

#[pymethods]
impl Module {
    /// The module's name (`HloModule NAME`).
    #[getter]
    fn name(&self) -> String {
        self.module().name.to_string()
    }

    /// The name errors give the source (a path, `<input>`).
    #[getter]
    fn source_name(&self) -> String {
        self.loaded.name.clone()
    }

    /// The module as HLO text, as `hlo-opt` prints it.
    fn __str__(&self, py: Python<'_>) -> String {
        let m = self.module();
        py.detach(|| hlo::print_module(m))
    }

    fn __repr__(&self) -> String {
        let m = self.module();
        format!(
            "<hlo_opt.Module '{}': {} computations, {} instructions>",
            m.name,
            m.computations().count(),
            m.all_instructions().count()
        )
    }

    /// The module as a serialized `HloModuleProto` (`hlo-opt --emit=proto`).
    fn to_proto<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let m = self.module();
        let bytes = py
            .detach(|| hlo::proto::to_bytes(m))
            .map_err(|e| hlo_error(py, &e))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Runs the verifier; raises `HloError` placed in the source text.
    fn verify(&self, py: Python<'_>) -> PyResult<()> {
        let l = &self.loaded;
        py.detach(|| l.verify()).map_err(|e| hlo_error(py, &e))
    }

    /// Runs passes as `hlo-opt --pass=...` does, on a copy of the module.
    #[pyo3(signature = (passes, *, budget = None, seed = None, top_k = None, threads = None,
        min_gain = None, trust_radius = None, model = None, layout_model = None,
        tile_model = None, measure = None, measure_budget = 10.0, verify_each = false,
        explain = None))]
    #[allow(clippy::too_many_arguments)]
    fn run_passes(
        &self,
        py: Python<'_>,
        passes: &Bound<'_, PyAny>,
        budget: Option<i64>,
        seed: Option<u64>,
        top_k: Option<i64>,
        threads: Option<i64>,
        min_gain: Option<f64>,
        trust_radius: Option<&Bound<'_, PyAny>>,
        model: Option<PathBuf>,
        layout_model: Option<PathBuf>,
        tile_model: Option<PathBuf>,
        measure: Option<String>,
        measure_budget: f64,
        verify_each: bool,
        explain: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PassResult> {
        let list = pass_list(passes)?;
        let names =
            passes::parse_pass_list(&list).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let mut warnings = passes::options::list_warnings(&names);
        let (explain, explain_all) = match explain {
            Some(v) => explain_mode(v)?,
            None => (false, false),
        };
        let settings = passes::options::Settings {
            budget: count("budget", budget)?,
            seed,
            top_k: count("top_k", top_k)?,
            threads: count("threads", threads)?,
            min_gain,
            trust_radius: radius(trust_radius)?,
            model,
            layout_model,
            tile_model,
            measuring: measure.is_some(),
            verify_each,
            explain,
            explain_all,
            progress: false,
        };
        let mut options = settings
            .pass_options(&list, &mut |w| warnings.push(w))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        if let Some(spec) = &measure {
            let measurer = pjrt::measurer_for_budget(spec, measure_budget)
                .map_err(|e| crate::BackendError::new_err(e.to_string()))?;
            options.measurer = Some(Box::new(measurer));
        }
        for w in &warnings {
            warn(py, w)?;
        }
        let src = &self.loaded;
        let (result, module, report) = py.detach(move || {
            let mut m = src.module.clone();
            let (result, report) = passes::options::run(&mut m, &list, options);
            (result, m, report)
        });
        let changed = result.map_err(|e| pass_error(py, e, src))?;
        // Through `serde_json::Value`, as `--explain-json` writes them (an
        // f32 score widened to f64, digit for digit the CLI's).
        let decisions_json = serde_json::to_value(&report.records)
            .map(|v| v.to_string())
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let text = hlo::print_module(&module);
        let out = Module {
            loaded: hlo::Loaded {
                module,
                text,
                name: src.name.clone(),
                ignored_fields: None,
            },
        };
        Ok(PassResult {
            module: Py::new(py, out)?,
            changed,
            explain: report.explain,
            notes: report.notes,
            warnings,
            decisions_json,
        })
    }
}

/// A pass error as a Python exception; a verifier error placed in the
/// source, as hlo-opt places it.
fn pass_error(py: Python<'_>, e: passes::PassError, src: &hlo::Loaded) -> PyErr {
    match e {
        passes::PassError::Verify { pass, source } => {
            let located = source.locate(&src.text, &src.name);
            crate::hlo_error_after(
                py,
                &format!("the module does not verify after pass {pass}:\n"),
                &located,
            )
        }
        passes::PassError::Hlo(source) => hlo_error(py, &source),
        passes::PassError::Options(_)
        | passes::PassError::UnknownPass { .. }
        | passes::PassError::PassList(_) => PyValueError::new_err(e.to_string()),
        other => PassError::new_err(other.to_string()),
    }
}
