//! Incremental scoring: a configuration's score from a base configuration's
//! node sums plus the terms of the nodes where it differs.
//!
//! Owns: [`NodeSumScorer`], built once per graph for a model of the node-sum
//! form ([`CostModel::node_sum_width`]; MODEL.md "Incremental stages"). Each
//! configurable node has a list of candidate rows (its 18 layout config
//! features); a configuration is one candidate index per node (a *genome*).
//! The scorer asks the model once for every node's terms under every one of
//! its candidates, sums the base genome's terms, and then scores a genome as
//! `score_pooled(base sums + Σ over the nodes it changes of (its term − the
//! base's term))`: the work per configuration grows with the number of
//! changed nodes, not with the graph.
//!
//! Invariants:
//! - Exact up to float rounding: the sums are kept in f64 and rounded to f32
//!   once, before the pooling stage (the whole head sums in f32, in another
//!   order, so the two differ by rounding only; `costmodel/tests/incremental.rs`
//!   checks it on the test graphs).
//! - Not batch-relative: a genome's score is `score_pooled` of its own sums,
//!   and the shipped pooling stage works per configuration, so it gets the
//!   same bits whatever else is in the call (`passes/tests/layout_incremental.rs`
//!   checks it on the test modules; the layout search relies on it to
//!   compare scores across calls without rescoring).
//! - A genome of the wrong length or with an index past a node's candidates
//!   is an [`CostModelError::Input`], never a panic.
//! - Memory: `width` f32 per (node, candidate) plus `width` f64; the model
//!   calls that compute the terms carry at most [`MAX_TERM_CELLS`]
//!   configuration cells each.

use std::sync::Arc;

use crate::graph::{ConfigBatch, Task, LAYOUT_CONFIG_DIM};
use crate::reuse::{Fingerprint, ModelKey, SharedCache, MAX_CACHED_SCORERS, MAX_SCORER_BYTES};
use crate::{CostModel, CostModelError, Prepared, Result};

/// Most (configuration x configurable node) cells one `node_terms` call
/// carries: its input is 18 f32 a cell, its output `width` f32, and ONNX
/// Runtime's intermediates (about 300 bytes a cell) stay in its arena after
/// the call, so this bounds the memory the terms add (about 20 MB; with
/// 2^19 cells the Gemma 4 module's layout pass peaked at 326 MB, above the
/// whole head's 302 MB, at 2^16 it peaks at 283 MB, no slower).
pub const MAX_TERM_CELLS: usize = 1 << 16;

/// Scores genomes of one prepared graph from the base genome's node sums
/// (module doc). Cheap to clone: the terms are shared, and with the
/// process's cache of scorers ([`crate::reuse`]) too.
#[derive(Clone, Debug)]
pub struct NodeSumScorer {
    data: Arc<Terms>,
}

#[derive(Debug)]
struct Terms {
    width: usize,
    /// Node `j`'s candidate `c` has its terms at `(first[j] + c) * width`.
    first: Vec<usize>,
    /// Candidates per node.
    sizes: Vec<usize>,
    terms: Vec<f32>,
    base: Vec<u16>,
    /// The base genome's node sums.
    base_sum: Vec<f64>,
}

/// A scorer's identity: the model's, and a fingerprint of the prepared
/// state, the candidate rows and the base genome.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct ScorerKey {
    model: ModelKey,
    inputs: u64,
    nodes: usize,
    cells: usize,
}

/// The scorers built in this process, for models with a
/// [`CostModel::reuse_key`] ([`crate::reuse`]).
static SCORERS: SharedCache<ScorerKey, Terms> =
    SharedCache::new(MAX_CACHED_SCORERS, MAX_SCORER_BYTES);

/// Empties the process's cache of scorers.
pub fn clear_cache() {
    SCORERS.clear();
}

/// How many scorers and bytes of terms the process's cache holds.
pub fn cache_size() -> (usize, usize) {
    SCORERS.len_bytes()
}

fn input_err(message: impl Into<String>) -> CostModelError {
    CostModelError::Input(message.into())
}

impl NodeSumScorer {
    /// The scorer for `prepared` (from `model.prepare`), the candidate rows of
    /// each configurable node (`rows[j][c]`, in the graph's
    /// `node_config_ids` order) and the base genome `base` (usually the
    /// compiler default). `Ok(None)` when the model has no node-sum form.
    pub fn new(
        model: &dyn CostModel,
        prepared: &Prepared,
        rows: &[Vec<[f32; LAYOUT_CONFIG_DIM]>],
        base: &[u16],
    ) -> Result<Option<Self>> {
        let Some(width) = model.node_sum_width() else {
            return Ok(None);
        };
        let nc = rows.len();
        if nc != prepared.graph.num_config_nodes() {
            return Err(input_err(format!(
                "{nc} nodes of candidate rows for a graph of {} configurable nodes",
                prepared.graph.num_config_nodes()
            )));
        }
        if base.len() != nc {
            return Err(input_err(format!(
                "a base genome of {} genes for {nc} configurable nodes",
                base.len()
            )));
        }
        if let Some(j) = (0..nc).find(|&j| base[j] as usize >= rows[j].len()) {
            return Err(input_err(format!(
                "the base genome picks candidate {} of node {j}, which has {}",
                base[j],
                rows[j].len()
            )));
        }
        let sizes: Vec<usize> = rows.iter().map(Vec::len).collect();
        let key = model.reuse_key().map(|model| {
            let mut h = Fingerprint::default();
            h.f32s(&prepared.state)
                .i64s(&prepared.graph.node_config_ids)
                .i64s(prepared.meta_edges.as_flattened())
                .usize(nc);
            for r in rows {
                h.f32s(r.as_flattened());
            }
            h.bytes(
                &base
                    .iter()
                    .flat_map(|g| g.to_le_bytes())
                    .collect::<Vec<u8>>(),
            );
            ScorerKey {
                model,
                inputs: h.finish(),
                nodes: nc,
                cells: sizes.iter().sum(),
            }
        });
        if let Some(data) = key.as_ref().and_then(|k| SCORERS.get(k)) {
            return Ok(Some(NodeSumScorer { data }));
        }
        let mut first = Vec::with_capacity(nc);
        let mut total = 0usize;
        for &s in &sizes {
            first.push(total);
            total += s;
        }
        let mut terms = vec![0f32; total * width];
        // The nodes with `s` candidates, for each `s` in increasing order; a
        // call gives such nodes their candidate k in configuration k, so all
        // of their terms take `s` configurations of them (and no cell is
        // wasted on a node with fewer candidates).
        let mut by_size: Vec<usize> = (0..nc).filter(|&j| sizes[j] > 0).collect();
        by_size.sort_by_key(|&j| (sizes[j], j));
        for group in by_size.chunk_by(|&a, &b| sizes[a] == sizes[b]) {
            let s = sizes[group[0]];
            // At most MAX_TERM_CELLS cells a call: split the nodes, then the
            // candidates.
            let nodes_per_call = (MAX_TERM_CELLS / s).clamp(1, group.len());
            let configs_per_call = (MAX_TERM_CELLS / nodes_per_call).clamp(1, s);
            for nodes in group.chunks(nodes_per_call) {
                let m = nodes.len();
                let mut k0 = 0;
                while k0 < s {
                    let k1 = (k0 + configs_per_call).min(s);
                    let mut feat = Vec::with_capacity((k1 - k0) * m * LAYOUT_CONFIG_DIM);
                    // `k` picks a candidate of each node: rows[j][k], not rows[k].
                    #[allow(clippy::needless_range_loop)]
                    for k in k0..k1 {
                        feat.extend(nodes.iter().flat_map(|&j| rows[j][k]));
                    }
                    let batch = ConfigBatch {
                        task: Task::Layout,
                        num_configs: k1 - k0,
                        nodes_per_config: m,
                        feat,
                    };
                    let out = model.node_terms(prepared, nodes, &batch)?;
                    if out.len() != (k1 - k0) * m * width {
                        return Err(CostModelError::Runtime(format!(
                            "node_terms gave {} values, want {} configs x {m} x {width}",
                            out.len(),
                            k1 - k0
                        )));
                    }
                    for k in k0..k1 {
                        for (i, &j) in nodes.iter().enumerate() {
                            let src = ((k - k0) * m + i) * width;
                            let dst = (first[j] + k) * width;
                            terms[dst..dst + width].copy_from_slice(&out[src..src + width]);
                        }
                    }
                    k0 = k1;
                }
            }
        }
        let mut base_sum = vec![0f64; width];
        for (j, &c) in base.iter().enumerate() {
            let at = (first[j] + c as usize) * width;
            for (s, &t) in base_sum.iter_mut().zip(&terms[at..at + width]) {
                *s += f64::from(t);
            }
        }
        let data = Arc::new(Terms {
            width,
            first,
            sizes,
            terms,
            base: base.to_vec(),
            base_sum,
        });
        if let Some(key) = key {
            let bytes = std::mem::size_of_val(data.terms.as_slice());
            SCORERS.insert(key, Arc::clone(&data), bytes);
        }
        Ok(Some(NodeSumScorer { data }))
    }

    /// The scorer for configurations given as rows (`num_configs x nodes x
    /// 18`, e.g. an npz file's): each node's distinct rows become its
    /// candidates (in first-seen order), the first configuration the base.
    /// Returns the scorer and each configuration's genome. `Ok(None)` when
    /// the model has no node-sum form or there are no configurations.
    pub fn from_rows(
        model: &dyn CostModel,
        prepared: &Prepared,
        num_configs: usize,
        feat: &[f32],
    ) -> Result<Option<(Self, Vec<Vec<u16>>)>> {
        if model.node_sum_width().is_none() || num_configs == 0 {
            return Ok(None);
        }
        let nc = prepared.graph.num_config_nodes();
        if feat.len() != num_configs * nc * LAYOUT_CONFIG_DIM {
            return Err(input_err(format!(
                "{} config values, want {num_configs} configs x {nc} x {LAYOUT_CONFIG_DIM}",
                feat.len()
            )));
        }
        let mut rows: Vec<Vec<[f32; LAYOUT_CONFIG_DIM]>> = vec![Vec::new(); nc];
        // Per node, the row's bits -> its candidate index (looked up only).
        let mut index: Vec<std::collections::HashMap<[u32; LAYOUT_CONFIG_DIM], u16>> =
            vec![std::collections::HashMap::new(); nc];
        let mut genomes = Vec::with_capacity(num_configs);
        for c in 0..num_configs {
            let mut g = Vec::with_capacity(nc);
            for j in 0..nc {
                let at = (c * nc + j) * LAYOUT_CONFIG_DIM;
                let mut row = [0f32; LAYOUT_CONFIG_DIM];
                row.copy_from_slice(&feat[at..at + LAYOUT_CONFIG_DIM]);
                let key = row.map(f32::to_bits);
                let next = rows[j].len();
                let k = *index[j].entry(key).or_insert_with(|| {
                    rows[j].push(row);
                    next as u16
                });
                if rows[j].len() > usize::from(u16::MAX) {
                    return Err(input_err(format!(
                        "node {j} has more than {} distinct configurations",
                        u16::MAX
                    )));
                }
                g.push(k);
            }
            genomes.push(g);
        }
        let base = genomes[0].clone();
        Ok(Self::new(model, prepared, &rows, &base)?.map(|s| (s, genomes)))
    }

    /// The width of the node sums.
    pub fn width(&self) -> usize {
        self.data.width
    }

    /// The node sums of `genome` (f64), from the base's plus its changes.
    fn sums(&self, genome: &[u16], out: &mut Vec<f64>) -> Result<()> {
        if genome.len() != self.data.base.len() {
            return Err(input_err(format!(
                "a genome of {} genes for {} configurable nodes",
                genome.len(),
                self.data.base.len()
            )));
        }
        out.clear();
        out.extend_from_slice(&self.data.base_sum);
        let w = self.data.width;
        for (j, (&g, &b)) in genome.iter().zip(&self.data.base).enumerate() {
            if g == b {
                continue;
            }
            if g as usize >= self.data.sizes[j] {
                return Err(input_err(format!(
                    "candidate {g} of node {j}, which has {}",
                    self.data.sizes[j]
                )));
            }
            let new = (self.data.first[j] + g as usize) * w;
            let old = (self.data.first[j] + b as usize) * w;
            for (s, (&t, &u)) in out.iter_mut().zip(
                self.data.terms[new..new + w]
                    .iter()
                    .zip(&self.data.terms[old..old + w]),
            ) {
                *s += f64::from(t) - f64::from(u);
            }
        }
        Ok(())
    }

    /// Scores `genomes` in one pooling call.
    pub fn score(&self, model: &dyn CostModel, genomes: &[Vec<u16>]) -> Result<Vec<f32>> {
        let mut pooled = Vec::with_capacity(genomes.len() * self.data.width);
        let mut sums = Vec::with_capacity(self.data.width);
        for g in genomes {
            self.sums(g, &mut sums)?;
            pooled.extend(sums.iter().map(|&s| s as f32));
        }
        model.score_pooled(&pooled, genomes.len())
    }
}

/// Scores a batch of configurations (`hlo-cost eval`, Python's
/// `CostModel.score`): incrementally when the model
/// has the node-sum form (each node's distinct rows in the batch become its
/// candidates, the first configuration the base; costmodel MODEL.md
/// "Incremental stages"; the whole head's scores up to float rounding), else
/// with the whole model.
pub fn score_batch(
    model: &dyn crate::CostModel,
    prepared: &crate::Prepared,
    configs: &crate::ConfigBatch,
) -> crate::Result<Vec<f32>> {
    if configs.task == crate::Task::Layout {
        if let Some((scorer, genomes)) =
            NodeSumScorer::from_rows(model, prepared, configs.num_configs, &configs.feat)?
        {
            return scorer.score(model, &genomes);
        }
    }
    model.score(prepared, configs)
}
