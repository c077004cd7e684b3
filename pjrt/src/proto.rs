//! The protobuf messages the backend writes and reads, encoded by hand on
//! the wire format (a handful of fields; field numbers are XLA's, from
//! `xla/pjrt/proto/compile_options.proto` and `xla/service/hlo.proto` /
//! `xla/xla_data.proto`):
//! - `CompileOptionsProto`: one replica, one partition, any device, and
//!   (for [`crate::Pipeline::LayoutsKept`]) the override
//!   `env_option_overrides["xla_disable_hlo_passes"]`. An override is
//!   applied on top of XLA's default debug options; writing `debug_options`
//!   ourselves would zero every other default.
//! - reading back the layouts of an optimized `HloModuleProto`
//!   ([`instruction_layouts`]), to confirm which layouts XLA compiled.
//!
//! Invariants: the reader never panics on malformed bytes (every length is
//! checked) and skips fields it does not know.

use crate::{PjrtError, Result};

/// XLA passes disabled on the layouts-kept path: `layout-assignment` would
/// replace the module's layouts, `algsimp` deletes the copies that carry
/// them, the pre-layout `cse` merges copies into mixed-layout elementwise
/// ops that the CPU backend refuses.
pub const DISABLED_PASSES_LAYOUTS_KEPT: &str = "layout-assignment,algsimp,cse";

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, ((field as u64) << 3) | wire as u64);
}

fn int_field(out: &mut Vec<u8>, field: u32, v: i64) {
    tag(out, field, 0);
    varint(out, v as u64);
}

fn bytes_field(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    tag(out, field, 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A serialized `CompileOptionsProto`: `executable_build_options` (3) with
/// `device_ordinal` (1) = -1, `num_replicas` (4) = 1, `num_partitions`
/// (5) = 1; each `(name, value)` of `overrides` as an
/// `env_option_overrides` (7) map entry whose `OptionOverrideProto` holds
/// `string_field` (1).
pub fn compile_options(overrides: &[(&str, &str)]) -> Vec<u8> {
    let mut build = Vec::new();
    int_field(&mut build, 1, -1);
    int_field(&mut build, 4, 1);
    int_field(&mut build, 5, 1);
    let mut out = Vec::new();
    bytes_field(&mut out, 3, &build);
    for (name, value) in overrides {
        let mut value_msg = Vec::new();
        bytes_field(&mut value_msg, 1, value.as_bytes());
        let mut entry = Vec::new();
        bytes_field(&mut entry, 1, name.as_bytes());
        bytes_field(&mut entry, 2, &value_msg);
        bytes_field(&mut out, 7, &entry);
    }
    out
}

/// One field of a message: its number and its value.
enum Value<'a> {
    Int(u64),
    Bytes(&'a [u8]),
    Fixed,
}

struct Fields<'a> {
    b: &'a [u8],
}

fn read_varint(b: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = b.split_first()?;
        *b = rest;
        v |= ((byte & 0x7f) as u64) << shift;
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

impl<'a> Iterator for Fields<'a> {
    type Item = std::result::Result<(u32, Value<'a>), ()>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.b.is_empty() {
            return None;
        }
        let mut step = || -> Option<(u32, Value<'a>)> {
            let key = read_varint(&mut self.b)?;
            let field = u32::try_from(key >> 3).ok()?;
            let v = match key & 7 {
                0 => Value::Int(read_varint(&mut self.b)?),
                1 => {
                    self.b = self.b.get(8..)?;
                    Value::Fixed
                }
                2 => {
                    let n = usize::try_from(read_varint(&mut self.b)?).ok()?;
                    let (v, rest) = (self.b.get(..n)?, self.b.get(n..)?);
                    self.b = rest;
                    Value::Bytes(v)
                }
                5 => {
                    self.b = self.b.get(4..)?;
                    Value::Fixed
                }
                _ => return None,
            };
            Some((field, v))
        };
        match step() {
            Some(f) => Some(Ok(f)),
            None => {
                self.b = &[];
                Some(Err(()))
            }
        }
    }
}

fn fields(b: &[u8]) -> Fields<'_> {
    Fields { b }
}

fn malformed() -> PjrtError {
    PjrtError::Protocol("malformed HloModuleProto".into())
}

/// An instruction of a compiled module and its layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstLayout {
    pub computation: String,
    pub name: String,
    pub opcode: String,
    /// `minor_to_major` of an array result; `None` for tuples, tokens and
    /// arrays without a layout.
    pub minor_to_major: Option<Vec<i64>>,
}

/// Every instruction of a serialized `HloModuleProto` with its layout:
/// `computations` (3) -> `instructions` (2) -> `name` (1), `opcode` (2),
/// `shape` (3) -> `layout` (5) -> `minor_to_major` (1, packed or not).
///
/// `PJRT_Executable_OptimizedProgram` of XLA:CPU answers an
/// `HloModuleProtoWithConfig` (the module is its field 1, the config field
/// 2); such a wrapper is unwrapped. Instructions XLA cloned into fusions
/// keep their name with a `.N` suffix.
pub fn instruction_layouts(module: &[u8]) -> Result<Vec<InstLayout>> {
    let mut has_computations = false;
    let mut first = None;
    for f in fields(module) {
        match f.map_err(|_| malformed())? {
            (3, Value::Bytes(_)) => has_computations = true,
            (1, Value::Bytes(b)) => first = Some(b),
            _ => {}
        }
    }
    let module = match first {
        Some(inner) if !has_computations => inner,
        _ => module,
    };
    let mut out = Vec::new();
    for f in fields(module) {
        let (n, v) = f.map_err(|_| malformed())?;
        let (3, Value::Bytes(comp)) = (n, v) else {
            continue;
        };
        let mut comp_name = String::new();
        let mut insts = Vec::new();
        for f in fields(comp) {
            match f.map_err(|_| malformed())? {
                (1, Value::Bytes(s)) => comp_name = String::from_utf8_lossy(s).into_owned(),
                (2, Value::Bytes(i)) => insts.push(i),
                _ => {}
            }
        }
        for inst in insts {
            let mut l = InstLayout {
                computation: comp_name.clone(),
                name: String::new(),
                opcode: String::new(),
                minor_to_major: None,
            };
            for f in fields(inst) {
                match f.map_err(|_| malformed())? {
                    (1, Value::Bytes(s)) => l.name = String::from_utf8_lossy(s).into_owned(),
                    (2, Value::Bytes(s)) => l.opcode = String::from_utf8_lossy(s).into_owned(),
                    (3, Value::Bytes(shape)) => l.minor_to_major = shape_layout(shape)?,
                    _ => {}
                }
            }
            out.push(l);
        }
    }
    Ok(out)
}

fn shape_layout(shape: &[u8]) -> Result<Option<Vec<i64>>> {
    let mut is_tuple = false;
    let mut layout = None;
    for f in fields(shape) {
        match f.map_err(|_| malformed())? {
            (4, _) => is_tuple = true,
            (5, Value::Bytes(l)) => {
                let mut m2m = Vec::new();
                for f in fields(l) {
                    match f.map_err(|_| malformed())? {
                        (1, Value::Int(v)) => m2m.push(v as i64),
                        (1, Value::Bytes(mut packed)) => {
                            while !packed.is_empty() {
                                m2m.push(read_varint(&mut packed).ok_or_else(malformed)? as i64);
                            }
                        }
                        _ => {}
                    }
                }
                layout = Some(m2m);
            }
            _ => {}
        }
    }
    Ok(if is_tuple { None } else { layout })
}

/// The serialized `HloModuleProto` of `m`.
///
/// FALLBACK (until `hlo` writes protos itself): the module is printed and
/// XLA's own parser in jaxlib serializes it ([`proto_via_jaxlib`]), with the
/// Python of `$HLO_OPT_PYTHON`, of a `.venv` in the current folder or an
/// ancestor, or `python3`.
pub fn module_proto(m: &hlo::Module) -> Result<Vec<u8>> {
    proto_via_jaxlib(&python(), &hlo::print_module(m))
}

fn python() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("HLO_OPT_PYTHON") {
        return p.into();
    }
    if let Ok(cwd) = std::env::current_dir() {
        for d in cwd.ancestors() {
            let p = d.join(".venv/bin/python");
            if p.is_file() {
                return p;
            }
        }
    }
    "python3".into()
}

/// Serializes HLO text to an `HloModuleProto` with XLA's own parser (jaxlib
/// in `python`).
pub fn proto_via_jaxlib(python: &std::path::Path, text: &str) -> Result<Vec<u8>> {
    use std::io::Write;
    let script = "import sys\nfrom jax._src.lib import hlo\n\
                  t = sys.stdin.read()\n\
                  sys.stdout.buffer.write(hlo.hlo_module_from_text(t).as_serialized_hlo_module_proto())\n";
    let mut child = std::process::Command::new(python)
        .args(["-c", script])
        .env("JAX_PLATFORMS", "cpu")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| PjrtError::Io {
            context: format!("running {}", python.display()),
            source: e,
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        let text = text.to_string();
        std::thread::spawn(move || {
            let _ = stdin.write_all(text.as_bytes());
        });
    }
    let out = child.wait_with_output().map_err(|e| PjrtError::Io {
        context: "jaxlib proto writer".into(),
        source: e,
    })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(PjrtError::Unsupported(format!(
            "XLA's parser (jaxlib) rejected the module: {last}"
        )));
    }
    Ok(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes jaxlib 0.10.2's `CompileOptions` writes for the same
    /// override (its `env_option_overrides` entry, field 7).
    #[test]
    fn the_override_is_encoded_as_xla_writes_it() {
        let b = compile_options(&[("xla_disable_hlo_passes", DISABLED_PASSES_LAYOUTS_KEPT)]);
        let entry = "3a390a16786c615f64697361626c655f686c6f5f706173736573121f0a1d6c61796f75742d61737369676e6d656e742c616c6773696d702c637365";
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        assert!(hex.ends_with(entry), "{hex}");
        // Build options: device_ordinal -1 (ten-byte varint), 1 replica, 1 partition.
        assert!(
            hex.starts_with("1a0f08ffffffffffffffffff0120012801"),
            "{hex}"
        );
    }

    #[test]
    fn malformed_protos_are_errors() {
        for bad in [
            &[0x1a, 0x05, 0x01][..],
            &[0xff; 11],
            &[0x1a, 0x02, 0x12, 0x09],
        ] {
            assert!(instruction_layouts(bad).is_err(), "{bad:?}");
        }
        assert_eq!(instruction_layouts(&[]).expect("empty"), vec![]);
    }
}
