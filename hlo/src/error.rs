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
    /// The module parsed but is not well formed. `offset` is the byte offset
    /// of the instruction's name in the source the module was parsed from
    /// (none for instructions a pass added); [`Error::locate`] turns it into
    /// `at`: the position and the source line.
    #[error("{}in computation {computation}, instruction %{instruction}: {message}", .at.as_ref().map(|a| format!("{}: ", a.0)).unwrap_or_default())]
    Verify {
        computation: String,
        instruction: String,
        message: String,
        offset: Option<usize>,
        at: Option<Box<(Pos, String)>>,
    },
    /// A module-level problem not tied to one instruction.
    #[error("invalid module: {0}")]
    Module(String),
    /// An error of the input file `file` as a whole (a proto that does not
    /// read): rendered `file: error: ...`.
    #[error("{file}: {source}")]
    InFile { file: String, source: Box<Error> },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Widest source line [`Error::render`] echoes, in characters; a longer line
/// is shown as a window of this width around the column, `...` marking the
/// cut ends (a module printed on one line can be megabytes long).
pub const MAX_SNIPPET_CHARS: usize = 256;

impl Error {
    /// The error for people: `file:line:col: error: message`, then the
    /// offending source line (at most [`MAX_SNIPPET_CHARS`] of it) and a caret
    /// under the column (parse errors, and verifier errors placed with
    /// [`Error::locate`]).
    pub fn render(&self) -> String {
        match self {
            Error::Parse {
                pos,
                message,
                snippet,
            } => format!("{pos}: error: {message}\n{}", caret_lines(snippet, pos.col)),
            Error::Verify {
                computation,
                instruction,
                message,
                at: Some(at),
                ..
            } => format!(
                "{}: error: in computation {computation}, instruction %{instruction}: {message}\n{}",
                at.0,
                caret_lines(&at.1, at.0.col)
            ),
            Error::InFile { file, source } => format!("{file}: error: {source}"),
            other => format!("error: {other}"),
        }
    }

    /// Places a verifier error in `text`, the source the module was parsed
    /// from, named `filename`: `file:line:col` of the instruction and its line.
    /// Other errors, and verifier errors about instructions without a source
    /// offset, are returned as they are.
    pub fn locate(self, text: &str, filename: &str) -> Error {
        match self {
            Error::Verify {
                computation,
                instruction,
                message,
                offset: Some(offset),
                at: None,
            } if offset < text.len() => {
                let (line, col) = line_col(text, offset);
                let snippet = source_line(text, offset);
                Error::Verify {
                    computation,
                    instruction,
                    message,
                    offset: Some(offset),
                    at: Some(Box::new((
                        Pos {
                            file: filename.to_string(),
                            line,
                            col,
                        },
                        snippet,
                    ))),
                }
            }
            other => other,
        }
    }
}

/// The source line (or a window of it, see [`MAX_SNIPPET_CHARS`]) and a caret
/// line under column `col` (1-based, in characters).
fn caret_lines(snippet: &str, col: usize) -> String {
    let chars: Vec<char> = snippet.chars().collect();
    let at = col.saturating_sub(1).min(chars.len());
    let (start, end) = if chars.len() <= MAX_SNIPPET_CHARS {
        (0, chars.len())
    } else {
        let start = at
            .saturating_sub(MAX_SNIPPET_CHARS / 2)
            .min(chars.len() - MAX_SNIPPET_CHARS);
        (start, start + MAX_SNIPPET_CHARS)
    };
    let lead = if start > 0 { "..." } else { "" };
    let tail = if end < chars.len() { "..." } else { "" };
    // Control characters (a NUL, an escape sequence) are not echoed as they are.
    let shown: String = chars[start..end]
        .iter()
        .map(|&c| {
            if c.is_control() && c != '\t' {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect();
    let pad: String = lead
        .chars()
        .map(|_| ' ')
        .chain(
            chars[start..at]
                .iter()
                .map(|&c| if c == '\t' { '\t' } else { ' ' }),
        )
        .collect();
    format!("{lead}{shown}{tail}\n{pad}^")
}

/// The 1-based line and column (in characters) of byte `offset` of `text`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text.as_bytes()[..offset];
    let line = memchr_count(b'\n', before) + 1;
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let col = text
        .get(line_start..offset)
        .map_or(offset - line_start, |s| s.chars().count())
        + 1;
    (line, col)
}

fn memchr_count(needle: u8, hay: &[u8]) -> usize {
    hay.iter().filter(|&&b| b == needle).count()
}

/// The line of `text` that holds byte `offset`, without its line end.
pub(crate) fn source_line(text: &str, offset: usize) -> String {
    let offset = offset.min(text.len());
    let start = text.as_bytes()[..offset]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let end = text.as_bytes()[offset..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(text.len(), |p| offset + p);
    text.get(start..end)
        .unwrap_or("")
        .trim_end_matches('\r')
        .to_string()
}
