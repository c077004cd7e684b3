//! The candidate layouts of each configurable node: the search space.
//!
//! A candidate is what the TpuGraphs layout autotuner varies and what its
//! config features encode: a minor-to-major *prefix* per tensor (output,
//! input, kernel); the rest of the layout follows in descending order
//! ([`dims::complete_prefix`]). `None` for a slot is the compiler's default
//! (all -1 features): the slot keeps the layout propagation gives it.
//!
//! Spaces, per opcode (checked against every config of unet_3d in the
//! published npz and the autotuner's run log, `tests/layout_coverage.rs`):
//! - convolution: the two most minor dimensions are the batch and feature
//!   dimensions (input, output) or the input and output feature dimensions
//!   (kernel), in either order: 2 x 2 x 2 = 8 candidates;
//! - dot: the two most minor dimensions of each tensor are an ordered pair of
//!   its non-batch dimensions (all dimensions when fewer than two are
//!   non-batch);
//! - reshape: the compiler default, plus every full output layout (rank <= 4;
//!   an ordered pair of minor dimensions above) with the input layout that
//!   makes the reshape a bitcast (size-1 input dimensions most major);
//!   output layouts no input layout can bitcast to are left out.
//!
//! Constraints: a node that is the entry root keeps the root's layout (its
//! output candidates are restricted to it). Candidate 0..n order is
//! deterministic; [`NodeSpace::default`] is the candidate that matches the
//! module's current layouts (the compiler default the search is seeded with).

use costmodel::features::{layout_config_row, layout_config_tensors};
use costmodel::graph::LAYOUT_CONFIG_DIM;
use hlo::{InstId, Module, Opcode};

use super::attrs;
use super::dims::{self, M2M};
use super::shapes;

/// One candidate: a minor-to-major prefix per slot (`None` = compiler default).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeConfig {
    pub output: Option<M2M>,
    pub input: Option<M2M>,
    pub kernel: Option<M2M>,
}

impl NodeConfig {
    pub const DEFAULT: NodeConfig = NodeConfig {
        output: None,
        input: None,
        kernel: None,
    };

    /// The 18 config features of this candidate.
    pub fn row(&self) -> [f32; LAYOUT_CONFIG_DIM] {
        layout_config_row(
            self.output.as_deref(),
            self.input.as_deref(),
            self.kernel.as_deref(),
        )
    }

    /// Reads a candidate back from 18 config features (-1 padded slots).
    pub fn from_row(row: &[f32]) -> NodeConfig {
        let slot = |k: usize| -> Option<M2M> {
            let v: M2M = row[k * 6..k * 6 + 6]
                .iter()
                .take_while(|&&x| x >= 0.0)
                .map(|&x| x as i64)
                .collect();
            if v.is_empty() {
                None
            } else {
                Some(v)
            }
        };
        NodeConfig {
            output: slot(0),
            input: slot(1),
            kernel: slot(2),
        }
    }
}

/// The candidates of one configurable node.
#[derive(Clone, Debug)]
pub struct NodeSpace {
    pub inst: InstId,
    /// The tensors of the output / input / kernel slots.
    pub output: InstId,
    pub input: Option<InstId>,
    pub kernel: Option<InstId>,
    pub candidates: Vec<NodeConfig>,
    /// Index of the compiler-default candidate.
    pub default: usize,
}

impl NodeSpace {
    /// Index of the candidate equal to `c` once both are read as features
    /// (so `Some([])` and `None` agree, as in the dataset).
    pub fn find(&self, c: &NodeConfig) -> Option<usize> {
        let row = c.row();
        self.candidates.iter().position(|x| x.row() == row)
    }
}

/// Builds the space of `inst` (a configurable node). `entry_root_layout` is the
/// layout the node must keep when it is the entry root.
pub fn node_space(m: &Module, inst: InstId, entry_root_layout: Option<&[i64]>) -> NodeSpace {
    let t = layout_config_tensors(m, inst);
    let i = m.inst(inst);
    let out_shape = i.shape;
    let cur = |x: Option<InstId>| -> Option<M2M> { m.minor_to_major_or_default(m.inst(x?).shape) };
    let rank = |x: Option<InstId>| -> Option<usize> { shapes::rank(m, m.inst(x?).shape) };
    let (candidates, default) = match i.opcode {
        Opcode::Convolution | Opcode::Dot => {
            let (outs, ins, kers) = match (i.opcode, attrs::conv_dims(i)) {
                (Opcode::Convolution, Some(cd)) => (
                    dims::ordered_pairs(&[cd.out_batch, cd.out_feature]),
                    dims::ordered_pairs(&[cd.lhs_batch, cd.lhs_feature]),
                    dims::ordered_pairs(&[cd.rhs_input_feature, cd.rhs_output_feature]),
                ),
                (Opcode::Dot, _) => {
                    let dd = attrs::dot_dims(i);
                    let out_rank = rank(Some(inst)).unwrap_or(0);
                    let nb_out: Vec<i64> = (dd.lhs_batch.len() as i64..out_rank as i64).collect();
                    let nb = |x: Option<InstId>, batch: &[i64]| -> Vec<i64> {
                        (0..rank(x).unwrap_or(0) as i64)
                            .filter(|d| !batch.contains(d))
                            .collect()
                    };
                    (
                        pair_space(&nb_out, out_rank),
                        pair_space(&nb(t.input, &dd.lhs_batch), rank(t.input).unwrap_or(0)),
                        pair_space(&nb(t.kernel, &dd.rhs_batch), rank(t.kernel).unwrap_or(0)),
                    )
                }
                _ => (Vec::new(), Vec::new(), Vec::new()),
            };
            let outs = restrict_to_root(outs, rank(Some(inst)).unwrap_or(0), entry_root_layout);
            let slot = |v: Vec<M2M>| -> Vec<Option<M2M>> {
                if v.is_empty() {
                    vec![None]
                } else {
                    v.into_iter().map(Some).collect()
                }
            };
            let (outs, ins, kers) = (slot(outs), slot(ins), slot(kers));
            let pick = |opts: &[Option<M2M>], x: Option<InstId>| closest(opts, cur(x), rank(x));
            let d = (
                pick(&outs, Some(inst)),
                pick(&ins, t.input),
                pick(&kers, t.kernel),
            );
            let mut cands = Vec::with_capacity(outs.len() * ins.len() * kers.len());
            let mut default = 0;
            for (a, o) in outs.iter().enumerate() {
                for (b, x) in ins.iter().enumerate() {
                    for (c, k) in kers.iter().enumerate() {
                        if (a, b, c) == d {
                            default = cands.len();
                        }
                        cands.push(NodeConfig {
                            output: o.clone(),
                            input: x.clone(),
                            kernel: k.clone(),
                        });
                    }
                }
            }
            (cands, default)
        }
        Opcode::Reshape => {
            let mut cands = vec![NodeConfig::DEFAULT];
            let (Some(out_rank), Some(in_rank)) = (rank(Some(inst)), rank(t.input)) else {
                return finish(inst, t.output, t.input, t.kernel, cands, 0);
            };
            let out_dims = shapes::dims(m, out_shape);
            let in_dims = t
                .input
                .map(|x| shapes::dims(m, m.inst(x).shape))
                .unwrap_or_default();
            let outs: Vec<M2M> = if out_rank <= 4 {
                dims::permutations(out_rank)
            } else {
                let all: Vec<i64> = (0..out_rank as i64).collect();
                dims::ordered_pairs(&all)
                    .iter()
                    .filter_map(|p| dims::complete_prefix(p, out_rank))
                    .collect()
            };
            let outs = restrict_to_root(outs, out_rank, entry_root_layout);
            for o in outs {
                if let Some(x) = dims::reshape_bitcast_layout(&out_dims, &o, &in_dims) {
                    debug_assert_eq!(x.len(), in_rank);
                    let c = NodeConfig {
                        output: Some(o),
                        input: Some(x),
                        kernel: None,
                    };
                    if !cands.contains(&c) {
                        cands.push(c);
                    }
                }
            }
            (cands, 0)
        }
        _ => (vec![NodeConfig::DEFAULT], 0),
    };
    finish(inst, t.output, t.input, t.kernel, candidates, default)
}

fn finish(
    inst: InstId,
    output: InstId,
    input: Option<InstId>,
    kernel: Option<InstId>,
    candidates: Vec<NodeConfig>,
    default: usize,
) -> NodeSpace {
    NodeSpace {
        inst,
        output,
        input,
        kernel,
        candidates,
        default,
    }
}

/// Ordered pairs of `dims` (all dimensions when fewer than two are given);
/// `[0]` for rank 1; nothing for scalars.
fn pair_space(dims_: &[i64], rank: usize) -> Vec<M2M> {
    if dims_.len() >= 2 {
        dims::ordered_pairs(dims_)
    } else if rank >= 2 {
        let all: Vec<i64> = (0..rank as i64).collect();
        dims::ordered_pairs(&all)
    } else if rank == 1 {
        vec![M2M::from_slice(&[0])]
    } else {
        Vec::new()
    }
}

/// Keeps the output prefixes whose completion is `root` (the entry root's
/// layout); when none is, the prefix of `root` of the same length.
fn restrict_to_root(outs: Vec<M2M>, rank: usize, root: Option<&[i64]>) -> Vec<M2M> {
    let Some(root) = root else { return outs };
    let len = outs.first().map_or(rank, |p| p.len());
    let kept: Vec<M2M> = outs
        .iter()
        .filter(|p| dims::complete_prefix(p, rank).as_deref() == Some(root))
        .cloned()
        .collect();
    if kept.is_empty() {
        vec![M2M::from_slice(&root[..len.min(root.len())])]
    } else {
        kept
    }
}

/// The option whose completed layout agrees longest (from the minor end)
/// with the tensor's current layout; ties go to the first.
fn closest(opts: &[Option<M2M>], cur: Option<M2M>, rank: Option<usize>) -> usize {
    let (Some(cur), Some(rank)) = (cur, rank) else {
        return 0;
    };
    let mut best = (0usize, 0usize);
    for (k, o) in opts.iter().enumerate() {
        let full = match o {
            Some(p) => dims::complete_prefix(p, rank),
            None => Some(cur.clone()),
        };
        let agree = full.map_or(0, |f| {
            f.iter().zip(cur.iter()).take_while(|(a, b)| a == b).count()
        });
        if agree > best.1 {
            best = (k, agree);
        }
    }
    best.0
}

/// The spaces of the configurable nodes `nodes` (in order).
pub fn spaces(m: &Module, nodes: &[InstId]) -> Vec<NodeSpace> {
    let entry = m.entry_computation();
    let root = entry.root;
    let root_layout = m.minor_to_major_or_default(m.inst(root).shape);
    nodes
        .iter()
        .map(|&n| {
            node_space(
                m,
                n,
                if n == root {
                    root_layout.as_deref()
                } else {
                    None
                },
            )
        })
        .collect()
}

/// Number of points of the product space (saturating).
pub fn product_size(spaces: &[NodeSpace]) -> u128 {
    spaces.iter().fold(1u128, |acc, s| {
        acc.saturating_mul(s.candidates.len().max(1) as u128)
    })
}
