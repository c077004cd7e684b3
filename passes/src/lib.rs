//! `passes`: the pass manager and the cost-model-guided passes (layout
//! assignment, tile selection).
//!
//! A pass is a name plus `run(module) -> changed` ([`Pass`]); the registry
//! ([`create_pass`], [`list_passes`]) maps `--pass` names to passes;
//! [`run_pipeline`] runs a comma-separated list of them, with the verifier
//! after each pass when asked (always in tests).
//!
//! # Map of the modules
//!
//! Each line: what the module owns; what it may import from this crate
//! (and from outside it). Imports point down this list, never up.
//!
//! | module | owns | may import |
//! |---|---|---|
//! | [`manager`] | the registry (one `match` from `--pass` name to pass), the pass-list parser, the pipeline runner with the verifier between passes | `layout`, `tile`, this file; `hlo` |
//! | [`layout`] | the layout pass as stages, one file each: `featurize`, `candidates` (enumerate each configurable node's layouts), `explore` (search, with `search`: the trust-region and genetic search; knows no IR, only genomes and a `fitness`), `measure`, `decide`, `apply` (with `assign`: propagation and copy insertion), `report` (the decision record `record`, its `--explain` text `render`); `dims` and `shapes` (minor-to-major helpers), `attrs` | `explain`, this file; `costmodel`, `hlo` |
//! | [`xla_cpu`] | the xla-cpu pass: `features` (a program's row), `candidates` (XLA:CPU's YNNPACK fusion choices), `model` (the ONNX model and its card), the decision and its report (`mod.rs`) | `explain`, this file; `costmodel`, `hlo` |
//! | [`tile`] | the tile pass: `extract` (kernels of a fused module), `kernel` and `space` (tile candidates), `runs` (measured runs as rows), `backend` (the `hlo_opt_tile` backend config) | this file; `costmodel`, `hlo` |
//! | this file | [`Pass`], [`PassContext`], [`PassOptions`], [`PassError`] (the crate's one error enum), the defaults the tools share | `costmodel`, `hlo` |
//!
//! `layout` and `tile` do not import each other. Nothing here parses flags
//! or prints for people beyond the `--explain` text the passes write into
//! [`PassContext::explain`]; the tools render it. `pjrt` imports this
//! crate (its measurer implements [`Measurer`]), never the other way.

use std::path::PathBuf;

use hlo::Module;

pub mod explain;
pub mod layout;
pub mod manager;
pub mod options;

pub use manager::{
    create_pass, list_passes, parse_pass_list, pass_names, run_pipeline, split_pass_list,
    verify_module,
};

pub mod tile;
pub mod xla_cpu;

/// Errors of passes and of the pass manager.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    #[error("unknown pass `{name}` (known passes: {known})")]
    UnknownPass { name: String, known: String },
    #[error("--pass {0}")]
    PassList(String),
    /// Options refused before any pass runs; the message names the flag.
    #[error("{0}")]
    Options(String),
    #[error("pass {pass}: {message}")]
    Failed { pass: &'static str, message: String },
    #[error("after pass {pass}: {source}")]
    Verify {
        pass: &'static str,
        source: hlo::Error,
    },
    #[error(transparent)]
    CostModel(#[from] costmodel::CostModelError),
    #[error(transparent)]
    Hlo(#[from] hlo::Error),
}

/// Whether a pass changed the module.
pub type Changed = bool;

/// Measures a candidate module on real hardware: HLO text in, runtime out
/// (any unit, lower is faster); `None` when the measurement failed.
pub type MeasureFn = dyn FnMut(&str) -> Option<f64> + Send;

/// A measurement of a set of candidate modules taken together (a built-in
/// measurer such as the PJRT backend's: each compiled once, run interleaved
/// with a control), and the candidate it keeps.
#[derive(Clone, Debug)]
pub struct Measurement {
    /// Index of the candidate to keep.
    pub keep: usize,
    /// Seconds per run of each candidate (`None`: not measured, failed);
    /// empty when the measurer gives no times.
    pub seconds: Vec<Option<f64>>,
    /// Human-readable lines: measured times and the decision (`--explain`).
    pub report: String,
}

/// Measures candidates together on real hardware. `candidates[default]` is
/// the compiler default; a measurer keeps another candidate only when it
/// is faster beyond its noise. An `Err` is a failure of the measurement
/// itself (no plugin, the default does not compile), reported to the user.
pub trait Measurer: Send {
    fn measure(
        &mut self,
        candidates: &[hlo::Module],
        default: usize,
    ) -> Result<Measurement, String>;
    /// The device measured on, named as model files name theirs
    /// (`xla-cpu`, see `costmodel::CostModel::device`); `None`: unknown.
    fn device(&mut self) -> Option<String> {
        None
    }
}

/// Options shared by all passes (CLI flags, C ABI options).
pub struct PassOptions {
    /// Layout cost model file; `None` = the embedded default.
    pub layout_model: Option<PathBuf>,
    /// Tile cost model file; `None` = the embedded default.
    pub tile_model: Option<PathBuf>,
    /// Seed of every randomized search.
    pub seed: u64,
    /// Maximum number of configurations scored per module by a search.
    pub budget: usize,
    /// How many of the best candidates to record / measure.
    pub top_k: usize,
    /// ONNX Runtime intra-op threads (0 = ORT's default).
    pub threads: usize,
    /// Run the verifier after each pass.
    pub verify_each: bool,
    /// Show progress bars on stderr for long searches.
    pub progress: bool,
    /// Optional hardware measurement callback (model-guided autotuning).
    pub measure: Option<Box<MeasureFn>>,
    /// Optional built-in measurer of whole candidate sets (`--measure=xla-cpu`);
    /// takes precedence over `measure` where a pass supports it.
    pub measurer: Option<Box<dyn Measurer>>,
    /// Write a detailed report (`--explain`) into [`PassContext::explain`]:
    /// the summary and the nodes the pass changed; costs a few extra model
    /// calls.
    pub explain: bool,
    /// With `explain`: list every node, unchanged ones too (`--explain=all`).
    pub explain_all: bool,
    /// Smallest predicted gain, in percent of the compiler default's model
    /// score, for which the layout pass changes a module; the estimated
    /// price of the copies a configuration needs is added to it
    /// (docs/passes.md, "What the passes promise").
    pub min_gain: f64,
    /// The layout search's trust region: most configurable nodes a
    /// configuration may change from the compiler default. Each change of
    /// the chosen configuration must also on its own be predicted to gain
    /// `min_gain`, or the model's resolution when larger (unless measured),
    /// and the whole configuration that floor plus its copies. `None`
    /// (`--trust-radius all`): no trust region, neither bound nor per-change
    /// check nor resolution floor (docs/passes.md, "The layout search's trust
    /// region").
    pub trust_radius: Option<usize>,
    /// Which compiler the tile pass decides for (`--tile-target`).
    pub tile_target: TileTarget,
    /// The XLA:GPU tile target's outputs (device description, key version,
    /// autotuning cache directory and results file).
    pub xla_gpu: tile::xla_gpu::XlaGpuOptions,
    /// The xla-cpu pass's model and the XLA and CPU it decides for.
    pub xla_cpu: xla_cpu::XlaCpuOptions,
}

/// Which compiler the tile pass decides for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TileTarget {
    /// XLA:GPU when the module holds Triton GEMM fusions, else TPU-style kernels.
    #[default]
    Auto,
    /// TPU-style kernels, ranked with the tile cost model (`hlo_opt_tile`).
    Tpu,
    /// XLA:GPU's Triton GEMM fusions (`triton_gemm_config`, autotuning cache).
    XlaGpu,
}

/// Default of [`PassOptions::trust_radius`]: the near-default
/// configurations a layout model is trained on change one to three nodes
/// (TpuGraphs' "default" collection, `hlo-cost collect`); farther away the
/// model extrapolates (docs/passes.md, "The layout search's trust region").
pub const DEFAULT_TRUST_RADIUS: usize = 3;

/// Default of [`PassOptions::min_gain`], in percent: above the layout
/// model's own noise (docs/passes.md, "What the passes promise").
pub const DEFAULT_MIN_GAIN: f64 = 1.0;

impl Default for PassOptions {
    fn default() -> Self {
        PassOptions {
            layout_model: None,
            tile_model: None,
            seed: 0,
            budget: 10_000,
            top_k: 1,
            threads: 0,
            verify_each: false,
            progress: false,
            measure: None,
            measurer: None,
            explain: false,
            explain_all: false,
            min_gain: DEFAULT_MIN_GAIN,
            trust_radius: Some(DEFAULT_TRUST_RADIUS),
            tile_target: TileTarget::Auto,
            xla_gpu: tile::xla_gpu::XlaGpuOptions::default(),
            xla_cpu: xla_cpu::XlaCpuOptions::default(),
        }
    }
}

/// State shared by the passes of one pipeline run.
pub struct PassContext {
    pub options: PassOptions,
    /// Human-readable report lines (`--explain`), appended by each pass.
    pub explain: String,
    /// What the user must hear even without `--explain` (a kernel skipped, a
    /// module the pass has nothing to do in); each is also in `explain`.
    pub notes: Vec<String>,
    /// The decisions of `explain` as data ([`explain::Record`]); the
    /// per-node model scores only with [`PassOptions::explain`].
    pub records: Vec<explain::Record>,
    /// Structured reports (`--explain-json`), one per pass run that writes
    /// one (the layout pass: its search, model, candidates, measurements
    /// and decision).
    pub reports: Vec<serde_json::Value>,
}

impl PassContext {
    pub fn new(options: PassOptions) -> Self {
        PassContext {
            options,
            explain: String::new(),
            notes: Vec::new(),
            records: Vec::new(),
            reports: Vec::new(),
        }
    }
}

/// A module-to-module transformation.
pub trait Pass {
    /// The `--pass` name.
    fn name(&self) -> &'static str;
    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, PassError>;
}
