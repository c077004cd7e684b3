//! A PJRT backend: XLA compiles and runs HLO modules through a PJRT plugin
//! (the XLA CPU plugin from PyPI, `xla-cpu-pjrt`), so that hlo-opt can check
//! results and measure runtimes with its layouts in effect.
//!
//! What this crate owns: finding a plugin ([`find_plugin`]), the C API calls
//! (`plugin.rs`, over the hand-written structs of `sys.rs`), the compile
//! options (`proto.rs`), a worker process that does every call into XLA
//! (`worker.rs`), the parent's side of it ([`Backend`]), deterministic
//! inputs and result comparison (`data.rs`), the XLA:CPU legalization of a
//! module whose layouts are kept (`legalize.rs`) and the measured choice
//! among candidates (`measure.rs`).
//!
//! # Map of the modules
//!
//! Each line: what the module owns; what it may import from this crate
//! (and from outside it). Imports point down this list, never up.
//!
//! | module | owns | may import |
//! |---|---|---|
//! | [`measure`] | the measured choice among candidates ([`PjrtMeasurer`], [`measurer_for`]): interleaved rounds, the control, the decision | `backend`, `data`, `legalize`, `proto`; `hlo`, `passes` (the `Measurer` trait) |
//! | `backend` | the parent's side of the worker ([`Backend`]): finding the plugin and the worker binary, compiling, running, timing | `worker`, `data`, `proto` |
//! | [`legalize`] | the XLA:CPU legalizations of a module whose layouts are kept | `hlo` |
//! | `data` | deterministic inputs for a signature, result comparison | `proto`; `hlo` |
//! | [`worker`] | the worker process: every call into XLA happens here | `plugin` |
//! | `plugin` | the PJRT C API calls | `sys` |
//! | `sys` | the hand-written C structs of the PJRT API | nothing |
//! | [`proto`] | the compile options as prost messages with XLA's field numbers | `hlo` |
//! | `error` | [`PjrtError`], the crate's one error enum | `hlo` |
//!
//! Invariants: nothing in the calling process calls into XLA; XLA aborting
//! (a fatal check, a missing custom-call handler) ends the worker, and the
//! caller gets [`PjrtError::WorkerDied`] with the tail of XLA's log. Inputs
//! are a function of (module signature, seed) only.

mod backend;
mod data;
mod error;
pub mod legalize;
pub mod measure;
mod plugin;
pub mod proto;
mod sys;
pub mod worker;

pub use backend::{find_plugin, find_worker, Backend, Compiled, Pipeline};
pub use data::{compare, differences, has_half_floats, inputs_for, values, Mismatch};
pub use error::{PjrtError, Result};
pub use measure::{
    device_name, measurer_for, measurer_for_budget, prepare, MeasureConfig, MeasureTarget,
    Measured, PjrtMeasurer,
};

/// Element types the backend feeds and reads back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElementType {
    Pred,
    S8,
    S16,
    S32,
    S64,
    U8,
    U16,
    U32,
    U64,
    F16,
    Bf16,
    F32,
    F64,
    C64,
    C128,
}

impl ElementType {
    pub fn byte_size(self) -> usize {
        use ElementType::*;
        match self {
            Pred | S8 | U8 => 1,
            S16 | U16 | F16 | Bf16 => 2,
            S32 | U32 | F32 => 4,
            S64 | U64 | F64 | C64 => 8,
            C128 => 16,
        }
    }

    pub fn name(self) -> &'static str {
        use ElementType::*;
        match self {
            Pred => "pred",
            S8 => "s8",
            S16 => "s16",
            S32 => "s32",
            S64 => "s64",
            U8 => "u8",
            U16 => "u16",
            U32 => "u32",
            U64 => "u64",
            F16 => "f16",
            Bf16 => "bf16",
            F32 => "f32",
            F64 => "f64",
            C64 => "c64",
            C128 => "c128",
        }
    }

    /// The type [`ElementType::name`] names (`f32`, `pred`, ...).
    pub fn from_name(name: &str) -> Option<Self> {
        use ElementType::*;
        [
            Pred, S8, S16, S32, S64, U8, U16, U32, U64, F16, Bf16, F32, F64, C64, C128,
        ]
        .into_iter()
        .find(|t| t.name() == name)
    }

    pub fn from_prim(p: hlo::PrimType) -> Option<Self> {
        use hlo::PrimType as P;
        Some(match p {
            P::Pred => Self::Pred,
            P::S8 => Self::S8,
            P::S16 => Self::S16,
            P::S32 => Self::S32,
            P::S64 => Self::S64,
            P::U8 => Self::U8,
            P::U16 => Self::U16,
            P::U32 => Self::U32,
            P::U64 => Self::U64,
            P::F16 => Self::F16,
            P::Bf16 => Self::Bf16,
            P::F32 => Self::F32,
            P::F64 => Self::F64,
            P::C64 => Self::C64,
            P::C128 => Self::C128,
            _ => return None,
        })
    }

    pub(crate) fn pjrt_type(self) -> i32 {
        use sys::buffer_type as T;
        use ElementType::*;
        match self {
            Pred => T::PRED,
            S8 => T::S8,
            S16 => T::S16,
            S32 => T::S32,
            S64 => T::S64,
            U8 => T::U8,
            U16 => T::U16,
            U32 => T::U32,
            U64 => T::U64,
            F16 => T::F16,
            Bf16 => T::BF16,
            F32 => T::F32,
            F64 => T::F64,
            C64 => T::C64,
            C128 => T::C128,
        }
    }

    pub(crate) fn from_pjrt(t: i32) -> Option<Self> {
        use sys::buffer_type as T;
        use ElementType::*;
        Some(match t {
            T::PRED => Pred,
            T::S8 => S8,
            T::S16 => S16,
            T::S32 => S32,
            T::S64 => S64,
            T::U8 => U8,
            T::U16 => U16,
            T::U32 => U32,
            T::U64 => U64,
            T::F16 => F16,
            T::F32 => F32,
            T::F64 => F64,
            T::BF16 => Bf16,
            T::C64 => C64,
            T::C128 => C128,
            _ => return None,
        })
    }
}

/// A dense row-major array on the host.
#[derive(Clone, Debug, PartialEq)]
pub struct HostArray {
    pub ty: ElementType,
    pub dims: Vec<i64>,
    /// `element_count * ty.byte_size()` bytes, little-endian.
    pub data: Vec<u8>,
}

impl HostArray {
    pub fn element_count(&self) -> usize {
        self.dims.iter().map(|&d| d.max(0) as usize).product()
    }
}
