//! `costmodel`: the learned cost model of hlo-opt.
//!
//! - [`graph`]: the TpuGraphs graph format in memory.
//!
//! A cost model sits behind the [`CostModel`] trait so the ONNX model, a
//! reference model for tests and future models plug in the same way. Scores are
//! "lower = predicted faster"; compare them with `f32::total_cmp` and break ties
//! by index.

pub mod graph;

pub use graph::{ConfigBatch, Graph, Task};
