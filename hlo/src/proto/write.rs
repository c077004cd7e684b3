//! Module -> `HloModuleProto`: [`module_to_proto`] builds the message,
//! [`module_to_bytes`] encodes it while it builds. A module the reader would
//! refuse is not written, so a written proto always reads back.
//!
//! [`Writer::module`] writes each computation (callees first, instructions
//! operands first, as XLA's `CreateFromProto` requires), then the header.
//! [`Writer::instruction`] writes typed attributes as the parser stored them,
//! one family of fields at a time; an attribute with no `HloInstructionProto`
//! field is an error naming it: nothing is dropped.

use std::borrow::Cow;
use std::collections::HashMap;

use prost::Message as _;

use super::xla::{BUFFER_TYPE, TUPLE_TYPE};
use super::{async_shorthand, xla};
pub use crate::attrs::literal::MAX_PROTO_BYTES;
use crate::attrs::literal::{self, Literal};
use crate::attrs::xla as ax;
use crate::error::{Error, Result};
use crate::ir::*;
use crate::opcode::Opcode;

use xla::HloInstructionProto as InstProto;

/// Module header attributes that belong to XLA's module *config*, not to
/// `HloModuleProto` (XLA's own `ToProto` does not write them either).
pub const CONFIG_ONLY_HEADER_ATTRS: &[&str] = &[
    "replica_count",
    "num_partitions",
    "allow_spmd_sharding_propagation_to_parameters",
    "allow_spmd_sharding_propagation_to_output",
    "alias_passthrough_params",
    "use_spmd_partitioning",
];

/// The header's `origin_recovery_table` as XLA's
/// `OriginalValueRecoveryTableProto`: the entries in the table's order
/// (XLA's), each recovery module written as a module of its own.
fn recovery_table_proto(
    t: &crate::attrs::xla::RecoveryTable,
) -> Result<xla::OriginalValueRecoveryTableProto> {
    let array = |a: &crate::attrs::xla::OriginalArray| xla::OriginalArrayProto {
        instruction_name: a.0.clone(),
        shape_index: a.1.clone(),
    };
    let mut entries = Vec::with_capacity(t.entries.len());
    for e in &t.entries {
        let recovery_module = match &e.module {
            Some(m) => Some(Box::new(module_to_proto(m).map_err(|err| {
                let mut a = String::new();
                ax::write_original_array(&e.old, &mut a);
                Error::Module(format!(
                    "origin_recovery_table: the recovery module of {{{a}}}: {err}"
                ))
            })?)),
            None => None,
        };
        entries.push(xla::RecoveryEntry {
            old_original_array: Some(array(&e.old)),
            new_original_array: Some(array(&e.new)),
            recovery_module,
        });
    }
    Ok(xla::OriginalValueRecoveryTableProto { entries })
}

/// A module is written only if its proto reads back: one the reader would
/// refuse (an unverified module the parser accepts, with an entry layout
/// that is not its entry computation's, say) is an error naming why.
fn writable(m: &Module) -> Result<()> {
    super::read::check_readable(m)
        .map_err(|e| Error::Module(format!("cannot write an invalid module to a proto: {e}")))
}

/// Converts a module to XLA's `HloModuleProto` (an error for a module the
/// reader would refuse: its proto always reads back). XLA's async shorthand
/// (`custom-call-start(...)`) is written as the async-start / update / done
/// chain calling the wrapped computation XLA's parser builds for it
/// ([`async_shorthand::expand`], on a copy; the module keeps the shorthand).
pub fn module_to_proto(m: &Module) -> Result<xla::HloModuleProto> {
    let expanded = async_shorthand::expand(m)?;
    let m = expanded.as_ref().unwrap_or(m);
    writable(m)?;
    let mut w = Writer::new(m);
    w.module(&mut Sink::Tree)
}

/// The bytes of [`module_to_proto`]'s message, encoded while it is made:
/// each instruction is encoded (by prost) as soon as it is built, straight
/// into the output after its computation's fields so far, and dropped, so
/// the message tree never exists whole and the length of an instruction is
/// not recomputed for the computation and the module holding it. An elided
/// array literal (`{...}`, in row-major order) is not made: its values go
/// from XLA's fill counters into the output a chunk at a time
/// ([`literal::ElidedFill::write_values`]). The bytes are those of encoding
/// the whole message (prost writes fields in tag order, and a default field
/// writes nothing, so a message's fields before a field, the field and the
/// fields after it can be encoded apart and concatenated). Fails, naming
/// the instruction, where the proto would exceed [`MAX_PROTO_BYTES`]
/// (protobuf's limit, 2 GiB).
pub fn module_to_bytes(m: &Module) -> Result<Vec<u8>> {
    let expanded = async_shorthand::expand(m)?;
    let m = expanded.as_ref().unwrap_or(m);
    writable(m)?;
    let mut w = Writer::new(m);
    w.stream_elided = true;
    // Fields 1 and 2 (the names [`Writer::module`] sets) come before
    // `computations` (3), the others after. XLA's modules take about 110
    // bytes per instruction.
    let mut out = Vec::with_capacity(128 * m.num_insts() + 1024);
    put_string(1, m.name.as_bytes(), &mut out);
    put_string(2, w.comp_names[m.entry.index()].as_bytes(), &mut out);
    let mut sink = Sink::Bytes {
        computations: out,
        program_shape: Vec::new(),
        ip: Box::default(),
        tail: Vec::new(),
    };
    let p = w.module(&mut sink)?;
    let Sink::Bytes {
        computations: mut out,
        ..
    } = sink
    else {
        unreachable!("the sink stays bytes")
    };
    let tail = xla::HloModuleProto {
        name: String::new(),
        entry_computation_name: String::new(),
        ..p
    };
    tail.encode_raw(&mut out);
    if out.len() as u64 > MAX_PROTO_BYTES {
        return Err(Error::Module(format!(
            "the module's proto would be {} bytes, over protobuf's limit of {MAX_PROTO_BYTES}",
            out.len()
        )));
    }
    Ok(out)
}

/// Where [`Writer::module`] puts computations and instructions: into the
/// message, or encoded (see [`module_to_bytes`]).
enum Sink {
    Tree,
    Bytes {
        /// The module's encoded fields before `computations`, then its
        /// encoded `computations` entries so far (the output).
        computations: Vec<u8>,
        /// The encoded program shape of the computation being made.
        program_shape: Vec<u8>,
        /// The instruction being encoded (one message reused for all).
        ip: Box<xla::HloInstructionProto>,
        /// The encoded fields of `ip` after its shape.
        tail: Vec<u8>,
    },
}

/// The encoded `ShapeProto` of each interned shape of one module, made once
/// per [`ShapeId`] (an instruction's shape, a program shape's parameters
/// and result all reuse it): `span[s]` is the range of `bytes` holding
/// `shape_proto(m, s)` encoded by prost.
#[derive(Default)]
struct ShapeBytes {
    span: Vec<Option<(u32, u32)>>,
    bytes: Vec<u8>,
}

impl ShapeBytes {
    fn get(&mut self, m: &Module, s: ShapeId) -> &[u8] {
        let (a, b) = self.span_of(m, s);
        &self.bytes[a..b]
    }

    fn span_of(&mut self, m: &Module, s: ShapeId) -> (usize, usize) {
        if self.span.len() <= s.index() {
            self.span.resize(m.num_shapes().max(s.index() + 1), None);
        }
        if let Some((a, b)) = self.span[s.index()] {
            return (a as usize, b as usize);
        }
        let body = match m.shape(s) {
            // A tuple's fields: its element type (2), then its elements
            // (4), each from its own encoded bytes.
            Shape::Tuple(elems) => {
                let mut body = Vec::new();
                xla::ShapeProto {
                    element_type: TUPLE_TYPE,
                    ..Default::default()
                }
                .encode_raw(&mut body);
                for &e in elems {
                    let (a, b) = self.span_of(m, e);
                    put_field(4, &self.bytes[a..b], &mut body);
                }
                body
            }
            _ => shape_proto(m, s).encode_to_vec(),
        };
        let a = self.bytes.len();
        self.bytes.extend_from_slice(&body);
        self.span[s.index()] = Some((a as u32, self.bytes.len() as u32));
        (a, self.bytes.len())
    }
}

/// Encodes a length-delimited field (a string, bytes, or an encoded
/// message) with prost's key and length encoding.
fn put_field(tag: u32, body: &[u8], buf: &mut Vec<u8>) {
    put_header(tag, body.len(), buf);
    buf.extend_from_slice(body);
}

/// The key and length of a length-delimited field whose `len` bytes of body
/// the caller writes next.
fn put_header(tag: u32, len: usize, buf: &mut Vec<u8>) {
    prost::encoding::encode_key(tag, prost::encoding::WireType::LengthDelimited, buf);
    prost::encoding::encode_varint(len as u64, buf);
}

/// A string field as prost writes it: nothing when empty.
fn put_string(tag: u32, s: &[u8], buf: &mut Vec<u8>) {
    if !s.is_empty() {
        put_field(tag, s, buf);
    }
}

/// The encoded length of [`put_string`]'s field.
fn string_len(tag: u32, s: &[u8]) -> usize {
    if s.is_empty() {
        0
    } else {
        field_len(tag, s.len())
    }
}

/// The encoded length of [`put_field`]'s field.
fn field_len(tag: u32, len: usize) -> usize {
    prost::encoding::key_len(tag) + prost::encoding::encoded_len_varint(len as u64) + len
}

/// `PrimitiveType` number of an element type.
pub fn prim_type_number(t: PrimType) -> i32 {
    use PrimType::*;
    match t {
        Pred => 1,
        S1 => 30,
        S2 => 26,
        S4 => 21,
        S8 => 2,
        S16 => 3,
        S32 => 4,
        S64 => 5,
        U1 => 31,
        U2 => 27,
        U4 => 22,
        U8 => 6,
        U16 => 7,
        U32 => 8,
        U64 => 9,
        F16 => 10,
        F32 => 11,
        Bf16 => 16,
        F64 => 12,
        F8E5M2 => 19,
        F8E4M3 => 28,
        F8E4M3FN => 20,
        F8E4M3B11FNUZ => 23,
        F8E3M4 => 29,
        F8E5M2FNUZ => 24,
        F8E4M3FNUZ => 25,
        F4E2M1FN => 32,
        F8E8M0FNU => 33,
        C64 => 15,
        C128 => 18,
        Token => 17,
        Opaque => 14,
    }
}

/// A shape (with layouts) as a `ShapeProto`.
pub fn shape_proto(m: &Module, s: ShapeId) -> xla::ShapeProto {
    match m.shape(s) {
        Shape::Array(a) => xla::ShapeProto {
            element_type: prim_type_number(a.elem),
            dimensions: a
                .dims
                .iter()
                .map(|&d| if d == UNBOUNDED_DIM { i64::MIN } else { d })
                .collect(),
            is_dynamic_dimension: if a.dynamic.iter().any(|&d| d) {
                a.dynamic.to_vec()
            } else {
                vec![false; a.dims.len()]
            },
            tuple_shapes: Vec::new(),
            layout: Some(match &a.layout {
                Some(l) => layout_proto(m, l),
                None => layout_proto(m, &Layout::default_for_rank(a.rank())),
            }),
        },
        Shape::Tuple(elems) => xla::ShapeProto {
            element_type: TUPLE_TYPE,
            tuple_shapes: elems.iter().map(|&e| shape_proto(m, e)).collect(),
            ..Default::default()
        },
        Shape::Buffer(inner) => xla::ShapeProto {
            element_type: BUFFER_TYPE,
            tuple_shapes: vec![shape_proto(m, *inner)],
            ..Default::default()
        },
        Shape::Token => xla::ShapeProto {
            element_type: prim_type_number(PrimType::Token),
            ..Default::default()
        },
        Shape::Opaque => xla::ShapeProto {
            element_type: prim_type_number(PrimType::Opaque),
            ..Default::default()
        },
    }
}

fn layout_proto(m: &Module, l: &Layout) -> xla::LayoutProto {
    let any_not_unique = l.dim_levels.iter().any(|d| !d.unique);
    let any_not_ordered = l.dim_levels.iter().any(|d| !d.ordered);
    xla::LayoutProto {
        minor_to_major: l.minor_to_major.to_vec(),
        dim_level_types: l
            .dim_levels
            .iter()
            .map(|d| match d.kind {
                DimLevelType::Dense => 0,
                DimLevelType::Compressed => 1,
                DimLevelType::Singleton => 2,
                DimLevelType::LooseCompressed => 3,
            })
            .collect(),
        dim_unique: if any_not_unique {
            l.dim_levels.iter().map(|d| d.unique).collect()
        } else {
            Vec::new()
        },
        dim_ordered: if any_not_ordered {
            l.dim_levels.iter().map(|d| d.ordered).collect()
        } else {
            Vec::new()
        },
        tiles: l
            .tiles
            .iter()
            .map(|t| xla::TileProto {
                dimensions: t.0.to_vec(),
            })
            .collect(),
        tail_padding_alignment_in_elements: l.tail_padding_alignment_in_elements,
        element_size_in_bits: l.element_size_in_bits,
        memory_space: l.memory_space,
        index_primitive_type: l.index_primitive_type.map_or(0, prim_type_number),
        pointer_primitive_type: l.pointer_primitive_type.map_or(0, prim_type_number),
        physical_shape: l.physical_shape.map(|p| Box::new(shape_proto(m, p))),
        dynamic_shape_metadata_prefix_bytes: l.dynamic_shape_metadata_prefix_bytes,
        split_configs: l
            .split_configs
            .iter()
            .map(|s| xla::SplitConfigProto {
                dimension: s.dimension,
                split_indices: s.split_indices.to_vec(),
            })
            .collect(),
    }
}

/// A constant's literal (or a custom call's `literal=`) of shape `s` as a
/// `LiteralProto`: tuple literals element by element; an array's values
/// in the physical order of the instruction's minor-to-major (XLA requires
/// a constant's literal to have it; the literal's layout is that order
/// only, tiles and the rest of the layout are the instruction's). An
/// elided literal (`{...}`) gets the values XLA's parser gives it, from
/// `fill` (see [`literal::ElidedFill`]: XLA's parser makes them up counted
/// in text order).
pub fn literal_proto(
    m: &Module,
    s: ShapeId,
    lit: &Literal,
    fill: &mut literal::ElidedFill,
) -> std::result::Result<xla::LiteralProto, String> {
    match (m.shape(s), lit) {
        (Shape::Array(a), Literal::Elided) => {
            let v = fill.array(a.elem, &a.dims)?;
            array_literal_proto(m, s, a, &v)
        }
        (Shape::Tuple(elems), Literal::Elided) => {
            let elided = vec![Literal::Elided; elems.len()];
            tuple_literal_proto(m, elems, &elided, fill)
        }
        (Shape::Tuple(elems), Literal::Tuple(values)) if elems.len() == values.len() => {
            tuple_literal_proto(m, elems, values, fill)
        }
        (Shape::Array(a), Literal::Array(v)) => array_literal_proto(m, s, a, v),
        _ => Err("the literal does not have its constant's shape".into()),
    }
}

fn tuple_literal_proto(
    m: &Module,
    elems: &[ShapeId],
    values: &[Literal],
    fill: &mut literal::ElidedFill,
) -> std::result::Result<xla::LiteralProto, String> {
    let tuple_literals = elems
        .iter()
        .zip(values.iter())
        .map(|(&e, v)| literal_proto(m, e, v, fill))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let shape = xla::ShapeProto {
        element_type: TUPLE_TYPE,
        tuple_shapes: tuple_literals
            .iter()
            .filter_map(|l| l.shape.clone())
            .collect(),
        ..Default::default()
    };
    Ok(xla::LiteralProto {
        shape: Some(shape),
        tuple_literals,
        ..Default::default()
    })
}

/// The shape an array literal of shape `s` (`a`) states in its
/// `LiteralProto`: the instruction's shape with its minor-to-major only (the
/// default one where it has none or not a permutation); that order, and
/// whether it is row-major (the literal's values are then in row-major
/// order as they are).
fn literal_shape(m: &Module, s: ShapeId, a: &ArrayShape) -> (xla::ShapeProto, Vec<i64>, bool) {
    let rank = a.rank();
    let minor_to_major = match &a.layout {
        Some(l) if crate::shape_infer::is_permutation(&l.minor_to_major, rank) => {
            l.minor_to_major.to_vec()
        }
        _ => Layout::default_for_rank(rank).minor_to_major.to_vec(),
    };
    let row_major = minor_to_major
        .iter()
        .rev()
        .enumerate()
        .all(|(k, &d)| d == k as i64);
    let mut shape = shape_proto(m, s);
    shape.layout = Some(xla::LayoutProto {
        minor_to_major: minor_to_major.clone(),
        ..Default::default()
    });
    (shape, minor_to_major, row_major)
}

fn array_literal_proto(
    m: &Module,
    s: ShapeId,
    a: &ArrayShape,
    v: &literal::ArrayLiteral,
) -> std::result::Result<xla::LiteralProto, String> {
    if v.elem() != a.elem || v.dims() != &a.dims[..] {
        return Err(if a.dynamic.is_empty() {
            "the literal does not have its constant's shape".into()
        } else {
            "a literal of a dynamic shape below its bounds cannot be written to a proto".into()
        });
    }
    let (shape, minor_to_major, row_major) = literal_shape(m, s, a);
    let mut lit = xla::LiteralProto {
        shape: Some(shape),
        ..Default::default()
    };
    if row_major {
        v.fill_proto(&mut lit)?;
    } else {
        v.in_physical_order(&minor_to_major).fill_proto(&mut lit)?;
    }
    Ok(lit)
}

/// XLA's `NameUniquer`: names in a module are unique; a repeated name gets
/// the next free numeric suffix of its root (`p0` -> `p0.1`), as XLA's
/// parser renames repeats (in text order) when it builds a module.
#[derive(Default)]
struct NameUniquer<'m> {
    used: crate::parse::FxMap<&'m str, (crate::parse::FxSet<i64>, i64)>,
}

/// A name's root and numeric suffix (`add.12` -> `("add", Some(12))`), and
/// whether the suffix is written canonically (no leading zeros), so that
/// reading the name back gives it.
fn split_name(name: &str) -> (&str, Option<i64>, bool) {
    let (root, suffix) = match name.rfind('.') {
        Some(p) if p > 0 && p + 1 < name.len() => match name[p + 1..].parse::<i64>() {
            Ok(n) if name[p + 1..].bytes().all(|b| b.is_ascii_digit()) => (&name[..p], Some(n)),
            _ => (name, None),
        },
        _ => (name, None),
    };
    let canonical = match suffix {
        None => true,
        Some(_) => {
            let digits = &name[root.len() + 1..];
            digits.len() == 1 || !digits.starts_with('0')
        }
    };
    (root, suffix, canonical)
}

/// Whether [`NameUniquer`] keeps every one of `names` as written (the
/// common case, checked with one set insert per name): no two share a root
/// and suffix, and every suffix is canonical.
fn all_names_kept<'a>(names: impl Iterator<Item = &'a str>, n: usize) -> bool {
    let mut seen: crate::parse::FxSet<(&str, i64)> =
        crate::parse::FxSet::with_capacity_and_hasher(n, Default::default());
    names.into_iter().all(|name| match split_name(name) {
        (root, suffix, true) => seen.insert((root, suffix.unwrap_or(0))),
        (_, _, false) => false,
    })
}

impl<'m> NameUniquer<'m> {
    fn unique(&mut self, name: &'m str) -> Cow<'m, str> {
        let (root, suffix, canonical) = split_name(name);
        let (used, next) = self.used.entry(root).or_default();
        let want = suffix.unwrap_or(0);
        let id = if used.insert(want) {
            // The common case: the name is kept as written.
            if canonical {
                return Cow::Borrowed(name);
            }
            want
        } else {
            while !used.insert(*next) {
                *next += 1;
            }
            *next += 1;
            *next - 1
        };
        Cow::Owned(if id == 0 {
            if suffix.is_some() {
                format!("{root}.0")
            } else {
                root.to_string()
            }
        } else {
            format!("{root}.{id}")
        })
    }
}

struct Writer<'m> {
    m: &'m Module,
    /// Instruction and computation names, made unique as XLA does.
    inst_names: Vec<Cow<'m, str>>,
    comp_names: Vec<Cow<'m, str>>,
    inst_ids: Vec<i64>,
    comp_ids: Vec<i64>,
    /// Computations called by a fusion.
    fused: Vec<bool>,
    /// The canonical stack frame index and the renumbering of frame ids.
    frames: Option<xla::StackFrameIndexProto>,
    frame_map: HashMap<i32, i32>,
    /// Scratch of [`Writer::instruction_order`].
    seen: Vec<bool>,
    /// Encoded shapes of `m` (see [`ShapeBytes`]).
    shapes: ShapeBytes,
    /// XLA's fill counters at each instruction holding an elided literal
    /// (see [`literal::ElidedFill`]): XLA's parser fills them in text
    /// order, the writer writes instructions operands first.
    elided_at: HashMap<InstId, literal::ElidedFill>,
    /// Whether an elided row-major array literal is left to the byte sink
    /// to generate (see [`module_to_bytes`]) rather than made.
    stream_elided: bool,
    /// The literal [`Writer::instruction`] left out of the instruction for
    /// the byte sink to generate: its shape, XLA's fill counters there, and
    /// its values field ([`literal::ElidedFill::values_field`]: the tag and
    /// the body's length).
    streamed: Option<(ShapeId, literal::ElidedFill, (u32, u64))>,
}

fn err(inst: &str, msg: impl std::fmt::Display) -> Error {
    Error::Module(format!("cannot write %{inst} to a proto: {msg}"))
}

/// The proto ids of an arena of `len` elements, of which `held` lists those
/// the module holds (arena index, id kept from a proto read): a kept id stays;
/// the held elements without one get fresh ids in arena order, above every
/// kept id; the others (not written) get -1. So a module read back from its
/// own proto, its wrapped computations folded, is written with the same ids.
fn proto_ids(len: usize, held: impl Iterator<Item = (usize, Option<i64>)>) -> Vec<i64> {
    let mut ids = vec![None; len];
    let mut max = -1;
    for (k, id) in held {
        ids[k] = Some(id);
        max = max.max(id.unwrap_or(-1));
    }
    let mut next = max;
    ids.into_iter()
        .map(|id| match id {
            Some(Some(id)) => id,
            Some(None) => {
                next += 1;
                next
            }
            None => -1,
        })
        .collect()
}

impl<'m> Writer<'m> {
    fn new(m: &'m Module) -> Self {
        // Fresh ids go, in arena order, to the instructions and computations
        // the module holds, above every kept id of those: elements left in
        // the arena unscheduled (a wrapped computation the reader folded
        // into the async shorthand) neither take nor bound them, so a module
        // read back from its own proto is written with the same ids.
        let inst_ids = proto_ids(
            m.num_insts(),
            m.all_instructions()
                .map(|i| (i.index(), m.inst_proto_id(i))),
        );
        let n_comps = m.computations().map(|c| c.index() + 1).max().unwrap_or(0);
        let comp_ids = proto_ids(
            n_comps,
            m.computations().map(|c| (c.index(), m.comp_proto_id(c))),
        );
        let mut fused = vec![false; n_comps];
        for i in m.all_instructions() {
            let inst = m.inst(i);
            if inst.opcode == Opcode::Fusion {
                for c in inst.called_computations() {
                    if let Some(f) = fused.get_mut(c.index()) {
                        *f = true;
                    }
                }
            }
        }
        let mut inst_names = vec![Cow::Borrowed(""); m.num_insts()];
        let mut comp_names = vec![Cow::Borrowed(""); n_comps];
        let (mut iu, mut cu) = (NameUniquer::default(), NameUniquer::default());
        let comps_kept = all_names_kept(m.computations().map(|c| &*m.comp(c).name), n_comps);
        let insts_kept = all_names_kept(
            m.computations()
                .flat_map(|c| m.comp(c).order.iter().map(|&i| &*m.inst(i).name)),
            m.num_insts(),
        );
        let mut elided_at = HashMap::new();
        let mut fill = literal::ElidedFill::default();
        for c in m.computations() {
            for &i in &m.comp(c).order {
                let inst = m.inst(i);
                // A constant's literal, or a custom call's `literal=`.
                let lit = match (inst.literal(), inst.custom_call_literal()) {
                    (Some(l), _) => Some((inst.shape, l)),
                    (None, Ok(Some((s, l)))) => Some((s, l)),
                    _ => None,
                };
                if let Some((s, lit)) = lit.filter(|(_, l)| l.has_elided()) {
                    elided_at.insert(i, fill);
                    fill.skip_literal(m, s, lit);
                }
            }
        }
        for c in m.computations() {
            let name = &*m.comp(c).name;
            comp_names[c.index()] = if comps_kept {
                Cow::Borrowed(name)
            } else {
                cu.unique(name)
            };
            for &i in &m.comp(c).order {
                let name = &*m.inst(i).name;
                inst_names[i.index()] = if insts_kept {
                    Cow::Borrowed(name)
                } else {
                    iu.unique(name)
                };
            }
        }
        Writer {
            m,
            inst_names,
            comp_names,
            inst_ids,
            comp_ids,
            fused,
            frames: None,
            frame_map: HashMap::new(),
            seen: Vec::new(),
            shapes: ShapeBytes::default(),
            elided_at,
            stream_elided: false,
            streamed: None,
        }
    }

    fn iid(&self, i: InstId) -> i64 {
        self.inst_ids[i.index()]
    }
    fn cid(&self, c: CompId) -> i64 {
        self.comp_ids[c.index()]
    }

    /// Computations callees first: a depth-first post-order over the call
    /// graph, roots taken in print order.
    fn computation_order(&self) -> Vec<CompId> {
        let m = self.m;
        let n = self.comp_ids.len();
        let mut state = vec![0u8; n];
        let mut out = Vec::with_capacity(n);
        for root in m.computations() {
            if state[root.index()] != 0 {
                continue;
            }
            // (computation, callees left to visit)
            let mut stack: Vec<(CompId, Vec<CompId>)> = vec![(root, self.callees(root))];
            state[root.index()] = 1;
            while let Some((c, todo)) = stack.last_mut() {
                if let Some(next) = todo.pop() {
                    if state[next.index()] == 0 {
                        state[next.index()] = 1;
                        let cs = self.callees(next);
                        stack.push((next, cs));
                    }
                } else {
                    let c = *c;
                    state[c.index()] = 2;
                    out.push(c);
                    stack.pop();
                }
            }
        }
        out
    }

    /// Callees of `c` in call order, reversed (popped from the back).
    fn callees(&self, c: CompId) -> Vec<CompId> {
        let m = self.m;
        let mut v: Vec<CompId> = m
            .comp(c)
            .order
            .iter()
            .flat_map(|&i| m.inst(i).called_computations())
            .collect();
        v.reverse();
        v
    }

    /// Instructions of `c` operands (and control predecessors) first,
    /// otherwise in schedule order.
    fn instruction_order(&mut self, c: CompId) -> Vec<InstId> {
        let m = self.m;
        let comp = m.comp(c);
        // Instructions seen, by index (all false between calls: the ones
        // set are those in `out`, reset at the end).
        let seen = &mut self.seen;
        seen.resize(m.num_insts(), false);
        let mut out = Vec::with_capacity(comp.order.len());
        // The k-th dependency of `i`: its operands, then its control
        // predecessors.
        let dep = |i: InstId, k: usize| -> Option<InstId> {
            let inst = m.inst(i);
            match inst.operands.get(k) {
                Some(&o) => Some(o),
                None => inst
                    .control_predecessors()
                    .get(k - inst.operands.len())
                    .copied(),
            }
        };
        // (instruction, dependencies visited so far)
        let mut stack: Vec<(InstId, usize)> = Vec::new();
        for &root in &comp.order {
            if seen[root.index()] {
                continue;
            }
            seen[root.index()] = true;
            stack.push((root, 0));
            while let Some((i, k)) = stack.last_mut() {
                if let Some(next) = dep(*i, *k) {
                    *k += 1;
                    if !seen[next.index()] {
                        seen[next.index()] = true;
                        stack.push((next, 0));
                    }
                } else {
                    out.push(*i);
                    stack.pop();
                }
            }
        }
        for &i in &out {
            seen[i.index()] = false;
        }
        out
    }

    fn program_shape(&self, c: CompId) -> xla::ProgramShapeProto {
        let m = self.m;
        let comp = m.comp(c);
        xla::ProgramShapeProto {
            parameters: comp
                .params
                .iter()
                .map(|&p| shape_proto(m, m.inst(p).shape))
                .collect(),
            result: Some(shape_proto(m, m.inst(comp.root).shape)),
            parameter_names: comp
                .params
                .iter()
                .map(|&p| self.inst_names[p.index()].to_string())
                .collect(),
        }
    }

    /// Appends instruction `i` (built into `ip` by [`Writer::instruction`])
    /// to `out` as an `instructions` entry; `tail` is scratch. Fields 1-3
    /// (name, opcode, shape) come before the others; the shape's bytes are
    /// made once per shape. A literal left to the sink
    /// ([`Writer::streamed`]) is generated straight into `out` between the
    /// fields before it (to 7, `metadata`) and after it (9 on).
    fn encode_instruction(
        &mut self,
        i: InstId,
        ip: &mut xla::HloInstructionProto,
        tail: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let m = self.m;
        let iname = &self.inst_names[i.index()];
        let name = iname.as_bytes();
        let opcode = m.inst(i).opcode.name().as_bytes();
        let streamed = self.streamed.take();
        let metadata = match streamed {
            Some(_) => ip.metadata.take(),
            None => None,
        };
        // Encoding the fields after the shape (or after the literal) gives
        // their length (in one walk of the message, not two).
        tail.clear();
        ip.encode_raw(tail);
        let mut len = string_len(1, name) + string_len(2, opcode) + tail.len();
        let mut literal = None;
        if let Some((s, fill, (tag, values))) = streamed {
            let Shape::Array(a) = m.shape(s) else {
                unreachable!("only an array literal streams")
            };
            let head = xla::LiteralProto {
                shape: Some(literal_shape(m, s, a).0),
                ..Default::default()
            }
            .encode_to_vec();
            let values = values as usize;
            let lit_len = head.len()
                + if values > 0 {
                    field_len(tag, values)
                } else {
                    0
                };
            len += metadata
                .as_ref()
                .map_or(0, |md| prost::encoding::message::encoded_len(7, md))
                + field_len(8, lit_len);
            literal = Some((s, fill, head, tag, values, lit_len));
        }
        let shape = self.shapes.get(m, m.inst(i).shape);
        len += field_len(3, shape.len());
        let total = out.len() as u64 + field_len(2, len) as u64;
        if total > MAX_PROTO_BYTES {
            return Err(err(
                iname,
                format!(
                    "the proto would reach {total} bytes with it, over protobuf's limit of \
                     {MAX_PROTO_BYTES}"
                ),
            ));
        }
        out.reserve(field_len(2, len));
        put_header(2, len, out);
        put_string(1, name, out);
        put_string(2, opcode, out);
        put_field(3, shape, out);
        if let Some((s, mut fill, head, tag, values, lit_len)) = literal {
            if let Some(md) = &metadata {
                prost::encoding::message::encode(7, md, out);
            }
            put_header(8, lit_len, out);
            out.extend_from_slice(&head);
            if values > 0 {
                let Shape::Array(a) = m.shape(s) else {
                    unreachable!("only an array literal streams")
                };
                put_header(tag, values, out);
                fill.write_values(a.elem, &a.dims, out)
                    .map_err(|x| err(iname, x))?;
            }
        }
        out.extend_from_slice(tail);
        Ok(())
    }

    /// [`Writer::program_shape`] encoded into `out` (cleared first), from
    /// the encoded shapes.
    fn program_shape_bytes(&mut self, c: CompId, out: &mut Vec<u8>) {
        let m = self.m;
        let comp = m.comp(c);
        out.clear();
        for &p in &comp.params {
            put_field(1, self.shapes.get(m, m.inst(p).shape), out);
        }
        put_field(2, self.shapes.get(m, m.inst(comp.root).shape), out);
        for &p in &comp.params {
            // A repeated string writes every element, empty or not.
            put_field(3, self.inst_names[p.index()].as_bytes(), out);
        }
    }

    /// XLA's parser rebuilds the stack frame index from the frames that
    /// instructions use, in text order (each frame after its parents), and
    /// renumbers `stack_frame_id`s; so does the writer
    /// ([`super::frames::in_use_order`]).
    fn canonical_frames(&mut self) -> Result<()> {
        let order = super::frames::in_use_order(self.m)?;
        self.frames = order.index;
        self.frame_map = order.ids;
        Ok(())
    }

    fn module(&mut self, sink: &mut Sink) -> Result<xla::HloModuleProto> {
        let m = self.m;
        self.canonical_frames()?;
        let mut p = xla::HloModuleProto {
            name: m.name.to_string(),
            entry_computation_name: self.comp_names[m.entry.index()].to_string(),
            entry_computation_id: self.cid(m.entry),
            id: m.module_proto_id().unwrap_or(0),
            // XLA writes these (empty) on every module.
            input_output_alias: Some(Default::default()),
            buffer_donor: Some(Default::default()),
            frontend_attributes: Some(Default::default()),
            ..Default::default()
        };
        let order = self.computation_order();
        p.computations.reserve_exact(order.len());
        for &c in &order {
            self.computation(c, sink, &mut p)?;
        }
        let scheduled = self.header(&mut p)?;
        if let Some(index) = self.frames.take() {
            p.stack_frame_index = Some(index);
        }
        if let Some(c) = &m.config {
            config(c, &mut p)?;
        }
        if scheduled {
            p.schedule = Some(self.schedule(&order));
        }
        Ok(p)
    }

    /// Computation `c` into `p`'s computations (or the byte sink's).
    fn computation(
        &mut self,
        c: CompId,
        sink: &mut Sink,
        p: &mut xla::HloModuleProto,
    ) -> Result<()> {
        let m = self.m;
        let comp = m.comp(c);
        // The name and program shape are set below (the byte sink
        // encodes them from the writer's own copies).
        let mut cp = xla::HloComputationProto {
            id: self.cid(c),
            root_id: self.iid(comp.root),
            is_fusion_computation: self.fused[c.index()],
            ..Default::default()
        };
        for a in &comp.attrs {
            match (&*a.key, &a.value) {
                ("execution_thread", AttrValue::Str(t)) => {
                    cp.execution_thread = String::from_utf8_lossy(t).into_owned()
                }
                (k, _) => {
                    return Err(Error::Module(format!(
                        "computation %{} attribute `{k}` has no HloComputationProto field",
                        comp.name
                    )))
                }
            }
        }
        let insts = self.instruction_order(c);
        match sink {
            Sink::Tree => {
                cp.name = self.comp_names[c.index()].to_string();
                cp.program_shape = Some(self.program_shape(c));
                cp.instructions.reserve_exact(insts.len());
                for i in insts {
                    let mut ip = xla::HloInstructionProto::default();
                    self.instruction(i, &mut ip)?;
                    ip.name = self.inst_names[i.index()].to_string();
                    ip.opcode = m.inst(i).opcode.name().to_string();
                    ip.shape = Some(shape_proto(m, m.inst(i).shape));
                    cp.instructions.push(ip);
                }
                p.computations.push(cp);
            }
            Sink::Bytes {
                computations: out,
                program_shape,
                ip,
                tail,
            } => {
                // The computation's key and length come first, its
                // length known at the end: room for the longest is left
                // here and the body moved back over what is not used.
                let start = out.len();
                let room = prost::encoding::key_len(3) + 10;
                out.resize(start + room, 0);
                // Field 1 (name) comes before `instructions` (2), the
                // program shape (4) after, then the others.
                put_string(1, self.comp_names[c.index()].as_bytes(), out);
                for i in insts {
                    self.instruction(i, ip)?;
                    self.encode_instruction(i, ip, tail, out)?;
                }
                self.program_shape_bytes(c, program_shape);
                put_field(4, program_shape, out);
                cp.encode_raw(out);
                let body = out.len() - start - room;
                let mut head = Vec::with_capacity(room);
                put_header(3, body, &mut head);
                out.copy_within(start + room.., start + head.len());
                out[start..start + head.len()].copy_from_slice(&head);
                out.truncate(start + head.len() + body);
            }
        }
        Ok(())
    }

    /// The module's header attributes into `p` (the entry layout as the host
    /// program shape); whether the module is scheduled.
    fn header(&self, p: &mut xla::HloModuleProto) -> Result<bool> {
        let m = self.m;
        let mut host_shape = None;
        let mut scheduled = false;
        for a in &m.attrs {
            let kind =
                |what: &str| Error::Module(format!("module attribute `{}` is not {what}", a.key));
            match (&*a.key, &a.value) {
                ("is_scheduled", AttrValue::Bool(b)) => scheduled = *b,
                ("entry_computation_layout", AttrValue::ProgramLayout(l)) => {
                    host_shape = Some(xla::ProgramShapeProto {
                        parameters: l.params.iter().map(|&s| shape_proto(m, s)).collect(),
                        result: Some(shape_proto(m, l.result)),
                        ..Default::default()
                    })
                }
                ("input_output_alias", AttrValue::InputOutputAlias(x)) => {
                    p.input_output_alias = Some(xla::HloInputOutputAliasProto::clone(x))
                }
                ("buffer_donor", AttrValue::BufferDonor(x)) => {
                    p.buffer_donor = Some(xla::HloBufferDonorProto::clone(x))
                }
                ("frontend_attributes", AttrValue::FrontendAttributes(x)) => {
                    p.frontend_attributes = Some(xla::FrontendAttributes::clone(x))
                }
                ("origin_recovery_table", AttrValue::RecoveryTable(t)) => {
                    // XLA writes no empty table.
                    if !t.entries.is_empty() {
                        p.original_value_recovery_table = Some(recovery_table_proto(t)?);
                    }
                }
                (
                    "is_scheduled"
                    | "entry_computation_layout"
                    | "input_output_alias"
                    | "buffer_donor"
                    | "frontend_attributes"
                    | "origin_recovery_table",
                    _,
                ) => return Err(kind("of the kind the parser makes")),
                (k, _) if CONFIG_ONLY_HEADER_ATTRS.contains(&k) => {}
                (k, _) => {
                    return Err(Error::Module(format!(
                        "module attribute `{k}` has no HloModuleProto field"
                    )))
                }
            }
        }
        let mut host = match host_shape {
            Some(s) => {
                let n = m.comp(m.entry).params.len();
                if s.parameters.len() != n {
                    return Err(Error::Module(format!(
                        "entry_computation_layout lists {} parameters, the entry computation has {n}",
                        s.parameters.len(),
                    )));
                }
                s
            }
            None => self.program_shape(m.entry),
        };
        // XLA names the entry layout's parameters p0, p1, ...
        host.parameter_names = (0..host.parameters.len())
            .map(|k| format!("p{k}"))
            .collect();
        p.host_program_shape = Some(host);
        Ok(scheduled)
    }

    /// The schedule: each unfused computation's instruction ids in order.
    fn schedule(&self, order: &[CompId]) -> xla::HloScheduleProto {
        let m = self.m;
        let mut sched = xla::HloScheduleProto::default();
        for &c in order {
            if self.fused[c.index()] {
                continue;
            }
            sched.sequences.insert(
                self.cid(c),
                xla::InstructionSequence {
                    instruction_ids: m.comp(c).order.iter().map(|&i| self.iid(i)).collect(),
                },
            );
        }
        sched
    }

    /// The `literal` field of instruction `id` (a constant's, a custom
    /// call's): `lit` of shape `s`, elided values from XLA's counters at the
    /// instruction. An elided row-major array is left to the byte sink
    /// ([`Writer::streamed`]) where it streams.
    fn literal_field(
        &mut self,
        id: InstId,
        s: ShapeId,
        lit: &Literal,
        p: &mut xla::HloInstructionProto,
    ) -> std::result::Result<(), String> {
        let m = self.m;
        let mut fill = self.elided_at.get(&id).copied().unwrap_or_default();
        if let (true, Shape::Array(a), Literal::Elided) = (self.stream_elided, m.shape(s), lit) {
            if literal_shape(m, s, a).2 {
                // Sized (and checked) now: the sink generates it after the
                // fields before it.
                let field = fill.values_field(a.elem, &a.dims)?;
                self.streamed = Some((s, fill, field));
                return Ok(());
            }
        }
        p.literal = Some(Box::new(literal_proto(m, s, lit, &mut fill)?));
        Ok(())
    }

    /// Instruction `id` into `p` (cleared first, so that the byte sink
    /// reuses one message and its buffers for every instruction).
    fn instruction(&mut self, id: InstId, p: &mut xla::HloInstructionProto) -> Result<()> {
        let m = self.m;
        let inst = m.inst(id);
        let name = &*inst.name;
        if async_shorthand::is_shorthand(inst) {
            return Err(err(
                name,
                "the async shorthand is expanded before writing (async_shorthand::expand)",
            ));
        }
        // The name, opcode and shape are set by the caller (the byte sink
        // encodes them from the writer's own copies).
        p.clear();
        self.streamed = None;
        p.id = self.iid(id);
        p.operand_ids
            .extend(inst.operands.iter().map(|&o| self.iid(o)));
        p.control_predecessor_ids
            .extend(inst.control_predecessors().iter().map(|&o| self.iid(o)));
        // XLA writes these (empty) on every instruction.
        p.metadata = Some(Default::default());
        p.frontend_attributes = Some(Box::default());
        p.statistics_viz = Some(Box::default());
        let e = |msg: String| err(name, msg);
        match inst.opcode {
            Opcode::Parameter => {
                p.parameter_number = inst
                    .parameter_number()
                    .ok_or_else(|| e("parameter without a number".into()))?;
                // XLA writes operand-less instructions without operands.
            }
            Opcode::Constant => {
                let lit = inst
                    .literal()
                    .ok_or_else(|| e("a constant without a literal".into()))?;
                self.literal_field(id, inst.shape, lit, p).map_err(e)?;
            }
            _ => {}
        }
        p.called_computation_ids = self.called_ids(inst);
        xla_defaults(inst, p);
        // A dot without dimension attributes (`dot(a, b)` of vectors) still
        // has dimension numbers (XLA requires the field).
        let mut n = Nested::new(inst.opcode);
        for a in &inst.attrs {
            let key = &*a.key;
            let t: &str = match &a.value {
                AttrValue::Raw(t) => t,
                // Calls and control predecessors are ids (above).
                AttrValue::Comp(_) | AttrValue::Comps(_) | AttrValue::Insts(_) => continue,
                // Enumerations in XLA's spelling (matched by name below).
                AttrValue::Enum(name) => name,
                // Other typed values: read through `ints`, `int`, `boolean`
                // and the instruction's accessors below.
                _ => "",
            };
            let v = AttrIn {
                m,
                id,
                inst,
                key,
                value: &a.value,
                t,
            };
            let known = self.annotation_attr(&v, p)?
                || array_attr(&v, p)?
                || conv_dot_attr(&v, p, &mut n)?
                || self.custom_call_attr(&v, p)?
                || collective_attr(&v, p)?
                || numeric_attr(&v, p)?
                || gather_scatter_attr(&v, p, &mut n)?
                || solver_attr(&v, p, &mut n)?
                || transfer_attr(&v, p)?
                || result_attr(&v, p)?;
            if !known {
                return Err(e(format!(
                    "attribute `{key}` of {} has no HloInstructionProto field the writer knows",
                    inst.opcode.name()
                )));
            }
        }
        n.finish(m, inst, p)
    }

    /// The ids of the computations `inst` calls, in the order XLA stores them.
    fn called_ids(&self, inst: &Instruction) -> Vec<i64> {
        let comp_attr = |k: &str| -> Vec<CompId> {
            match inst.attr(k) {
                Some(AttrValue::Comp(c)) => vec![*c],
                Some(AttrValue::Comps(cs)) => cs.to_vec(),
                _ => Vec::new(),
            }
        };
        let called: Vec<CompId> = match inst.opcode {
            Opcode::While => [comp_attr("body"), comp_attr("condition")].concat(),
            Opcode::Conditional if inst.attr("true_computation").is_some() => [
                comp_attr("true_computation"),
                comp_attr("false_computation"),
            ]
            .concat(),
            Opcode::SelectAndScatter => [comp_attr("select"), comp_attr("scatter")].concat(),
            _ => inst.called_computations().collect(),
        };
        called.iter().map(|&c| self.cid(c)).collect()
    }

    /// Op metadata, sharding, frontend attributes, the backend config.
    fn annotation_attr(&mut self, v: &AttrIn, p: &mut InstProto) -> Result<bool> {
        let AttrIn {
            inst,
            key,
            value,
            t,
            ..
        } = *v;
        let e = |msg: String| err(&inst.name, msg);
        let ae = |r: crate::attrs::AttrError| err(&inst.name, r);
        match key {
            "metadata" => {
                let AttrValue::Metadata(md) = value else {
                    return Err(e(format!("`{key}` is not op metadata")));
                };
                let mut md = xla::OpMetadata::clone(md);
                if md.stack_frame_id != 0 {
                    md.stack_frame_id =
                        *self.frame_map.get(&md.stack_frame_id).ok_or_else(|| {
                            e(format!(
                                "stack_frame_id {} is not in the module's stack frames",
                                md.stack_frame_id
                            ))
                        })?;
                }
                p.metadata = Some(md);
            }
            "sharding" => {
                let AttrValue::Sharding(sh) = value else {
                    return Err(e(format!(
                    "`{key}`: a named sharding in syntax newer than jaxlib 0.10.2 (`unreduced=max{{...}}`) cannot be written to a proto"
                )));
                };
                // The reader's check of a sharding (text takes a few
                // that a proto cannot carry: a mesh axis of size 0,
                // found by the parse_print fuzzer).
                ax::sharding_from_proto(sh)
                    .map_err(|x| e(format!("`{key}` cannot be written to a proto: {x}")))?;
                p.sharding = Some(Box::new(xla::OpSharding::clone(sh)));
            }
            "frontend_attributes" => {
                p.frontend_attributes = inst
                    .frontend_attributes()
                    .map_err(ae)?
                    .cloned()
                    .map(Box::new)
            }
            "backend_config" => {
                p.backend_config = if t.trim_start().starts_with('"') {
                    v.string()?
                } else {
                    t.trim().as_bytes().to_vec()
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// A comparison's direction and type, a fusion's kind, a custom call's
    /// fields (its `literal=` too).
    fn custom_call_attr(&mut self, v: &AttrIn, p: &mut InstProto) -> Result<bool> {
        let AttrIn {
            m,
            id,
            inst,
            key,
            t,
            ..
        } = *v;
        let e = |msg: String| err(&inst.name, msg);
        let ae = |r: crate::attrs::AttrError| err(&inst.name, r);
        match key {
            "direction" => p.comparison_direction = t.trim().to_string(),
            "type" => p.comparison_type = t.trim().to_string(),
            "kind" => p.fusion_kind = t.trim().to_string(),
            "custom_call_target" => p.custom_call_target = v.text()?,
            "api_version" => {
                p.custom_call_api_version = match t.trim() {
                    "API_VERSION_UNSPECIFIED" => 0,
                    "API_VERSION_ORIGINAL" => 1,
                    "API_VERSION_STATUS_RETURNING" => 2,
                    "API_VERSION_STATUS_RETURNING_UNIFIED" => 3,
                    "API_VERSION_TYPED_FFI" => 4,
                    o => return Err(e(format!("unknown api_version `{o}`"))),
                }
            }
            "custom_call_has_side_effect" => p.custom_call_has_side_effect = v.boolean()?,
            "schedule" => {
                p.custom_call_schedule = match t.trim() {
                    "SCHEDULE_NONE" => 0,
                    "SCHEDULE_LATEST" => 1,
                    "SCHEDULE_EARLIEST" => 2,
                    o => return Err(e(format!("unknown custom-call schedule `{o}`"))),
                }
            }
            "output_to_operand_aliasing" => {
                p.output_operand_aliasing = inst
                    .output_operand_aliasing()
                    .map_err(ae)?
                    .unwrap_or_default()
                    .to_vec()
            }
            "operand_layout_constraints" => {
                p.constrain_layout = true;
                p.operand_shapes_with_layout = inst
                    .operand_layout_constraints()
                    .map_err(ae)?
                    .unwrap_or_default()
                    .iter()
                    .map(|&s| shape_proto(m, s))
                    .collect();
            }
            "literal" => {
                let (sid, lit) = inst
                    .custom_call_literal()
                    .map_err(ae)?
                    .ok_or_else(|| e("`literal` is not a literal".into()))?;
                self.literal_field(id, sid, lit, p)
                    .map_err(|x| e(format!("`literal`: {x}")))?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// The nested messages an instruction's attributes fill one field at a
/// time, written once all attributes are read.
struct Nested {
    dot: bool,
    gather: xla::GatherDimensionNumbers,
    has_gather: bool,
    scatter: xla::ScatterDimensionNumbers,
    has_scatter: bool,
    ragged: xla::RaggedDotDimensionNumbers,
    has_ragged: bool,
    tri: xla::TriangularSolveOptions,
    has_tri: bool,
}

impl Nested {
    fn new(op: Opcode) -> Self {
        Nested {
            dot: op == Opcode::Dot,
            gather: Default::default(),
            has_gather: false,
            scatter: Default::default(),
            has_scatter: false,
            ragged: Default::default(),
            has_ragged: false,
            tri: Default::default(),
            has_tri: false,
        }
    }

    /// Writes the messages into `p`; an outfeed without `outfeed_shape=`
    /// outfeeds its operand's shape.
    fn finish(mut self, m: &Module, inst: &Instruction, p: &mut InstProto) -> Result<()> {
        let ae = |r: crate::attrs::AttrError| err(&inst.name, r);
        if self.dot {
            let d = inst.dot_dims().map_err(ae)?.unwrap_or_default();
            let dd = xla::DotDimensionNumbers {
                lhs_contracting_dimensions: d.lhs_contracting.to_vec(),
                rhs_contracting_dimensions: d.rhs_contracting.to_vec(),
                lhs_batch_dimensions: d.lhs_batch.to_vec(),
                rhs_batch_dimensions: d.rhs_batch.to_vec(),
            };
            if inst.opcode == Opcode::RaggedDot {
                self.has_ragged = true;
                self.ragged.dot_dimension_numbers = Some(dd);
            } else {
                p.dot_dimension_numbers = Some(Box::new(dd));
            }
        }
        if inst.opcode == Opcode::Outfeed && p.outfeed_shape.is_none() {
            // Without `outfeed_shape=`, XLA outfeeds its operand's shape.
            if let Some(&o) = inst.operands.first() {
                p.outfeed_shape = Some(Box::new(shape_proto(m, m.inst(o).shape)));
            }
        }
        if self.has_ragged {
            p.ragged_dot_dimension_numbers = Some(Box::new(self.ragged));
        }
        if self.has_gather {
            p.gather_dimension_numbers = Some(Box::new(self.gather));
        }
        if self.has_scatter {
            p.scatter_dimension_numbers = Some(Box::new(self.scatter));
        }
        if self.has_tri {
            p.triangular_solve_options = Some(Box::new(self.tri));
        }
        Ok(())
    }
}

/// One attribute of an instruction being written: the module, the
/// instruction and its id, the key, the value, and the text of a raw or
/// enumeration value (empty for other typed values).
#[derive(Clone, Copy)]
struct AttrIn<'a> {
    m: &'a Module,
    id: InstId,
    inst: &'a Instruction,
    key: &'a str,
    value: &'a AttrValue,
    t: &'a str,
}

impl AttrIn<'_> {
    fn e(&self, msg: String) -> Error {
        err(&self.inst.name, msg)
    }

    fn ints(&self) -> Result<Vec<i64>> {
        match self.value {
            AttrValue::Ints(v) => Ok(v.to_vec()),
            _ => Err(self.e(format!("`{}` is not an integer list", self.key))),
        }
    }

    fn int(&self) -> Result<i64> {
        match self.value {
            AttrValue::Int(v) => Ok(*v),
            _ => Err(self.e(format!("`{}` is not an integer", self.key))),
        }
    }

    fn boolean(&self) -> Result<bool> {
        match self.value {
            AttrValue::Bool(b) => Ok(*b),
            _ => Err(self.e(format!("`{}` is not true or false", self.key))),
        }
    }

    fn string(&self) -> Result<Vec<u8>> {
        match self.value {
            AttrValue::Str(b) => Ok(b.to_vec()),
            _ => ax::string_value(self.t).map_err(|x| self.e(format!("`{}`: {x}", self.key))),
        }
    }

    fn text(&self) -> Result<String> {
        String::from_utf8(self.string()?)
            .map_err(|_| self.e(format!("`{}` is not UTF-8", self.key)))
    }
}

/// Dimension lists, a tuple index, slices, padding, a window.
fn array_attr(v: &AttrIn, p: &mut InstProto) -> Result<bool> {
    let AttrIn { inst, key, .. } = *v;
    let ae = |r: crate::attrs::AttrError| err(&inst.name, r);
    match key {
        "dimensions" => p.dimensions = v.ints()?,
        "iota_dimension" | "inferred_dimension" => p.dimensions = vec![v.int()?],
        "index" => p.tuple_index = v.int()?,
        "slice" => {
            p.slice_dimensions = inst
                .slice()
                .map_err(ae)?
                .unwrap_or_default()
                .into_iter()
                .map(|s| xla::SliceDimensions {
                    start: s.start,
                    limit: s.limit,
                    stride: s.stride,
                })
                .collect()
        }
        "dynamic_slice_sizes" => p.dynamic_slice_sizes = v.ints()?,
        "padding" => {
            p.padding_config = Some(Box::new(xla::PaddingConfig {
                dimensions: inst
                    .padding()
                    .map_err(ae)?
                    .unwrap_or_default()
                    .into_iter()
                    .map(|d| xla::PaddingConfigDimension {
                        edge_padding_low: d.lo,
                        edge_padding_high: d.hi,
                        interior_padding: d.interior,
                    })
                    .collect(),
            }))
        }
        "window" => {
            p.window = Some(Box::new(xla::Window {
                dimensions: inst
                    .window()
                    .map_err(ae)?
                    .unwrap_or_default()
                    .into_iter()
                    .map(|w| xla::WindowDimension {
                        size: w.size,
                        stride: w.stride,
                        padding_low: w.pad_lo,
                        padding_high: w.pad_hi,
                        window_dilation: w.rhs_dilation,
                        base_dilation: w.lhs_dilation,
                        window_reversal: w.reversal,
                    })
                    .collect(),
            }))
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Convolution and dot dimension numbers, group counts, precisions and
/// algorithms.
fn conv_dot_attr(v: &AttrIn, p: &mut InstProto, n: &mut Nested) -> Result<bool> {
    let AttrIn { inst, key, t, .. } = *v;
    let e = |msg: String| err(&inst.name, msg);
    let ae = |r: crate::attrs::AttrError| err(&inst.name, r);
    match key {
        "dim_labels" => {
            let d = inst.conv_dims().map_err(ae)?.unwrap_or_default();
            let need = |v: Option<i64>| {
                v.ok_or_else(|| e("dim_labels leaves a dimension unassigned".into()))
            };
            // A part with fewer spatial dimensions than the input
            // holds -1 for the missing ones (`?`): no proto carries
            // that (the reader refuses it as out of range).
            let spatial = |v: &[i64]| {
                if v.iter().any(|&x| x < 0) {
                    Err(e("dim_labels leaves a spatial dimension unassigned".into()))
                } else {
                    Ok(v.to_vec())
                }
            };
            p.convolution_dimension_numbers = Some(Box::new(xla::ConvolutionDimensionNumbers {
                input_batch_dimension: need(d.input_batch)?,
                input_feature_dimension: need(d.input_feature)?,
                input_spatial_dimensions: spatial(&d.input_spatial)?,
                kernel_input_feature_dimension: need(d.kernel_input_feature)?,
                kernel_output_feature_dimension: need(d.kernel_output_feature)?,
                kernel_spatial_dimensions: spatial(&d.kernel_spatial)?,
                output_batch_dimension: need(d.output_batch)?,
                output_feature_dimension: need(d.output_feature)?,
                output_spatial_dimensions: spatial(&d.output_spatial)?,
            }))
        }
        "feature_group_count" => p.feature_group_count = v.int()?,
        "batch_group_count" => p.batch_group_count = v.int()?,
        "lhs_batch_dims" | "rhs_batch_dims" | "lhs_contracting_dims" | "rhs_contracting_dims" => {
            n.dot = true
        }
        "lhs_ragged_dims" => {
            n.has_ragged = true;
            n.ragged.lhs_ragged_dimensions = v.ints()?
        }
        "rhs_group_dims" => {
            n.has_ragged = true;
            n.ragged.rhs_group_dimensions = v.ints()?
        }
        "operand_precision" => {
            p.precision_config
                .get_or_insert_with(Default::default)
                .operand_precision = inst
                .operand_precision()
                .map_err(ae)?
                .unwrap_or_default()
                .iter()
                .map(|&x| i32::from(x))
                .collect()
        }
        "algorithm" if inst.opcode == Opcode::RngBitGenerator => {
            p.rng_algorithm = match t.trim() {
                "rng_default" => 0,
                "rng_three_fry" => 1,
                "rng_philox" => 2,
                o => return Err(e(format!("unknown rng algorithm `{o}`"))),
            }
        }
        "algorithm" => {
            p.precision_config
                .get_or_insert_with(Default::default)
                .algorithm = ax::DOT_ALGORITHMS
                .iter()
                .position(|n| *n == t)
                .ok_or_else(|| e(format!("unknown dot algorithm `{t}`")))?
                as i32
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Replica groups, channels, source-target pairs and the boolean flags.
fn collective_attr(v: &AttrIn, p: &mut InstProto) -> Result<bool> {
    let AttrIn { inst, key, .. } = *v;
    let e = |msg: String| err(&inst.name, msg);
    let ae = |r: crate::attrs::AttrError| err(&inst.name, r);
    match key {
        "replica_groups" => match inst.replica_groups().map_err(ae)? {
            // No groups (`{}`) is the proto's default: nothing to write.
            None => {}
            Some(ax::ReplicaGroups::List(groups)) if groups.is_empty() => {}
            Some(ax::ReplicaGroups::List(groups)) => {
                p.collective_device_list = Some(Box::new(xla::CollectiveDeviceListProto {
                    replica_groups: groups
                        .iter()
                        .map(|g| xla::ReplicaGroup {
                            replica_ids: g.clone(),
                        })
                        .collect(),
                }))
            }
            Some(ax::ReplicaGroups::Mesh(g)) => {
                p.mesh_axes_replica_group_list = Some(Box::new(g.clone()))
            }
            Some(ax::ReplicaGroups::Iota(l)) => {
                let [num_replica_groups, num_devices_per_group] = l.dims[..] else {
                    return Err(e(format!(
                        "`{key}`: an iota list is `[groups,size]<=[...]`"
                    )));
                };
                p.iota_collective_device_list = Some(Box::new(xla::IotaReplicaGroupListProto {
                    num_replica_groups,
                    num_devices_per_group,
                    iota_reshape_dims: l.reshape.clone(),
                    iota_transpose_perm: l.perm.iter().map(|&x| x as i32).collect(),
                }))
            }
        },
        "channel_id" => p.channel_id = v.int()?,
        "use_global_device_ids" => p.use_global_device_ids = v.boolean()?,
        "constrain_layout" => p.constrain_layout = v.boolean()?,
        "is_host_transfer" => p.is_host_transfer = v.boolean()?,
        "is_stable" => p.is_stable = v.boolean()?,
        "indices_are_sorted" => p.indices_are_sorted = v.boolean()?,
        "unique_indices" => p.unique_indices = v.boolean()?,
        "largest" => p.largest = v.boolean()?,
        "is_composite" => p.is_composite = v.boolean()?,
        "is_reverse" => p.is_reverse = v.boolean()?,
        "source_target_pairs" => {
            p.source_target_pairs = inst
                .source_target_pairs()
                .map_err(ae)?
                .unwrap_or_default()
                .iter()
                .map(|&[source, target]| xla::SourceTarget { source, target })
                .collect()
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Batch-norm, reduce-precision, FFT, padding-type and rng fields.
fn numeric_attr(v: &AttrIn, p: &mut InstProto) -> Result<bool> {
    let AttrIn { inst, key, t, .. } = *v;
    let e = |msg: String| err(&inst.name, msg);
    let ae = |r: crate::attrs::AttrError| err(&inst.name, r);
    match key {
        "feature_index" => p.feature_index = v.int()?,
        "epsilon" => {
            p.epsilon = inst
                .float_attr(key)
                .map_err(ae)?
                .ok_or_else(|| e("`epsilon` has no value".into()))?
        }
        "exponent_bits" => p.exponent_bits = v.int()? as i32,
        "mantissa_bits" => p.mantissa_bits = v.int()? as i32,
        "fft_type" => {
            p.fft_type = match t.trim() {
                "FFT" => 0,
                "IFFT" => 1,
                "RFFT" => 2,
                "IRFFT" => 3,
                o => return Err(e(format!("unknown fft_type `{o}`"))),
            }
        }
        "fft_length" => p.fft_length = v.ints()?,
        // `PaddingType` numbers.
        "padding_type" => {
            p.padding_type = match t.trim() {
                "PADDING_INVALID" => 0,
                "PADDING_VALID" => 1,
                "PADDING_SAME" => 2,
                o => return Err(e(format!("unknown padding_type `{o}`"))),
            }
        }
        "distribution" => {
            p.distribution = match t.trim() {
                "rng_uniform" => 1,
                "rng_normal" => 2,
                o => return Err(e(format!("unknown distribution `{o}`"))),
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Gather and scatter dimension numbers, slice sizes.
fn gather_scatter_attr(v: &AttrIn, p: &mut InstProto, n: &mut Nested) -> Result<bool> {
    let AttrIn {
        inst, key, value, ..
    } = *v;
    let e = |msg: String| err(&inst.name, msg);
    match key {
        "offset_dims" => (n.has_gather, n.gather.offset_dims) = (true, v.ints()?),
        "collapsed_slice_dims" => (n.has_gather, n.gather.collapsed_slice_dims) = (true, v.ints()?),
        "start_index_map" => (n.has_gather, n.gather.start_index_map) = (true, v.ints()?),
        "operand_batching_dims" => {
            (n.has_gather, n.gather.operand_batching_dims) = (true, v.ints()?)
        }
        "start_indices_batching_dims" => {
            (n.has_gather, n.gather.start_indices_batching_dims) = (true, v.ints()?)
        }
        "slice_sizes" if inst.opcode != Opcode::Gather => {
            // collective-permute's `{{128,32}, ...}`: flattened.
            p.dynamic_slice_sizes = match value {
                AttrValue::IntLists(v) => v.concat(),
                _ => return Err(e(format!("`{key}` is not a list of integer lists"))),
            }
        }
        "slice_sizes" => p.gather_slice_sizes = v.ints()?,
        "index_vector_dim" if inst.opcode == Opcode::Gather => {
            (n.has_gather, n.gather.index_vector_dim) = (true, v.int()?)
        }
        "index_vector_dim" => (n.has_scatter, n.scatter.index_vector_dim) = (true, v.int()?),
        "update_window_dims" => (n.has_scatter, n.scatter.update_window_dims) = (true, v.ints()?),
        "inserted_window_dims" => {
            (n.has_scatter, n.scatter.inserted_window_dims) = (true, v.ints()?)
        }
        "scatter_dims_to_operand_dims" => {
            (n.has_scatter, n.scatter.scatter_dims_to_operand_dims) = (true, v.ints()?)
        }
        "input_batching_dims" => (n.has_scatter, n.scatter.input_batching_dims) = (true, v.ints()?),
        "scatter_indices_batching_dims" => {
            (n.has_scatter, n.scatter.scatter_indices_batching_dims) = (true, v.ints()?)
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Top-k, the rng state's delta, triangular-solve and Cholesky options.
fn solver_attr(v: &AttrIn, p: &mut InstProto, n: &mut Nested) -> Result<bool> {
    let AttrIn { inst, key, t, .. } = *v;
    let e = |msg: String| err(&inst.name, msg);
    match key {
        "k" => p.k = v.int()?,
        "delta" => p.delta = v.int()?,
        "left_side" => (n.has_tri, n.tri.left_side) = (true, v.boolean()?),
        "unit_diagonal" => (n.has_tri, n.tri.unit_diagonal) = (true, v.boolean()?),
        "transpose_a" => {
            n.has_tri = true;
            n.tri.transpose_a = match t.trim() {
                "NO_TRANSPOSE" => 1,
                "TRANSPOSE" => 2,
                "ADJOINT" => 3,
                o => return Err(e(format!("unknown transpose_a `{o}`"))),
            }
        }
        "lower" if inst.opcode == Opcode::Cholesky => {
            p.cholesky_options = Some(Box::new(xla::CholeskyOptions {
                lower: v.boolean()?,
            }))
        }
        "lower" => (n.has_tri, n.tri.lower) = (true, v.boolean()?),
        _ => return Ok(false),
    }
    Ok(true)
}

/// Infeed and outfeed, parameter replication, domains, the async
/// execution thread, the cross-program prefetch index.
fn transfer_attr(v: &AttrIn, p: &mut InstProto) -> Result<bool> {
    let AttrIn { m, inst, key, .. } = *v;
    let e = |msg: String| err(&inst.name, msg);
    let ae = |r: crate::attrs::AttrError| err(&inst.name, r);
    match key {
        "outfeed_shape" => {
            p.outfeed_shape = inst
                .outfeed_shape()
                .map_err(ae)?
                .map(|s| Box::new(shape_proto(m, s)))
        }
        "outfeed_config" => p.outfeed_config = v.string()?,
        "infeed_config" => p.infeed_config = v.string()?,
        "parameter_replication" => {
            p.parameter_replication = Some(Box::new(xla::ParameterReplication {
                replicated_at_leaf_buffers: inst
                    .bool_list_attr(key)
                    .map_err(ae)?
                    .unwrap_or_default()
                    .to_vec(),
            }))
        }
        "domain" => {
            // XLA's text names the user side `entry` and the
            // operand side `exit`; its proto stores the operand side
            // as the entry sharding (checked against jaxlib 0.10.2).
            if let Some(d) = inst.domain().map_err(ae)? {
                for sh in [&d.entry, &d.exit] {
                    ax::sharding_from_proto(sh)
                        .map_err(|x| e(format!("`{key}` cannot be written to a proto: {x}")))?;
                }
                p.domain_entry_sharding = Some(Box::new(d.exit.clone()));
                p.domain_exit_sharding = Some(Box::new(d.entry.clone()));
            }
        }
        "async_execution_thread" => p.async_execution_thread = v.text()?,
        "cross_program_prefetch_index" => p.cross_program_prefetch_index = Some(v.int()? as i32),
        _ => return Ok(false),
    }
    Ok(true)
}

/// Result accuracy, statistics, sparsity, the original value, a scan's
/// fields.
fn result_attr(v: &AttrIn, p: &mut InstProto) -> Result<bool> {
    let AttrIn { inst, key, .. } = *v;
    let ae = |r: crate::attrs::AttrError| err(&inst.name, r);
    match key {
        // A default mode is no field: XLA (jaxlib 0.10.2) drops it
        // when parsing, and our reader reads no field as no
        // attribute (written, it broke the write/read fixed point).
        "result_accuracy" => {
            p.result_accuracy = inst
                .result_accuracy()
                .map_err(ae)?
                .filter(|r| r.tolerance.is_some() || r.mode.unwrap_or(0) != 0)
                .cloned()
                .map(Box::new)
        }
        "statistics" => p.statistics_viz = inst.statistics().map_err(ae)?.cloned().map(Box::new),
        "sparsity_config" => {
            p.sparsity_config = inst.sparsity_config().map_err(ae)?.cloned().map(Box::new)
        }
        "origin" => {
            p.original_value = inst
                .original_value()
                .map_err(ae)?
                .map(|v| Box::new(ax::original_value_proto(v)))
        }
        "num_carries" => p.num_carries = v.int()?,
        "is_associative" => p.is_associative = if v.boolean()? { 1 } else { 2 },
        _ => return Ok(false),
    }
    Ok(true)
}

/// The defaults XLA writes on custom calls, dots and convolutions (and
/// needs: a custom call without an api version is API_VERSION_ORIGINAL in
/// text, UNSPECIFIED in a proto).
fn xla_defaults(inst: &Instruction, p: &mut InstProto) {
    match inst.opcode {
        Opcode::CustomCall => {
            p.custom_call_api_version = 1;
            p.feature_group_count = 1;
            p.batch_group_count = 1;
            p.precision_config = Some(Box::default());
        }
        Opcode::Dot | Opcode::Convolution | Opcode::RaggedDot => {
            p.precision_config = Some(Box::new(xla::PrecisionConfig {
                operand_precision: vec![0; inst.operands.len().min(2)],
                algorithm: 0,
            }));
            if inst.opcode == Opcode::Convolution {
                p.feature_group_count = 1;
                p.batch_group_count = 1;
                // A convolution without `window=` has a window of no
                // dimensions, which XLA requires to be present.
                p.window = Some(Box::default());
            }
        }
        _ => {}
    }
}

/// The module's device assignment and SPMD shardings into `p`; what the
/// reader would refuse is not written.
fn config(c: &ProtoConfig, p: &mut xla::HloModuleProto) -> Result<()> {
    if let Some(d) = &c.device_assignment {
        super::read::check_device_assignment(d).map_err(Error::Module)?;
    }
    let shardings = c
        .spmd_output_sharding
        .iter()
        .map(|s| ("spmd_output_sharding", s));
    for (what, s) in shardings.chain(
        c.spmd_parameters_shardings
            .iter()
            .map(|s| ("spmd_parameters_shardings", s)),
    ) {
        ax::sharding_from_proto(s).map_err(|e| Error::Module(format!("module {what}: {e}")))?;
    }
    p.device_assignment = c.device_assignment.clone();
    p.spmd_output_sharding = c.spmd_output_sharding.clone();
    p.spmd_parameters_shardings = c.spmd_parameters_shardings.clone();
    Ok(())
}
