//! `HloModuleProto` -> [`Module`]: the proto is checked and lowered straight
//! into the IR, so that a module read from a proto meets exactly the rules a
//! module read from text does ([`check_readable`]).
//!
//! [`Reader::build`] reads the header, then each computation and its
//! instructions ([`Reader::instruction`]), their fields as typed attributes
//! ([`Reader::fields`]). Fields the IR does not carry are listed in
//! [`ReadReport::ignored`] by path; nothing is dropped silently.

use crate::parse::{FxMap as HashMap, FxSet as HashSet};
use std::fmt::Write as _;

use smallvec::SmallVec;

use super::xla;
use super::xla::{BUFFER_TYPE, TUPLE_TYPE};
use crate::attrs::literal::{ArrayLiteral, Literal};
use crate::error::{Error, Result};
use crate::ir::*;
use crate::opcode::Opcode;

/// What reading a proto could not carry into the module.
#[derive(Clone, Debug, Default)]
pub struct ReadReport {
    /// Paths of fields present in the proto that the module does not hold
    /// (`computations[0].instructions[3].statistics_viz`, or `... field #120`
    /// for a field number the schema does not know).
    pub ignored: Vec<String>,
}

impl ReadReport {
    /// [`ReadReport::ignored`] for people: paths with their indices folded
    /// (`computations[].instructions[].statistics_viz`), each with the number
    /// of places it occurs, in first-seen order, comma-separated.
    pub fn summary(&self) -> String {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for p in &self.ignored {
            let mut folded = String::with_capacity(p.len());
            let mut in_index = false;
            for c in p.chars() {
                match c {
                    '[' => {
                        in_index = true;
                        folded.push_str("[]");
                    }
                    ']' => in_index = false,
                    _ if in_index => {}
                    _ => folded.push(c),
                }
            }
            match counts.iter_mut().find(|(f, _)| *f == folded) {
                Some((_, n)) => *n += 1,
                None => counts.push((folded, 1)),
            }
        }
        counts
            .iter()
            .map(|(f, n)| format!("{f} ({n}x)"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn bad(msg: impl Into<String>) -> Error {
    Error::Module(format!("invalid HloModuleProto: {}", msg.into()))
}

/// XLA builds a proto's computations in the order the proto lists them, and
/// an instruction may only call a computation built before its own (XLA:
/// "instruction references invalid computation id(s)"; a proto listing the
/// entry first is refused so). The same proto is refused here: read, it
/// would be another module than XLA's (none), and written back in callees-
/// first order it would not read back to itself (found by fuzzing). A
/// called id the proto does not hold at all, or a computation calling
/// itself, is left to the instruction's own checks.
fn callees_listed_first(comps: &[xla::HloComputationProto]) -> Result<()> {
    let listed: HashMap<i64, usize> = comps.iter().enumerate().map(|(k, c)| (c.id, k)).collect();
    for (k, c) in comps.iter().enumerate() {
        for i in &c.instructions {
            for callee in &i.called_computation_ids {
                if let Some(&at) = listed.get(callee) {
                    if at > k {
                        return Err(bad(format!(
                            "computation `{}` (listed {}): instruction `{}` calls computation `{}` (id {callee}, \
                             listed {}); XLA reads a proto's computations in their order and needs \
                             every callee listed before its caller",
                            c.name,
                            k + 1,
                            i.name,
                            comps[at].name,
                            at + 1,
                        )));
                    }
                }
            }
        }
    }
    Ok(())
}

/// A computation whose root id is none of its instructions.
fn no_root(c: &xla::HloComputationProto) -> Error {
    bad(format!(
        "computation `{}`: root id {} is not one of its instructions",
        c.name, c.root_id
    ))
}

/// `e` (an error of [`bad`]) with `path`, where in the proto it is, before
/// its message, which keeps a single `invalid HloModuleProto:` prefix.
fn within(path: &dyn std::fmt::Display, e: Error) -> Error {
    match e {
        Error::Module(m) => {
            let msg = m.strip_prefix("invalid HloModuleProto: ").unwrap_or(&m);
            bad(format!("{path}: {msg}"))
        }
        e => e,
    }
}

/// A name XLA's text can carry (`[A-Za-z0-9_.-]+`), as the parser requires.
fn check_name(name: &str, what: &str) -> Result<()> {
    if crate::parse::is_plain_name(name) {
        Ok(())
    } else {
        Err(bad(format!(
            "{what} `{}` is not a name HLO text can carry; names use letters, digits, `_`, `.` and `-`",
            name.escape_debug()
        )))
    }
}

/// Converts a decoded proto into a module: ids become arena ids (the
/// proto's are recorded, [`Module::inst_proto_id`]); computations and
/// instructions in the order of their ids, as XLA's `CreateFromProto` sorts
/// them ([`Reader::computation_order`]).
pub fn module_from_proto(p: &xla::HloModuleProto) -> Result<(Module, ReadReport)> {
    module_from_proto_ordered(p, true)
}

/// [`module_from_proto`], with computations and instructions in the order
/// the proto lists them (for data that refers to instructions by their
/// position in the proto, as TpuGraphs' node indices do).
pub fn module_from_proto_as_listed(p: &xla::HloModuleProto) -> Result<(Module, ReadReport)> {
    module_from_proto_ordered(p, false)
}

fn module_from_proto_ordered(
    p: &xla::HloModuleProto,
    by_ids: bool,
) -> Result<(Module, ReadReport)> {
    let mut r = Reader {
        by_ids,
        p,
        report: ReadReport::default(),
        comp_names: HashMap::default(),
        comp_ids: HashMap::default(),
        m: Module::new(p.name.as_str()),
        shapes: HashMap::default(),
        shape_buf: String::new(),
        seen_shapes: Default::default(),
        fields: Vec::new(),
    };
    r.build()?;
    // The lowered module passes the checks the parser applies after
    // lowering and the verifier's structure checks.
    let m = std::mem::replace(&mut r.m, Module::new(""));
    check_readable(&m).map_err(|e| bad(format!("the module it describes is not valid: {e}")))?;
    // The stack frame tables as XLA numbers them after reading a proto
    // (over its module, wrapped computations included).
    let mut m = m;
    super::frames::renumber(&mut m, p)?;
    // XLA's wrapped computations of the async shorthand become the
    // shorthand again, as the text parser holds it.
    super::async_shorthand::fold(&mut m);
    Ok((m, r.report))
}

/// What a module read from a proto must meet, and so what the writer
/// requires of a module it writes (a proto it writes always reads back):
/// the parser's rules ([`crate::semantic::check`]) and the verifier's
/// structure checks (what text cannot express but a proto can, a
/// computation calling itself, ...; an entry layout that is not its
/// computation's, layouts that are not permutations, which the parser
/// leaves to the verifier). Shapes are not inferred: the text parser does
/// not either, and XLA reads modules whose shapes its verifier would reject.
pub(crate) fn check_readable(m: &Module) -> std::result::Result<(), String> {
    if let Err(f) = crate::semantic::check(m) {
        let at = match (f.inst, f.comp) {
            (Some(i), _) => format!("%{}: ", m.inst(i).name),
            (None, Some(c)) => format!("computation %{}: ", m.comp(c).name),
            (None, None) => f.attr.map_or_else(String::new, |a| format!("{a}: ")),
        };
        return Err(format!("{at}{}", f.message));
    }
    crate::verify::verify_structure(m).map_err(|e| e.to_string())
}

/// Each instruction's computation, by proto id: instruction ids are unique
/// over the module, and names as well.
fn inst_comps(p: &xla::HloModuleProto) -> Result<HashMap<i64, i64>> {
    let total = p.computations.iter().map(|c| c.instructions.len()).sum();
    let mut inst_comps: HashMap<i64, i64> =
        HashMap::with_capacity_and_hasher(total, Default::default());
    let mut seen_names = HashSet::with_capacity_and_hasher(total, Default::default());
    for c in &p.computations {
        for i in &c.instructions {
            if inst_comps.insert(i.id, c.id).is_some() {
                return Err(bad(format!("instruction id {} appears twice", i.id)));
            }
            if !seen_names.insert(&i.name) {
                return Err(bad(format!("instruction name `{}` appears twice", i.name)));
            }
        }
    }
    Ok(inst_comps)
}

struct Reader<'p> {
    /// Order computations and instructions by their ids (else as listed).
    by_ids: bool,
    p: &'p xla::HloModuleProto,
    report: ReadReport,
    comp_names: HashMap<i64, &'p str>,
    /// Proto computation id -> the module's.
    comp_ids: HashMap<i64, CompId>,
    /// The module being built.
    m: Module,
    /// Shapes by their text (see [`Reader::shape`]).
    shapes: HashMap<String, ShapeId>,
    shape_buf: String,
    /// Shape protos already interned, by a hash of their fields.
    seen_shapes: crate::parse::FxMap<u64, (&'p xla::ShapeProto, ShapeId)>,
    /// The attributes of the instruction being read (a buffer reused).
    fields: Vec<Field>,
}

use crate::attrs::xla::{self as ax, quote, strip_profile};

/// `computations[C].instructions[I]`, formatted only when a message or a
/// report needs it.
struct InstPath {
    ci: usize,
    ii: usize,
}

impl std::fmt::Display for InstPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "computations[{}].instructions[{}]", self.ci, self.ii)
    }
}

/// The instruction [`Reader::fields`] reads: where it is, its opcode, its
/// message.
#[derive(Clone, Copy)]
struct At<'a, 'p> {
    path: &'a InstPath,
    op: Opcode,
    i: &'p xla::HloInstructionProto,
}

/// Whether XLA prints `s`'s layout not at all: a scalar whose layout holds
/// nothing (as [`write_shape`] decides).
fn trivial_scalar_layout(s: &xla::ShapeProto, l: &xla::LayoutProto) -> bool {
    s.dimensions.is_empty()
        && *l
            == xla::LayoutProto {
                tail_padding_alignment_in_elements: l.tail_padding_alignment_in_elements.min(1),
                ..Default::default()
            }
        && l.tail_padding_alignment_in_elements <= 1
}

/// Whether `s` is a shape the reader lowers without text: an array of a
/// numeric type with static, non-negative dimensions and no layout or a
/// layout of a permutation, tiles of positive sizes (or `*`) and a memory
/// space, or a tuple of such shapes. Everything else (dynamic dimensions,
/// sparse or annotated layouts, buffers, tokens, malformed values) takes
/// the text path and its checks.
fn plain_shape(s: &xla::ShapeProto, depth: usize) -> bool {
    if depth > 8 {
        return false;
    }
    if s.element_type == TUPLE_TYPE {
        return s.layout.is_none()
            && s.dimensions.is_empty()
            && s.tuple_shapes.iter().all(|e| plain_shape(e, depth + 1));
    }
    let numeric =
        prim_type(s.element_type).is_some_and(|t| !matches!(t, PrimType::Token | PrimType::Opaque));
    if !numeric
        || !s.tuple_shapes.is_empty()
        || s.dimensions.iter().any(|&d| d < 0)
        || s.is_dynamic_dimension.iter().any(|&d| d)
        || s.is_dynamic_dimension.len() > s.dimensions.len()
    {
        return false;
    }
    let Some(l) = &s.layout else {
        return true;
    };
    if trivial_scalar_layout(s, l) {
        return true;
    }
    let permutation = crate::shape_infer::is_permutation(&l.minor_to_major, s.dimensions.len());
    let plain_tiles = l.tiles.iter().all(|t| {
        !t.dimensions.is_empty()
            && t.dimensions
                .iter()
                .all(|&d| d > 0 || d == Tile::COMBINE_DIM)
    });
    permutation
        && plain_tiles
        && l.memory_space >= 0
        && *l
            == xla::LayoutProto {
                minor_to_major: l.minor_to_major.clone(),
                tiles: l.tiles.clone(),
                memory_space: l.memory_space,
                tail_padding_alignment_in_elements: l.tail_padding_alignment_in_elements.min(1),
                ..Default::default()
            }
        && matches!(l.tail_padding_alignment_in_elements, 0 | 1)
}

/// A collective-permute's `slice_sizes={{...},...}` groups from the proto's
/// flattened `dynamic_slice_sizes` (the writer concatenates them): one group
/// per buffer, each as long as the buffer's rank (the buffers are the
/// instruction's shape, or the first element of a start's tuple, or that
/// shape's elements when it is a tuple). Sizes that do not divide so are
/// written as one group.
fn permute_slice_sizes(op: Opcode, shape: Option<&xla::ShapeProto>, sizes: &[i64]) -> String {
    let mut base = shape;
    if op == Opcode::CollectivePermuteStart {
        base = base.and_then(|s| s.tuple_shapes.first());
    }
    let ranks: Vec<usize> = match base {
        Some(s) if s.element_type == TUPLE_TYPE => {
            s.tuple_shapes.iter().map(|e| e.dimensions.len()).collect()
        }
        Some(s) => vec![s.dimensions.len()],
        None => Vec::new(),
    };
    let mut groups = Vec::new();
    let mut rest = sizes;
    let mut k = 0;
    while !rest.is_empty() && ranks.iter().any(|&r| r > 0) {
        let r = ranks[k % ranks.len()];
        k += 1;
        if r == 0 || r > rest.len() {
            break;
        }
        groups.push(format!("{{{}}}", join(&rest[..r])));
        rest = &rest[r..];
    }
    if !rest.is_empty() || groups.is_empty() {
        return format!("{{{}}}", join(sizes));
    }
    groups.join(",")
}

/// Feeds the fields that tell shapes apart to `h` (a cache key; equality is
/// checked on the whole proto).
fn hash_shape(s: &xla::ShapeProto, h: &mut crate::parse::FxHasher, depth: usize) {
    use std::hash::Hash;
    s.element_type.hash(h);
    s.dimensions.hash(h);
    s.is_dynamic_dimension.hash(h);
    if let Some(l) = &s.layout {
        l.minor_to_major.hash(h);
        for t in &l.tiles {
            t.dimensions.hash(h);
        }
        l.memory_space.hash(h);
    }
    s.tuple_shapes.len().hash(h);
    if depth < 4 {
        for e in &s.tuple_shapes {
            hash_shape(e, h, depth + 1);
        }
    }
}

fn join<T: std::fmt::Display>(v: &[T]) -> String {
    let mut s = String::new();
    for (k, x) in v.iter().enumerate() {
        if k > 0 {
            s.push(',');
        }
        let _ = write!(s, "{x}");
    }
    s
}

fn prim_type(n: i32) -> Option<PrimType> {
    use PrimType::*;
    Some(match n {
        1 => Pred,
        30 => S1,
        26 => S2,
        21 => S4,
        2 => S8,
        3 => S16,
        4 => S32,
        5 => S64,
        31 => U1,
        27 => U2,
        22 => U4,
        6 => U8,
        7 => U16,
        8 => U32,
        9 => U64,
        10 => F16,
        11 => F32,
        16 => Bf16,
        12 => F64,
        19 => F8E5M2,
        28 => F8E4M3,
        20 => F8E4M3FN,
        23 => F8E4M3B11FNUZ,
        29 => F8E3M4,
        24 => F8E5M2FNUZ,
        25 => F8E4M3FNUZ,
        32 => F4E2M1FN,
        33 => F8E8M0FNU,
        15 => C64,
        18 => C128,
        17 => Token,
        14 => Opaque,
        _ => return None,
    })
}

/// A `ShapeProto` as shape text (with layouts).
pub(crate) fn shape_text(s: &xla::ShapeProto, depth: usize) -> Result<String> {
    let mut o = String::new();
    write_shape(s, depth, &mut o)?;
    Ok(o)
}

fn write_shape(s: &xla::ShapeProto, depth: usize, o: &mut String) -> Result<()> {
    if depth > super::MAX_DEPTH {
        return Err(bad("shapes nest too deeply"));
    }
    match s.element_type {
        TUPLE_TYPE => {
            o.push('(');
            for (k, e) in s.tuple_shapes.iter().enumerate() {
                if k > 0 {
                    o.push_str(", ");
                }
                write_shape(e, depth + 1, o)?;
            }
            o.push(')');
        }
        BUFFER_TYPE => {
            let [inner] = &s.tuple_shapes[..] else {
                return Err(bad("a buffer shape holds exactly one shape"));
            };
            o.push_str("b(");
            write_shape(inner, depth + 1, o)?;
            o.push(')');
        }
        17 => o.push_str("token[]"),
        14 => o.push_str("opaque[]"),
        n => {
            let t = prim_type(n).ok_or_else(|| bad(format!("unknown element type {n}")))?;
            o.push_str(t.name());
            o.push('[');
            for (k, &d) in s.dimensions.iter().enumerate() {
                if k > 0 {
                    o.push(',');
                }
                if s.is_dynamic_dimension.get(k).copied().unwrap_or(false) {
                    if d == i64::MIN {
                        o.push('?');
                        continue;
                    }
                    o.push_str("<=");
                }
                let _ = write!(o, "{d}");
            }
            o.push(']');
            if let Some(l) = &s.layout {
                // XLA prints a scalar without its (empty) layout.
                let trivial_scalar = trivial_scalar_layout(s, l);
                // As XLA validates a layout against its shape: a permutation
                // of the dimensions.
                if !crate::shape_infer::is_permutation(&l.minor_to_major, s.dimensions.len()) {
                    return Err(bad(format!(
                        "layout {{{}}} is not a permutation of the {} dimensions of its shape",
                        join(&l.minor_to_major),
                        s.dimensions.len()
                    )));
                }
                if !trivial_scalar {
                    write_layout(l, depth, o)?;
                }
            }
        }
    }
    Ok(())
}

fn write_layout(l: &xla::LayoutProto, depth: usize, o: &mut String) -> Result<()> {
    o.push('{');
    o.push_str(&join(&l.minor_to_major));
    let tail = if l.tail_padding_alignment_in_elements == 0 {
        1
    } else {
        l.tail_padding_alignment_in_elements
    };
    let extra = !l.dim_level_types.is_empty()
        || !l.tiles.is_empty()
        || tail != 1
        || l.index_primitive_type != 0
        || l.pointer_primitive_type != 0
        || l.element_size_in_bits != 0
        || l.memory_space != 0
        || !l.split_configs.is_empty()
        || l.physical_shape.is_some()
        || l.dynamic_shape_metadata_prefix_bytes != 0;
    if extra {
        o.push(':');
        if !l.dim_level_types.is_empty() {
            o.push_str("D(");
            for (k, &d) in l.dim_level_types.iter().enumerate() {
                if k > 0 {
                    o.push(',');
                }
                o.push(match d {
                    0 => 'D',
                    1 => 'C',
                    2 => 'S',
                    3 => 'H',
                    _ => return Err(bad(format!("unknown dim level type {d}"))),
                });
                if !l.dim_unique.get(k).copied().unwrap_or(true) {
                    o.push('+');
                }
                if !l.dim_ordered.get(k).copied().unwrap_or(true) {
                    o.push('~');
                }
            }
            o.push(')');
        }
        if !l.tiles.is_empty() {
            o.push('T');
            for t in &l.tiles {
                if t.dimensions.is_empty() {
                    return Err(bad("a layout tile has no dimensions"));
                }
                o.push('(');
                for (k, &d) in t.dimensions.iter().enumerate() {
                    if k > 0 {
                        o.push(',');
                    }
                    if d == Tile::COMBINE_DIM {
                        o.push('*');
                    } else {
                        let _ = write!(o, "{d}");
                    }
                }
                o.push(')');
            }
        }
        if tail != 1 {
            let _ = write!(o, "L({tail})");
        }
        let ty = |n: i32| prim_type(n).ok_or_else(|| bad(format!("unknown element type {n}")));
        if l.index_primitive_type != 0 {
            let _ = write!(o, "#({})", ty(l.index_primitive_type)?);
        }
        if l.pointer_primitive_type != 0 {
            let _ = write!(o, "*({})", ty(l.pointer_primitive_type)?);
        }
        if l.element_size_in_bits != 0 {
            let _ = write!(o, "E({})", l.element_size_in_bits);
        }
        if l.memory_space != 0 {
            let _ = write!(o, "S({})", l.memory_space);
        }
        for sc in &l.split_configs {
            let _ = write!(o, "SC({}:{})", sc.dimension, join(&sc.split_indices));
        }
        if let Some(ps) = &l.physical_shape {
            o.push_str("P(");
            write_shape(ps, depth + 1, o)?;
            o.push(')');
        }
        if l.dynamic_shape_metadata_prefix_bytes != 0 {
            let _ = write!(o, "M({})", l.dynamic_shape_metadata_prefix_bytes);
        }
    }
    o.push('}');
    Ok(())
}

/// The typed literal of a `LiteralProto` (tuple literals element by
/// element, at most [`MAX_LITERAL_DEPTH`] deep).
fn literal_of(l: &xla::LiteralProto, depth: usize) -> Result<Literal> {
    let shape = l
        .shape
        .as_ref()
        .ok_or_else(|| bad("a literal without a shape"))?;
    if shape.element_type == TUPLE_TYPE {
        if depth >= MAX_LITERAL_DEPTH {
            return Err(bad("tuple literals nested too deeply"));
        }
        if l.tuple_literals.len() != shape.tuple_shapes.len() {
            return Err(bad(format!(
                "a tuple literal of {} elements holds {}",
                shape.tuple_shapes.len(),
                l.tuple_literals.len()
            )));
        }
        let elems = l
            .tuple_literals
            .iter()
            .map(|e| literal_of(e, depth + 1))
            .collect::<Result<Vec<_>>>()?;
        return Ok(Literal::Tuple(elems.into()));
    }
    let t = prim_type(shape.element_type).ok_or_else(|| {
        bad(format!(
            "unknown literal element type {}",
            shape.element_type
        ))
    })?;
    let count = shape
        .dimensions
        .iter()
        .try_fold(1usize, |a, &d| {
            usize::try_from(d).ok().and_then(|d| a.checked_mul(d))
        })
        .ok_or_else(|| bad("a literal shape with a negative or huge size"))?;
    // The value count is checked before the layout's order is built.
    let a = ArrayLiteral::from_proto(t, &shape.dimensions, l, None).map_err(bad)?;
    // The literal's own layout orders its values.
    match physical_to_logical(shape, count)? {
        None => Ok(Literal::Array(a)),
        Some(order) => Ok(Literal::Array(
            ArrayLiteral::from_proto(t, &shape.dimensions, l, Some(&order)).map_err(bad)?,
        )),
    }
}

/// Nesting limit of tuple literals read from a proto.
const MAX_LITERAL_DEPTH: usize = 64;

/// Element type and dimensions agree (layouts aside), element by element
/// for tuples.
fn same_literal_shape(a: &xla::ShapeProto, b: &xla::ShapeProto) -> bool {
    a.element_type == b.element_type
        && a.dimensions == b.dimensions
        && a.tuple_shapes.len() == b.tuple_shapes.len()
        && a.tuple_shapes
            .iter()
            .zip(&b.tuple_shapes)
            .all(|(x, y)| same_literal_shape(x, y))
}

/// Whether each element of a tuple literal has the shape the tuple declares
/// for it (element type and dimensions), at every level.
fn tuple_shapes_agree(l: &xla::LiteralProto, depth: usize) -> bool {
    let Some(shape) = &l.shape else {
        return false;
    };
    if shape.element_type != TUPLE_TYPE {
        return true;
    }
    depth < MAX_LITERAL_DEPTH
        && l.tuple_literals.len() == shape.tuple_shapes.len()
        && l.tuple_literals
            .iter()
            .zip(&shape.tuple_shapes)
            .all(|(e, want)| {
                e.shape
                    .as_ref()
                    .is_some_and(|es| same_literal_shape(es, want))
                    && tuple_shapes_agree(e, depth + 1)
            })
}

/// For a literal whose layout is not row-major, the position in the data of
/// each value in row-major order.
fn physical_to_logical(shape: &xla::ShapeProto, count: usize) -> Result<Option<Vec<usize>>> {
    let rank = shape.dimensions.len();
    let Some(l) = &shape.layout else {
        return Ok(None);
    };
    let m2m = &l.minor_to_major;
    if m2m.is_empty() || m2m.iter().rev().enumerate().all(|(k, &d)| d == k as i64) {
        return Ok(None);
    }
    if m2m.len() != rank || !l.tiles.is_empty() {
        return Err(bad(
            "a literal layout must be a permutation of its dimensions, untiled",
        ));
    }
    let mut seen = vec![false; rank];
    for &d in m2m {
        let ok = usize::try_from(d).ok().filter(|&d| d < rank && !seen[d]);
        let Some(d) = ok else {
            return Err(bad("a literal layout is not a permutation"));
        };
        seen[d] = true;
    }
    let dims: Vec<usize> = shape.dimensions.iter().map(|&d| d as usize).collect();
    // Physical strides: minor-most dimension has stride 1.
    let mut stride = vec![0usize; rank];
    let mut s = 1usize;
    for &d in m2m {
        stride[d as usize] = s;
        s *= dims[d as usize];
    }
    let mut out = Vec::with_capacity(count);
    let mut idx = vec![0usize; rank];
    for _ in 0..count {
        out.push(idx.iter().zip(&stride).map(|(i, s)| i * s).sum());
        for k in (0..rank).rev() {
            idx[k] += 1;
            if idx[k] < dims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Ok(Some(out))
}

/// The module's device assignment and SPMD shardings ([`ProtoConfig`]),
/// checked as XLA checks them when it reads them into the module's config:
/// a device assignment of at least one replica and one computation, with a
/// list of devices per computation and a device per replica in each (XLA
/// refuses the others; it takes any device ids), shardings as instructions'
/// are read.
fn proto_config(p: &xla::HloModuleProto) -> Result<ProtoConfig> {
    let sharding = |s: &xla::OpSharding, path: &str| {
        ax::sharding_from_proto(s).map_err(|e| bad(format!("{path}: {e}")))
    };
    let spmd_output_sharding = match &p.spmd_output_sharding {
        Some(s) => Some(sharding(s, "spmd_output_sharding")?),
        None => None,
    };
    let spmd_parameters_shardings = p
        .spmd_parameters_shardings
        .iter()
        .enumerate()
        .map(|(k, s)| sharding(s, &format!("spmd_parameters_shardings[{k}]")))
        .collect::<Result<Vec<_>>>()?;
    if let Some(d) = &p.device_assignment {
        check_device_assignment(d).map_err(bad)?;
    }
    Ok(ProtoConfig {
        device_assignment: p.device_assignment.clone(),
        spmd_output_sharding,
        spmd_parameters_shardings,
    })
}

/// What XLA requires of a device assignment (see [`proto_config`]); the
/// message says what is wrong.
pub(crate) fn check_device_assignment(
    d: &xla::DeviceAssignmentProto,
) -> std::result::Result<(), String> {
    if d.replica_count <= 0 || d.computation_count <= 0 {
        return Err(format!(
            "device_assignment: {} replicas of {} computations; both must be at least 1",
            d.replica_count, d.computation_count
        ));
    }
    if d.computation_devices.len() != d.computation_count as usize {
        return Err(format!(
            "device_assignment: computation_count {} but devices for {} computations",
            d.computation_count,
            d.computation_devices.len()
        ));
    }
    for (k, c) in d.computation_devices.iter().enumerate() {
        if c.replica_device_ids.len() != d.replica_count as usize {
            return Err(format!(
                "device_assignment.computation_devices[{k}]: {} devices for {} replicas",
                c.replica_device_ids.len(),
                d.replica_count
            ));
        }
    }
    Ok(())
}

/// The ids inside a stack frame index point into its own lists (1-based; a
/// parent 0 is none), and no frame is its own ancestor.
fn check_stack_frames(sf: &xla::StackFrameIndexProto) -> Result<()> {
    let within = |id: i32, n: usize| usize::try_from(id).is_ok_and(|k| (1..=n).contains(&k));
    for (k, l) in sf.file_locations.iter().enumerate() {
        if !within(l.file_name_id, sf.file_names.len())
            || !within(l.function_name_id, sf.function_names.len())
        {
            return Err(bad(format!(
                "file location {}: file_name_id {} or function_name_id {} is not in the index",
                k + 1,
                l.file_name_id,
                l.function_name_id
            )));
        }
    }
    let n = sf.stack_frames.len();
    for (k, f) in sf.stack_frames.iter().enumerate() {
        if !within(f.file_location_id, sf.file_locations.len())
            || !(f.parent_frame_id == 0 || within(f.parent_frame_id, n))
        {
            return Err(bad(format!(
                "stack frame {}: file_location_id {} or parent_frame_id {} is not in the index",
                k + 1,
                f.file_location_id,
                f.parent_frame_id
            )));
        }
        // Walking up from a frame reaches the root within `n` steps.
        let (mut at, mut steps) = (f.parent_frame_id, 0);
        while at != 0 {
            steps += 1;
            if steps > n {
                return Err(bad(format!(
                    "stack frame {}: its parents form a cycle",
                    k + 1
                )));
            }
            at = sf.stack_frames[(at - 1) as usize].parent_frame_id;
        }
    }
    Ok(())
}

/// The places of a scheduled computation's instructions: the schedule's
/// order (as indices into its list) and each instruction's place in it; the
/// schedule must list each instruction once.
fn scheduled_order(
    c: &xla::HloComputationProto,
    pos: &HashMap<i64, usize>,
    ids: &[i64],
) -> Result<(Vec<usize>, Option<Vec<usize>>)> {
    let mut order = Vec::with_capacity(ids.len());
    let mut rank = vec![usize::MAX; c.instructions.len()];
    let mut twice = false;
    for id in ids {
        let k = *pos.get(id).ok_or_else(|| {
            bad(format!(
                "the schedule of `{}` names instruction id {id}, not in it",
                c.name
            ))
        })?;
        twice |= rank[k] != usize::MAX;
        rank[k] = order.len();
        order.push(k);
    }
    if order.len() != c.instructions.len() {
        return Err(bad(format!(
            "the schedule of `{}` lists {} of its {} instructions",
            c.name,
            order.len(),
            c.instructions.len()
        )));
    }
    if twice {
        return Err(bad(format!(
            "the schedule of `{}` names an instruction twice",
            c.name
        )));
    }
    Ok((order, Some(rank)))
}

/// The places of an unscheduled computation's instructions (see
/// [`scheduled_order`]): by id, or as listed where `by_ids` is false or ids
/// would put a use before its definition; no ranks where that is the list's
/// own order.
fn unscheduled_order(
    c: &xla::HloComputationProto,
    pos: &HashMap<i64, usize>,
    by_ids: bool,
) -> (Vec<usize>, Option<Vec<usize>>) {
    let n = c.instructions.len();
    let mut order: Vec<usize> = (0..n).collect();
    if by_ids {
        order.sort_by_key(|&k| c.instructions[k].id);
        let mut at_of = vec![0; n];
        for (at, &k) in order.iter().enumerate() {
            at_of[k] = at;
        }
        let defs_first = order.iter().enumerate().all(|(at, &k)| {
            let i = &c.instructions[k];
            i.operand_ids
                .iter()
                .chain(&i.control_predecessor_ids)
                .all(|d| pos.get(d).is_none_or(|&j| at_of[j] < at))
        });
        if !defs_first {
            order = (0..n).collect();
        }
    }
    let mut rank = None;
    if order.iter().enumerate().any(|(at, &k)| at != k) {
        let mut r = vec![0; order.len()];
        for (at, &k) in order.iter().enumerate() {
            r[k] = at;
        }
        rank = Some(r);
    }
    (order, rank)
}

/// The parameters' ids in parameter-number order; the numbers must be
/// 0..n.
fn numbered_params(
    c: &xla::HloComputationProto,
    mut params: Vec<(i64, InstId)>,
) -> Result<Vec<InstId>> {
    params.sort_by_key(|&(n, _)| n);
    let mut param_ids = Vec::with_capacity(params.len());
    for (k, &(n, pid)) in params.iter().enumerate() {
        if n != k as i64 {
            return Err(bad(if n < k as i64 {
                format!(
                    "parameter number {n} is used twice in computation `{}`",
                    c.name
                )
            } else {
                format!(
                    "parameter numbers of computation `{}` must be 0..{}; {k} is missing",
                    c.name,
                    params.len()
                )
            }));
        }
        param_ids.push(pid);
    }
    Ok(param_ids)
}
/// An instruction's operands (none for a parameter or a constant) and its
/// payload (a parameter's number, a constant's literal, read straight from
/// its `LiteralProto`).
fn operands_and_payload(
    path: &InstPath,
    opcode: Opcode,
    i: &xla::HloInstructionProto,
    id_of: &impl Fn(i64) -> Result<InstId>,
) -> Result<(SmallVec<[InstId; 3]>, Option<Payload>)> {
    let mut operands: SmallVec<[InstId; 3]> = SmallVec::new();
    let mut payload: Option<Payload> = None;
    match opcode {
        Opcode::Parameter => {
            if i.parameter_number < 0 {
                return Err(bad(format!(
                    "{path}: parameter number {} is negative",
                    i.parameter_number
                )));
            }
            payload = Some(Payload::Parameter(i.parameter_number));
        }
        Opcode::Constant => {
            let lit = i
                .literal
                .as_ref()
                .ok_or_else(|| bad(format!("{path}: a constant without a literal")))?;
            // The values are read from the literal's own shape; XLA's
            // constant is that shape, so it must be the instruction's
            // (element type and dimensions; layouts may differ).
            if let (Some(ls), Some(is)) = (&lit.shape, &i.shape) {
                if !same_literal_shape(ls, is) {
                    return Err(bad(format!(
                        "{path}: the literal's shape {} is not the instruction's {}",
                        shape_text(ls, 0).map_err(|e| within(&path, e))?,
                        shape_text(is, 0).map_err(|e| within(&path, e))?
                    )));
                }
            }
            let lit = literal_of(lit, 0).map_err(|e| within(&path, e))?;
            payload = Some(Payload::Literal(Box::new(lit)));
        }
        _ => {
            for &op in &i.operand_ids {
                operands.push(id_of(op)?);
            }
        }
    }
    Ok((operands, payload))
}

/// An integer-list attribute, typed.
fn int_list(key: &'static str, v: &[i64]) -> Field {
    Field::Typed(key, AttrValue::Ints(v.into()))
}

fn int_lists(v: &[Vec<i64>]) -> String {
    let parts: Vec<String> = v.iter().map(|g| format!("{{{}}}", join(g))).collect();
    format!("{{{}}}", parts.join(","))
}

/// One attribute of an instruction as [`Reader::fields`] finds it: the text
/// of its value in XLA's spelling, or its typed value.
enum Field {
    Text(&'static str, String),
    Typed(&'static str, AttrValue),
}

/// The arena ids of one computation's instructions: by proto id, its
/// index in the computation's list (`pos`), its place in the order they are
/// added (`rank`, the schedule's; `None`: the list's own) from `base`.
struct LocalIds<'a> {
    pos: &'a HashMap<i64, usize>,
    rank: Option<&'a [usize]>,
    base: usize,
}

impl LocalIds<'_> {
    fn get(&self, id: i64) -> Option<InstId> {
        let k = *self.pos.get(&id)?;
        let at = self.rank.map_or(k, |r| r[k]);
        Some(InstId::from_index(self.base + at))
    }
}

impl<'p> Reader<'p> {
    fn ignore(&mut self, path: String) {
        self.report.ignored.push(path);
    }

    /// The interned shape of a `ShapeProto`: written in XLA's spelling (with
    /// the checks of [`write_shape`]) and read by the parser's shape lowering
    /// once per distinct shape, so shapes pass the checks text shapes do. A
    /// proto equal to one seen before reuses its shape.
    fn shape(&mut self, s: &'p xla::ShapeProto, path: &dyn std::fmt::Display) -> Result<ShapeId> {
        let key = {
            let mut h = crate::parse::FxHasher::default();
            hash_shape(s, &mut h, 0);
            std::hash::Hasher::finish(&h)
        };
        if let Some(&(seen, id)) = self.seen_shapes.get(&key) {
            if seen == s {
                return Ok(id);
            }
        }
        let id = if plain_shape(s, 0) {
            self.intern_plain(s)
        } else {
            self.shape_from_text(s, path)?
        };
        self.seen_shapes.entry(key).or_insert((s, id));
        Ok(id)
    }

    /// Interns a shape [`plain_shape`] accepted, as the parser would lower
    /// its text.
    fn intern_plain(&mut self, s: &xla::ShapeProto) -> ShapeId {
        if s.element_type == TUPLE_TYPE {
            let elems = s
                .tuple_shapes
                .iter()
                .map(|e| self.intern_plain(e))
                .collect();
            return self.m.intern_shape(Shape::Tuple(elems));
        }
        let elem = prim_type(s.element_type).unwrap_or(PrimType::F32);
        let layout = s
            .layout
            .as_ref()
            .filter(|l| !trivial_scalar_layout(s, l))
            .map(|l| {
                let mut out = Layout::from_minor_to_major(l.minor_to_major.iter().copied());
                out.tiles = l
                    .tiles
                    .iter()
                    .map(|t| Tile(t.dimensions.iter().copied().collect()))
                    .collect();
                out.memory_space = l.memory_space;
                out
            });
        self.m.intern_shape(Shape::Array(ArrayShape {
            elem,
            dims: s.dimensions.iter().copied().collect(),
            dynamic: SmallVec::new(),
            layout,
        }))
    }

    fn shape_from_text(
        &mut self,
        s: &xla::ShapeProto,
        path: &dyn std::fmt::Display,
    ) -> Result<ShapeId> {
        self.shape_buf.clear();
        let mut text = std::mem::take(&mut self.shape_buf);
        let r = write_shape(s, 0, &mut text);
        let id = match r {
            Err(e) => Err(within(path, e)),
            Ok(()) => match self.shapes.get(text.as_str()) {
                Some(&id) => Ok(id),
                None => match crate::parse::parse_shape_into(&mut self.m, &text) {
                    Ok(id) => {
                        self.shapes.insert(text.clone(), id);
                        Ok(id)
                    }
                    Err(e) => Err(bad(format!("{path}: shape {text}: {e}"))),
                },
            },
        };
        self.shape_buf = text;
        id
    }

    /// A header, computation or instruction attribute from its value text,
    /// as the parser stores it: the kinds XLA types decoded
    /// ([`crate::attrs::decode`]), the others kept verbatim.
    fn attr(
        path: &dyn std::fmt::Display,
        op: Option<Opcode>,
        key: &str,
        value: &str,
    ) -> Result<Attr> {
        let typed = op.and_then(|op| crate::attrs::decode(key, op, value));
        let value = match typed {
            Some(v) => v.map_err(|msg| bad(format!("{path}: `{key}`: {msg}")))?,
            None => {
                if let Some(at) = crate::parse::unclosed_comment(value) {
                    return Err(bad(format!(
                        "{path}: `{key}`: a comment `/*` opened at byte {at} of the value is not closed"
                    )));
                }
                AttrValue::Raw(value.into())
            }
        };
        Ok(Attr {
            key: key.into(),
            value,
        })
    }

    fn build(&mut self) -> Result<()> {
        let p = self.p;
        if p.computations.is_empty() {
            return Err(bad("no computations"));
        }
        check_name(&p.name, "module name")?;
        let entry_id = self.entry_id()?;
        let inst_comps = inst_comps(p)?;
        let sched: HashMap<i64, &Vec<i64>> = p
            .schedule
            .iter()
            .flat_map(|s| s.sequences.iter().map(|(k, v)| (*k, &v.instruction_ids)))
            .collect();
        self.header()?;
        self.module_extras()?;
        let by_id = self.computation_order()?;
        // Every computation has its id before any body refers to it.
        for (_, c) in &by_id {
            check_name(&c.name, "computation name")?;
            let id = self.m.reserve_computation(c.name.as_str());
            self.comp_ids.insert(c.id, id);
            self.m.set_comp_proto_id(id, c.id);
        }
        for (ci, c) in by_id {
            self.computation(ci, c, entry_id, &inst_comps, sched.get(&c.id).copied())?;
        }
        self.m.entry = self.comp_ids[&entry_id];
        self.m.set_module_proto_id(p.id);
        Ok(())
    }

    /// The entry computation's proto id, once computation ids and names are
    /// known unique (recorded in `comp_names`) and no instruction calls the
    /// entry.
    fn entry_id(&mut self) -> Result<i64> {
        let p = self.p;
        // Computation ids: unique; names: unique.
        let mut names = HashSet::default();
        for c in &p.computations {
            if self.comp_names.insert(c.id, &c.name).is_some() {
                return Err(bad(format!("computation id {} appears twice", c.id)));
            }
            if !names.insert(&c.name) {
                return Err(bad(format!("computation name `{}` appears twice", c.name)));
            }
        }
        let entry_id = if p.entry_computation_id != 0 || self.comp_names.contains_key(&0) {
            p.entry_computation_id
        } else {
            p.computations
                .iter()
                .find(|c| c.name == p.entry_computation_name)
                .map(|c| c.id)
                .ok_or_else(|| bad("no entry computation"))?
        };
        if !self.comp_names.contains_key(&entry_id) {
            return Err(bad(format!(
                "entry computation id {entry_id} does not exist"
            )));
        }
        // The entry computation is the program: no instruction calls it.
        // (A proto whose entry is, say, an async op's wrapped computation
        // reads in XLA as a module whose text has no ENTRY; found by
        // fuzzing, where the async shorthand then left the module without
        // one.)
        for c in &p.computations {
            if let Some(i) = c
                .instructions
                .iter()
                .find(|i| i.called_computation_ids.contains(&entry_id))
            {
                return Err(bad(format!(
                    "the entry computation (id {entry_id}) is called by instruction `{}` of \
                     computation `{}`; an entry computation is called by no instruction",
                    i.name, c.name
                )));
            }
        }
        Ok(entry_id)
    }

    /// The module's header attributes, in the order XLA prints them.
    fn header(&mut self) -> Result<()> {
        let p = self.p;
        let mut header: Vec<(&str, AttrValue)> = Vec::new();
        if p.schedule.is_some() {
            header.push(("is_scheduled", AttrValue::Bool(true)));
        }
        if let Some(hs) = &p.host_program_shape {
            let path = "host_program_shape";
            let params = hs
                .parameters
                .iter()
                .map(|s| self.shape(s, &path))
                .collect::<Result<_>>()?;
            let result = match &hs.result {
                Some(s) => self.shape(s, &path)?,
                None => self.m.intern_shape(Shape::Tuple(SmallVec::new())),
            };
            header.push((
                "entry_computation_layout",
                AttrValue::ProgramLayout(Box::new(ProgramLayout { params, result })),
            ));
        }
        if let Some(a) = &p.input_output_alias {
            if !a.entries.is_empty() {
                let mut a = a.clone();
                for e in &mut a.entries {
                    // The text knows may-alias (1) and must-alias (2).
                    if e.kind != 2 {
                        e.kind = 1;
                    }
                }
                header.push((
                    "input_output_alias",
                    AttrValue::InputOutputAlias(Box::new(a)),
                ));
            }
        }
        if let Some(b) = &p.buffer_donor {
            if !b.entries.is_empty() {
                header.push(("buffer_donor", AttrValue::BufferDonor(Box::new(b.clone()))));
            }
        }
        if let Some(f) = &p.frontend_attributes {
            if !f.map.is_empty() {
                let f = ax::frontend_attributes_from_proto(f)
                    .map_err(|e| bad(format!("frontend_attributes: {e}")))?;
                header.push((
                    "frontend_attributes",
                    AttrValue::FrontendAttributes(Box::new(f)),
                ));
            }
        }
        if let Some(t) = &p.original_value_recovery_table {
            if !t.entries.is_empty() {
                let t = self.recovery_table(t)?;
                header.push((
                    "origin_recovery_table",
                    AttrValue::RecoveryTable(Box::new(t)),
                ));
            }
        }
        for (k, value) in header {
            self.m.attrs.push(Attr {
                key: k.into(),
                value,
            });
        }
        Ok(())
    }

    /// The stack frame index, the module's config, and the module fields the
    /// IR does not hold (reported).
    fn module_extras(&mut self) -> Result<()> {
        let p = self.p;
        if let Some(sf) = &p.stack_frame_index {
            check_stack_frames(sf)?;
            let empty = sf.file_names.is_empty()
                && sf.function_names.is_empty()
                && sf.file_locations.is_empty()
                && sf.stack_frames.is_empty();
            if !empty {
                self.m.stack_frames = Some(Box::new(sf.clone()));
            }
        }
        let config = proto_config(p)?;
        if !config.is_empty() {
            self.m.config = Some(Box::new(config));
        }
        // Fields of the module the IR does not hold.
        for (set, name) in [
            (
                !p.cross_program_prefetches.is_empty(),
                "cross_program_prefetches",
            ),
            (p.is_dynamic, "is_dynamic"),
            (p.use_auto_spmd_partitioning, "use_auto_spmd_partitioning"),
            (!p.profile_info.is_empty(), "profile_info"),
            (!p.device_type.is_empty(), "device_type"),
            (!p.payloads.is_empty(), "payloads"),
            (p.pjrt_id.is_some(), "pjrt_id"),
        ] {
            if set {
                self.ignore(name.into());
            }
        }
        Ok(())
    }

    /// The computations with their indices in the proto, in the order they
    /// are added: by id where callees come first so, else as listed. Ordered
    /// by id, the printed text reads back into XLA as the module XLA reads
    /// from the proto (the proto's lists are in XLA's post-order; the ids
    /// keep the order of the text XLA read).
    fn computation_order(&self) -> Result<Vec<(usize, &'p xla::HloComputationProto)>> {
        let p = self.p;
        // Computations in the order of their ids, as XLA's `CreateFromProto`
        // sorts them: XLA's text of a module lists callees by its call-graph
        // post-order, which starts from this order (a module XLA read from
        // text keeps the text's order in its ids, not in the proto's
        // post-ordered list), so our text must list them in it for XLA to
        // read the module it reads from the proto. Ids that put a caller
        // before its callee (a compiler's, not a text's) keep the proto's
        // order (XLA's post-order: callees first).
        callees_listed_first(&p.computations)?;
        let mut by_id: Vec<(usize, &xla::HloComputationProto)> =
            p.computations.iter().enumerate().collect();
        by_id.sort_by_key(|(_, c)| c.id);
        let callees_first = {
            let pos: HashMap<i64, usize> = by_id
                .iter()
                .enumerate()
                .map(|(k, (_, c))| (c.id, k))
                .collect();
            by_id.iter().enumerate().all(|(k, (_, c))| {
                c.instructions.iter().all(|i| {
                    i.called_computation_ids
                        .iter()
                        .all(|callee| pos.get(callee).is_none_or(|&at| at < k))
                })
            })
        };
        if !callees_first || !self.by_ids {
            by_id.sort_by_key(|&(k, _)| k);
        }
        Ok(by_id)
    }

    /// `original_value_recovery_table` as the header's table: entries in
    /// XLA's order (an original array twice is an error, as in text), each
    /// recovery module read as a module of its own (the fields it holds that
    /// the IR does not are reported under the entry's path).
    fn recovery_table(
        &mut self,
        t: &xla::OriginalValueRecoveryTableProto,
    ) -> Result<ax::RecoveryTable> {
        let array = |a: &Option<xla::OriginalArrayProto>| match a {
            Some(a) => (a.instruction_name.clone(), a.shape_index.clone()),
            None => (String::new(), Vec::new()),
        };
        let mut entries = Vec::with_capacity(t.entries.len());
        for (k, e) in t.entries.iter().enumerate() {
            let path = format!("original_value_recovery_table.entries[{k}].recovery_module");
            let module = match &e.recovery_module {
                Some(m) => {
                    let (m, report) = module_from_proto_ordered(m, self.by_ids).map_err(|err| {
                        bad(format!(
                            "{path}: {}",
                            err.to_string()
                                .trim_start_matches("invalid module: ")
                                .trim_start_matches("invalid HloModuleProto: ")
                        ))
                    })?;
                    for f in report.ignored {
                        self.ignore(format!("{path}.{f}"));
                    }
                    Some(Box::new(m))
                }
                None => None,
            };
            entries.push(ax::RecoveryEntry {
                old: array(&e.old_original_array),
                new: array(&e.new_original_array),
                module,
            });
        }
        ax::RecoveryTable::sorted(entries)
            .map_err(|e| bad(format!("original_value_recovery_table: {e}")))
    }

    fn comp_id(&self, id: i64) -> Result<CompId> {
        self.comp_ids
            .get(&id)
            .copied()
            .ok_or_else(|| bad(format!("called computation id {id} does not exist")))
    }

    fn computation(
        &mut self,
        ci: usize,
        c: &'p xla::HloComputationProto,
        entry_id: i64,
        inst_comps: &HashMap<i64, i64>,
        schedule: Option<&Vec<i64>>,
    ) -> Result<()> {
        // Each instruction's index in the computation's list, by proto id.
        let mut pos: HashMap<i64, usize> =
            HashMap::with_capacity_and_hasher(c.instructions.len(), Default::default());
        pos.extend(c.instructions.iter().enumerate().map(|(k, i)| (i.id, k)));
        if !pos.contains_key(&c.root_id) {
            return Err(no_root(c));
        }
        // Instructions get their arena ids in schedule order (else id order),
        // so operands defined later in the computation resolve like forward
        // references in text: `rank[k]` is the place of instruction `k` in it.
        let (order, rank) = match schedule {
            Some(ids) => scheduled_order(c, &pos, ids)?,
            // Unscheduled: in the order of their ids, as XLA's
            // `CreateFromProto` sorts them (see the computations above),
            // unless the ids put a use before its definition (a compiler's
            // ids): then in the proto's order (XLA's post-order).
            None => unscheduled_order(c, &pos, self.by_ids),
        };
        let ids = LocalIds {
            pos: &pos,
            rank: rank.as_deref(),
            base: self.m.num_insts(),
        };
        let cid = self.comp_ids[&c.id];
        let mut params: Vec<(i64, InstId)> = Vec::new();
        for &k in &order {
            // Error paths give the instruction's index in the proto.
            let path = InstPath { ci, ii: k };
            let inst = &c.instructions[k];
            let id = self.instruction(&path, inst, c, cid, inst_comps, &ids)?;
            if inst.opcode == "parameter" {
                params.push((inst.parameter_number, id));
            }
        }
        let param_ids = numbered_params(c, params)?;
        let mut attrs = Vec::new();
        if !c.execution_thread.is_empty() && c.execution_thread != "main" {
            attrs.push(Attr {
                key: "execution_thread".into(),
                value: AttrValue::Str(c.execution_thread.as_bytes().into()),
            });
        }
        let comp = self.m.comp_mut(cid);
        comp.root = ids.get(c.root_id).ok_or_else(|| no_root(c))?;
        comp.params = param_ids;
        comp.attrs = attrs;
        comp.is_entry = c.id == entry_id;
        self.m.place_computation(cid);
        Ok(())
    }

    fn instruction(
        &mut self,
        path: &InstPath,
        i: &'p xla::HloInstructionProto,
        c: &xla::HloComputationProto,
        cid: CompId,
        inst_comps: &HashMap<i64, i64>,
        ids: &LocalIds<'_>,
    ) -> Result<InstId> {
        let opcode = Opcode::from_name(&i.opcode)
            .ok_or_else(|| bad(format!("{path}: unknown opcode `{}`", i.opcode)))?;
        check_name(&i.name, "instruction name")?;
        let shape = i
            .shape
            .as_ref()
            .ok_or_else(|| bad(format!("{path}: no shape")))?;
        let shape = self.shape(shape, path)?;
        let id_of = |id: i64| -> Result<InstId> {
            match ids.get(id) {
                Some(x) => Ok(x),
                None => match inst_comps.get(&id) {
                    Some(&other) if other != c.id => Err(bad(format!(
                        "{path}: instruction id {id} belongs to another computation"
                    ))),
                    _ => Err(bad(format!("{path}: instruction id {id} does not exist"))),
                },
            }
        };
        let (operands, payload) = operands_and_payload(path, opcode, i, &id_of)?;
        let mut attrs: Vec<Attr> = Vec::new();
        self.calls(path, opcode, i, c, ids, &mut attrs)?;
        self.field_attrs(
            At {
                path,
                op: opcode,
                i,
            },
            &mut attrs,
        )?;
        if !i.control_predecessor_ids.is_empty() {
            let preds: SmallVec<[InstId; 2]> = i
                .control_predecessor_ids
                .iter()
                .map(|&id| id_of(id))
                .collect::<Result<_>>()?;
            attrs.push(Attr {
                key: "control-predecessors".into(),
                value: AttrValue::Insts(preds),
            });
        }
        let id = InstId::from_index(self.m.num_insts());
        // As the parser: a send or recv-done after its operand takes the
        // data shape from it.
        let first = operands.first().copied().filter(|&op| op < id);
        let inst = Instruction {
            parent: cid,
            name: i.name.as_str().into(),
            opcode,
            operands,
            shape,
            attrs,
            payload,
        };
        let got = crate::parse::append_lowered(&mut self.m, inst, first);
        self.m.set_inst_proto_id(got, i.id);
        Ok(got)
    }

    /// The computations `i` calls, as the attributes the text names them by.
    fn calls(
        &self,
        path: &InstPath,
        opcode: Opcode,
        i: &xla::HloInstructionProto,
        c: &xla::HloComputationProto,
        ids: &LocalIds<'_>,
        attrs: &mut Vec<Attr>,
    ) -> Result<()> {
        // Called computations.
        let called: SmallVec<[CompId; 2]> = i
            .called_computation_ids
            .iter()
            .map(|&id| self.comp_id(id))
            .collect::<Result<_>>()?;
        let mut call = |key: &str, v: AttrValue| {
            attrs.push(Attr {
                key: key.into(),
                value: v,
            })
        };
        match opcode {
            Opcode::While => {
                let [body, cond] = called[..] else {
                    return Err(bad(format!("{path}: a while calls a body and a condition")));
                };
                call("condition", AttrValue::Comp(cond));
                call("body", AttrValue::Comp(body));
            }
            Opcode::Conditional => {
                let pred = i.operand_ids.first().and_then(|&op| {
                    ids.pos
                        .get(&op)
                        .and_then(|&k| c.instructions[k].shape.as_ref())
                });
                if pred.is_some_and(|s| s.element_type == 1) && called.len() == 2 {
                    call("true_computation", AttrValue::Comp(called[0]));
                    call("false_computation", AttrValue::Comp(called[1]));
                } else {
                    call("branch_computations", AttrValue::Comps(called.clone()));
                }
            }
            Opcode::SelectAndScatter => {
                let [sel, sc] = called[..] else {
                    return Err(bad(format!(
                        "{path}: select-and-scatter calls select and scatter"
                    )));
                };
                call("select", AttrValue::Comp(sel));
                call("scatter", AttrValue::Comp(sc));
            }
            Opcode::Fusion | Opcode::AsyncStart | Opcode::AsyncUpdate | Opcode::AsyncDone => {
                if let [one] = called[..] {
                    call("calls", AttrValue::Comp(one));
                } else if !called.is_empty() {
                    return Err(bad(format!("{path}: {} calls one computation", i.opcode)));
                }
            }
            Opcode::CustomCall => {
                if !called.is_empty() {
                    call("called_computations", AttrValue::Comps(called.clone()));
                }
            }
            _ => match called[..] {
                [] => {}
                [one] => call("to_apply", AttrValue::Comp(one)),
                _ => call("called_computations", AttrValue::Comps(called.clone())),
            },
        }
        Ok(())
    }

    /// Every other field ([`Reader::fields`]) as attributes, decoded or
    /// checked as the text's are.
    fn field_attrs(&mut self, at: At<'_, 'p>, attrs: &mut Vec<Attr>) -> Result<()> {
        let At {
            path, op: opcode, ..
        } = at;
        let mut fields = std::mem::take(&mut self.fields);
        fields.clear();
        self.fields(at, &mut fields)?;
        attrs.reserve(fields.len());
        for f in fields.drain(..) {
            attrs.push(match f {
                Field::Text(key, value) => Self::attr(path, Some(opcode), key, &value)?,
                Field::Typed(key, value) => {
                    // The per-opcode kind table the text decoding applies.
                    crate::attrs::check_kind(key, opcode, &value)
                        .map_err(|m| bad(format!("{path}: `{key}`: {m}")))?;
                    Attr {
                        key: key.into(),
                        value,
                    }
                }
            });
        }
        self.fields = fields;
        Ok(())
    }

    /// Every other field of an instruction as an attribute: typed where the
    /// IR's type for the key is a plain value (integers, booleans, integer
    /// lists: [`crate::attrs::value_kind`]), or typed from its message
    /// (shardings, replica groups, windows, metadata, ...), else as XLA's
    /// text of the value, decoded as the parser decodes it
    /// ([`crate::attrs::decode`]). [`Reader::field_attrs`] checks the typed
    /// ones against the opcode's kind table ([`crate::attrs::check_kind`]).
    fn fields(&mut self, at: At<'_, 'p>, a: &mut Vec<Field>) -> Result<()> {
        self.dimension_fields(at, a)?;
        self.window_fields(at, a)?;
        self.dot_fields(at, a)?;
        self.op_kind_fields(at, a)?;
        self.collective_fields(at, a)?;
        self.numeric_fields(at, a)?;
        self.gather_scatter_fields(at, a)?;
        self.solver_fields(at, a)?;
        self.transfer_fields(at, a)?;
        self.annotation_fields(at, a)?;
        self.sharding_config_fields(at, a)?;
        self.ignored_fields(at);
        Ok(())
    }

    /// Dimension lists, a tuple index, slices and dynamic slice sizes.
    fn dimension_fields(&mut self, at: At<'_, 'p>, a: &mut Vec<Field>) -> Result<()> {
        let At { op, i, .. } = at;
        if !i.dimensions.is_empty() {
            match op {
                Opcode::Iota => a.push(Field::Typed(
                    "iota_dimension",
                    AttrValue::Int(i.dimensions[0]),
                )),
                Opcode::Reshape => a.push(Field::Typed(
                    "inferred_dimension",
                    AttrValue::Int(i.dimensions[0]),
                )),
                _ => a.push(int_list("dimensions", &i.dimensions)),
            }
        } else if op == Opcode::Iota {
            a.push(Field::Typed("iota_dimension", AttrValue::Int(0)));
        } else if op == Opcode::Broadcast
            || crate::semantic::required_attrs(op).contains(&"dimensions")
        {
            // An empty list is the proto's default: nothing is written. A
            // broadcast has `dimensions=` as XLA prints it, `{}` also for a
            // non-scalar operand, which XLA reads (found by fuzzing: left
            // out, such a broadcast was refused as one that needs it).
            a.push(int_list("dimensions", &[]));
        }
        if op == Opcode::GetTupleElement {
            a.push(Field::Typed("index", AttrValue::Int(i.tuple_index)));
        }
        // A slice of a scalar has no dimensions (nothing written), and
        // still its `slice={}`.
        if !i.slice_dimensions.is_empty() || op == Opcode::Slice {
            let dims = i
                .slice_dimensions
                .iter()
                .map(|s| SliceDim {
                    start: s.start,
                    limit: s.limit,
                    stride: s.stride,
                })
                .collect();
            a.push(Field::Typed("slice", AttrValue::Slice(dims)));
        }
        if !i.dynamic_slice_sizes.is_empty() {
            if matches!(
                op,
                Opcode::CollectivePermute | Opcode::CollectivePermuteStart
            ) {
                a.push(Field::Text(
                    "slice_sizes",
                    format!(
                        "{{{}}}",
                        permute_slice_sizes(op, i.shape.as_ref(), &i.dynamic_slice_sizes)
                    ),
                ));
            } else {
                a.push(int_list("dynamic_slice_sizes", &i.dynamic_slice_sizes));
            }
        } else if op == Opcode::DynamicSlice {
            // An empty list is the proto's default; XLA prints
            // `dynamic_slice_sizes={}` and reads it (found by fuzzing: left
            // out, the dynamic-slice was refused as one that needs it).
            a.push(int_list("dynamic_slice_sizes", &[]));
        }
        Ok(())
    }

    /// A window, convolution dimension numbers and group counts, a padding.
    fn window_fields(&mut self, at: At<'_, 'p>, a: &mut Vec<Field>) -> Result<()> {
        let At { path, op, i } = at;
        let ebad = |m: String| bad(format!("{path}: {m}"));
        if let Some(w) = i.window.as_ref().filter(|w| !w.dimensions.is_empty()) {
            let dims = w
                .dimensions
                .iter()
                .map(|x| WindowDim {
                    size: x.size,
                    stride: x.stride,
                    pad_lo: x.padding_low,
                    pad_hi: x.padding_high,
                    lhs_dilation: x.base_dilation,
                    rhs_dilation: x.window_dilation,
                    reversal: x.window_reversal,
                })
                .collect();
            a.push(Field::Typed("window", AttrValue::Window(dims)));
        }
        if let Some(cd) = i
            .convolution_dimension_numbers
            .as_ref()
            .filter(|cd| ***cd != xla::ConvolutionDimensionNumbers::default())
        {
            let d = conv_dims(cd).map_err(ebad)?;
            a.push(Field::Typed("dim_labels", AttrValue::ConvDims(Box::new(d))));
        }
        if matches!(op, Opcode::Convolution) {
            if i.feature_group_count > 1 {
                a.push(Field::Typed(
                    "feature_group_count",
                    AttrValue::Int(i.feature_group_count),
                ));
            }
            if i.batch_group_count > 1 {
                a.push(Field::Typed(
                    "batch_group_count",
                    AttrValue::Int(i.batch_group_count),
                ));
            }
        }
        if let Some(p) = &i.padding_config {
            let dims = p
                .dimensions
                .iter()
                .map(|d| PadDim {
                    lo: d.edge_padding_low,
                    hi: d.edge_padding_high,
                    interior: d.interior_padding,
                })
                .collect();
            a.push(Field::Typed("padding", AttrValue::Padding(dims)));
        }
        Ok(())
    }

    /// Dot and ragged-dot dimension numbers, operand precisions and the dot
    /// algorithm.
    fn dot_fields(&mut self, at: At<'_, 'p>, a: &mut Vec<Field>) -> Result<()> {
        let At { path, i, .. } = at;
        let ebad = |m: String| bad(format!("{path}: {m}"));
        let dot = i.dot_dimension_numbers.as_deref().or(i
            .ragged_dot_dimension_numbers
            .as_ref()
            .and_then(|r| r.dot_dimension_numbers.as_ref()));
        if let Some(d) = dot {
            if !d.lhs_batch_dimensions.is_empty() {
                a.push(int_list("lhs_batch_dims", &d.lhs_batch_dimensions));
            }
            if !d.lhs_contracting_dimensions.is_empty() {
                a.push(int_list(
                    "lhs_contracting_dims",
                    &d.lhs_contracting_dimensions,
                ));
            }
            if !d.rhs_batch_dimensions.is_empty() {
                a.push(int_list("rhs_batch_dims", &d.rhs_batch_dimensions));
            }
            if !d.rhs_contracting_dimensions.is_empty() {
                a.push(int_list(
                    "rhs_contracting_dims",
                    &d.rhs_contracting_dimensions,
                ));
            }
        }
        if let Some(r) = &i.ragged_dot_dimension_numbers {
            if !r.lhs_ragged_dimensions.is_empty() {
                a.push(int_list("lhs_ragged_dims", &r.lhs_ragged_dimensions));
            }
            if !r.rhs_group_dimensions.is_empty() {
                a.push(int_list("rhs_group_dims", &r.rhs_group_dimensions));
            }
        }
        if let Some(pc) = &i.precision_config {
            if pc.operand_precision.iter().any(|&p| p != 0) {
                // XLA's PrecisionConfig.Precision values, by number (an
                // unknown one is an error, not `default`: found by fuzzing).
                let values = pc
                    .operand_precision
                    .iter()
                    .map(|&p| {
                        u8::try_from(p)
                            .ok()
                            .filter(|&k| usize::from(k) < crate::attrs::validate::PRECISIONS.len())
                            .ok_or_else(|| ebad(format!("unknown operand precision {p}")))
                    })
                    .collect::<Result<_>>()?;
                a.push(Field::Typed(
                    "operand_precision",
                    AttrValue::Precisions(values),
                ));
            }
            if pc.algorithm != 0 {
                let n = usize::try_from(pc.algorithm)
                    .ok()
                    .and_then(|k| ax::DOT_ALGORITHMS.get(k))
                    .ok_or_else(|| ebad(format!("unknown dot algorithm {}", pc.algorithm)))?;
                a.push(Field::Text("algorithm", n.to_string()));
            }
        }
        Ok(())
    }

    /// A comparison's direction and type, a fusion's kind, a custom call's
    /// target, side effect, layout constraints, schedule, API version and
    /// literal; `constrain_layout` on other opcodes.
    fn op_kind_fields(&mut self, at: At<'_, 'p>, a: &mut Vec<Field>) -> Result<()> {
        let At { path, op, i } = at;
        let ebad = |m: String| bad(format!("{path}: {m}"));
        if op == Opcode::Compare {
            let d = crate::attrs::validate::direction(&i.comparison_direction)
                .map_err(|m| ebad(format!("`direction`: {m}")))?;
            a.push(Field::Typed("direction", AttrValue::Enum(d)));
            if !i.comparison_type.is_empty() {
                a.push(Field::Text("type", i.comparison_type.clone()));
            }
        }
        if op == Opcode::Fusion {
            a.push(Field::Text("kind", i.fusion_kind.clone()));
        }
        if op == Opcode::CustomCall {
            a.push(Field::Typed(
                "custom_call_target",
                AttrValue::Str(i.custom_call_target.as_bytes().into()),
            ));
            if i.custom_call_has_side_effect {
                a.push(Field::Typed(
                    "custom_call_has_side_effect",
                    AttrValue::Bool(true),
                ));
            }
            if i.constrain_layout {
                let shapes = i
                    .operand_shapes_with_layout
                    .iter()
                    .map(|s| self.shape(s, path))
                    .collect::<Result<_>>()?;
                a.push(Field::Typed(
                    "operand_layout_constraints",
                    AttrValue::Shapes(shapes),
                ));
            }
            if i.custom_call_schedule != 0 {
                a.push(Field::Text(
                    "schedule",
                    match i.custom_call_schedule {
                        1 => "SCHEDULE_LATEST",
                        2 => "SCHEDULE_EARLIEST",
                        v => return Err(ebad(format!("unknown custom call schedule {v}"))),
                    }
                    .to_string(),
                ));
            }
            if i.custom_call_api_version != 0 && i.custom_call_api_version != 1 {
                a.push(Field::Text(
                    "api_version",
                    match i.custom_call_api_version {
                        2 => "API_VERSION_STATUS_RETURNING",
                        3 => "API_VERSION_STATUS_RETURNING_UNIFIED",
                        4 => "API_VERSION_TYPED_FFI",
                        v => return Err(ebad(format!("unknown api version {v}"))),
                    }
                    .to_string(),
                ));
            }
            if let Some(l) = &i.literal {
                let s = l
                    .shape
                    .as_ref()
                    .ok_or_else(|| ebad("a literal without a shape".into()))?;
                // The values are read from each element's own shape: they
                // must be the shapes the literal declares.
                if !tuple_shapes_agree(l, 0) {
                    return Err(ebad(
                        "a tuple literal whose elements' shapes are not its own".into(),
                    ));
                }
                let shape = self.shape(s, path)?;
                let lit = literal_of(l, 0)?;
                a.push(Field::Typed(
                    "literal",
                    AttrValue::Literal(shape, Box::new(lit)),
                ));
            }
        } else if i.constrain_layout {
            a.push(Field::Typed("constrain_layout", AttrValue::Bool(true)));
        }
        Ok(())
    }

    /// Output-operand aliasing, channels, replica groups and the collectives'
    /// flags and source-target pairs.
    fn collective_fields(&mut self, at: At<'_, 'p>, a: &mut Vec<Field>) -> Result<()> {
        let At { path, op, i } = at;
        let ebad = |m: String| bad(format!("{path}: {m}"));
        if !i.output_operand_aliasing.is_empty() {
            a.push(Field::Typed(
                "output_to_operand_aliasing",
                AttrValue::Aliasing(i.output_operand_aliasing.clone().into_boxed_slice()),
            ));
        }
        if i.channel_id > 0 {
            a.push(Field::Typed("channel_id", AttrValue::Int(i.channel_id)));
        }
        let lists = |groups: &[xla::ReplicaGroup]| {
            ax::ReplicaGroups::List(groups.iter().map(|g| g.replica_ids.clone()).collect())
        };
        let groups = if let Some(g) = &i.mesh_axes_replica_group_list {
            Some(ax::ReplicaGroups::Mesh(
                ax::mesh_replica_groups_from_proto(g)
                    .map_err(|e| ebad(format!("mesh_axes_replica_group_list: {e}")))?,
            ))
        } else if let Some(l) = &i.iota_collective_device_list {
            Some(ax::ReplicaGroups::Iota(ax::IotaList {
                dims: vec![l.num_replica_groups, l.num_devices_per_group],
                reshape: l.iota_reshape_dims.clone(),
                perm: if l.iota_transpose_perm.is_empty() {
                    (0..l.iota_reshape_dims.len() as i64).collect()
                } else {
                    l.iota_transpose_perm
                        .iter()
                        .map(|&p| i64::from(p))
                        .collect()
                },
            }))
        } else if let Some(l) = &i.collective_device_list {
            Some(lists(&l.replica_groups))
        } else if !i.replica_groups.is_empty() {
            Some(lists(&i.replica_groups))
        } else {
            None
        };
        let collective = matches!(
            op,
            Opcode::AllReduce
                | Opcode::AllReduceStart
                | Opcode::AllGather
                | Opcode::AllGatherStart
                | Opcode::AllToAll
                | Opcode::ReduceScatter
                | Opcode::CollectiveBroadcast
                | Opcode::RaggedAllToAll
        );
        if let Some(g) = groups.or(collective.then(|| ax::ReplicaGroups::List(Vec::new()))) {
            a.push(Field::Typed(
                "replica_groups",
                AttrValue::ReplicaGroups(Box::new(g)),
            ));
        }
        if i.use_global_device_ids {
            a.push(Field::Typed("use_global_device_ids", AttrValue::Bool(true)));
        }
        if !i.source_target_pairs.is_empty() {
            let v: Vec<Vec<i64>> = i
                .source_target_pairs
                .iter()
                .map(|p| vec![p.source, p.target])
                .collect();
            a.push(Field::Text("source_target_pairs", int_lists(&v)));
        } else if matches!(
            op,
            Opcode::CollectivePermute | Opcode::CollectivePermuteStart
        ) {
            a.push(Field::Text("source_target_pairs", "{}".into()));
        }
        if i.is_host_transfer {
            a.push(Field::Typed("is_host_transfer", AttrValue::Bool(true)));
        }
        if i.is_stable {
            a.push(Field::Typed("is_stable", AttrValue::Bool(true)));
        }
        Ok(())
    }

    /// Batch-norm epsilon and feature index, reduce-precision bits, an FFT's
    /// type and lengths, random distributions and algorithms.
    fn numeric_fields(&mut self, at: At<'_, 'p>, a: &mut Vec<Field>) -> Result<()> {
        let At { path, op, i } = at;
        let ebad = |m: String| bad(format!("{path}: {m}"));
        if matches!(
            op,
            Opcode::BatchNormGrad | Opcode::BatchNormInference | Opcode::BatchNormTraining
        ) {
            a.push(Field::Typed("epsilon", AttrValue::Float(i.epsilon)));
            a.push(Field::Typed(
                "feature_index",
                AttrValue::Int(i.feature_index),
            ));
        }
        if op == Opcode::ReducePrecision {
            a.push(Field::Typed(
                "exponent_bits",
                AttrValue::Int(i64::from(i.exponent_bits)),
            ));
            a.push(Field::Typed(
                "mantissa_bits",
                AttrValue::Int(i64::from(i.mantissa_bits)),
            ));
        }
        if op == Opcode::Fft {
            a.push(Field::Text(
                "fft_type",
                match i.fft_type {
                    0 => "FFT",
                    1 => "IFFT",
                    2 => "RFFT",
                    3 => "IRFFT",
                    v => return Err(ebad(format!("unknown fft type {v}"))),
                }
                .to_string(),
            ));
            a.push(int_list("fft_length", &i.fft_length));
        }
        if op == Opcode::Rng {
            a.push(Field::Text(
                "distribution",
                match i.distribution {
                    1 => "rng_uniform",
                    2 => "rng_normal",
                    v => return Err(ebad(format!("unknown distribution {v}"))),
                }
                .to_string(),
            ));
        }
        if op == Opcode::RngBitGenerator {
            a.push(Field::Text(
                "algorithm",
                match i.rng_algorithm {
                    0 => "rng_default",
                    1 => "rng_three_fry",
                    2 => "rng_philox",
                    v => return Err(ebad(format!("unknown rng algorithm {v}"))),
                }
                .to_string(),
            ));
        }
        Ok(())
    }

    /// Gather and scatter dimension numbers and index flags.
    fn gather_scatter_fields(&mut self, at: At<'_, 'p>, a: &mut Vec<Field>) -> Result<()> {
        let At { i, .. } = at;
        if let Some(g) = &i.gather_dimension_numbers {
            a.push(int_list("offset_dims", &g.offset_dims));
            a.push(int_list("collapsed_slice_dims", &g.collapsed_slice_dims));
            a.push(int_list("start_index_map", &g.start_index_map));
            if !g.operand_batching_dims.is_empty() {
                a.push(int_list("operand_batching_dims", &g.operand_batching_dims));
            }
            if !g.start_indices_batching_dims.is_empty() {
                a.push(int_list(
                    "start_indices_batching_dims",
                    &g.start_indices_batching_dims,
                ));
            }
            a.push(Field::Typed(
                "index_vector_dim",
                AttrValue::Int(g.index_vector_dim),
            ));
            // Checked against the opcode with the other typed fields (on
            // any other opcode `slice_sizes` is a list of lists).
            a.push(Field::Typed(
                "slice_sizes",
                AttrValue::Ints(i.gather_slice_sizes.as_slice().into()),
            ));
        }
        if let Some(s) = &i.scatter_dimension_numbers {
            a.push(int_list("update_window_dims", &s.update_window_dims));
            a.push(int_list("inserted_window_dims", &s.inserted_window_dims));
            a.push(int_list(
                "scatter_dims_to_operand_dims",
                &s.scatter_dims_to_operand_dims,
            ));
            if !s.input_batching_dims.is_empty() {
                a.push(int_list("input_batching_dims", &s.input_batching_dims));
            }
            if !s.scatter_indices_batching_dims.is_empty() {
                a.push(int_list(
                    "scatter_indices_batching_dims",
                    &s.scatter_indices_batching_dims,
                ));
            }
            a.push(Field::Typed(
                "index_vector_dim",
                AttrValue::Int(s.index_vector_dim),
            ));
        }
        if i.indices_are_sorted {
            a.push(Field::Typed("indices_are_sorted", AttrValue::Bool(true)));
        }
        if i.unique_indices {
            a.push(Field::Typed("unique_indices", AttrValue::Bool(true)));
        }
        Ok(())
    }

    /// Top-k, the rng state's delta, triangular-solve and Cholesky options.
    fn solver_fields(&mut self, at: At<'_, 'p>, a: &mut Vec<Field>) -> Result<()> {
        let At { path, op, i } = at;
        let ebad = |m: String| bad(format!("{path}: {m}"));
        if op == Opcode::Topk {
            a.push(Field::Typed("k", AttrValue::Int(i.k)));
            if i.largest {
                a.push(Field::Typed("largest", AttrValue::Bool(true)));
            }
        }
        if op == Opcode::RngGetAndUpdateState {
            a.push(Field::Typed("delta", AttrValue::Int(i.delta)));
        }
        if let Some(t) = &i.triangular_solve_options {
            a.push(Field::Typed("left_side", AttrValue::Bool(t.left_side)));
            a.push(Field::Typed("lower", AttrValue::Bool(t.lower)));
            a.push(Field::Typed(
                "unit_diagonal",
                AttrValue::Bool(t.unit_diagonal),
            ));
            a.push(Field::Text(
                "transpose_a",
                match t.transpose_a {
                    1 => "NO_TRANSPOSE",
                    2 => "TRANSPOSE",
                    3 => "ADJOINT",
                    v => return Err(ebad(format!("unknown transpose_a {v}"))),
                }
                .to_string(),
            ));
        }
        if let Some(ch) = &i.cholesky_options {
            a.push(Field::Typed("lower", AttrValue::Bool(ch.lower)));
        }
        Ok(())
    }

    /// Infeed and outfeed, parameter replication, domains, the async
    /// execution thread, the cross-program prefetch index.
    fn transfer_fields(&mut self, at: At<'_, 'p>, a: &mut Vec<Field>) -> Result<()> {
        let At { path, op, i } = at;
        let ebad = |m: String| bad(format!("{path}: {m}"));
        if let Some(s) = &i.outfeed_shape {
            if op == Opcode::Outfeed {
                let s = self.shape(s, path)?;
                a.push(Field::Typed("outfeed_shape", AttrValue::Shape(s)));
            }
        }
        if !i.outfeed_config.is_empty() {
            a.push(Field::Typed(
                "outfeed_config",
                AttrValue::Str(i.outfeed_config.as_slice().into()),
            ));
        }
        if !i.infeed_config.is_empty() {
            a.push(Field::Typed(
                "infeed_config",
                AttrValue::Str(i.infeed_config.as_slice().into()),
            ));
        }
        if let Some(pr) = &i.parameter_replication {
            if !pr.replicated_at_leaf_buffers.is_empty() {
                a.push(Field::Typed(
                    "parameter_replication",
                    AttrValue::Bools(pr.replicated_at_leaf_buffers.as_slice().into()),
                ));
            }
        }
        if let (Some(en), Some(ex)) = (&i.domain_entry_sharding, &i.domain_exit_sharding) {
            let sharding = |s| ax::sharding_from_proto(s).map_err(|e| ebad(format!("domain: {e}")));
            // The proto's entry sharding is the text's `exit` (see the writer).
            let d = ax::DomainShardings {
                entry: sharding(ex)?,
                exit: sharding(en)?,
            };
            a.push(Field::Typed("domain", AttrValue::Domain(Box::new(d))));
        }
        if !i.async_execution_thread.is_empty() && i.async_execution_thread != "main" {
            a.push(Field::Typed(
                "async_execution_thread",
                AttrValue::Str(i.async_execution_thread.as_bytes().into()),
            ));
        }
        if let Some(x) = i.cross_program_prefetch_index {
            a.push(Field::Typed(
                "cross_program_prefetch_index",
                AttrValue::Int(i64::from(x)),
            ));
        }
        Ok(())
    }

    /// Result accuracy, statistics, sparsity, the original value, a scan's
    /// carries and flags.
    fn annotation_fields(&mut self, at: At<'_, 'p>, a: &mut Vec<Field>) -> Result<()> {
        let At { path, op, i } = at;
        let ebad = |m: String| bad(format!("{path}: {m}"));
        if let Some(r) = &i.result_accuracy {
            if !crate::semantic::takes_result_accuracy(op) {
                // XLA's proto reader sets it only on the ops its text parser
                // takes it on, and drops it elsewhere: reported, not kept.
                self.ignore(format!("{path}.result_accuracy"));
            } else if let Some(r) = ax::result_accuracy_from_proto(r).map_err(ebad)? {
                a.push(Field::Typed(
                    "result_accuracy",
                    AttrValue::ResultAccuracy(Box::new(r)),
                ));
            }
        }
        if let Some(s) = i
            .statistics_viz
            .as_ref()
            .filter(|s| !s.statistics.is_empty() || s.stat_index_to_visualize != 0)
        {
            let s = ax::statistics_from_proto(s).map_err(ebad)?;
            a.push(Field::Typed(
                "statistics",
                AttrValue::Statistics(Box::new(s)),
            ));
        }
        // XLA writes an empty config on every dot and convolution: no sparsity.
        if let Some(s) = i
            .sparsity_config
            .as_ref()
            .filter(|s| s.lhs.is_some() || s.rhs.is_some())
        {
            a.push(Field::Typed(
                "sparsity_config",
                AttrValue::Sparsity(s.clone()),
            ));
        }
        if let Some(v) = &i.original_value {
            let shape = i.shape.clone().unwrap_or_default();
            let v = ax::original_value_from_proto(v, &shape).map_err(ebad)?;
            a.push(Field::Typed(
                "origin",
                AttrValue::OriginalValue(Box::new(v)),
            ));
        }
        // A scan needs `num_carries=`, 0 too (the proto's default; found by
        // fuzzing: left out, the scan was refused as one that needs it).
        if i.num_carries != 0 || op == Opcode::Scan {
            a.push(Field::Typed("num_carries", AttrValue::Int(i.num_carries)));
        }
        if i.is_associative != 0 {
            a.push(Field::Typed(
                "is_associative",
                AttrValue::Bool(i.is_associative == 1),
            ));
        }
        if i.is_reverse {
            a.push(Field::Typed("is_reverse", AttrValue::Bool(true)));
        }
        if i.is_composite {
            a.push(Field::Typed("is_composite", AttrValue::Bool(true)));
        }
        Ok(())
    }

    /// Sharding, frontend attributes, op metadata, the backend config and the
    /// padding type.
    fn sharding_config_fields(&mut self, at: At<'_, 'p>, a: &mut Vec<Field>) -> Result<()> {
        let At { path, i, .. } = at;
        let ebad = |m: String| bad(format!("{path}: {m}"));
        if let Some(s) = &i.sharding {
            let s = ax::sharding_from_proto(s).map_err(|e| ebad(format!("sharding: {e}")))?;
            a.push(Field::Typed("sharding", AttrValue::Sharding(Box::new(s))));
        }
        if let Some(f) = &i.frontend_attributes {
            if !f.map.is_empty() {
                let f = ax::frontend_attributes_from_proto(f)
                    .map_err(|e| ebad(format!("frontend_attributes: {e}")))?;
                a.push(Field::Typed(
                    "frontend_attributes",
                    AttrValue::FrontendAttributes(Box::new(f)),
                ));
            }
        }
        if let Some(m) = &i.metadata {
            let frames = self
                .p
                .stack_frame_index
                .as_ref()
                .map_or(0, |sf| sf.stack_frames.len());
            if usize::try_from(m.stack_frame_id).map_or(true, |id| id > frames) {
                return Err(bad(format!(
                    "instruction {}: stack_frame_id {} is not one of the module's {frames} stack frames",
                    i.name, m.stack_frame_id
                )));
            }
            // Typed, as the parser stores it; the profile fields have no
            // text form (reported below).
            let md = strip_profile(m);
            if md != xla::OpMetadata::default() {
                a.push(Field::Typed("metadata", AttrValue::Metadata(Box::new(md))));
            }
        }
        if !i.backend_config.is_empty() {
            let bc = &i.backend_config;
            // Written as braces (as XLA prints JSON) only when the text
            // reads back as the same bytes: one brace group whose brackets
            // balance as the parser's bracket check sees them, with no
            // comment and no control character but white space (text never
            // holds a NUL byte); any other bytes are written as a quoted
            // string.
            let raw = std::str::from_utf8(bc).ok().filter(|s| {
                s.starts_with('{')
                    && crate::attrs::xla::Cur::new(s)
                        .braced()
                        .is_ok_and(|b| b.len() == s.len())
                    && !s.contains("/*")
                    && !s.contains("//")
                    && !s
                        .bytes()
                        .any(|b| b < 0x20 && !matches!(b, b'\n' | b'\r' | b'\t'))
                    && crate::parse::brackets_balance(s)
            });
            if raw.is_some() {
                a.push(Field::Text(
                    "backend_config",
                    String::from_utf8_lossy(bc).into_owned(),
                ));
            } else {
                a.push(Field::Text("backend_config", quote(bc)));
            }
        }
        match i.padding_type {
            0 => {}
            1 => a.push(Field::Text("padding_type", "PADDING_VALID".into())),
            2 => a.push(Field::Text("padding_type", "PADDING_SAME".into())),
            v => return Err(ebad(format!("unknown padding type {v}"))),
        }
        Ok(())
    }

    /// Fields the IR does not carry, reported in [`ReadReport::ignored`].
    fn ignored_fields(&mut self, at: At<'_, 'p>) {
        let At { path, i, .. } = at;
        // Fields the IR does not carry.
        for (set, name) in [
            (i.backend_config_payload.is_some(), "backend_config_payload"),
            (i.conv_kind != 0, "conv_kind"),
            (i.all_reduce_id != 0, "all_reduce_id"),
            (i.is_cross_program_prefetch, "is_cross_program_prefetch"),
            (
                i.metadata.as_ref().is_some_and(|m| {
                    m.profile_info.is_some()
                        || m.metadata_payload.is_some()
                        || m.size_of_generated_code_in_bytes != 0
                        || m.size_of_memory_working_set_in_bytes != 0
                }),
                "metadata (profile fields)",
            ),
        ] {
            if set {
                self.ignore(format!("{path}.{name}"));
            }
        }
    }
}

/// `ConvolutionDimensionNumbers` as the module holds them (what
/// [`ConvDims::parse`] reads from the labels XLA prints for them): the rank
/// is what the numbers reach (at least the input's spatial dimensions and
/// two), a dimension with no role is `?`; a dimension with two roles, or a
/// part with more spatial dimensions than the input, is an error.
fn conv_dims(
    d: &xla::ConvolutionDimensionNumbers,
) -> std::result::Result<crate::shape_infer::ConvDims, String> {
    let spatial_count = d.input_spatial_dimensions.len();
    if spatial_count > 10 {
        return Err("more than 10 spatial dimensions".into());
    }
    let reach = |v: &[i64], a: i64, b: i64| v.iter().copied().chain([a, b]).max().unwrap_or(0) + 1;
    let rank = [
        reach(
            &d.input_spatial_dimensions,
            d.input_batch_dimension,
            d.input_feature_dimension,
        ),
        reach(
            &d.kernel_spatial_dimensions,
            d.kernel_input_feature_dimension,
            d.kernel_output_feature_dimension,
        ),
        reach(
            &d.output_spatial_dimensions,
            d.output_batch_dimension,
            d.output_feature_dimension,
        ),
    ]
    .into_iter()
    .max()
    .unwrap_or(0)
    .clamp(0, 64) as usize;
    let rank = rank.max(spatial_count + 2);
    let mut has_unknown = false;
    // Each part: every position below the rank, at most one role each.
    let mut part = |a: i64,
                    b: i64,
                    spatial: &[i64]|
     -> std::result::Result<crate::shape_infer::Dims, String> {
        if spatial.len() > spatial_count {
            return Err(format!(
                "spatial dimension {} is not one of the {spatial_count} of the input",
                spatial_count
            ));
        }
        // Fewer would leave a spatial dimension unassigned, which the text
        // cannot say and the writer refuses (found by the proto fuzzer).
        if spatial.len() < spatial_count {
            return Err(format!(
                "{} spatial dimensions where the input has {spatial_count}",
                spatial.len()
            ));
        }
        let mut used = vec![false; rank];
        for pos in [a, b].iter().chain(spatial) {
            let slot = usize::try_from(*pos)
                .ok()
                .and_then(|p| used.get_mut(p))
                .ok_or("a convolution dimension number is out of range")?;
            if *slot {
                return Err(format!("convolution dimension {pos} has two roles"));
            }
            *slot = true;
        }
        has_unknown |= used.contains(&false);
        let mut out: crate::shape_infer::Dims = spatial.iter().copied().collect();
        out.resize(spatial_count, -1);
        Ok(out)
    };
    let input_spatial = part(
        d.input_batch_dimension,
        d.input_feature_dimension,
        &d.input_spatial_dimensions,
    )?;
    let kernel_spatial = part(
        d.kernel_input_feature_dimension,
        d.kernel_output_feature_dimension,
        &d.kernel_spatial_dimensions,
    )?;
    let output_spatial = part(
        d.output_batch_dimension,
        d.output_feature_dimension,
        &d.output_spatial_dimensions,
    )?;
    Ok(crate::shape_infer::ConvDims {
        input_batch: Some(d.input_batch_dimension),
        input_feature: Some(d.input_feature_dimension),
        input_spatial,
        kernel_input_feature: Some(d.kernel_input_feature_dimension),
        kernel_output_feature: Some(d.kernel_output_feature_dimension),
        kernel_spatial,
        output_batch: Some(d.output_batch_dimension),
        output_feature: Some(d.output_feature_dimension),
        output_spatial,
        has_unknown,
        part_ranks: [rank; 3],
    })
}
