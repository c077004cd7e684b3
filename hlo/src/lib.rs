//! `hlo`: XLA's HLO text format in and out.
//!
//! - [`parse_module`] reads HLO text (as XLA prints and parses it) into the
//!   arena IR of [`ir`]; errors carry `file:line:col`.
//! - [`print_module`] writes the IR back as HLO text that XLA's parser reads as
//!   the same module.
//! - [`verify`] checks operand counts, shapes and layouts of a module.
//!
//! Everything that came from input is validated here; code downstream of a
//! successful parse + verify may index arenas without re-checking.

pub mod error;
pub mod ir;
pub mod opcode;

pub use error::{Error, Result};
pub use ir::*;
pub use opcode::Opcode;
