//! XLA's binary module format, `HloModuleProto`, in and out.
//!
//! - [`to_bytes`] / [`module_to_proto`]: a [`Module`] as XLA's
//!   `HloModuleProto` (what `--xla_dump_hlo_as_proto` writes and PJRT's
//!   `PJRT_Client_Compile` with format `"hlo"` takes). Every attribute is
//!   mapped to its proto field; one the proto cannot carry is an error, never
//!   dropped.
//! - [`from_bytes`] / [`module_from_proto`]: the reverse, keeping the proto's
//!   instruction and computation ids ([`Module::inst_proto_id`]). Fields the
//!   IR does not model are reported in [`ReadReport::ignored`] (unknown field
//!   numbers by a walk of the wire format against the schema tables of
//!   [`xla`], known fields the reader does not map by name); callers decide
//!   whether that is an error ([`from_bytes`] makes it one).
//!
//! Invariants: decoding never panics and never allocates more than the input
//! justifies (prost bounds every length by the remaining input; the walk
//! bounds nesting at [`MAX_DEPTH`]); encoding is deterministic.

pub mod xla;

mod read;
mod write;

pub use read::{module_from_proto, ReadReport};
pub use write::module_to_proto;

use prost::Message as _;

use crate::error::{Error, Result};
use crate::ir::Module;

/// Deepest message nesting the readers accept (shapes nest in tuples and
/// literals; XLA's own limit for protobuf parsing is 100).
pub const MAX_DEPTH: usize = 100;

/// A module as the bytes of a serialized `HloModuleProto`.
pub fn to_bytes(m: &Module) -> Result<Vec<u8>> {
    Ok(module_to_proto(m)?.encode_to_vec())
}

/// Reads a serialized `HloModuleProto`. Fails on malformed bytes, on a
/// module that is not well formed (dangling ids, cycles, ...), and on fields
/// the IR does not model (listed by path); use [`from_bytes_lossy`] to read
/// such a module anyway.
pub fn from_bytes(bytes: &[u8]) -> Result<Module> {
    let (m, report) = from_bytes_lossy(bytes)?;
    if !report.ignored.is_empty() {
        return Err(Error::Module(format!(
            "the proto holds fields hlo-opt does not model: {}",
            report.ignored.join(", ")
        )));
    }
    Ok(m)
}

/// Reads a serialized `HloModuleProto`, returning the module and the fields
/// it could not carry over.
pub fn from_bytes_lossy(bytes: &[u8]) -> Result<(Module, ReadReport)> {
    let mut unknown = Vec::new();
    walk::<xla::HloModuleProto>(bytes, "", 0, &mut unknown)
        .map_err(|e| Error::Module(format!("not a valid HloModuleProto: {e}")))?;
    let proto = xla::HloModuleProto::decode(bytes)
        .map_err(|e| Error::Module(format!("not a valid HloModuleProto: {e}")))?;
    let (m, mut report) = module_from_proto(&proto)?;
    unknown.append(&mut report.ignored);
    report.ignored = unknown;
    Ok((m, report))
}

/// Whether `bytes` look like a serialized `HloModuleProto` rather than HLO
/// text: HLO text starts (after white space and comments) with `HloModule`;
/// a proto starts with a field key, and parses.
pub fn looks_like_proto(bytes: &[u8]) -> bool {
    let text_start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map(|p| &bytes[p..]);
    if let Some(t) = text_start {
        if t.starts_with(b"HloModule") || t.starts_with(b"//") || t.starts_with(b"/*") {
            return false;
        }
    }
    let mut unknown = Vec::new();
    !bytes.is_empty() && walk::<xla::HloModuleProto>(bytes, "", 0, &mut unknown).is_ok()
}

/// A message's field table: name and message-typed child of each field
/// number it declares (generated with the message, see [`xla`]).
pub trait Fields {
    const NAME: &'static str;
    fn field(tag: u32) -> Option<(&'static str, Option<Walker>)>;
}

/// Walks one message's bytes (see [`walk`]).
pub type Walker = fn(&[u8], &str, usize, &mut Vec<String>) -> std::result::Result<(), String>;

/// Walks the wire format of message `M`, recording the path of every field
/// number `M`'s schema does not declare (`computations[2].instructions[5].#120`).
pub fn walk<M: Fields>(
    mut buf: &[u8],
    path: &str,
    depth: usize,
    unknown: &mut Vec<String>,
) -> std::result::Result<(), String> {
    use prost::encoding::{decode_key, decode_varint, WireType};
    if depth > MAX_DEPTH {
        return Err(format!("{path}: messages nest deeper than {MAX_DEPTH}"));
    }
    let mut counts: Vec<(u32, usize)> = Vec::new();
    while !buf.is_empty() {
        let (tag, wt) = decode_key(&mut buf).map_err(|e| format!("{}: {e}", M::NAME))?;
        let known = M::field(tag);
        let name = known.map_or_else(|| format!("#{tag}"), |(n, _)| n.to_string());
        let sub = |counts: &mut Vec<(u32, usize)>| -> String {
            let k = match counts.iter_mut().find(|(t, _)| *t == tag) {
                Some((_, c)) => {
                    *c += 1;
                    *c - 1
                }
                None => {
                    counts.push((tag, 1));
                    0
                }
            };
            let sep = if path.is_empty() { "" } else { "." };
            format!("{path}{sep}{name}[{k}]")
        };
        match wt {
            WireType::Varint => {
                decode_varint(&mut buf).map_err(|e| format!("{}.{name}: {e}", M::NAME))?;
            }
            WireType::SixtyFourBit => {
                if buf.len() < 8 {
                    return Err(format!("{}.{name}: truncated", M::NAME));
                }
                buf = &buf[8..];
            }
            WireType::ThirtyTwoBit => {
                if buf.len() < 4 {
                    return Err(format!("{}.{name}: truncated", M::NAME));
                }
                buf = &buf[4..];
            }
            WireType::LengthDelimited => {
                let len =
                    decode_varint(&mut buf).map_err(|e| format!("{}.{name}: {e}", M::NAME))?;
                let len = usize::try_from(len)
                    .ok()
                    .filter(|&l| l <= buf.len())
                    .ok_or_else(|| format!("{}.{name}: length {len} past the end", M::NAME))?;
                let (body, rest) = buf.split_at(len);
                buf = rest;
                if let Some((_, Some(child))) = known {
                    let p = sub(&mut counts);
                    child(body, &p, depth + 1, unknown)?;
                }
            }
            WireType::StartGroup | WireType::EndGroup => {
                return Err(format!("{}.{name}: groups are not used by XLA", M::NAME));
            }
        }
        if known.is_none() {
            let sep = if path.is_empty() { "" } else { "." };
            unknown.push(format!("{path}{sep}{} field #{tag}", M::NAME));
        }
    }
    Ok(())
}
