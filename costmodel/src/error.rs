//! The error type of the `costmodel` crate.

/// Everything that can go wrong featurizing, reading npz files or running a model.
#[derive(Debug, thiserror::Error)]
pub enum CostModelError {
    /// The module cannot be featurized the TpuGraphs way (unknown opcode, rank > 6, ...).
    #[error("featurization: {0}")]
    Featurize(String),
    /// An npz file is missing, truncated or does not match the published format.
    #[error("npz {path}: {message}")]
    Npz { path: String, message: String },
    /// A model file is missing, corrupt, or does not match the model contract (MODEL.md).
    #[error("model {path}: {message}")]
    Model { path: String, message: String },
    /// The ONNX Runtime shared library could not be found or loaded.
    #[error("ONNX Runtime: {0}")]
    Runtime(String),
    /// Bad input to a model: empty graph, no configurable nodes, NaN, wrong sizes.
    #[error("invalid input: {0}")]
    Input(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

pub type Result<T, E = CostModelError> = std::result::Result<T, E>;
