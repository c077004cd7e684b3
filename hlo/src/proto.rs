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
//!   whether that is an error ([`from_bytes`] makes it one). Computations
//!   and instructions take the order of their ids, as in XLA;
//!   [`from_bytes_lossy_as_listed`] keeps the proto's order instead.
//!
//! Invariants: decoding never panics and never allocates more than the input
//! justifies (prost bounds every length by the remaining input; the walk
//! bounds nesting at [`MAX_DEPTH`]); encoding is deterministic.

pub use crate::ir::xla;

mod async_shorthand;
mod frames;
mod read;
mod write;

pub use read::{module_from_proto, module_from_proto_as_listed, ReadReport};
pub use write::{module_to_bytes, module_to_proto, MAX_PROTO_BYTES};

use prost::Message as _;

use crate::error::{Error, Result};
use crate::ir::Module;

/// Deepest message nesting the readers accept (shapes nest in tuples and
/// literals; XLA's own limit for protobuf parsing is 100).
pub const MAX_DEPTH: usize = 100;

/// A module as the bytes of a serialized `HloModuleProto`.
pub fn to_bytes(m: &Module) -> Result<Vec<u8>> {
    module_to_bytes(m)
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
    read_bytes(bytes, module_from_proto)
}

/// [`from_bytes_lossy`], with computations and instructions in the order the
/// proto lists them (see [`module_from_proto_as_listed`]).
pub fn from_bytes_lossy_as_listed(bytes: &[u8]) -> Result<(Module, ReadReport)> {
    read_bytes(bytes, module_from_proto_as_listed)
}

fn read_bytes(
    bytes: &[u8],
    read: fn(&xla::HloModuleProto) -> Result<(Module, ReadReport)>,
) -> Result<(Module, ReadReport)> {
    let mut unknown = Vec::new();
    // A clean proto (the common case) is checked once, by the fast scan;
    // any other is walked for the paths of its unknown fields or its error.
    if !scan::<xla::HloModuleProto>(bytes, 0) {
        walk::<xla::HloModuleProto>(bytes, None, 0, &mut unknown)
            .map_err(|e| Error::Module(format!("not a valid HloModuleProto: {e}")))?;
    }
    let proto = decode_module(bytes)
        .map_err(|e| Error::Module(format!("not a valid HloModuleProto: {e}")))?;
    let (m, mut report) = read(&proto)?;
    unknown.append(&mut report.ignored);
    report.ignored = unknown;
    Ok((m, report))
}

/// `HloModuleProto::decode`, with each computation's instruction list
/// allocated once at its length: prost grows a repeated field one element
/// at a time, and an instruction message is large enough that the doublings
/// of a big computation's list copy more than the whole proto. Everything
/// else is prost's own decoding (the loop is `Message::merge`'s).
fn decode_module(bytes: &[u8]) -> std::result::Result<xla::HloModuleProto, String> {
    use prost::encoding::{decode_key, decode_varint, skip_field, DecodeContext, WireType};
    let mut p = xla::HloModuleProto::default();
    let mut buf = bytes;
    while !buf.is_empty() {
        // prost's errors name the field (its stack of messages and fields)
        // but not where it is: the top-level field's offset says that.
        let at = bytes.len() - buf.len();
        let located = |e: prost::DecodeError| format!("in the field at byte {at}: {e}");
        let (tag, wt) = decode_key(&mut buf).map_err(located)?;
        if tag != 3 || wt != WireType::LengthDelimited {
            p.merge_field(tag, wt, &mut buf, DecodeContext::default())
                .map_err(located)?;
            continue;
        }
        // `computations` (3): count the `instructions` (2) entries first.
        let len = decode_varint(&mut buf).map_err(located)?;
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= buf.len())
            .ok_or_else(|| {
                format!("at byte {at}: HloModuleProto.computations: length past the end")
            })?;
        let (body, rest) = buf.split_at(len);
        buf = rest;
        let mut count = 0;
        let mut scan = body;
        while !scan.is_empty() {
            let Ok((tag, wt)) = decode_key(&mut scan) else {
                break;
            };
            count += usize::from(tag == 2);
            if skip_field(wt, tag, &mut scan, DecodeContext::default()).is_err() {
                break;
            }
        }
        let mut c = xla::HloComputationProto::default();
        c.instructions.reserve_exact(count);
        merge_computation(&mut c, body).map_err(|mut e| {
            // As prost's own decoding names the field.
            e.push("HloModuleProto", "computations");
            format!(
                "in computations[{}] (the field at byte {at}): {e}",
                p.computations.len()
            )
        })?;
        p.computations.push(c);
    }
    Ok(p)
}

/// `HloComputationProto::merge`, except for `program_shape` (4): the
/// reader derives a computation's signature from its parameters and root,
/// as XLA's does, so its shapes (a few allocations each, as many as the
/// instructions' in a module of small fusions) are not built. Its bytes are
/// still checked as prost would decode them: [`walk`] has checked their
/// wire format, and its `parameter_names` (3) must be UTF-8.
fn merge_computation(
    c: &mut xla::HloComputationProto,
    mut buf: &[u8],
) -> std::result::Result<(), prost::DecodeError> {
    use prost::encoding::{decode_key, decode_varint, skip_field, string, DecodeContext, WireType};
    let mut name = String::new();
    while !buf.is_empty() {
        let (tag, wt) = decode_key(&mut buf)?;
        if tag != 4 || wt != WireType::LengthDelimited {
            c.merge_field(tag, wt, &mut buf, DecodeContext::default())?;
            continue;
        }
        // The field's bytes, its length checked by skipping it.
        let mut body = buf;
        skip_field(wt, tag, &mut buf, DecodeContext::default())?;
        let len = decode_varint(&mut body)? as usize;
        let mut body = &body[..len];
        while !body.is_empty() {
            let (tag, wt) = decode_key(&mut body)?;
            if tag == 3 {
                string::merge(wt, &mut name, &mut body, DecodeContext::default()).map_err(
                    |mut e| {
                        e.push("ProgramShapeProto", "parameter_names");
                        e.push("HloComputationProto", "program_shape");
                        e
                    },
                )?;
            } else {
                skip_field(wt, tag, &mut body, DecodeContext::default())?;
            }
        }
    }
    Ok(())
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
    !bytes.is_empty() && walk::<xla::HloModuleProto>(bytes, None, 0, &mut unknown).is_ok()
}

pub use crate::ir::xla::{ChildOf, Fields};

/// A field table's walker of a message-typed field (see [`walk`]).
struct WalkerOf;

impl ChildOf for WalkerOf {
    type Out = Walker;
    fn child<C: Fields>() -> Walker {
        walk::<C>
    }
}

/// A field table's scanner of a message-typed field (see [`scan`]).
struct ScannerOf;

impl ChildOf for ScannerOf {
    type Out = Scanner;
    fn child<C: Fields>() -> Scanner {
        scan::<C>
    }
}

/// Scans one message's bytes (see [`scan`]).
pub type Scanner = fn(&[u8], usize) -> bool;

/// Walks one message's bytes (see [`walk`]).
pub type Walker =
    fn(&[u8], Option<&PathSeg<'_>>, usize, &mut Vec<String>) -> std::result::Result<(), String>;

/// One step of the path from the root message to the one being walked
/// (`computations[2]`), linked to its parent on the stack: the walk renders a
/// path only when it reports an unknown field, so a clean proto costs no
/// allocation per field.
pub struct PathSeg<'a> {
    parent: Option<&'a PathSeg<'a>>,
    name: &'static str,
    index: usize,
    /// Byte offset of this message's body in the whole input.
    offset: usize,
}

/// `computations[2].instructions[5]` for the path ending at `seg` ("" for the root).
fn render_path(seg: Option<&PathSeg<'_>>) -> String {
    let mut segs = Vec::new();
    let mut at = seg;
    while let Some(s) = at {
        segs.push(s);
        at = s.parent;
    }
    let mut out = String::new();
    for (k, s) in segs.iter().rev().enumerate() {
        if k > 0 {
            out.push('.');
        }
        out.push_str(s.name);
        out.push('[');
        out.push_str(&s.index.to_string());
        out.push(']');
    }
    out
}

/// Whether the wire format of message `M` is one [`walk`] accepts without
/// an unknown field: the same checks (field keys, varints, lengths, no
/// groups, nesting at most [`MAX_DEPTH`]) with neither paths nor messages,
/// so a clean proto is checked at about half the walk's cost; `false` says
/// only that [`walk`] has something to report.
pub fn scan<M: Fields>(mut buf: &[u8], depth: usize) -> bool {
    use prost::encoding::{decode_key, decode_varint, WireType};
    if depth > MAX_DEPTH {
        return false;
    }
    while !buf.is_empty() {
        let Ok((tag, wt)) = decode_key(&mut buf) else {
            return false;
        };
        let Some((_, child)) = M::field::<ScannerOf>(tag) else {
            return false;
        };
        let ok = match wt {
            WireType::Varint => decode_varint(&mut buf).is_ok(),
            WireType::SixtyFourBit => buf.get(8..).map(|rest| buf = rest).is_some(),
            WireType::ThirtyTwoBit => buf.get(4..).map(|rest| buf = rest).is_some(),
            WireType::LengthDelimited => {
                let body = decode_varint(&mut buf)
                    .ok()
                    .and_then(|len| usize::try_from(len).ok())
                    .filter(|&len| len <= buf.len())
                    .map(|len| {
                        let (body, rest) = buf.split_at(len);
                        buf = rest;
                        body
                    });
                match (body, child) {
                    (None, _) => false,
                    (Some(body), Some(child)) => child(body, depth + 1),
                    (Some(_), None) => true,
                }
            }
            WireType::StartGroup | WireType::EndGroup => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// Walks the wire format of message `M`, recording the path of every field
/// number `M`'s schema does not declare (`computations[2].instructions[5].#120`).
pub fn walk<M: Fields>(
    mut buf: &[u8],
    path: Option<&PathSeg<'_>>,
    depth: usize,
    unknown: &mut Vec<String>,
) -> std::result::Result<(), String> {
    use prost::encoding::{decode_key, decode_varint, WireType};
    let base = path.map_or(0, |p| p.offset);
    let start_len = buf.len();
    if depth > MAX_DEPTH {
        return Err(format!(
            "at byte {base}: {}: messages nest deeper than {MAX_DEPTH}",
            render_path(path)
        ));
    }
    // Occurrences so far of each field number with a message child (its
    // index in the path); few distinct numbers per message.
    let mut counts: smallvec::SmallVec<[(u32, usize); 8]> = smallvec::SmallVec::new();
    while !buf.is_empty() {
        // Where this field starts in the whole input, and the message it is
        // in: a failure names both (a truncated proto fails at its end).
        let at = base + (start_len - buf.len());
        let fail = |what: String| {
            let p = render_path(path);
            let sep = if p.is_empty() { "" } else { " in " };
            format!("at byte {at}{sep}{p}: {what}")
        };
        let (tag, wt) = decode_key(&mut buf).map_err(|e| fail(format!("{}: {e}", M::NAME)))?;
        let known = M::field::<WalkerOf>(tag);
        let name = || known.map_or_else(|| format!("#{tag}"), |(n, _)| n.to_string());
        match wt {
            WireType::Varint => {
                decode_varint(&mut buf)
                    .map_err(|e| fail(format!("{}.{}: {e}", M::NAME, name())))?;
            }
            WireType::SixtyFourBit => {
                if buf.len() < 8 {
                    return Err(fail(format!("{}.{}: truncated", M::NAME, name())));
                }
                buf = &buf[8..];
            }
            WireType::ThirtyTwoBit => {
                if buf.len() < 4 {
                    return Err(fail(format!("{}.{}: truncated", M::NAME, name())));
                }
                buf = &buf[4..];
            }
            WireType::LengthDelimited => {
                let len = decode_varint(&mut buf)
                    .map_err(|e| fail(format!("{}.{}: {e}", M::NAME, name())))?;
                let len = usize::try_from(len)
                    .ok()
                    .filter(|&l| l <= buf.len())
                    .ok_or_else(|| {
                        fail(format!(
                            "{}.{}: length {len} past the end ({} bytes left)",
                            M::NAME,
                            name(),
                            buf.len()
                        ))
                    })?;
                let body_at = base + (start_len - buf.len());
                let (body, rest) = buf.split_at(len);
                buf = rest;
                if let Some((field_name, Some(child))) = known {
                    let index = match counts.iter_mut().find(|(t, _)| *t == tag) {
                        Some((_, c)) => {
                            *c += 1;
                            *c - 1
                        }
                        None => {
                            counts.push((tag, 1));
                            0
                        }
                    };
                    let seg = PathSeg {
                        parent: path,
                        name: field_name,
                        index,
                        offset: body_at,
                    };
                    child(body, Some(&seg), depth + 1, unknown)?;
                }
            }
            WireType::StartGroup | WireType::EndGroup => {
                return Err(fail(format!(
                    "{}.{}: groups are not used by XLA",
                    M::NAME,
                    name()
                )));
            }
        }
        if known.is_none() {
            let p = render_path(path);
            let sep = if p.is_empty() { "" } else { "." };
            unknown.push(format!("{p}{sep}{} field #{tag}", M::NAME));
        }
    }
    Ok(())
}
