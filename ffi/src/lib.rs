//! The C ABI of hlo-opt: what a C or C++ compiler links (`-lhlo_opt`) to parse
//! HLO text, run hlo-opt's passes on it and print it back. The declarations are
//! documented in the hand-written `include/hlo_opt.h`; `tests/header.rs`
//! regenerates them from this crate with cbindgen and fails when the two differ.
//!
//! Invariants of every exported function:
//! - it checks each pointer argument for NULL before use and returns
//!   [`hlo_opt_status_t::HLO_OPT_ERROR_NULL_ARGUMENT`] instead of crashing;
//! - it runs its body under `catch_unwind`: no panic crosses the boundary (a
//!   caught panic becomes [`hlo_opt_status_t::HLO_OPT_ERROR_INTERNAL`]);
//! - it records the outcome of the call in the calling thread's last-error
//!   message ([`hlo_opt_last_error`]): the error text on failure, "" on success;
//! - no Rust type crosses the boundary: handles are opaque pointers to boxed
//!   values, strings handed out are `CString`s released by
//!   [`hlo_opt_string_free`];
//! - handles are `Sync`: a module wraps a `Mutex<Module>`, options a
//!   `Mutex<OptionsData>`, so any thread may use any handle at any time (freeing
//!   a handle still in use elsewhere is the caller's bug).

#![allow(non_camel_case_types)]

mod backend;
mod guard;
mod module;
mod options;
mod status;
mod strings;

pub use module::*;
pub use options::*;
pub use status::*;
pub use strings::*;
