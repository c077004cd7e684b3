//! The `--explain` report as data: what each pass decided, the candidates it
//! weighed, their model scores and measured times. Each pass appends
//! [`Record`]s to [`crate::PassContext::records`] next to the text it writes
//! into [`crate::PassContext::explain`]; the Python package hands them out
//! as dictionaries (`serde` field names are their keys; the layout pass's
//! are its `--explain-json` keys).
//!
//! Scores are model scores: lower is predicted faster. Times are seconds.

use serde::Serialize;

/// One decision of a pass.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "pass", rename_all = "snake_case")]
pub enum Record {
    /// The layout pass's decision record for the module; serialized, the
    /// object `--explain-json` writes (its keys in docs/passes.md).
    Layout(Box<crate::layout::record::LayoutReport>),
    /// The tile pass's decision for one kernel.
    Tile(TileRecord),
    /// The xla-cpu pass's choice of kernels for the module.
    XlaCpu(XlaCpuRecord),
}

/// The xla-cpu pass on one module (`passes::xla_cpu`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct XlaCpuRecord {
    /// The model (built-in name or path), the XLA and the CPU it was trained on.
    pub model: String,
    pub xla: String,
    pub trained_cpu: String,
    /// The chosen candidate (`default`, `ynn:none`, `ynn:dot+reduce`, ...)
    /// and the compile options that select it (none for the default).
    pub chosen: String,
    pub options: Vec<(String, String)>,
    /// Why, in words.
    pub reason: String,
    /// Every candidate, the default first.
    pub predictions: Vec<XlaCpuPrediction>,
    /// The per-op model (built-in name or path), where one exists for
    /// this XLA (left out otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op_model: Option<String>,
    /// Each distinct dot and convolution oneDNN takes, and whether it goes there.
    pub onednn: Vec<XlaCpuOp>,
    /// What to time on the device against the default, in order, where it
    /// can be measured (`hlo_opt.jax.compile`'s `verify`): the chosen
    /// candidate unless it is the default, then the card's portfolio.
    pub verify: Vec<String>,
}

/// One distinct dot or convolution of the xla-cpu pass's per-op choice
/// (`passes::xla_cpu::contractions`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct XlaCpuOp {
    /// `bf16[8,256]x[256,512] b[]x[] c[1]x[0]`, as `hlo_opt.onednn` matches it.
    pub signature: String,
    /// How many ops of the program have it.
    pub count: usize,
    /// Predicted runtime change of a oneDNN matmul against XLA's default
    /// kernel for this op alone, percent (negative = faster).
    pub change_pct: f64,
    /// The gain it needs: the op model's error times its margin, percent.
    pub required_gain_pct: f64,
    /// Whether it goes to oneDNN.
    pub onednn: bool,
    /// A convolution of a form (dimension labels) the op model was not
    /// trained on: it keeps XLA's kernel whatever the prediction. Left out
    /// when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unseen_form: bool,
}

/// One candidate of the xla-cpu pass.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct XlaCpuPrediction {
    pub candidate: String,
    /// Predicted runtime change against XLA's default, percent (negative = faster).
    pub change_pct: f64,
    /// The gain it needs to be chosen: the model's measured error times the
    /// card's margin, percent.
    pub required_gain_pct: f64,
    /// Whether its predicted gain beats that.
    pub trusted: bool,
}

/// The tile pass on one kernel.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TileRecord {
    pub kernel: String,
    /// The tile chosen and its model score; the compiler default's.
    pub chosen: String,
    pub score: f32,
    pub default: String,
    pub default_score: f32,
    /// The best-ranked tiles, best first (`--top-k`), with their scores.
    pub candidates: Vec<(String, f32)>,
    /// Tiles ranked, within the memory budget, enumerated.
    pub ranked: usize,
    pub within_budget: usize,
    pub raw: u64,
    /// The measured time of the chosen tile (a measure callback).
    pub measured: Option<f64>,
}
