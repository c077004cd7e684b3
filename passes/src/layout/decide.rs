//! Decide: whether the search's best configuration is applied. Its
//! predicted gain must cover the floor (`--min-gain`, or the model's error
//! in the trust region) plus the price of the copies it needs; a measured
//! choice stands on its measurement.

use costmodel::CostModel;
use hlo::Module;

use super::apply::decisions;
use super::assign;
use super::candidates::NodeSpace;
use super::explore::Searched;
use super::gain::{gain_pct, Floor};
use super::measure::Measured;
use crate::PassError;

/// What the pass decided about the search's best configuration.
#[derive(Clone, Copy, Debug)]
pub(super) enum Verdict {
    /// The compiler default scored best (or no other configuration exists).
    DefaultIsBest,
    /// Applied: its predicted gain (percent of the default's score) covered
    /// `--min-gain` plus the price of its copies (or a measurement chose it).
    Applied { gain: f64, copy_pct: f64 },
    /// Not applied: the predicted gain is below `floor + copy_pct`.
    Rejected {
        gain: f64,
        copy_pct: f64,
        copies: usize,
        floor: Floor,
    },
}

/// The price of the copies a configuration needs, in percent: the bytes the
/// copies write as a share of the bytes every scheduled instruction of the
/// module writes (copies included). A copy reads and writes its tensor once,
/// so for a module whose runtime follows the bytes it moves this is the
/// share of the runtime the copies add; the layout model does not see the
/// copies (they are not configurable nodes), so the pass charges them here.
pub fn copy_share_pct(m: &Module, copies: &[assign::CopyRecord]) -> f64 {
    if copies.is_empty() {
        return 0.0;
    }
    let fused: Vec<bool> = {
        let mut v = Vec::new();
        for c in m.computations() {
            if v.len() <= c.index() {
                v.resize(c.index() + 1, false);
            }
        }
        for i in m.all_instructions() {
            if m.inst(i).opcode == hlo::Opcode::Fusion {
                for c in m.inst(i).called_computations() {
                    if let Some(f) = v.get_mut(c.index()) {
                        *f = true;
                    }
                }
            }
        }
        v
    };
    let mut total = 0f64;
    for i in m.all_instructions() {
        let inst = m.inst(i);
        if fused.get(inst.parent.index()).copied().unwrap_or(false) {
            continue;
        }
        total += shape_bytes(m, inst.shape);
    }
    let copied: f64 = copies
        .iter()
        .map(|c| shape_bytes(m, m.inst(c.copy).shape))
        .sum();
    if total <= 0.0 {
        0.0
    } else {
        copied / total * 100.0
    }
}

/// Bytes of an array shape (tuples: the sum of their arrays), as f64 so that
/// no product overflows.
fn shape_bytes(m: &Module, s: hlo::ShapeId) -> f64 {
    match m.shape(s) {
        hlo::Shape::Array(a) => {
            let elems: f64 = a.dims.iter().map(|&d| d.max(0) as f64).product();
            elems * f64::from(a.elem.byte_size())
        }
        hlo::Shape::Tuple(e) => e.iter().map(|&x| shape_bytes(m, x)).sum(),
        _ => 0.0,
    }
}

/// The decision: the verdict, and the module with the best configuration
/// assigned when it is applied.
pub(super) struct Decided {
    pub verdict: Verdict,
    pub applied: Option<(Module, assign::Assignment)>,
}

/// Applies the best configuration to a copy of `m` (its copies are part of
/// its price, see [`Verdict`]) and decides whether it is worth it.
pub(super) fn decide(
    m: &Module,
    spaces: &[NodeSpace],
    searched: &Searched,
    model: &dyn CostModel,
    measured: &Measured,
) -> Result<Decided, PassError> {
    let (outcome, floor) = (&searched.outcome, searched.floor);
    if outcome.best == searched.default || measured.nothing_to_measure() {
        return Ok(Decided {
            verdict: Verdict::DefaultIsBest,
            applied: None,
        });
    }
    let mut trial = m.clone();
    let dec = decisions(&trial, spaces, &outcome.best);
    let a = assign::assign(&mut trial, &dec)?;
    let gain = gain_pct(
        outcome.best_score,
        outcome.default_score,
        model.log_runtime_per_score(),
    );
    let copy_pct = copy_share_pct(&trial, &a.copies);
    let required = floor.pct + copy_pct;
    Ok(if measured.chose || gain >= required {
        Decided {
            verdict: Verdict::Applied { gain, copy_pct },
            applied: Some((trial, a)),
        }
    } else {
        Decided {
            verdict: Verdict::Rejected {
                gain,
                copy_pct,
                copies: a.copies.len(),
                floor,
            },
            applied: None,
        }
    })
}
