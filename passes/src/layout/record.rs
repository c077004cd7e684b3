//! The decision record: what the layout pass searched, considered and
//! decided, as data. `--explain-json` is its JSON as a
//! [`crate::explain::Record`] (its `pass` tag, then the serde field names
//! as keys, docs/passes.md); the `--explain` text is rendered from it
//! ([`super::report`]). A field without a value is left out, never `null`.

use serde::Serialize;

/// The layout pass's report on one module.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayoutReport {
    /// Configurable nodes, and those with more than one candidate.
    pub nodes: usize,
    pub nodes_with_choice: usize,
    pub space: Space,
    pub trust_region: TrustRegion,
    pub search: SearchInfo,
    pub model: ModelInfo,
    /// With `--measure`: the model's best configurations, best first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub model_ranked: Vec<Ranked>,
    /// Each change of the search's best (and each change the trust region
    /// reverted), alone against the compiler default, in node order.
    pub considered: Vec<Considered>,
    /// The other configurable nodes, in node order.
    pub other_nodes: Vec<OtherNode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measurement: Option<Measurement>,
    pub decision: Decision,
    pub warnings: Vec<String>,
    pub result: Outcome,
}

/// The product space of the nodes' candidates.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Space {
    /// Exact count; left out beyond 2^64 (then `log10` says it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configurations: Option<u64>,
    pub log10: f64,
}

/// The trust region the search stayed in.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TrustRegion {
    /// `--trust-radius`; left out for `all`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub radius: Option<usize>,
    /// Configurations in the region: exact below 2^64, else left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configurations: Option<u64>,
    pub log10: f64,
    /// The count reached the largest u128 (3.40e38): it is at least that.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub saturated: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SearchInfo {
    pub method: String,
    /// Distinct configurations scored.
    pub scored: usize,
    pub seconds: f64,
    pub seed: u64,
    /// Configurations rescored together at the end.
    pub rescored: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelInfo {
    pub name: String,
    /// The device whose runtimes it was trained on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Predictions are runtime changes (else changes of the score).
    pub runtime_calibrated: bool,
    /// The model's error as a runtime change, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_runtime_resolution: Option<f64>,
    /// The smallest predicted gain acted on and what set it; left out when
    /// measured candidates decide.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold_source: Option<String>,
}

/// One of the model's best configurations (`--measure`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ranked {
    pub rank: usize,
    pub predicted_change_pct: f64,
    pub nodes_changed: usize,
    /// The nodes it changes, each with its layouts: `%name (output {..}, ...)`.
    pub changes: Vec<String>,
    pub score: f32,
}

/// A change considered: one node of the search's best, alone against the
/// compiler default.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Considered {
    pub node: String,
    /// The layouts chosen (left out when the trust region reverted it) and
    /// the compiler default's, as `output {1,0}, input default`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub choice: Option<String>,
    pub default: String,
    /// Left out when the change was not scored alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_change_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score_alone: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_score: Option<f32>,
    /// `applied`, `not applied` or `reverted`.
    pub outcome: &'static str,
    /// Whether the node's layouts changed in the module.
    pub changed: bool,
}

/// A configurable node whose own choice is the compiler default's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OtherNode {
    pub node: String,
    pub default: String,
    /// Relaid out by the changes around it.
    pub relaid_out: bool,
}

/// What measurement said.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Measurement {
    /// Distinct modules measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidates: Option<usize>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,
    /// The model's best configurations all gave the default's module.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub nothing_to_measure: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configurations: Option<usize>,
    /// The measurement's lines, as `--explain` shows them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    /// Median seconds per run of each measured module (`null`: it failed),
    /// the compiler default's index among them and the index kept.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub seconds: Vec<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept: Option<usize>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Decision {
    pub applied: bool,
    /// `model`, `trust region` or `measurement`.
    pub decided_by: &'static str,
    pub text: String,
    /// The applied or rejected configuration's predicted change, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_change_pct: Option<f64>,
    pub best_score: f32,
    pub default_score: f32,
}

/// What changed in the module.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outcome {
    pub nodes_changed: usize,
    /// Nodes whose chosen candidate spells out the layouts they had.
    pub chose_same_layouts: usize,
    pub copies_added: usize,
    pub instructions_relaid_out: usize,
    /// `copy %c of %p for %u (shape)`, one per copy.
    pub copies: Vec<String>,
}
