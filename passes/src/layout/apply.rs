//! Apply: a configuration becomes per-node decisions, which [`assign`]
//! propagates and completes with copies; the stage that rewrites the
//! module with the decided configuration.

use hlo::{InstId, Module};
use indexmap::IndexMap;

use super::assign::{self, Decision};
use super::candidates::NodeSpace;
use super::{dims, shapes};
use crate::PassError;

/// The decisions a genome stands for: per node, the slots that differ from
/// the node's compiler default, completed to full layouts.
pub fn decisions(m: &Module, spaces: &[NodeSpace], genome: &[u16]) -> IndexMap<InstId, Decision> {
    let mut out = IndexMap::new();
    for (s, &c) in spaces.iter().zip(genome) {
        let chosen = &s.candidates[c as usize];
        let default = &s.candidates[s.default];
        let rank_of = |i: InstId| shapes::rank(m, m.inst(i).shape);
        let complete = |p: &Option<dims::M2M>, t: InstId| -> Option<dims::M2M> {
            dims::complete_prefix(p.as_deref()?, rank_of(t)?)
        };
        let mut d = Decision::default();
        if chosen.output != default.output {
            d.output = complete(&chosen.output, s.output);
        }
        let operands = &m.inst(s.inst).operands;
        for (slot, tensor, dflt) in [
            (&chosen.input, s.input, &default.input),
            (&chosen.kernel, s.kernel, &default.kernel),
        ] {
            let Some(t) = tensor else { continue };
            if slot == dflt {
                continue;
            }
            let k = if Some(t) == s.input { 0 } else { 1 };
            if operands.get(k) != Some(&t) {
                continue;
            }
            if let Some(l) = complete(slot, t) {
                d.operands.push((k, l));
            }
        }
        if d != Decision::default() {
            out.insert(s.inst, d);
        }
    }
    out
}

/// The layouts a configurable node has and reads: its output's and those of
/// its operands (a missing layout read as the default one).
pub(super) type NodeLayouts = (Option<dims::M2M>, Vec<Option<dims::M2M>>);

pub(super) fn node_layouts(m: &Module, s: &NodeSpace) -> NodeLayouts {
    let layout = |i: InstId| m.minor_to_major_or_default(m.inst(i).shape);
    (
        layout(s.inst),
        m.inst(s.inst).operands.iter().map(|&o| layout(o)).collect(),
    )
}

/// What applying changed: the assignment (none when nothing was assigned)
/// and, per configurable node, whether its layouts changed.
pub(super) struct Applied {
    pub assignment: Option<assign::Assignment>,
    pub changed_nodes: Vec<bool>,
}

/// Rewrites `m` with the decided configuration (the module it gives,
/// assigned on a copy by [`super::decide`]); with none, gives missing layouts the ones propagation gives.
pub(super) fn apply(
    m: &mut Module,
    spaces: &[NodeSpace],
    decided: Option<(Module, assign::Assignment)>,
) -> Result<Applied, PassError> {
    let before: Vec<NodeLayouts> = spaces.iter().map(|s| node_layouts(m, s)).collect();
    let all_laid_out = m
        .all_instructions()
        .all(|i| m.has_all_layouts(m.inst(i).shape));
    let assignment = match decided {
        Some((trial, a)) => {
            *m = trial;
            Some(a)
        }
        None if all_laid_out => None,
        // Nothing chosen, but layouts are missing: give every
        // instruction the layout propagation gives it.
        None => Some(assign::assign(m, &IndexMap::new())?),
    };
    let changed_nodes = spaces
        .iter()
        .zip(&before)
        .map(|(s, b)| node_layouts(m, s) != *b)
        .collect();
    Ok(Applied {
        assignment,
        changed_nodes,
    })
}
