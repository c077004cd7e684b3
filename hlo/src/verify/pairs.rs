//! Asynchronous pairs: an op that starts asynchronous work (`all-reduce-start`,
//! `all-gather-start`, `collective-permute-start`, `copy-start`, `send`,
//! `recv`, `async-start`, `async-update`) is continued by exactly one op,
//! and that op takes its start as its operand and has the shape the start
//! promises.
//!
//! The rules, as XLA's verifier applies them (checked against jaxlib and the
//! XLA CPU plugin on small modules, `testdata/verify/async_*.hlo`):
//! - a start has exactly one user (operand edges, distinct users; control
//!   edges do not count), of the opcodes [`continuations`] lists. `send` and
//!   `recv` may also be used by a `tuple` (pipelined loops carry them), and
//!   may have no user when they are the root of a computation an
//!   `async-start` wraps;
//! - a done (and `async-update`) takes one of the opcodes [`starts`] lists as
//!   its operand (`send-done` / `recv-done` may take a `get-tuple-element`,
//!   the other side of a pipelined loop);
//! - a done has the shape its start promises: `all-reduce-done` the start's
//!   shape, `all-gather-done`, `collective-permute-done` and `async-done`
//!   element 1 of the start's tuple (the outputs), `copy-done` element 0
//!   (`copy-start(x)` itself has shape `(x, x, u32[])`).
//!   Under newer XLA's late binding the async shape changes along the
//!   chain: `async-done` is not compared after an `async-update` that binds
//!   further operands, nor when element 1 is `()` (the done binds the
//!   outputs). `all-reduce-done` may also have element 1 of a two-element
//!   start, the older `(operand, result)` form XLA's MHLO importer reads.

use smallvec::SmallVec;

use super::{Check, Verifier};
use crate::error::Result;
use crate::ir::{AttrValue, CompId, InstId, Instruction, PrimType, Shape, ShapeId};
use crate::opcode::Opcode;

/// The opcodes that may use `start`, for an op that starts asynchronous
/// work; `None` for every other op.
fn continuations(start: Opcode) -> Option<&'static [Opcode]> {
    use Opcode::*;
    Some(match start {
        AllReduceStart => &[AllReduceDone],
        AllGatherStart => &[AllGatherDone],
        CollectivePermuteStart => &[CollectivePermuteDone],
        CopyStart => &[CopyDone],
        AsyncStart | AsyncUpdate => &[AsyncUpdate, AsyncDone],
        Send => &[SendDone, Tuple],
        Recv => &[RecvDone, Tuple],
        _ => return None,
    })
}

/// The opcodes a done may take as its operand; `None` for every other op
/// (`async-update` / `async-done` are checked with the async chain).
fn starts(done: Opcode) -> Option<&'static [Opcode]> {
    use Opcode::*;
    Some(match done {
        AllReduceDone => &[AllReduceStart],
        AllGatherDone => &[AllGatherStart],
        CollectivePermuteDone => &[CollectivePermuteStart],
        CopyDone => &[CopyStart],
        SendDone => &[Send, GetTupleElement],
        RecvDone => &[Recv, GetTupleElement],
        _ => return None,
    })
}

/// `an all-reduce-done`, `a send-done or tuple`.
fn one_of(ops: &[Opcode]) -> String {
    let names: Vec<&str> = ops.iter().map(|o| o.name()).collect();
    let article = match names.first().and_then(|n| n.chars().next()) {
        Some('a' | 'e' | 'i' | 'o' | 'u') => "an",
        _ => "a",
    };
    format!("{article} {}", names.join(" or "))
}

impl Verifier<'_> {
    /// A done's operand is its start, and the done has the start's promised
    /// shape. Called from the per-opcode rules for the opcodes of [`starts`].
    pub(super) fn check_done(&self, inst: &Instruction) -> Check {
        let Some(allowed) = starts(inst.opcode) else {
            return Ok(());
        };
        self.operand_count(inst, 1)?;
        let op = self.m.inst(inst.operands[0]);
        if !allowed.contains(&op.opcode) {
            return Err(format!(
                "operand 0 (%{}) must be {}, but is {}",
                op.name,
                one_of(allowed),
                one_of(&[op.opcode])
            ));
        }
        let promised = match inst.opcode {
            // The older form `(operand, result) all-reduce-start` (XLA's
            // MHLO importer still reads it) promises element 1.
            Opcode::AllReduceDone => match self.element(op.shape, 1) {
                Some(s) if self.compatible(s, inst.shape) => None,
                _ => Some((op.shape, "")),
            },
            Opcode::AllGatherDone | Opcode::CollectivePermuteDone => {
                self.element(op.shape, 1).map(|s| (s, "element 1 of "))
            }
            Opcode::CopyDone => self.element(op.shape, 0).map(|s| (s, "element 0 of ")),
            _ => None,
        };
        match promised {
            Some((s, which)) => self.expect_promised(inst, op, s, which),
            None => Ok(()),
        }
    }

    /// `copy-start(x)` has shape `(x, x, u32[])`: the copy, the source and a
    /// context (XLA's verifier infers it so).
    pub(super) fn check_copy_start(&self, inst: &Instruction) -> Check {
        self.operand_count(inst, 1)?;
        let m = self.m;
        let x = m.inst(inst.operands[0]).shape;
        let ok = match m.shape(inst.shape) {
            Shape::Tuple(es) if es.len() == 3 => {
                self.compatible(es[0], x)
                    && self.compatible(es[1], x)
                    && matches!(m.shape(es[2]), Shape::Array(a) if a.elem == PrimType::U32 && a.dims.is_empty())
            }
            _ => false,
        };
        if ok {
            return Ok(());
        }
        let x = self.shape_str(x);
        Err(format!(
            "copy-start must have the shape ({x}, {x}, u32[]), but its shape is {}",
            self.shape_str(inst.shape)
        ))
    }

    /// `async-done` has the shape of element 1 of its operand's async shape
    /// (the wrapped computation's result), unless an `async-update` of the
    /// chain binds further operands (late binding). Runs after the operand
    /// was checked to be an async-start or async-update.
    pub(super) fn check_async_done_shape(&self, inst: &Instruction) -> Check {
        let m = self.m;
        let op = m.inst(inst.operands[0]);
        // Walk back to the async-start; operands come earlier in the
        // schedule, so the walk ends.
        let mut link = op;
        while link.opcode == Opcode::AsyncUpdate {
            if link.operands.len() != 1 {
                return Ok(());
            }
            link = m.inst(link.operands[0]);
        }
        match self.element(op.shape, 1) {
            // `()`: the outputs are bound by the async-done (late binding).
            Some(s) if matches!(m.shape(s), Shape::Tuple(es) if es.is_empty()) => Ok(()),
            Some(s) => self.expect_promised(inst, op, s, "element 1 of "),
            None => Ok(()),
        }
    }

    /// Element `k` of tuple shape `s`, if `s` is a tuple that long.
    fn element(&self, s: ShapeId, k: usize) -> Option<ShapeId> {
        match self.m.shape(s) {
            Shape::Tuple(es) => es.get(k).copied(),
            _ => None,
        }
    }

    fn expect_promised(
        &self,
        inst: &Instruction,
        start: &Instruction,
        promised: ShapeId,
        which: &str,
    ) -> Check {
        if self.compatible(promised, inst.shape) {
            return Ok(());
        }
        Err(format!(
            "{} must have the shape of {which}its {} %{}, {}, but its shape is {}",
            inst.opcode,
            start.opcode,
            start.name,
            self.shape_str(promised),
            self.shape_str(inst.shape)
        ))
    }

    /// Every start of `c` (the opcodes of [`continuations`]) has exactly one
    /// user, of an opcode that continues it. Runs after the per-instruction
    /// checks of `c`, while its schedule positions are recorded.
    pub(super) fn check_async_users(&self, c: CompId) -> Result<()> {
        let m = self.m;
        let comp = m.comp(c);
        if !comp
            .order
            .iter()
            .any(|&id| continuations(m.inst(id).opcode).is_some())
        {
            return Ok(());
        }
        let at = |id: InstId| self.position[id.index()] as usize - 1;
        // Distinct users by schedule position (a user's operands are all
        // seen before the next user's, so comparing with the last suffices).
        let mut users: Vec<SmallVec<[InstId; 2]>> = vec![SmallVec::new(); comp.order.len()];
        for &u in &comp.order {
            for &op in &m.inst(u).operands {
                let list = &mut users[at(op)];
                if list.last() != Some(&u) {
                    list.push(u);
                }
            }
        }
        for (pos, &id) in comp.order.iter().enumerate() {
            let inst = m.inst(id);
            let Some(allowed) = continuations(inst.opcode) else {
                continue;
            };
            let us = &users[pos];
            let wrapped_root = matches!(inst.opcode, Opcode::Send | Opcode::Recv)
                && us.is_empty()
                && comp.root == id
                && self.is_async_computation(c);
            if wrapped_root {
                continue;
            }
            let fail = |msg: String| self.fail(c, &inst.name, msg);
            match us.as_slice() {
                [u] if allowed.contains(&m.inst(*u).opcode) => {}
                [u] => {
                    return Err(fail(format!(
                        "the user of {} %{} must be {}, but %{} is {}",
                        inst.opcode,
                        inst.name,
                        one_of(allowed),
                        m.inst(*u).name,
                        one_of(&[m.inst(*u).opcode])
                    )))
                }
                _ => {
                    let names: Vec<String> =
                        us.iter().map(|&u| format!("%{}", m.inst(u).name)).collect();
                    return Err(fail(format!(
                        "{} must have exactly one user ({}), but has {}{}",
                        inst.opcode,
                        one_of(allowed),
                        if us.is_empty() {
                            "none".to_string()
                        } else {
                            us.len().to_string()
                        },
                        if names.is_empty() {
                            String::new()
                        } else {
                            format!(": {}", names.join(", "))
                        }
                    )));
                }
            }
        }
        Ok(())
    }

    /// Whether an `async-start` of the module wraps computation `c`.
    fn is_async_computation(&self, c: CompId) -> bool {
        let m = self.m;
        m.all_instructions().any(|id| {
            let inst = m.inst(id);
            inst.opcode == Opcode::AsyncStart
                && match inst.attr("calls") {
                    Some(AttrValue::Comp(x)) => *x == c,
                    Some(AttrValue::Comps(xs)) => xs.contains(&c),
                    _ => false,
                }
        })
    }
}
