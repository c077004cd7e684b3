//! The C ABI of hlo-opt: what a C or C++ compiler links (`-lhlo_opt`) to parse
//! HLO text, run hlo-opt's passes on it and print it back. The declarations are
//! documented in the hand-written `include/hlo_opt.h`; `tests/header.rs`
//! regenerates them from this crate with cbindgen and fails when the two differ.
//!
//! # Map of the modules
//!
//! Each line: what the module owns; what it may import from this crate
//! (and from outside it). Imports point down this list, never up.
//!
//! | module | owns | may import |
//! |---|---|---|
//! | `module` | `hlo_opt_module_*`, `hlo_opt_list_passes`, running passes | `backend`, `options`, `strings`, `guard`, `status`; `hlo`, `passes`, `costmodel` |
//! | `backend` | the calls into `hlo` and `passes` the C ABI wraps, in one place | `hlo`, `passes` |
//! | `options` | `hlo_opt_options_*`: the pass options a C host sets, the host's `measure` callback as a measurer | `guard`, `status`; `passes`, `pjrt` |
//! | `strings` | strings and bytes handed out, and their `free` functions | `guard`, `status` |
//! | `guard` | `catch_unwind` around every entry point, the quiet panic hook, the thread's last error | `status` |
//! | `status` | `hlo_opt_status_t`, whose values are stable | nothing |
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
