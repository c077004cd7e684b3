//! Reading a module from the bytes of a file, as `hlo-opt FILE` does: HLO
//! text or a serialized `HloModuleProto`, told apart by content whatever the
//! file name. The one reader behind the CLI and the Python package.
//!
//! Invariant: [`Loaded::text`] is the text that positions in later errors
//! refer to: the source itself for text input, the module's printed text for
//! a proto (which has no text of its own).

use crate::error::{Error, Result};
use crate::ir::Module;

/// A module read from a file, with the text its positions refer to.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub module: Module,
    /// The source text (text input) or the printed module (proto input).
    pub text: String,
    /// The name errors give the input (a path, `<stdin>`, `<input>`).
    pub name: String,
    /// Proto input: the fields hlo-opt does not model, which were not
    /// carried over ([`crate::proto::ReadReport::summary`]); `None` when
    /// every field was.
    pub ignored_fields: Option<String>,
}

impl Loaded {
    /// The warning the CLI prints for [`Loaded::ignored_fields`].
    pub fn warning(&self) -> Option<String> {
        self.ignored_fields.as_ref().map(|fields| {
            format!(
                "{}: warning: HloModuleProto fields hlo-opt does not model are not carried over: {fields}",
                self.name
            )
        })
    }

    /// Runs the verifier; an error is placed in [`Loaded::text`].
    pub fn verify(&self) -> Result<()> {
        crate::verify_in_source(&self.module, &self.text, &self.name)
    }
}

/// Reads `bytes` named `name`: a serialized `HloModuleProto` when they look
/// like one ([`crate::proto::looks_like_proto`]; fields the IR does not model
/// are listed in [`Loaded::ignored_fields`]), else HLO text (UTF-8, the
/// first bad byte reported at its position). Not verified: see
/// [`Loaded::verify`]. A proto's errors are [`Error::InFile`] naming `name`.
pub fn load_bytes(bytes: Vec<u8>, name: &str) -> Result<Loaded> {
    let binary = binary_byte(&bytes);
    if binary.is_some() || crate::proto::looks_like_proto(&bytes) {
        let (module, report) =
            crate::proto::from_bytes_lossy(&bytes).map_err(|e| Error::InFile {
                file: name.to_string(),
                source: Box::new(match (binary, e) {
                    // Not text, and its bytes do not decode as a proto: say
                    // both, and why it was taken for a proto.
                    (Some((at, b)), Error::Module(m))
                        if m.starts_with(NOT_A_PROTO) =>
                    {
                        Error::Module(format!(
                            "not HLO text (byte {at} is 0x{b:02X}, a control byte) and not a whole HloModuleProto (truncated or corrupt): {}",
                            &m[NOT_A_PROTO.len()..]
                        ))
                    }
                    (_, e) => e,
                }),
            })?;
        let text = crate::print_module(&module);
        let ignored_fields = (!report.ignored.is_empty()).then(|| report.summary());
        return Ok(Loaded {
            module,
            text,
            name: name.to_string(),
            ignored_fields,
        });
    }
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            // `source_text` positions the first bad byte; it fails exactly
            // when `from_utf8` does.
            crate::source_text(e.as_bytes(), name)?;
            return Err(Error::InFile {
                file: name.to_string(),
                source: Box::new(Error::Module(e.to_string())),
            });
        }
    };
    let module = crate::parse_module_named(&text, name)?;
    Ok(Loaded {
        module,
        text,
        name: name.to_string(),
        ignored_fields: None,
    })
}

/// How [`crate::proto::from_bytes_lossy`] starts the message of bytes that
/// do not decode.
const NOT_A_PROTO: &str = "not a valid HloModuleProto: ";

/// The first byte that marks `bytes` as binary rather than HLO text, with
/// its offset: a control byte other than tab, line feed and carriage return
/// (a serialized proto's field keys and lengths are mostly such bytes),
/// unless the input starts as HLO text does (`HloModule` or a comment,
/// after white space), where the text reader reports the byte at its line
/// and column.
fn binary_byte(bytes: &[u8]) -> Option<(usize, u8)> {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace())?;
    let t = &bytes[start..];
    if t.starts_with(b"HloModule") || t.starts_with(b"//") || t.starts_with(b"/*") {
        return None;
    }
    bytes
        .iter()
        .position(|&b| (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r')) || b == 0x7F)
        .map(|at| (at, bytes[at]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = "HloModule m\n\nENTRY e {\n  ROOT p = f32[2]{0} parameter(0)\n}\n";

    #[test]
    fn text_and_proto_are_told_apart_by_content() {
        let t = load_bytes(SMALL.as_bytes().to_vec(), "a.pb").expect("text");
        assert_eq!(t.text, SMALL);
        assert!(t.ignored_fields.is_none());
        let bytes = crate::proto::to_bytes(&t.module).expect("written");
        let p = load_bytes(bytes, "a.hlo").expect("proto");
        // Positions in a proto's errors refer to its printed text.
        assert_eq!(p.text, crate::print_module(&p.module));
        assert!(
            p.text.contains("ROOT %p = f32[2]{0} parameter(0)"),
            "{}",
            p.text
        );
    }

    #[test]
    fn bad_input_is_an_error_naming_the_file() {
        let e = load_bytes(b"HloModule m\n\xff".to_vec(), "f.hlo").expect_err("bad UTF-8");
        assert!(
            e.render().starts_with("f.hlo:2:1: error: invalid UTF-8"),
            "{}",
            e.render()
        );
        let e = load_bytes(b"HloModule m\nENTRY {".to_vec(), "g.hlo").expect_err("bad text");
        assert!(matches!(e, Error::Parse { .. }), "{e}");
    }

    #[test]
    fn a_truncated_proto_is_reported_as_one_with_its_offset_and_field() {
        let t = load_bytes(SMALL.as_bytes().to_vec(), "a.hlo").expect("text");
        let bytes = crate::proto::to_bytes(&t.module).expect("written");
        let cut = bytes[..bytes.len() / 2].to_vec();
        let e = load_bytes(cut, "cut.pb").expect_err("truncated").render();
        assert!(e.starts_with("cut.pb: error: "), "{e}");
        assert!(
            e.contains("not a whole HloModuleProto (truncated or corrupt)"),
            "{e}"
        );
        assert!(e.contains("at byte "), "{e}");
        assert!(!e.contains('\n'), "no source line is echoed: {e}");
        // Garbage: the same, never a source line of raw bytes.
        let e = load_bytes(b"\x13\x37\x00\xff\xfe garbage".to_vec(), "g.bin")
            .expect_err("garbage")
            .render();
        assert!(
            e.contains("byte 0 is 0x13") && e.contains("at byte 0"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
    }
}
