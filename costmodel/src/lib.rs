//! `costmodel`: the learned cost model of hlo-opt.
//!
//! # Map of the modules
//!
//! Each line: what the module owns; what it may import from this crate
//! (and from outside it). Imports point down this list, never up, so each
//! module can be read knowing only the ones below it.
//!
//! | module | owns | may import |
//! |---|---|---|
//! | [`tuning`] | autotuner records (raw TpuGraphs `ModuleTuningData` / `TuningData` protobufs, `.runs.json`) as configuration rows with their measured runtimes | `features`, `graph`, `error`; `hlo` |
//! | [`features`] | TpuGraphs-exact featurization of an HLO module (`node`: the 140 node features; `opcode`: TpuGraphs' opcode ids; `config`: the 18 layout / 24 tile configuration features) | `graph`, `error`; `hlo` |
//! | [`rows`] | [`rows::RowModel`]: an ONNX model over feature rows (`features` [n, width] in, n values out), for the passes' rankers and regressors | `onnx` (its environment) |
//! | [`onnx`] | the learned GNN models run with ONNX Runtime: the model contract (docs/cost-models.md), finding and checking the library, [`load_model`], the embedded defaults; the process's caches of models and encoder outputs | `incremental` (its cache), `reuse`, `prune`, `graph`, the [`CostModel`] trait, `error` |
//! | [`reference`] | a hand-written, non-learned reference [`CostModel`] for tests and `--model reference` | `graph`, the [`CostModel`] trait, `error` |
//! | [`incremental`] | scoring configurations as the compiler default's node sums plus the changed nodes' terms, for models of the node-sum form; the process's cache of those scorers | the [`CostModel`] trait, `reuse`, `graph`, `error` |
//! | [`reuse`] | the process's bounded caches of loaded models (their sessions) and of the encoder's outputs, and the keys they are found by (a model's bytes, task and threads; a graph's arrays) | `graph`; `sha2` |
//! | [`prune`] | k-hop pruning of layout graphs for the encoder | `graph` |
//! | [`npz`] | npz files of the published format, read streaming and written | `graph`, `error` |
//! | [`metrics`] | the ranking metrics of the TpuGraphs paper and Kaggle (Kendall tau, slowdown@k) | nothing |
//! | [`graph`] | the TpuGraphs graph format in memory ([`Graph`], its borrowed form [`GraphView`], [`ConfigBatch`], [`Task`]) | nothing |
//! | [`error`] | [`CostModelError`], the crate's one error enum | nothing |
//! | this file | the [`CostModel`] trait, [`Prepared`] | `reuse` (a model's key), `graph`, `error` |
//!
//! `hlo` is the only workspace crate this one imports; `passes` and the
//! tools import it. No module here prints, reads flags or knows a pass.
//!
//! A cost model sits behind the [`CostModel`] trait so the ONNX model, a
//! reference model for tests and future models plug in the same way. Scores are
//! "lower = predicted faster"; compare them with `f32::total_cmp` and break ties
//! by index.

pub mod error;
pub mod features;
pub mod graph;
pub mod incremental;
pub mod metrics;
pub mod npz;
pub mod onnx;
pub mod prune;
pub mod reference;
pub mod reuse;
pub mod rows;
pub mod tuning;

pub use error::{CostModelError, Result};
pub use graph::{ConfigBatch, Graph, GraphView, Task};
pub use onnx::{load_model, OnnxModel};

/// The configuration-independent work a model did for one graph (for the GNN:
/// the encoder's embeddings of the configurable nodes), reused for every batch
/// of configurations of that graph.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The graph, for models that need it at scoring time (tile: early join).
    pub graph: Graph,
    /// Model-specific state, row-major, of shape `state_shape`.
    pub state: Vec<f32>,
    pub state_shape: Vec<usize>,
    /// Layout models with an early join: the configurable nodes' meta-graph,
    /// `[consumer, producer]` rows of positions in `node_config_ids`
    /// ([`prune::meta_edges`]); empty for every other model.
    pub meta_edges: Vec<[i64; 2]>,
}

/// A learned (or reference) cost model: ranks configurations of a graph.
pub trait CostModel: Send + Sync {
    /// The task this model scores.
    fn task(&self) -> Task;
    /// The hardware whose runtimes the model learned (`tpu`, `xla-cpu`, ...);
    /// `None` for a model of no device (the reference heuristic).
    fn device(&self) -> Option<String> {
        None
    }
    /// How a score difference translates into runtime: a configuration that
    /// scores `Δ` lower is predicted `exp(Δ · k)` times faster, `k` this
    /// number (`model.json` `log_runtime_per_score`, fitted on the training
    /// graphs; MODEL.md). `None`: the model's scores are only an order; the
    /// layout pass then compares scores as ratios.
    fn log_runtime_per_score(&self) -> Option<f64> {
        None
    }
    /// How far a predicted runtime ratio can be trusted: the standard error,
    /// in ln(runtime), of the predicted ratio of two configurations of one
    /// graph, measured on the training graphs (`model.json`
    /// `log_runtime_resolution`, MODEL.md). The layout pass applies no change
    /// predicted to gain less than `1 - exp(-resolution)`. `None`: unknown.
    fn log_runtime_resolution(&self) -> Option<f64> {
        None
    }
    /// The model's identity for the process's caches ([`reuse`]): two models
    /// of one key give the same outputs for the same inputs, so what one
    /// computed (the incremental scorer's node terms) serves the other.
    /// `None` (the default): nothing this model computes is cached.
    fn reuse_key(&self) -> Option<reuse::ModelKey> {
        None
    }
    /// Runs the configuration-independent part once per graph.
    fn prepare(&self, graph: &Graph) -> Result<Prepared>;
    /// [`CostModel::prepare`] of a graph whose arrays are borrowed (numpy
    /// arrays from Python): the same result. This default copies them into
    /// a [`Graph`]; a model that reads only parts of the graph reads them
    /// in place.
    fn prepare_view(&self, graph: GraphView<'_>) -> Result<Prepared> {
        self.prepare(&graph.to_graph())
    }
    /// One score per configuration of `configs`; lower = predicted faster.
    fn score(&self, prepared: &Prepared, configs: &ConfigBatch) -> Result<Vec<f32>>;

    /// The node-sum form of a layout model (MODEL.md "Incremental stages"),
    /// when it has one: a configuration's score is `score_pooled` of the sum,
    /// over the configurable nodes, of each node's `node_terms`, and a node's
    /// terms depend on its own configuration row alone (given the prepared
    /// graph). Returns the width of those sums; `None`: no such form, score
    /// whole configurations with [`CostModel::score`].
    fn node_sum_width(&self) -> Option<usize> {
        None
    }
    /// The terms of the configurable nodes at positions `nodes` (of the
    /// graph's `node_config_ids`) under each configuration of `configs`,
    /// whose rows are those nodes' (`nodes_per_config == nodes.len()`):
    /// `num_configs x nodes.len() x width`, row-major.
    fn node_terms(
        &self,
        _prepared: &Prepared,
        _nodes: &[usize],
        _configs: &ConfigBatch,
    ) -> Result<Vec<f32>> {
        Err(CostModelError::Input(
            "this model has no node-sum form (node_sum_width is None)".into(),
        ))
    }
    /// Scores from node sums, `num_configs x width` row-major (the terms of
    /// [`CostModel::node_terms`] summed over the nodes).
    fn score_pooled(&self, _pooled: &[f32], _num_configs: usize) -> Result<Vec<f32>> {
        Err(CostModelError::Input(
            "this model has no node-sum form (node_sum_width is None)".into(),
        ))
    }
}
