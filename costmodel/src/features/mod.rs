//! TpuGraphs-exact featurization of an HLO module: what the dataset's C++
//! extractor (`tpu_graphs/process_data/xla`: `hlo_encoder.cc`,
//! `featurizers.h`, `hlo_opcode.h`) computes from an `HloModuleProto`,
//! computed here from our IR.
//!
//! - nodes: every scheduled instruction, computations in module (print)
//!   order, instructions in schedule order; `node_inst` maps back;
//! - `node_opcode`: [`opcode::opcode_id`]; `node_feat`: [`node::node_features`];
//! - `edge_index`: `[consumer, producer]` for each distinct operand, plus
//!   `[caller, root]` for each computation an instruction calls, sorted
//!   lexicographically and without duplicates (the dataset's sparse-tensor
//!   reordering);
//! - `node_splits`: 0, then the running instruction count after every
//!   computation whose name contains `cluster`, `while` or `cond`, then the
//!   total if the last split is short of it;
//! - layout task: `node_config_ids`, the configurable nodes ([`is_configurable`]).
//!
//! Configuration rows: [`layout_config_row`] (18) and [`tile_config_row`] (24).
//!
//! Attribute values (window, dim_labels, slice, padding, integer lists) are
//! decoded by [`hlo::attrs`], the one decoding path the verifier and the
//! passes also use.
//!
//! Documented fallbacks (the dataset's own behaviour): an opcode the TpuGraphs
//! list does not know gets id 0; an element type it has no slot for leaves the
//! one-hot group all zero; a rank above 6 is truncated to 6 leading values
//! while sums and products cover every dimension.

pub mod config;
pub mod node;
pub mod opcode;

use hlo::{CompId, InstId, Module, Opcode};

pub use config::{layout_config_row, tile_config_row};
pub use node::{idx, node_features};
pub use opcode::{opcode_id, opcode_name};

use crate::error::{CostModelError, Result};
use crate::graph::{Graph, Task, NODE_FEAT_DIM};

/// A module featurized for one task, with the maps back to the IR.
#[derive(Clone, Debug)]
pub struct Featurized {
    pub graph: Graph,
    /// Node index -> instruction.
    pub node_inst: Vec<InstId>,
    /// The configurable nodes (layout task), in `node_config_ids` order; empty for tile.
    pub config_nodes: Vec<InstId>,
}

impl Featurized {
    /// Node index of an instruction, if it is a node.
    pub fn node_of(&self, inst: InstId) -> Option<usize> {
        self.node_inst.iter().position(|&i| i == inst)
    }
}

/// The tensors the three slots of a layout config row describe for one
/// configurable node: the node's own output, then its `input` (operand 0 of a
/// convolution, dot or reshape) and `kernel` (operand 1 of a convolution or
/// dot: the filter, the dot's rhs).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ConfigTensors {
    pub output: InstId,
    pub input: Option<InstId>,
    pub kernel: Option<InstId>,
}

impl ConfigTensors {
    /// The slots in row order (output, input, kernel).
    pub fn slots(&self) -> [Option<InstId>; 3] {
        [Some(self.output), self.input, self.kernel]
    }
}

/// Which tensors the output / input / kernel slots of `inst`'s layout config refer to.
pub fn layout_config_tensors(m: &Module, inst: InstId) -> ConfigTensors {
    let i = m.inst(inst);
    let operand = |k: usize| i.operands.get(k).copied();
    match i.opcode {
        Opcode::Convolution | Opcode::Dot => ConfigTensors {
            output: inst,
            input: operand(0),
            kernel: operand(1),
        },
        Opcode::Reshape => ConfigTensors {
            output: inst,
            input: operand(0),
            kernel: None,
        },
        _ => ConfigTensors {
            output: inst,
            input: None,
            kernel: None,
        },
    }
}

/// Computations that are (transitively) called by a fusion instruction:
/// their instructions' layouts follow the fusion and are not configurable.
fn fused_computations(m: &Module) -> Vec<bool> {
    let n = m.computations().map(|c| c.index() + 1).max().unwrap_or(0);
    let mut fused = vec![false; n];
    let mut work: Vec<CompId> = Vec::new();
    for id in m.all_instructions() {
        let inst = m.inst(id);
        if inst.opcode == Opcode::Fusion {
            work.extend(inst.called_computations());
        }
    }
    while let Some(c) = work.pop() {
        if c.index() >= fused.len() {
            fused.resize(c.index() + 1, false);
        }
        if std::mem::replace(&mut fused[c.index()], true) {
            continue;
        }
        for &id in &m.comp(c).order {
            work.extend(m.inst(id).called_computations());
        }
    }
    fused
}

fn is_config_opcode(op: Opcode) -> bool {
    matches!(op, Opcode::Convolution | Opcode::Dot | Opcode::Reshape)
}

/// The dataset's rule for the layout task: a convolution, dot or reshape
/// outside fused computations (inside a fusion, layouts follow the fusion).
/// Checked against the published data: it gives the `config_index_to_node` of
/// unet_3d and brax_es from their HLO, and on all 7 published layout npz
/// samples (1,174 convolutions, dots and reshapes, fused computations found
/// through the graph's fusion-to-root edges) it selects exactly their
/// `node_config_ids`.
///
/// Scans the module's fusions; to test every instruction use [`configurable_nodes`].
pub fn is_configurable(m: &Module, inst: InstId) -> bool {
    let i = m.inst(inst);
    is_config_opcode(i.opcode)
        && !fused_computations(m)
            .get(i.parent.index())
            .copied()
            .unwrap_or(false)
}

/// Every configurable instruction, in node order.
pub fn configurable_nodes(m: &Module) -> Vec<InstId> {
    let fused = fused_computations(m);
    m.all_instructions()
        .filter(|&id| {
            let i = m.inst(id);
            is_config_opcode(i.opcode) && !fused.get(i.parent.index()).copied().unwrap_or(false)
        })
        .collect()
}

/// Whether a computation name starts a new `node_splits` segment after it.
fn is_split_computation(name: &str) -> bool {
    name.contains("cluster") || name.contains("while") || name.contains("cond")
}

/// Featurizes `m` for `task` exactly as the TpuGraphs dataset does.
pub fn featurize(m: &Module, task: Task) -> Result<Featurized> {
    const NONE: u32 = u32::MAX;
    let n = m.instruction_count();
    if n == 0 {
        return Err(CostModelError::Featurize(
            "the module has no instructions".into(),
        ));
    }
    let mut node_of = vec![NONE; m.num_insts()];
    let mut node_inst = Vec::with_capacity(n);
    let mut node_splits = vec![0i64];
    for c in m.computations() {
        let comp = m.comp(c);
        for &id in &comp.order {
            node_of[id.index()] = node_inst.len() as u32;
            node_inst.push(id);
        }
        if is_split_computation(&comp.name) {
            node_splits.push(node_inst.len() as i64);
        }
    }
    if node_splits.last().copied() != Some(node_inst.len() as i64) {
        node_splits.push(node_inst.len() as i64);
    }

    let lookup = |id: InstId, what: &dyn Fn() -> String| -> Result<i64> {
        match node_of.get(id.index()).copied() {
            Some(k) if k != NONE => Ok(k as i64),
            _ => Err(CostModelError::Featurize(what())),
        }
    };

    let mut node_feat = vec![0f32; n * NODE_FEAT_DIM];
    let mut node_opcode = Vec::with_capacity(n);
    let mut edge_index: Vec<[i64; 2]> = Vec::with_capacity(n * 2);
    // Nodes are visited in index order, so sorting each node's producers
    // gives the lexicographic order of the whole list.
    let mut producers: Vec<i64> = Vec::new();
    for ((k, &id), row) in node_inst
        .iter()
        .enumerate()
        .zip(node_feat.chunks_exact_mut(NODE_FEAT_DIM))
    {
        let inst = m.inst(id);
        node_opcode.push(opcode_id(inst.opcode));
        let row: &mut [f32; NODE_FEAT_DIM] = row.try_into().expect("chunks of NODE_FEAT_DIM");
        node_features(m, id, row)?;
        producers.clear();
        for &op in &inst.operands {
            producers.push(lookup(op, &|| {
                format!("%{}: operand is not a scheduled instruction", inst.name)
            })?);
        }
        for c in inst.called_computations() {
            let root = m.comp(c).root;
            producers.push(lookup(root, &|| {
                format!(
                    "%{}: called computation %{} has no scheduled root",
                    inst.name,
                    m.comp(c).name
                )
            })?);
        }
        producers.sort_unstable();
        producers.dedup();
        edge_index.extend(producers.iter().map(|&p| [k as i64, p]));
    }

    let config_nodes = match task {
        Task::Layout => configurable_nodes(m),
        Task::Tile => Vec::new(),
    };
    let node_config_ids = config_nodes
        .iter()
        .map(|&id| node_of[id.index()] as i64)
        .collect();

    Ok(Featurized {
        graph: Graph {
            node_feat,
            node_opcode,
            edge_index,
            node_config_ids,
            node_splits,
        },
        node_inst,
        config_nodes,
    })
}
