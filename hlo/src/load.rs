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
    if crate::proto::looks_like_proto(&bytes) {
        let (module, report) =
            crate::proto::from_bytes_lossy(&bytes).map_err(|e| Error::InFile {
                file: name.to_string(),
                source: Box::new(e),
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
}
