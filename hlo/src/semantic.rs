//! Rules XLA's HLO parser enforces beyond the syntax: attribute values in the
//! format their opcode expects, attributes an opcode requires, and the
//! structure of async wrappers. [`check`] runs after lowering, over the whole
//! module, and reports the first violation as a [`Finding`]; the parser turns
//! it into a `file:line:col` error (at `attr=` when the finding names an
//! attribute, else at the instruction's name).
//!
//! Invariants: checks only read the module; a module the printer produced
//! from a module that passed [`check`] passes it again (the printer never
//! changes attribute text); every finding names what to fix.

use crate::ir::*;
use crate::opcode::Opcode;

/// One violation: where (instruction, or computation when no instruction is
/// to blame; optionally the attribute) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub inst: Option<InstId>,
    pub comp: Option<CompId>,
    pub attr: Option<String>,
    pub message: String,
}

impl Finding {
    /// A finding about attribute `key` of instruction `inst`.
    pub fn attr(inst: InstId, key: &str, message: impl Into<String>) -> Self {
        Finding {
            inst: Some(inst),
            comp: None,
            attr: Some(key.to_string()),
            message: message.into(),
        }
    }
}

/// Checks every instruction of `m`; the first violation in print order.
pub fn check(m: &Module) -> Result<(), Finding> {
    for id in m.all_instructions() {
        let inst = m.inst(id);
        #[allow(clippy::single_match)]
        match inst.opcode {
            Opcode::Compare => check_compare(id, inst)?,
            _ => {}
        }
    }
    Ok(())
}

const DIRECTIONS: &[&str] = &["EQ", "NE", "GE", "GT", "LE", "LT"];

/// `compare` needs `direction=` with one of XLA's six directions.
fn check_compare(id: InstId, inst: &Instruction) -> Result<(), Finding> {
    match inst.raw_attr("direction") {
        None => Err(Finding {
            inst: Some(id),
            comp: None,
            attr: None,
            message: format!(
                "compare %{} needs `direction=` (one of {})",
                inst.name,
                DIRECTIONS.join(", ")
            ),
        }),
        Some(d) if DIRECTIONS.contains(&d) => Ok(()),
        Some(d) => Err(Finding::attr(
            id,
            "direction",
            format!(
                "unknown comparison direction `{d}`; expected one of {}",
                DIRECTIONS.join(", ")
            ),
        )),
    }
}
