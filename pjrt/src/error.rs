//! The crate's error type: every failure of finding, loading, compiling,
//! running or comparing, with the words a user needs to act on it.

/// Errors of the PJRT backend.
#[derive(Debug, thiserror::Error)]
pub enum PjrtError {
    /// No plugin (or worker executable) was found; the message says where we looked.
    #[error("{0}")]
    NotFound(String),
    /// The plugin file is not a usable PJRT plugin.
    #[error("PJRT plugin {plugin}: {message}")]
    Plugin { plugin: String, message: String },
    /// XLA returned an error from a PJRT call.
    #[error("XLA ({call}): {message}")]
    Xla { call: String, message: String },
    /// A request the worker answered with an error (its message, often an
    /// [`PjrtError::Xla`] rendered there).
    #[error("{message} (while {doing})")]
    Failed { doing: String, message: String },
    /// The worker process ended without answering (XLA aborted or crashed).
    #[error("XLA aborted the worker process ({status}) while {doing}{log}")]
    WorkerDied {
        status: String,
        doing: String,
        log: String,
    },
    /// The worker did not answer in time and was killed.
    #[error("the worker took more than {seconds} s while {doing}; killed it")]
    Timeout { seconds: u64, doing: String },
    /// A module this backend cannot feed or compare (tuple parameters,
    /// f8 types, dynamic shapes, ...).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Bad input to the backend itself.
    #[error("{0}")]
    Input(String),
    /// Talking to the worker failed.
    #[error("worker protocol: {0}")]
    Protocol(String),
    #[error(transparent)]
    Hlo(#[from] hlo::Error),
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
}

pub type Result<T> = std::result::Result<T, PjrtError>;
