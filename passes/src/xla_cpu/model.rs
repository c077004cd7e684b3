//! The learned XLA:CPU kernel model: an ONNX regressor (LightGBM,
//! `costmodel/training/xla_cpu_model.py --export`) that predicts, for a
//! program's features and one candidate, the log of the candidate's runtime
//! over XLA's default; and its card (JSON beside it): the XLA and CPU it
//! was trained on, and each candidate's measured prediction error, which
//! the decision must beat. Run by ONNX Runtime through costmodel's
//! environment.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::candidates::Candidate;
use super::features::NUM_FEATURES;

/// Columns of a model row: the program features, then the candidate's.
pub const ROW: usize = NUM_FEATURES + 4;

/// Where and with what a model was trained, and how well it predicts.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct Card {
    /// The XLA the labels were measured with (`jaxlib 0.10.2`).
    pub xla: String,
    /// The CPU model name (`/proc/cpuinfo`), its relevant ISA extensions and
    /// core count.
    pub cpu: String,
    #[serde(default)]
    pub isa: Vec<String>,
    #[serde(default)]
    pub cores: usize,
    /// Programs and families in the training data.
    pub programs: usize,
    pub families: usize,
    /// Per candidate name: the model's leave-one-family-out error in log
    /// space (the root mean square of prediction minus measurement).
    pub error: std::collections::BTreeMap<String, f64>,
    /// A candidate is chosen only when its predicted gain exceeds
    /// `margin` times its error (chosen by cross-validation).
    pub margin: f64,
    /// Cross-validated top-1 slowdown against the measured best, for the
    /// record (`mean`, `geomean`, `max`, and the default's).
    #[serde(default)]
    pub cv: std::collections::BTreeMap<String, f64>,
    /// The module-wide candidates worth timing beside the model's choice,
    /// best first: those that, measured, came closest to each training
    /// program's best (`cv`'s `portfolio_mean` is their
    /// leave-one-family-out slowdown). Empty in older cards.
    #[serde(default)]
    pub portfolio: Vec<String>,
}

/// A built-in model (program or op model): its name, the XLA version it is
/// for, ONNX and card.
pub struct Builtin {
    pub name: &'static str,
    pub jaxlib: &'static str,
    pub onnx: &'static [u8],
    pub card: &'static str,
}

/// The shipped models, one per supported jaxlib (trained on the
/// developers' machine: docs/xla-cpu.md).
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "xla-cpu-jaxlib-0.10.2",
        jaxlib: "0.10.2",
        onnx: include_bytes!("../../models/xla_cpu_jaxlib-0.10.2.onnx"),
        card: include_str!("../../models/xla_cpu_jaxlib-0.10.2.json"),
    },
    Builtin {
        name: "xla-cpu-jaxlib-0.12.0.1",
        jaxlib: "0.12.0.1",
        onnx: include_bytes!("../../models/xla_cpu_jaxlib-0.12.0.1.onnx"),
        card: include_str!("../../models/xla_cpu_jaxlib-0.12.0.1.json"),
    },
];

/// The built-in model names, comma-separated (for messages).
pub fn builtin_names() -> String {
    BUILTINS
        .iter()
        .map(|b| b.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Built-in models loaded so far in this process, by name.
pub type Cache<T> = Mutex<Vec<(&'static str, Arc<T>)>>;

/// The model `name` from `cache`, made by `make` and kept there the first
/// time.
pub fn cached<T>(
    cache: &Cache<T>,
    name: &'static str,
    make: impl FnOnce() -> Result<T, String>,
) -> Result<Arc<T>, String> {
    let mut loaded = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, m)) = loaded.iter().find(|(n, _)| *n == name) {
        return Ok(Arc::clone(m));
    }
    let m = Arc::new(make()?);
    loaded.push((name, Arc::clone(&m)));
    Ok(m)
}

/// The built-in models loaded so far in this process.
static LOADED: Cache<KernelModel> = Mutex::new(Vec::new());

/// Drops the loaded built-in models (their ONNX Runtime sessions); a later
/// use loads them again (`hlo_opt_release_caches`).
pub fn clear_cache() {
    LOADED.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// A loaded model and its card.
pub struct KernelModel {
    rows: costmodel::rows::RowModel,
    pub card: Card,
    pub origin: String,
}

impl KernelModel {
    /// The built-in model for `jaxlib` (a version such as `0.10.2`).
    pub fn builtin_for(jaxlib: &str) -> Option<&'static Builtin> {
        BUILTINS.iter().find(|b| b.jaxlib == jaxlib)
    }

    /// By built-in name (loaded once per process, then shared), or an
    /// `.onnx` path with its card at `PATH.json` (the `.onnx` suffix
    /// replaced; read at each call).
    pub fn load(name_or_path: &str) -> Result<Arc<KernelModel>, String> {
        if let Some(b) = BUILTINS.iter().find(|b| b.name == name_or_path) {
            return cached(&LOADED, b.name, || {
                KernelModel::from_parts(b.onnx, b.card, b.name)
            });
        }
        let path = Path::new(name_or_path);
        if path.extension().and_then(|e| e.to_str()) != Some("onnx") {
            return Err(format!(
                "XLA:CPU model `{name_or_path}`: neither a built-in model ({}) nor an .onnx file",
                builtin_names()
            ));
        }
        let onnx = std::fs::read(path).map_err(|e| format!("{name_or_path}: {e}"))?;
        let card_path = path.with_extension("json");
        let card = std::fs::read_to_string(&card_path)
            .map_err(|e| format!("{}: the model's card: {e}", card_path.display()))?;
        KernelModel::from_parts(&onnx, &card, name_or_path).map(Arc::new)
    }

    pub fn from_parts(onnx: &[u8], card: &str, origin: &str) -> Result<KernelModel, String> {
        let card: Card =
            serde_json::from_str(card).map_err(|e| format!("{origin}: the model's card: {e}"))?;
        if !(card.margin.is_finite() && card.margin >= 0.0)
            || card.error.values().any(|e| !(e.is_finite() && *e >= 0.0))
        {
            return Err(format!("{origin}: the model's card has a margin or error that is not a finite non-negative number"));
        }
        if let Some(bad) = card
            .portfolio
            .iter()
            .find(|n| Candidate::from_name(n).is_none())
        {
            return Err(format!(
                "{origin}: the model's card names {bad:?} in its portfolio, which is not a candidate"
            ));
        }
        let rows = costmodel::rows::RowModel::from_bytes(onnx, ROW, origin)?;
        Ok(KernelModel {
            rows,
            card,
            origin: origin.to_string(),
        })
    }

    /// The predicted log runtime ratio over the default of each candidate
    /// for a program with `features`.
    pub fn predict(
        &self,
        features: &[f64; NUM_FEATURES],
        cands: &[Candidate],
    ) -> Result<Vec<f64>, String> {
        let mut data = Vec::with_capacity(cands.len() * ROW);
        for c in cands {
            data.extend(features.iter().map(|&x| x as f32));
            data.extend(c.encoding().iter().map(|&x| x as f32));
        }
        let values = self.rows.run(&data, cands.len())?;
        Ok(values.iter().map(|&v| f64::from(v)).collect())
    }
}
