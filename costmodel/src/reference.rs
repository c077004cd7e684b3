//! The reference cost model: a small, deterministic, hand-written heuristic
//! over the TpuGraphs features. It is not learned and makes no claim to
//! predict TPU runtimes well; it exists so that everything around a model
//! (`hlo-cost eval`, the passes, tests) runs without ONNX Runtime, with
//! scores that depend on the configurations in a documented way.
//!
//! **Layout** (per configuration, summed over the configurable nodes `j`):
//! `score = Σ_j w_j · Σ_t a_t · d_t`, where
//! - `w_j = log2(2 + elements of node j's output)` (node feature 28,
//!   `shape_dimensions_product`), so big tensors matter more;
//! - `t` runs over the node's output, input and kernel layouts (config
//!   features 0–5, 6–11, 12–17, minor-to-major prefixes, `-1` padded) with
//!   weights `a = (1, 1, 0.5)`;
//! - `d_t = 0` when the layout is left to the compiler (`-1`), otherwise the
//!   number of prefix positions `i` whose dimension differs from XLA's default
//!   layout (`minor_to_major[i] = rank - 1 - i`), plus 1 when the minor-most
//!   dimension differs (it decides the TPU's (8, 128) tiling). The rank is the
//!   number of leading non-zero dimensions of the node (features 21–26), at
//!   least the prefix length and the largest dimension index + 1.
//!
//! **Tile**: with `E` = elements of the kernel's output (feature 28 of the
//! last root node, feature 0 = `is_root`), `o` = output tile elements (config
//! feature 15, 0 = whole output), `i` = input tile elements (feature 23):
//! `score = ceil(E / o) · (512 + o + i)`: a fixed cost per grid step plus the
//! tile traffic, favouring fewer, larger tiles that do not re-read big inputs.
//!
//! Lower score = predicted faster. Bad input (wrong task, sizes that do not
//! match the graph, non-finite features, an empty graph, no configurable
//! node) is an [`CostModelError::Input`] error.

use crate::graph::{ConfigBatch, Graph, Task, LAYOUT_CONFIG_DIM, NODE_FEAT_DIM, TILE_CONFIG_DIM};
use crate::{CostModel, CostModelError, Prepared, Result};

/// Node feature indices used (tpu_graphs README, "Features").
const FEAT_IS_ROOT: usize = 0;
const FEAT_DIMS: usize = 21;
const FEAT_DIMS_PRODUCT: usize = 28;
/// Tile config feature indices: output and input bounds' products.
const TILE_OUTPUT_PRODUCT: usize = 15;
const TILE_INPUT_PRODUCT: usize = 23;
/// Fixed cost of one tile grid step, in element-equivalents.
const TILE_STEP_COST: f64 = 512.0;
/// Weights of the output, input and kernel layouts.
const TENSOR_WEIGHT: [f64; 3] = [1.0, 1.0, 0.5];

/// The reference model for one task. See the module doc for the formulas.
#[derive(Copy, Clone, Debug)]
pub struct ReferenceModel {
    task: Task,
}

impl ReferenceModel {
    pub fn new(task: Task) -> ReferenceModel {
        ReferenceModel { task }
    }
}

fn input(msg: String) -> CostModelError {
    CostModelError::Input(msg)
}

fn feat(graph: &Graph, node: usize, index: usize) -> f32 {
    graph.node_feat[node * NODE_FEAT_DIM + index]
}

fn check_graph(graph: &Graph) -> Result<()> {
    let n = graph.num_nodes();
    if n == 0 {
        return Err(input("empty graph (no nodes)".into()));
    }
    if graph.node_feat.len() != n * NODE_FEAT_DIM {
        return Err(input(format!(
            "node_feat has {} values for {n} nodes",
            graph.node_feat.len()
        )));
    }
    if let Some(i) = graph.node_feat.iter().position(|v| !v.is_finite()) {
        return Err(input(format!(
            "node_feat of node {} feature {} is not finite",
            i / NODE_FEAT_DIM,
            i % NODE_FEAT_DIM
        )));
    }
    Ok(())
}

/// The layout deviation `d_t` of one minor-to-major prefix from XLA's default.
fn layout_deviation(prefix: &[f32], node_rank: usize) -> f64 {
    let m2m: Vec<i64> = prefix
        .iter()
        .take_while(|&&v| v >= 0.0)
        .map(|&v| v as i64)
        .collect();
    if m2m.is_empty() {
        return 0.0;
    }
    let max_dim = m2m.iter().copied().max().unwrap_or(0) as usize;
    let rank = node_rank.max(m2m.len()).max(max_dim + 1) as i64;
    let mismatches = m2m
        .iter()
        .enumerate()
        .filter(|&(i, &d)| d != rank - 1 - i as i64)
        .count();
    let minor_changed = m2m[0] != rank - 1;
    mismatches as f64 + if minor_changed { 1.0 } else { 0.0 }
}

impl CostModel for ReferenceModel {
    fn task(&self) -> Task {
        self.task
    }

    fn prepare(&self, graph: &Graph) -> Result<Prepared> {
        check_graph(graph)?;
        let n = graph.num_nodes();
        match self.task {
            Task::Layout => {
                if graph.node_config_ids.is_empty() {
                    return Err(input("the graph has no configurable nodes".into()));
                }
                // Per configurable node: weight and rank.
                let mut state = Vec::with_capacity(2 * graph.num_config_nodes());
                for &id in &graph.node_config_ids {
                    let node = usize::try_from(id).ok().filter(|&v| v < n).ok_or_else(|| {
                        input(format!("configurable node id {id} is not a node (0..{n})"))
                    })?;
                    let elems = f64::from(feat(graph, node, FEAT_DIMS_PRODUCT)).max(0.0);
                    let rank = (0..6)
                        .take_while(|&k| feat(graph, node, FEAT_DIMS + k) > 0.0)
                        .count();
                    state.push((2.0 + elems).log2() as f32);
                    state.push(rank as f32);
                }
                let nc = graph.num_config_nodes();
                Ok(Prepared {
                    graph: graph.clone(),
                    state,
                    state_shape: vec![nc, 2],
                    meta_edges: Vec::new(),
                })
            }
            Task::Tile => {
                let root = (0..n)
                    .rev()
                    .find(|&i| feat(graph, i, FEAT_IS_ROOT) > 0.5)
                    .unwrap_or(n - 1);
                let elems = feat(graph, root, FEAT_DIMS_PRODUCT).max(1.0);
                Ok(Prepared {
                    graph: graph.clone(),
                    state: vec![elems],
                    state_shape: vec![1],
                    meta_edges: Vec::new(),
                })
            }
        }
    }

    fn score(&self, prepared: &Prepared, configs: &ConfigBatch) -> Result<Vec<f32>> {
        if configs.task != self.task {
            return Err(input(format!(
                "{} configurations given to a {} model",
                configs.task.name(),
                self.task.name()
            )));
        }
        let per_config = match self.task {
            Task::Layout => prepared.graph.num_config_nodes(),
            Task::Tile => 1,
        };
        let dim = self.task.config_dim();
        if configs.nodes_per_config != per_config
            || configs.feat.len() != configs.num_configs * per_config * dim
        {
            return Err(input(format!(
                "configuration batch of {} values for {} configs x {} nodes; the graph needs {} x {dim} per config",
                configs.feat.len(),
                configs.num_configs,
                configs.nodes_per_config,
                per_config
            )));
        }
        if let Some(i) = configs.feat.iter().position(|v| !v.is_finite()) {
            return Err(input(format!(
                "configuration {} has a non-finite feature",
                i / (per_config * dim)
            )));
        }
        let scores = match self.task {
            Task::Layout => configs
                .feat
                .chunks_exact(per_config * LAYOUT_CONFIG_DIM)
                .map(|config| {
                    let mut s = 0.0f64;
                    for (j, node) in config.chunks_exact(LAYOUT_CONFIG_DIM).enumerate() {
                        let weight = f64::from(prepared.state[2 * j]);
                        let rank = prepared.state[2 * j + 1] as usize;
                        for (t, a) in TENSOR_WEIGHT.iter().enumerate() {
                            s += weight * a * layout_deviation(&node[6 * t..6 * t + 6], rank);
                        }
                    }
                    s as f32
                })
                .collect(),
            Task::Tile => {
                let elems = f64::from(prepared.state.first().copied().unwrap_or(1.0));
                configs
                    .feat
                    .chunks_exact(TILE_CONFIG_DIM)
                    .map(|c| {
                        let out = f64::from(c[TILE_OUTPUT_PRODUCT]);
                        let out = if out >= 1.0 { out } else { elems };
                        let inp = f64::from(c[TILE_INPUT_PRODUCT]).max(0.0);
                        ((elems / out).ceil() * (TILE_STEP_COST + out + inp)) as f32
                    })
                    .collect()
            }
        };
        Ok(scores)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_layouts_cost_nothing_and_deviations_count() {
        // rank 4: default minor-to-major is [3, 2, 1, 0].
        assert_eq!(layout_deviation(&[-1.0; 6], 4), 0.0);
        assert_eq!(
            layout_deviation(&[3.0, 2.0, -1.0, -1.0, -1.0, -1.0], 4),
            0.0
        );
        // Minor-most changed to 0: 1 mismatch + 1 for the minor dimension.
        assert_eq!(
            layout_deviation(&[0.0, 3.0, -1.0, -1.0, -1.0, -1.0], 4),
            3.0
        );
        // Rank unknown (0): taken from the prefix: [4, 0] implies rank >= 5.
        assert_eq!(
            layout_deviation(&[4.0, 0.0, -1.0, -1.0, -1.0, -1.0], 0),
            1.0
        );
    }

    #[test]
    fn tile_prefers_fewer_larger_tiles() {
        let mut node_feat = vec![0.0; 2 * NODE_FEAT_DIM];
        node_feat[NODE_FEAT_DIM + FEAT_IS_ROOT] = 1.0;
        node_feat[NODE_FEAT_DIM + FEAT_DIMS_PRODUCT] = 409_600.0;
        let graph = Graph {
            node_feat,
            node_opcode: vec![63, 27],
            edge_index: vec![[1, 0]],
            ..Graph::default()
        };
        let m = ReferenceModel::new(Task::Tile);
        let p = m.prepare(&graph).expect("prepare");
        let mut feat = vec![0.0; 2 * TILE_CONFIG_DIM];
        feat[TILE_OUTPUT_PRODUCT] = 200.0;
        feat[TILE_CONFIG_DIM + TILE_OUTPUT_PRODUCT] = 5.0;
        let batch = ConfigBatch {
            task: Task::Tile,
            num_configs: 2,
            nodes_per_config: 1,
            feat,
        };
        let s = m.score(&p, &batch).expect("score");
        assert_eq!(s, vec![2048.0 * 712.0, 81920.0 * 517.0]);
    }

    #[test]
    fn bad_input_is_an_error() {
        let m = ReferenceModel::new(Task::Layout);
        assert!(matches!(
            m.prepare(&Graph::default()),
            Err(CostModelError::Input(_))
        ));
        let graph = Graph {
            node_feat: vec![0.0; NODE_FEAT_DIM],
            node_opcode: vec![1],
            ..Graph::default()
        };
        assert!(matches!(m.prepare(&graph), Err(CostModelError::Input(_))));
        let graph = Graph {
            node_config_ids: vec![0],
            ..graph
        };
        let p = m.prepare(&graph).expect("prepare");
        let nan = ConfigBatch {
            task: Task::Layout,
            num_configs: 1,
            nodes_per_config: 1,
            feat: vec![f32::NAN; 18],
        };
        assert!(matches!(m.score(&p, &nan), Err(CostModelError::Input(_))));
        let short = ConfigBatch {
            task: Task::Layout,
            num_configs: 2,
            nodes_per_config: 1,
            feat: vec![-1.0; 18],
        };
        assert!(matches!(m.score(&p, &short), Err(CostModelError::Input(_))));
        let tile = ConfigBatch {
            task: Task::Tile,
            num_configs: 1,
            nodes_per_config: 1,
            feat: vec![0.0; 24],
        };
        assert!(matches!(m.score(&p, &tile), Err(CostModelError::Input(_))));
    }
}
