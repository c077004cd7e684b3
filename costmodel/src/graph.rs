//! The TpuGraphs graph format in memory: what the featurizer produces, what
//! npz files hold, what models consume. Field meanings follow the published
//! dataset (tpu_graphs README, "Features").
//!
//! Invariants: `node_feat.len() == num_nodes * NODE_FEAT_DIM`,
//! `node_opcode.len() == num_nodes`, every edge endpoint `< num_nodes`,
//! `node_config_ids` distinct and `< num_nodes`, in any order (the published
//! files do not promise sorted ids; rows of a configuration follow this order).

/// Number of features per node.
pub const NODE_FEAT_DIM: usize = 140;
/// Layout config features per configurable node (output, input, kernel minor-to-major, 6 each).
pub const LAYOUT_CONFIG_DIM: usize = 18;
/// Tile config features per kernel (kernel, output, input bounds with sum and product).
pub const TILE_CONFIG_DIM: usize = 24;

/// The two TpuGraphs tasks.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Hash)]
pub enum Task {
    Layout,
    Tile,
}

impl Task {
    pub fn name(self) -> &'static str {
        match self {
            Task::Layout => "layout",
            Task::Tile => "tile",
        }
    }
    pub fn config_dim(self) -> usize {
        match self {
            Task::Layout => LAYOUT_CONFIG_DIM,
            Task::Tile => TILE_CONFIG_DIM,
        }
    }
}

/// A graph in the TpuGraphs format, without its configurations.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Graph {
    /// `num_nodes x 140`, row-major.
    pub node_feat: Vec<f32>,
    /// TpuGraphs opcode id of each node.
    pub node_opcode: Vec<u8>,
    /// `[consumer, producer]` pairs.
    pub edge_index: Vec<[i64; 2]>,
    /// Layout task: the configurable nodes (node indices). Empty for tile.
    pub node_config_ids: Vec<i64>,
    /// Node index ranges of the graph's segments, as published (`node_splits`).
    pub node_splits: Vec<i64>,
}

impl Graph {
    pub fn num_nodes(&self) -> usize {
        self.node_opcode.len()
    }
    pub fn num_config_nodes(&self) -> usize {
        self.node_config_ids.len()
    }

    /// The graph's arrays, borrowed.
    pub fn view(&self) -> GraphView<'_> {
        GraphView {
            node_feat: &self.node_feat,
            node_opcode: &self.node_opcode,
            edge_index: &self.edge_index,
            node_config_ids: &self.node_config_ids,
            node_splits: &self.node_splits,
        }
    }

    /// Checks the invariants of the module doc ([`GraphView::check`]).
    pub fn check(&self) -> Result<(), String> {
        self.view().check()
    }
}

/// A graph's arrays borrowed from whoever holds them (a [`Graph`], numpy
/// arrays): what a model reads of a graph, without a copy. The fields and
/// invariants are [`Graph`]'s.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GraphView<'a> {
    /// `num_nodes x 140`, row-major.
    pub node_feat: &'a [f32],
    pub node_opcode: &'a [u8],
    /// `[consumer, producer]` pairs.
    pub edge_index: &'a [[i64; 2]],
    pub node_config_ids: &'a [i64],
    pub node_splits: &'a [i64],
}

impl<'a> From<&'a Graph> for GraphView<'a> {
    fn from(graph: &'a Graph) -> Self {
        graph.view()
    }
}

impl GraphView<'_> {
    pub fn num_nodes(&self) -> usize {
        self.node_opcode.len()
    }
    pub fn num_config_nodes(&self) -> usize {
        self.node_config_ids.len()
    }

    /// The arrays copied into a [`Graph`].
    pub fn to_graph(&self) -> Graph {
        Graph {
            node_feat: self.node_feat.to_vec(),
            node_opcode: self.node_opcode.to_vec(),
            edge_index: self.edge_index.to_vec(),
            node_config_ids: self.node_config_ids.to_vec(),
            node_splits: self.node_splits.to_vec(),
        }
    }

    /// Checks the invariants of the module doc: the node features' size,
    /// every edge endpoint and configurable node id in `0..num_nodes`, the
    /// ids distinct. The message names the array and the entry.
    pub fn check(&self) -> Result<(), String> {
        let n = self.num_nodes();
        if self.node_feat.len() != n * NODE_FEAT_DIM {
            return Err(format!(
                "node_feat has {} values, expected {n} x {NODE_FEAT_DIM}",
                self.node_feat.len()
            ));
        }
        for (i, e) in self.edge_index.iter().enumerate() {
            if e.iter().any(|&v| v < 0 || v as u64 >= n as u64) {
                return Err(format!(
                    "edge_index[{i}] = {e:?} refers to a node outside 0..{n}"
                ));
            }
        }
        let mut seen = vec![false; n];
        for (i, &v) in self.node_config_ids.iter().enumerate() {
            if v < 0 || v as u64 >= n as u64 || std::mem::replace(&mut seen[v as usize], true) {
                return Err(format!(
                    "node_config_ids[{i}] = {v}: not a distinct node id in 0..{n}"
                ));
            }
        }
        Ok(())
    }
}

/// A batch of configurations of one graph.
///
/// Layout: `num_configs x num_config_nodes x 18`; tile: `num_configs x 24`; row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigBatch {
    pub task: Task,
    pub num_configs: usize,
    /// Layout: configurable nodes per config; tile: 1.
    pub nodes_per_config: usize,
    pub feat: Vec<f32>,
}
