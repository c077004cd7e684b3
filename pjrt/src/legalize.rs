//! Backend legalization for XLA:CPU with the module's layouts kept
//! ([`crate::Pipeline::LayoutsKept`]): the few rewrites that make a laid-out
//! module compile there and compute what it means. Each rewrite inserts a
//! `copy` (a physical transpose) or moves a layout; each is reported.
//!
//! The rules, each from an XLA:CPU behaviour seen through PJRT (each is
//! shown necessary by `tests/xla_cpu_layouts.rs`: without it the results
//! are wrong):
//! 1. **entry parameters** arrive in the default (row-major) layout: PJRT
//!    resets the entry computation layout to the defaults, and a parameter
//!    instruction in another layout reads the row-major bytes as if they
//!    were in its layout. Such a parameter gets the default layout and a
//!    `copy` into its old one. A tuple parameter (fed as its leaves) gets
//!    row-major elements and a `copy` after each `get-tuple-element` of an
//!    element in another layout.
//! 2. **the entry result** is handed back as row-major: a result (or tuple
//!    element) in another layout is copied into the default at the root.
//!    The header's `entry_computation_layout` is then dropped (the
//!    parameters and root now say the same).
//! 3. **dot batch dimensions** must be the most major of each operand and of
//!    the result, in order: XLA:CPU either refuses the dot ("LHS batch dims
//!    [0,1] must be in the most major dimensions") or computes wrong values.
//!    An operand in another layout is copied into one with the batch
//!    dimensions most major (the others keep their order); a result is
//!    produced that way and copied back into its layout.
//!
//! Not needed (measured): elementwise ops whose operands have other layouts
//! than their result compute correctly once the pre-layout `cse` is off;
//! jax's permuted layouts on transposes are real layouts (a transpose that
//! is a bitcast) and are kept as they are.
//!
//! Invariants: the rewritten module computes the same values (copies only
//! change physical order); nothing changes in a module that is already
//! legal (the report is empty); instruction names stay unique.

use hlo::{CompId, InstId, Instruction, Layout, Module, Opcode, Shape, ShapeId};
use smallvec::SmallVec;

use crate::{PjrtError, Result};

/// What legalization changed, one line per rewrite (empty: already legal).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub lines: Vec<String>,
}

impl Report {
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

/// A `copy` of `x` into layout `m2m`, placed before `before` (appended when `None`).
fn copy_into(
    m: &mut Module,
    comp: CompId,
    x: InstId,
    m2m: &[i64],
    before: Option<InstId>,
) -> InstId {
    let shape = m.with_minor_to_major(m.inst(x).shape, m2m);
    let name = m.unique_inst_name(&format!(
        "{}.legal",
        m.inst(x).name.split('.').next().unwrap_or("copy")
    ));
    let inst = Instruction {
        name: name.into(),
        opcode: Opcode::Copy,
        shape,
        operands: SmallVec::from_slice(&[x]),
        payload: None,
        attrs: Vec::new(),
        parent: comp,
    };
    match before {
        Some(b) => m.insert_inst_before(b, inst),
        None => m.append_inst(inst),
    }
}

fn next_in_order(m: &Module, comp: CompId, x: InstId) -> Option<InstId> {
    let order = &m.comp(comp).order;
    let at = order.iter().position(|&i| i == x)?;
    order.get(at + 1).copied()
}

/// `x` is produced in layout `produced` and copied right after into its
/// layout `m2m`, which its users (and the root, if it is `x`) now read.
fn produce_then_copy(m: &mut Module, comp: CompId, x: InstId, produced: &[i64], m2m: &[i64]) {
    let users = m.users(comp)[x.index()].clone();
    let shape = m.with_minor_to_major(m.inst(x).shape, produced);
    m.inst_mut(x).shape = shape;
    let before = next_in_order(m, comp, x);
    let c = copy_into(m, comp, x, m2m, before);
    for u in users {
        m.replace_operand(u, x, c);
    }
    if m.comp(comp).root == x {
        m.comp_mut(comp).root = c;
    }
}

/// Legalizes `m` for XLA:CPU with its layouts kept (see the module doc).
pub fn legalize_xla_cpu(m: &mut Module) -> Result<Report> {
    let mut report = Report::default();
    entry_parameters(m, &mut report)?;
    dots(m, &mut report)?;
    entry_result(m, &mut report)?;
    Ok(report)
}

fn entry_parameters(m: &mut Module, report: &mut Report) -> Result<()> {
    let comp = m.entry;
    let params = m.comp(comp).params.clone();
    for p in params {
        if m.inst_shape(p).is_tuple() {
            tuple_parameter(m, p, report)?;
            continue;
        }
        let Some(old) = m.minor_to_major_or_default(m.inst(p).shape) else {
            continue;
        };
        if Layout::is_default_order(&old) {
            continue;
        }
        let default = Layout::default_order(old.len());
        produce_then_copy(m, comp, p, &default, &old);
        report.lines.push(format!(
            "entry parameter %{}: arrives row-major; copied into {}",
            m.inst(p).name,
            Layout::order_text(&old)
        ));
    }
    Ok(())
}

/// Rule 1 for a tuple entry parameter (fed as its leaves): the parameter's
/// elements become row-major, and each `get-tuple-element` of an element
/// in another layout is produced row-major and copied into that layout.
/// Another use of the whole tuple with such an element is refused.
fn tuple_parameter(m: &mut Module, p: InstId, report: &mut Report) -> Result<()> {
    let comp = m.entry;
    let Shape::Tuple(elems) = m.inst_shape(p).clone() else {
        return Ok(());
    };
    let old: Vec<Option<SmallVec<[i64; 6]>>> = elems
        .iter()
        .map(|&s| {
            m.minor_to_major_or_default(s)
                .filter(|l| !Layout::is_default_order(l))
        })
        .collect();
    if old.iter().all(Option::is_none) {
        return Ok(());
    }
    let name = m.inst(p).name.to_string();
    let users = m.users(comp)[p.index()].clone();
    for &u in &users {
        let index = (m.inst(u).opcode == Opcode::GetTupleElement)
            .then(|| m.inst(u).tuple_index().ok().flatten())
            .flatten()
            .and_then(|k| usize::try_from(k).ok())
            .filter(|&k| k < elems.len());
        let Some(k) = index else {
            return Err(PjrtError::Unsupported(format!(
                "the tuple entry parameter %{name} has elements that are not row-major and is \
                 used whole by %{} (only its get-tuple-elements can be legalized)",
                m.inst(u).name
            )));
        };
        let Some(l) = &old[k] else {
            continue;
        };
        let l = l.clone();
        let default = Layout::default_order(l.len());
        produce_then_copy(m, comp, u, &default, &l);
        report.lines.push(format!(
            "entry parameter %{name} element {k} (%{}): arrives row-major; copied into {}",
            m.inst(u).name,
            Layout::order_text(&l)
        ));
    }
    let row_major: SmallVec<[ShapeId; 4]> = elems
        .iter()
        .zip(&old)
        .map(|(&s, l)| match l {
            Some(l) => m.with_minor_to_major(s, &Layout::default_order(l.len())),
            None => s,
        })
        .collect();
    let s = m.intern_shape(Shape::Tuple(row_major));
    m.inst_mut(p).shape = s;
    Ok(())
}

/// `m2m` with `batch` moved to the most-major positions (batch[0] most
/// major), the other dimensions in their current minor-to-major order.
fn batch_major(m2m: &[i64], batch: &[i64]) -> Vec<i64> {
    let mut out: Vec<i64> = m2m.iter().copied().filter(|d| !batch.contains(d)).collect();
    out.extend(batch.iter().rev());
    out
}

fn batch_is_major(m2m: &[i64], batch: &[i64]) -> bool {
    m2m.len() >= batch.len() && m2m.iter().rev().take(batch.len()).eq(batch.iter())
}

fn dots(m: &mut Module, report: &mut Report) -> Result<()> {
    let comps: Vec<CompId> = m.computations().collect();
    for comp in comps {
        let order = m.comp(comp).order.clone();
        for d in order {
            if m.inst(d).opcode != Opcode::Dot {
                continue;
            }
            let dims = m
                .inst(d)
                .dot_dims()
                .map_err(|e| PjrtError::Input(format!("%{}: {e}", m.inst(d).name)))?
                .unwrap_or_default();
            if dims.lhs_batch.is_empty() {
                continue;
            }
            for (k, batch) in [
                (0usize, dims.lhs_batch.clone()),
                (1, dims.rhs_batch.clone()),
            ] {
                let Some(&x) = m.inst(d).operands.get(k) else {
                    continue;
                };
                let Some(l) = m.minor_to_major_or_default(m.inst(x).shape) else {
                    continue;
                };
                if batch_is_major(&l, &batch) {
                    continue;
                }
                let want = batch_major(&l, &batch);
                let c = copy_into(m, comp, x, &want, Some(d));
                m.inst_mut(d).operands[k] = c;
                report.lines.push(format!(
                    "dot %{}: {} operand copied from {} to {} (batch dimensions most major)",
                    m.inst(d).name,
                    if k == 0 { "lhs" } else { "rhs" },
                    Layout::order_text(&l),
                    Layout::order_text(&want)
                ));
            }
            let Some(l) = m.minor_to_major_or_default(m.inst(d).shape) else {
                continue;
            };
            let out_batch: Vec<i64> = (0..dims.lhs_batch.len() as i64).collect();
            if batch_is_major(&l, &out_batch) {
                continue;
            }
            let want = batch_major(&l, &out_batch);
            produce_then_copy(m, comp, d, &want, &l);
            report.lines.push(format!(
                "dot %{}: result produced as {} and copied into {} (batch dimensions most major)",
                m.inst(d).name,
                Layout::order_text(&want),
                Layout::order_text(&l)
            ));
        }
    }
    Ok(())
}

fn entry_result(m: &mut Module, report: &mut Report) -> Result<()> {
    let comp = m.entry;
    let root = m.comp(comp).root;
    let mut changed = false;
    if let Some(l) = m.minor_to_major_or_default(m.inst(root).shape) {
        if !Layout::is_default_order(&l) {
            let default = Layout::default_order(l.len());
            let c = copy_into(m, comp, root, &default, None);
            m.comp_mut(comp).root = c;
            report.lines.push(format!(
                "entry result %{}: copied from {} to row-major",
                m.inst(root).name,
                Layout::order_text(&l)
            ));
            changed = true;
        }
    } else if m.inst(root).opcode == Opcode::Tuple {
        let n = m.inst(root).operands.len();
        let mut elems: SmallVec<[ShapeId; 4]> = SmallVec::new();
        for k in 0..n {
            let x = m.inst(root).operands[k];
            match m.minor_to_major_or_default(m.inst(x).shape) {
                Some(l) if !Layout::is_default_order(&l) => {
                    let default = Layout::default_order(l.len());
                    let c = copy_into(m, comp, x, &default, Some(root));
                    m.inst_mut(root).operands[k] = c;
                    report.lines.push(format!(
                        "entry result element {k} (%{}): copied from {} to row-major",
                        m.inst(x).name,
                        Layout::order_text(&l)
                    ));
                    changed = true;
                    elems.push(m.inst(c).shape);
                }
                _ => elems.push(m.inst(x).shape),
            }
        }
        if changed {
            let s = m.intern_shape(Shape::Tuple(elems));
            m.inst_mut(root).shape = s;
        }
    } else if m.inst_shape(root).is_tuple() {
        // A tuple-shaped root that is not a tuple op (a while, a call, ...):
        // its leaves must already be row-major.
        if let Shape::Tuple(elems) = m.inst_shape(root).clone() {
            for (k, s) in elems.iter().enumerate() {
                if m.minor_to_major_or_default(*s)
                    .is_some_and(|l| !Layout::is_default_order(&l))
                {
                    return Err(PjrtError::Unsupported(format!(
                        "entry result element {k} of %{} is not row-major and the root is not a tuple",
                        m.inst(root).name
                    )));
                }
            }
        }
    }
    let had_layout = m
        .attrs
        .iter()
        .any(|a| &*a.key == "entry_computation_layout");
    if had_layout && (changed || !report.is_empty()) {
        m.attrs.retain(|a| &*a.key != "entry_computation_layout");
        report
            .lines
            .push("entry_computation_layout: dropped (parameters and root are row-major)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_dimensions_move_to_the_most_major_positions_in_order() {
        assert_eq!(batch_major(&[0, 1, 2, 3], &[0, 1]), vec![2, 3, 1, 0]);
        assert_eq!(batch_major(&[3, 2, 1, 0], &[0, 1]), vec![3, 2, 1, 0]);
        assert!(batch_is_major(&[3, 2, 1, 0], &[0, 1]));
        assert!(!batch_is_major(&[3, 2, 0, 1], &[0, 1]));
        assert!(!batch_is_major(&[0, 1, 2, 3], &[0, 1]));
    }
}
