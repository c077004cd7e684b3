//! The learned per-op model: for one dot's or convolution's row
//! ([`super::contractions`]), the log of oneDNN's runtime over XLA's
//! default kernel for it, learned from ops timed alone
//! (`costmodel/training/xla_cpu_ops_model.py --export`), and its card: the
//! XLA and CPU it was trained on, its cross-validated error and the margin
//! an op's predicted gain must beat.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::contractions::{Contraction, NUM_OP_FEATURES};
use super::model::{cached, Builtin, Cache};

/// Where and with what an op model was trained, and how well it predicts.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct OpCard {
    pub xla: String,
    pub cpu: String,
    #[serde(default)]
    pub isa: Vec<String>,
    #[serde(default)]
    pub cores: usize,
    /// Ops (dots and convolutions) in the training data, and how many of
    /// them are convolutions.
    pub ops: usize,
    #[serde(default)]
    pub convolutions: usize,
    /// Cross-validated error in log space (root mean square).
    pub error: f64,
    /// An op goes to oneDNN only when its predicted gain exceeds `margin`
    /// times `error` (chosen by cross-validation).
    pub margin: f64,
    #[serde(default)]
    pub cv: std::collections::BTreeMap<String, f64>,
    /// The convolution forms (dimension labels, `b01f_01io->b01f`) of the
    /// training data. A convolution of another form (a weight gradient's
    /// `f01b_i01o->01bf`) is outside what the model has seen: it keeps
    /// XLA's kernel. Empty in older cards: no such check.
    #[serde(default)]
    pub conv_forms: Vec<String>,
}

impl OpCard {
    /// Whether the op of `signature` is of a form the model was trained on
    /// (every dot is; a convolution when its dimension labels are among
    /// [`OpCard::conv_forms`]).
    pub fn knows(&self, signature: &str) -> bool {
        match signature.strip_prefix("conv ") {
            Some(rest) if !self.conv_forms.is_empty() => rest
                .split_whitespace()
                .nth(1)
                .is_some_and(|form| self.conv_forms.iter().any(|f| f == form)),
            _ => true,
        }
    }
}

/// The shipped op models, one per supported jaxlib.
pub const BUILTIN_OPS: &[Builtin] = &[
    Builtin {
        name: "xla-cpu-ops-jaxlib-0.10.2",
        jaxlib: "0.10.2",
        onnx: include_bytes!("../../models/xla_cpu_ops_jaxlib-0.10.2.onnx"),
        card: include_str!("../../models/xla_cpu_ops_jaxlib-0.10.2.json"),
    },
    Builtin {
        name: "xla-cpu-ops-jaxlib-0.12.0.1",
        jaxlib: "0.12.0.1",
        onnx: include_bytes!("../../models/xla_cpu_ops_jaxlib-0.12.0.1.onnx"),
        card: include_str!("../../models/xla_cpu_ops_jaxlib-0.12.0.1.json"),
    },
];

static LOADED: Cache<OpModel> = Mutex::new(Vec::new());

/// Drops the loaded built-in op models.
pub fn clear_cache() {
    LOADED.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// A loaded op model and its card.
pub struct OpModel {
    rows: costmodel::rows::RowModel,
    pub card: OpCard,
    pub origin: String,
}

impl OpModel {
    /// The built-in op model for the XLA a program model was trained on
    /// (its card's `xla`, `jaxlib 0.10.2`), loaded once per process.
    pub fn builtin_for_xla(xla: &str) -> Result<Option<Arc<OpModel>>, String> {
        let Some(b) = BUILTIN_OPS
            .iter()
            .find(|b| xla.strip_prefix("jaxlib ") == Some(b.jaxlib))
        else {
            return Ok(None);
        };
        cached(&LOADED, b.name, || {
            OpModel::from_parts(b.onnx, b.card, b.name)
        })
        .map(Some)
    }

    /// The op model that goes with a program model: `ops.onnx` (card
    /// `ops.json`) beside a program model given as a path, as
    /// `scripts/xla_cpu_retrain` writes them; else the built-in one for the
    /// XLA the program model was trained on.
    pub fn for_program_model(origin: &str, xla: &str) -> Result<Option<Arc<OpModel>>, String> {
        let path = std::path::Path::new(origin);
        if path.extension().is_some_and(|e| e == "onnx") {
            let sibling = path.with_file_name("ops.onnx");
            if sibling.is_file() {
                let onnx =
                    std::fs::read(&sibling).map_err(|e| format!("{}: {e}", sibling.display()))?;
                let card_path = sibling.with_extension("json");
                let card = std::fs::read_to_string(&card_path)
                    .map_err(|e| format!("{}: the op model's card: {e}", card_path.display()))?;
                return OpModel::from_parts(&onnx, &card, &sibling.display().to_string())
                    .map(|m| Some(Arc::new(m)));
            }
        }
        OpModel::builtin_for_xla(xla)
    }

    pub fn from_parts(onnx: &[u8], card: &str, origin: &str) -> Result<OpModel, String> {
        let card: OpCard = serde_json::from_str(card)
            .map_err(|e| format!("{origin}: the op model's card: {e}"))?;
        if !(card.margin.is_finite()
            && card.margin >= 0.0
            && card.error.is_finite()
            && card.error >= 0.0)
        {
            return Err(format!(
                "{origin}: the op model's card has a margin or error that is not a finite non-negative number"
            ));
        }
        let rows = costmodel::rows::RowModel::from_bytes(onnx, NUM_OP_FEATURES, origin)?;
        Ok(OpModel {
            rows,
            card,
            origin: origin.to_string(),
        })
    }

    /// The predicted log runtime ratio (oneDNN over XLA's default) of each op.
    pub fn predict(&self, ops: &[&Contraction]) -> Result<Vec<f64>, String> {
        let data: Vec<f32> = ops
            .iter()
            .flat_map(|d| d.features.iter().map(|&x| x as f32))
            .collect();
        let values = self.rows.run(&data, ops.len())?;
        Ok(values.iter().map(|&v| f64::from(v)).collect())
    }
}
