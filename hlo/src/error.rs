//! The error type of the `hlo` crate: parse errors with a source position,
//! verifier errors naming the instruction.

use std::fmt;

/// A position in HLO source text (1-based line and column).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pos {
    pub file: String,
    pub line: usize,
    pub col: usize,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.col)
    }
}

/// Everything that can go wrong reading, checking or writing HLO.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The text is not valid HLO. `snippet` is the offending source line.
    #[error("{pos}: {message}")]
    Parse {
        pos: Pos,
        message: String,
        snippet: String,
    },
    /// The module parsed but is not well formed.
    #[error("in computation {computation}, instruction %{instruction}: {message}")]
    Verify {
        computation: String,
        instruction: String,
        message: String,
    },
    /// A module-level problem not tied to one instruction.
    #[error("invalid module: {0}")]
    Module(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The error for people: `file:line:col: error: message`, then the
    /// offending source line and a caret under the column (parse errors).
    pub fn render(&self) -> String {
        match self {
            Error::Parse {
                pos,
                message,
                snippet,
            } => {
                let pad: String = snippet
                    .chars()
                    .take(pos.col.saturating_sub(1))
                    .map(|c| if c == '\t' { '\t' } else { ' ' })
                    .collect();
                format!("{pos}: error: {message}\n{snippet}\n{pad}^")
            }
            other => format!("error: {other}"),
        }
    }
}
