//! Model fitness: how the search scores a configuration. One row of
//! features per node and candidate, precomputed; node-sum models score
//! incrementally, any other model scores whole configurations.

use costmodel::features::Featurized;
use costmodel::graph::LAYOUT_CONFIG_DIM;
use costmodel::incremental::NodeSumScorer;
use costmodel::{ConfigBatch, CostModel, Prepared, Task};

use super::candidates::{NodeConfig, NodeSpace};
use super::fail;
use super::search::Fitness;
use crate::{PassContext, PassError};

/// Scores genomes with a cost model: one row of 18 features per node and
/// candidate, precomputed. A model of the node-sum form scores a genome
/// incrementally, from the compiler default's node sums plus the terms of
/// the nodes it changes ([`NodeSumScorer`]; the same scores up to float
/// rounding); any other model gets batches of genomes as one `ConfigBatch`.
pub struct ModelFitness<'a> {
    model: &'a dyn CostModel,
    prepared: Prepared,
    rows: Vec<Vec<[f32; LAYOUT_CONFIG_DIM]>>,
    incremental: Option<NodeSumScorer>,
    /// Model calls made.
    pub calls: usize,
}

impl<'a> ModelFitness<'a> {
    pub fn new(
        model: &'a dyn CostModel,
        f: &Featurized,
        spaces: &[NodeSpace],
    ) -> Result<Self, PassError> {
        let mut fitness = Self::whole(model, f, spaces)?;
        let default: Vec<u16> = spaces.iter().map(|s| s.default as u16).collect();
        fitness.incremental =
            NodeSumScorer::new(model, &fitness.prepared, &fitness.rows, &default)?;
        Ok(fitness)
    }

    /// The fitness the search uses. `--trust-radius all` keeps the search
    /// as it was before incremental scoring, whole-head scores included:
    /// the incremental sums round differently, and the unbounded genetic
    /// search follows another path from the first near-tie they reorder
    /// (docs/benchmarks.md, 28 Nov).
    pub fn for_search(
        model: &'a dyn CostModel,
        f: &Featurized,
        spaces: &[NodeSpace],
        cx: &PassContext,
    ) -> Result<Self, PassError> {
        if cx.options.trust_radius.is_none() {
            Self::whole(model, f, spaces)
        } else {
            Self::new(model, f, spaces)
        }
    }

    /// A fitness that scores every genome whole, whatever the model's form
    /// (the reference the incremental scores are tested against).
    pub fn whole(
        model: &'a dyn CostModel,
        f: &Featurized,
        spaces: &[NodeSpace],
    ) -> Result<Self, PassError> {
        if model.task() != Task::Layout {
            return Err(fail(format!(
                "the model is a {} model; the layout pass needs a layout model (--layout-model)",
                model.task().name()
            )));
        }
        let prepared = model.prepare(&f.graph)?;
        let rows = spaces
            .iter()
            .map(|s| s.candidates.iter().map(NodeConfig::row).collect())
            .collect();
        Ok(ModelFitness {
            model,
            prepared,
            rows,
            incremental: None,
            calls: 0,
        })
    }

    /// Scores configurations given as raw feature rows
    /// (`configs x nodes x 18`), e.g. the measured configs of an npz file.
    pub fn score_rows(
        &mut self,
        num_configs: usize,
        feat: Vec<f32>,
    ) -> Result<Vec<f32>, PassError> {
        self.calls += 1;
        let batch = ConfigBatch {
            task: Task::Layout,
            num_configs,
            nodes_per_config: self.rows.len(),
            feat,
        };
        Ok(self.model.score(&self.prepared, &batch)?)
    }
}

impl Fitness for ModelFitness<'_> {
    /// Incremental scores are not batch-relative: each is `score_pooled` of
    /// its own node sums, and `head_pool` is per configuration, so a
    /// configuration gets the same bits in any call
    /// (`passes/tests/layout_incremental.rs` checks it). The whole head's
    /// scores differ between calls by float rounding (costmodel
    /// `onnx_model.rs`), which can reorder near-ties: batch-relative.
    fn batch_relative(&self) -> bool {
        self.incremental.is_none()
    }
    fn score(&mut self, genomes: &[Vec<u16>]) -> Result<Vec<f32>, PassError> {
        if let Some(inc) = &self.incremental {
            self.calls += 1;
            return Ok(inc.score(self.model, genomes)?);
        }
        let n = self.rows.len();
        let mut feat = Vec::with_capacity(genomes.len() * n * LAYOUT_CONFIG_DIM);
        for g in genomes {
            for (j, &c) in g.iter().enumerate() {
                feat.extend_from_slice(&self.rows[j][c as usize]);
            }
        }
        self.score_rows(genomes.len(), feat)
    }
}
