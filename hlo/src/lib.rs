//! `hlo`: XLA's HLO text format in and out.
//!
//! - [`parse_module`] reads HLO text (as XLA prints and parses it) into the
//!   arena IR of [`ir`]; errors carry `file:line:col`.
//! - [`print_module`] writes the IR back as HLO text that XLA's parser reads as
//!   the same module.
//! - [`proto`] reads and writes XLA's binary `HloModuleProto`
//!   ([`proto::to_bytes`], [`proto::from_bytes`]).
//! - [`parse_stablehlo`] reads StableHLO MLIR text (generic op form, as jax
//!   lowers it) into the same IR XLA's MLIR-to-HLO conversion would give.
//! - [`verify`] checks operand counts, shapes and layouts of a module.
//! - [`attrs`]: the typed attribute values the parser decodes once
//!   (dimensions, windows, padding, slices, enumerations, precisions, ...)
//!   and their accessors.
//!
//! Everything that came from input is validated here; code downstream of a
//! successful parse may index arenas without re-checking.
//!
//! Layers (imports point down, never in a circle; `tests/layers.rs` checks):
//! - the IR: [`ir`] (module, computations, instructions, shapes, layouts and
//!   every typed attribute value: [`ir::literal`], [`ir::values`],
//!   [`ir::dims`], XLA's messages [`ir::xla`]), [`opcode`], and [`error`]
//!   (errors carry their positions); it imports nothing above it;
//! - the formats over it: text ([`parse`], [`attrs`], [`print`](mod@print)) and
//!   [`proto`] (reader and writer);
//! - the checks: [`semantic`], [`shape_infer`], [`verify`](mod@verify).

// pest is used without its `std` feature (which forces a stack probe on every
// rule call); the generated parser then refers to `alloc`. Nesting depth is
// bounded by our own guard (`parse::MAX_DEPTH`).
extern crate alloc;

pub mod attrs;
pub mod error;
pub mod ir;
pub mod load;
pub mod opcode;
pub mod parse;
pub mod print;
pub mod proto;
pub mod semantic;
pub mod shape_infer;
pub mod stablehlo;
pub mod verify;

pub use error::{Error, Result};
pub use ir::*;
pub use load::{load_bytes, Loaded};
pub use opcode::Opcode;
pub use parse::{parse_module, parse_module_named, source_text};
pub use print::{
    canonical_post_order, print_computation, print_computation_canonical, print_instruction,
    print_instruction_canonical, print_layout, print_layout_in, print_module, print_shape,
    print_shape_no_layout, CanonicalOptions, Subcomputations,
};
pub use stablehlo::{parse_stablehlo, stablehlo_to_hlo_text};
pub use verify::{verify, verify_in_source};
