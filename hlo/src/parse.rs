//! HLO text -> [`Module`]: the pest grammar (`hlo.pest`) and its lowering into
//! the arena IR.
//!
//! Invariants of a module returned by [`parse_module`]:
//! - every operand, control predecessor and called computation resolved to an
//!   id of the module (forward references inside a computation and to
//!   computations defined later are allowed, as in XLA);
//! - instruction names are unique within their computation, computation names
//!   unique within the module;
//! - each computation has a root (`ROOT`, or its last instruction) and
//!   parameters numbered `0..n` without gaps;
//! - exactly one entry computation (`ENTRY`, or the last computation).
//!
//! Called computations and control predecessors become ids. Attribute
//! values are decoded once: into a typed [`AttrValue`] where
//! [`crate::attrs`] types their kind (shapes in them interned like other
//! shapes), else kept as source text ([`AttrValue::Raw`]). Parameter numbers
//! and constant literals become [`Payload`]; the stack frame sections
//! [`Module::stack_frames`]. Bracket nesting is bounded by [`MAX_DEPTH`]
//! before pest runs, so no input can overflow the stack.
//!
//! The grammar runs in pieces: the text before the computations, then per
//! computation its head, each instruction and its closing attributes. An
//! instruction line in the form XLA prints is delimited by hand
//! (`parse/fast.rs`, which yields exactly the grammar's tokens or declines);
//! any other goes through the grammar's `instruction` rule. Lowering reads
//! the same token spans ([`InstParts`]) either way, so the result is the
//! same (`tests/fast_path.rs` compares the two over the corpus and mutants
//! of it). The pieces accept exactly what the `module` rule accepts; on any
//! error the whole module is parsed in that one rule, so errors are the
//! ones a one-pass parse reports.

use pest::iterators::Pair;
use pest::Parser;
use smallvec::SmallVec;

use crate::error::{Error, Pos, Result};
use crate::ir::*;
use crate::opcode::Opcode;

mod compact_gte;
mod fast;

#[derive(pest_derive::Parser)]
#[grammar = "hlo.pest"]
struct HloParser;

/// Deepest bracket nesting (`{`, `(`, `[` outside strings) accepted.
pub const MAX_DEPTH: usize = 128;

/// Attribute keys whose value names called computations.
pub const COMPUTATION_ATTRS: &[&str] = &[
    "to_apply",
    "calls",
    "body",
    "condition",
    "true_computation",
    "false_computation",
    "branch_computations",
    "called_computations",
    "select",
    "scatter",
];

/// Parses HLO text; errors name the file `<input>`.
pub fn parse_module(text: &str) -> Result<Module> {
    parse_module_named(text, "<input>")
}

/// Parses HLO text; errors carry `filename:line:col`.
pub fn parse_module_named(text: &str, filename: &str) -> Result<Module> {
    parse_module_with(text, filename, true)
}

/// [`parse_module_named`] with every instruction read by the grammar (no
/// fast path): what the tests compare the fast path against.
#[doc(hidden)]
pub fn parse_module_named_by_grammar(text: &str, filename: &str) -> Result<Module> {
    parse_module_with(text, filename, false)
}

fn parse_module_with(text: &str, filename: &str, fast: bool) -> Result<Module> {
    check_text(text, filename)?;
    check_depth(text, filename)?;
    let scratch = bumpalo::Bump::new();
    let mut lowerer = Lowerer::new(text, filename, &scratch);
    lowerer.fast = fast;
    let module = match lowerer.module() {
        Ok(m) => m,
        Err(e) => {
            // A step of the grammar failed, or lowering failed before the
            // rest of the text was parsed. A parse of the whole module in one
            // rule reports what a one-pass parser would: a syntax error
            // anywhere in the text comes first, and it is the same error
            // wherever the steps stopped.
            HloParser::parse(Rule::module, text).map_err(|e| pest_error(e, text, filename, 0))?;
            return Err(e);
        }
    };
    // Rules XLA's parser enforces beyond the syntax (attribute formats,
    // per-opcode requirements, async wrapping); reported at the instruction.
    if let Err(f) = crate::semantic::check(&module) {
        return Err(lowerer.finding_error(&module, f));
    }
    Ok(module)
}

/// The bytes of a file as HLO text: UTF-8 (the encoding XLA reads). The
/// first invalid byte is reported at its `filename:line:col`, with the line
/// (invalid bytes shown as U+FFFD); [`parse_module_named`] then rejects a
/// byte order mark and NUL bytes, also positioned.
pub fn source_text<'a>(bytes: &'a [u8], filename: &str) -> Result<&'a str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(e) => {
            let at = e.valid_up_to();
            let valid = std::str::from_utf8(&bytes[..at]).unwrap_or_default();
            let (line, col) = line_col(valid, at);
            let line_start = valid.rfind('\n').map_or(0, |p| p + 1);
            let line_end = bytes[at..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |p| at + p);
            let snippet = String::from_utf8_lossy(&bytes[line_start..line_end])
                .trim_end_matches('\r')
                .to_string();
            let message = match e.error_len() {
                Some(n) => format!(
                    "invalid UTF-8: byte{} {} cannot start or continue a character here (HLO text is UTF-8; is this a binary file, e.g. a serialized HloModuleProto?)",
                    if n > 1 { "s" } else { "" },
                    bytes[at..at + n]
                        .iter()
                        .map(|b| format!("0x{b:02X}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
                None => "invalid UTF-8: the text ends inside a multi-byte character".to_string(),
            };
            Err(Error::Parse {
                pos: Pos {
                    file: filename.to_string(),
                    line,
                    col,
                },
                message,
                snippet,
            })
        }
    }
}

/// Rejects what no HLO text contains, before the grammar sees it: a UTF-8
/// byte order mark (XLA's parser rejects it too: "expects name") and NUL
/// bytes.
fn check_text(text: &str, filename: &str) -> Result<()> {
    if text.starts_with('\u{feff}') {
        return Err(error_at(
            text,
            filename,
            0,
            "the text starts with a UTF-8 byte order mark (EF BB BF), which XLA's parser rejects too; save the file without it",
        ));
    }
    if let Some(at) = memchr::memchr(0, text.as_bytes()) {
        return Err(error_at(
            text,
            filename,
            at,
            "NUL byte (0x00) in the text: HLO text never contains one (is this a binary file, e.g. a serialized HloModuleProto?)",
        ));
    }
    Ok(())
}

/// Parses one shape (`f32[2,3]{1,0}`, `(s32[], f32[4])`, with layouts),
/// interned into `m`. Used for shapes that attributes hold as text
/// (`entry_computation_layout`, `operand_layout_constraints`, ...).
pub fn parse_shape_into(m: &mut Module, text: &str) -> Result<ShapeId> {
    check_depth(text, "<shape>")?;
    let scratch = bumpalo::Bump::new();
    let mut l = Lowerer::new(text, "<shape>", &scratch);
    l.m = std::mem::replace(m, Module::new(""));
    let result = (|| {
        let mut pairs = HloParser::parse(Rule::shape_full, text)
            .map_err(|e| pest_error(e, text, "<shape>", 0))?;
        let inner = pairs
            .next()
            .and_then(|full| full.into_inner().next())
            .ok_or_else(|| l.err(0, "expected a shape"))?;
        let s = l.shape_inner(inner)?;
        Ok(l.m.intern_shape(s))
    })();
    *m = std::mem::replace(&mut l.m, Module::new(""));
    result
}

// ---------------------------------------------------------------------------
// errors

/// The byte offset of `key=` in the `HloModule` header line of `text` (the
/// first line that starts with `HloModule`), if it is there.
fn header_attr_offset(text: &str, key: &str) -> Option<usize> {
    let mut start = 0;
    let line = text.split_inclusive('\n').find_map(|l| {
        let at = start;
        start += l.len();
        l.trim_start().starts_with("HloModule").then_some((at, l))
    })?;
    let needle = format!("{key}=");
    let (at, l) = line;
    let mut from = 0;
    while let Some(p) = l[from..].find(&needle) {
        let k = from + p;
        if matches!(l[..k].chars().next_back(), Some(' ' | ',' | '\t')) {
            return Some(at + k);
        }
        from = k + needle.len();
    }
    None
}

pub(crate) use crate::error::{line_col, source_line};

/// A parse error at byte `offset` of `text`.
pub(crate) fn error_at(
    text: &str,
    filename: &str,
    offset: usize,
    message: impl Into<String>,
) -> Error {
    let (line, col) = line_col(text, offset);
    Error::Parse {
        pos: Pos {
            file: filename.to_string(),
            line,
            col,
        },
        message: message.into(),
        snippet: source_line(text, offset),
    }
}

fn describe(rule: &Rule) -> &'static str {
    match rule {
        Rule::EOI => "end of input",
        Rule::name | Rule::operand_ref | Rule::inst_name => "a name",
        Rule::int | Rule::uint => "an integer",
        Rule::string => "a string",
        Rule::module => "an HLO module",
        Rule::header => "`HloModule name`",
        Rule::module_name => "a module name",
        Rule::debug_sections => "a debug section",
        Rule::computation => "a computation (`name {` or `ENTRY name {`)",
        Rule::entry_kw => "`ENTRY`",
        Rule::signature => "a computation signature `(params) -> shape`",
        Rule::param_decl => "a parameter declaration `name: shape`",
        Rule::instruction => "an instruction (`name = shape opcode(operands)`) or `}`",
        Rule::root_kw => "`ROOT`",
        // `constant({...})` is only tried after the generic `opcode(...)`
        // form failed; to a person both are "an opcode".
        Rule::constant_call => "an opcode",
        Rule::literal => "a literal",
        Rule::generic_call => "an opcode with operands `opcode(...)`",
        Rule::opcode => "an opcode",
        Rule::operand => "an operand",
        Rule::nested_inst => "a nested instruction",
        Rule::attr => "an attribute `key=value`",
        Rule::attr_key => "an attribute name",
        Rule::attr_value => "an attribute value",
        Rule::shape | Rule::elem_shape => "a shape (e.g. `f32[2,3]{1,0}` or a tuple `(...)`)",
        Rule::tuple_shape => "a tuple shape",
        Rule::array_shape => "an array shape",
        Rule::prim_type => "an element type",
        Rule::dim => "a dimension size",
        Rule::layout => "a layout `{...}`",
        Rule::m2m => "a minor-to-major list",
        Rule::dim_levels => "`D(...)`",
        Rule::dim_level => "a dimension level type",
        Rule::tiles => "tiles `T(...)`",
        Rule::tile => "a tile `(a,b)`",
        Rule::tile_dim => "a tile dimension",
        Rule::tail_pad => "`L(n)`",
        Rule::index_type => "`#(type)`",
        Rule::pointer_type => "`*(type)`",
        Rule::elem_size => "`E(n)`",
        Rule::split_config => "`SC(dim:indices)`",
        Rule::mem_space => "`S(n)`",
        Rule::phys_shape => "`P(shape)`",
        Rule::dyn_meta => "`M(n)`",
        Rule::shape_list_full => "a list of shapes `{f32[2]{0}, ...}`",
        Rule::shape_one_full => "a shape",
        Rule::program_shape_full => "a computation layout `{(parameter shapes)->result shape}`",
        _ => "valid HLO",
    }
}

/// Converts a pest error into ours; `base` is the byte offset in `text` of
/// the input pest parsed (non-zero when a shape is re-parsed from a slice).
fn pest_error(e: pest::error::Error<Rule>, text: &str, filename: &str, base: usize) -> Error {
    let offset = base
        + match e.location {
            pest::error::InputLocation::Pos(p) => p,
            pest::error::InputLocation::Span((s, _)) => s,
        };
    let message = match &e.variant {
        pest::error::ErrorVariant::ParsingError {
            positives,
            negatives,
        } => {
            let mut pos: Vec<&str> = Vec::new();
            for d in positives.iter().map(describe) {
                if !pos.contains(&d) {
                    pos.push(d);
                }
            }
            let found = found_token(text, offset);
            // `%t#a`: a compact tuple-element operand needs an index.
            if pos == ["an integer"] && offset > 0 && text.as_bytes().get(offset - 1) == Some(&b'#')
            {
                pos[0] = "a tuple index (an integer) after `#`";
            }
            if !pos.is_empty() {
                let mut m = format!("expected {}", join_or(&pos));
                m.push_str(&format!(", found {found}"));
                m
            } else if !negatives.is_empty() {
                let neg: Vec<&str> = negatives.iter().map(describe).collect();
                format!("unexpected {} ({found})", join_or(&neg))
            } else {
                format!("unexpected {found}")
            }
        }
        pest::error::ErrorVariant::CustomError { message } => message.clone(),
    };
    error_at(text, filename, offset, message)
}

fn join_or(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [a] => a.to_string(),
        [rest @ .., last] => format!("{} or {}", rest.join(", "), last),
    }
}

/// A short description of the text at `offset` for messages.
fn found_token(text: &str, offset: usize) -> String {
    let rest = text.get(offset..).unwrap_or("");
    let tok: String = match rest.chars().next() {
        None => return "end of input".to_string(),
        Some(c) if c.is_ascii_alphanumeric() || c == '%' || c == '_' => rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '%' | '_' | '.' | '-'))
            .take(40)
            .collect(),
        Some('\n') => return "end of line".to_string(),
        Some(c) => c.to_string(),
    };
    format!("`{tok}`")
}

/// Bytes [`check_depth`] stops at: brackets, string quotes, comment starts.
const DEPTH_SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    let special = b"{}()[]\"/";
    let mut k = 0;
    while k < special.len() {
        t[special[k] as usize] = true;
        k += 1;
    }
    t
};

/// The offset of the first byte at or after `from` that [`check_depth`]
/// stops at ([`DEPTH_SPECIAL`]). Most bytes of a module are none of them; on
/// x86_64 sixteen bytes are tested at a time (SSE2, part of the baseline).
#[inline]
fn next_depth_special(bytes: &[u8], from: usize) -> Option<usize> {
    // Advanced by the x86_64 block only (elsewhere, e.g. the aarch64 wheel,
    // the scalar loop below does all the work).
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut i = from;
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
            _mm_set1_epi8,
        };
        while i + 16 <= bytes.len() {
            // SAFETY: `i + 16 <= bytes.len()`, so the 16 bytes read are in
            // bounds (`loadu` has no alignment requirement); SSE2 is part of
            // the x86_64 baseline.
            let mask = unsafe {
                let v = _mm_loadu_si128(bytes.as_ptr().add(i).cast::<__m128i>());
                let eq = |b: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8));
                let hits = _mm_or_si128(
                    _mm_or_si128(
                        _mm_or_si128(eq(b'{'), eq(b'}')),
                        _mm_or_si128(eq(b'('), eq(b')')),
                    ),
                    _mm_or_si128(
                        _mm_or_si128(eq(b'['), eq(b']')),
                        _mm_or_si128(eq(b'"'), eq(b'/')),
                    ),
                );
                _mm_movemask_epi8(hits) as u32
            };
            if mask != 0 {
                return Some(i + mask.trailing_zeros() as usize);
            }
            i += 16;
        }
    }
    bytes
        .get(i..)?
        .iter()
        .position(|&b| DEPTH_SPECIAL[b as usize])
        .map(|p| i + p)
}

/// A lexical pre-pass over the whole text, before pest runs: brackets
/// (`{}`, `()`, `[]` outside strings and comments) must balance and nest at
/// most [`MAX_DEPTH`] deep; strings and `/* */` comments must be closed. This
/// bounds pest's recursion (it is built without its stack guard) and gives
/// precise messages for the most common breakage.
/// Whether `text`'s brackets balance (outside strings and comments) as the
/// parser's pre-pass requires of a module: what a printer may write
/// verbatim inside a module (a `backend_config={...}` read from a proto).
pub(crate) fn brackets_balance(text: &str) -> bool {
    check_depth(text, "").is_ok()
}

fn check_depth(text: &str, filename: &str) -> Result<()> {
    let bytes = text.as_bytes();
    let mut open: Vec<(u8, usize)> = Vec::new();
    let mut i = 0;
    let describe_open = |(c, at): (u8, usize)| {
        let (l, col) = line_col(text, at);
        format!("`{}` opened at {l}:{col}", c as char)
    };
    while i < bytes.len() {
        // Jump to the next byte that opens or closes something.
        match next_depth_special(bytes, i) {
            Some(p) => i = p,
            None => break,
        }
        match bytes[i] {
            c @ (b'{' | b'(' | b'[') => {
                if open.len() >= MAX_DEPTH {
                    return Err(error_at(
                        text,
                        filename,
                        i,
                        format!("brackets nested deeper than {MAX_DEPTH} levels"),
                    ));
                }
                open.push((c, i));
            }
            c @ (b'}' | b')' | b']') => {
                let want = match c {
                    b'}' => b'{',
                    b')' => b'(',
                    _ => b'[',
                };
                match open.pop() {
                    Some((o, _)) if o == want => {}
                    Some(o) => {
                        return Err(error_at(
                            text,
                            filename,
                            i,
                            format!("`{}` does not match the {}", c as char, describe_open(o)),
                        ))
                    }
                    None => {
                        return Err(error_at(
                            text,
                            filename,
                            i,
                            format!("`{}` without a matching opening bracket", c as char),
                        ))
                    }
                }
            }
            b'"' => {
                let start = i;
                i += 1;
                loop {
                    match memchr::memchr2(b'"', b'\\', &bytes[i.min(bytes.len())..]) {
                        Some(p) if bytes[i + p] == b'\\' => i += p + 2,
                        Some(p) => {
                            i += p;
                            break;
                        }
                        None => {
                            i = bytes.len();
                            break;
                        }
                    }
                }
                if i >= bytes.len() {
                    return Err(error_at(
                        text,
                        filename,
                        start,
                        "unterminated string: missing closing `\"`",
                    ));
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let start = i;
                match text.get(i + 2..).and_then(|r| r.find("*/")) {
                    Some(p) => i += 2 + p + 1,
                    None => {
                        return Err(error_at(
                            text,
                            filename,
                            start,
                            "unterminated comment: missing `*/`",
                        ))
                    }
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = memchr::memchr(b'\n', &bytes[i..]).map_or(bytes.len(), |p| i + p);
            }
            _ => {}
        }
        i += 1;
    }
    if let Some(&o) = open.last() {
        return Err(error_at(
            text,
            filename,
            o.1,
            format!("unclosed {}", describe_open(o)),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// lowering

pub(crate) use crate::ir::hash::{FxHasher, FxMap, FxSet};

/// A reference by name still to be resolved: (user, operand slot or usize::MAX
/// for a control predecessor, name, byte offset).
struct PendingRef<'a> {
    user: InstId,
    slot: usize,
    name: &'a str,
    offset: usize,
    /// The shape written before the name (`f32[2] %x`) and its offset,
    /// checked against the target once it is known.
    written: Option<(ShapeId, usize)>,
}

struct CompRef {
    id: CompId,
    defined: bool,
    /// Byte offset of the first reference (for "undefined computation" errors).
    first_use: usize,
}

struct Lowerer<'a> {
    text: &'a str,
    file: &'a str,
    m: Module,
    shapes: FxMap<&'a str, ShapeId>,
    comps: FxMap<&'a str, CompRef>,
    // per computation
    names: FxMap<&'a str, InstId>,
    pending: Vec<PendingRef<'a>>,
    /// Parse-time scratch for generated names (nested instructions).
    scratch: &'a bumpalo::Bump,
    /// Byte offset of each instruction's name (indexed by `InstId::index`;
    /// 0 for the arena's unused slot 0), for errors found after lowering.
    inst_offsets: Vec<u32>,
    /// Byte offset of each computation's name (indexed by `CompId::index`).
    comp_offsets: Vec<u32>,
    /// Per computation: get-tuple-elements made for `%t#i` operands.
    gte: compact_gte::CompactGtes,
    /// Whether instructions go through [`fast::instruction`] first.
    fast: bool,
    /// The instructions of the computation being read (reused).
    inst_buf: Vec<InstParts<'a>>,
}

fn strip_pct(s: &str) -> &str {
    s.strip_prefix('%').unwrap_or(s)
}

/// An instruction as the grammar delimits it: the spans of its tokens (all
/// slices of the module text, so their offsets are known), whether they come
/// from pest or from the fast path ([`fast::instruction`]). Lowering reads
/// only these.
pub(crate) struct InstParts<'a> {
    /// Byte offset where the instruction starts (`ROOT` or its name).
    at: usize,
    root: bool,
    /// The `inst_name` token (with its `%`).
    name: &'a str,
    shape: Option<&'a str>,
    call: CallParts<'a>,
    /// The `attr` tokens (`key=value`).
    attrs: SmallVec<[&'a str; 4]>,
}

/// The head of a computation as the grammar delimits it (`comp_head`): the
/// spans of its tokens, from pest or from [`fast::comp_head`].
pub(crate) struct CompHead<'a> {
    entry: bool,
    /// The `name` token (with its `%`).
    name: &'a str,
    /// The name token of each parameter declaration.
    params: SmallVec<[&'a str; 8]>,
    /// The signature's result `shape` token.
    result: Option<&'a str>,
}

impl<'a> CompHead<'a> {
    /// The head from the tokens of a `comp_head` pair.
    fn from_pair(head: Pair<'a, Rule>) -> Self {
        let mut h = CompHead {
            entry: false,
            name: "",
            params: SmallVec::new(),
            result: None,
        };
        for p in head.into_inner() {
            match p.as_rule() {
                Rule::entry_kw => h.entry = true,
                Rule::name => h.name = p.as_str(),
                Rule::signature => {
                    for s in p.into_inner() {
                        if s.as_rule() == Rule::param_decl {
                            if let Some(n) = s.into_inner().next() {
                                h.params.push(n.as_str());
                            }
                        } else if s.as_rule() == Rule::shape {
                            h.result = Some(s.as_str());
                        }
                    }
                }
                _ => {}
            }
        }
        h
    }
}

/// The operation of an instruction: `constant_call` (its literal's text) or
/// `generic_call` (its opcode and `operand` tokens).
pub(crate) enum CallParts<'a> {
    Constant {
        text: &'a str,
        literal: &'a str,
    },
    Generic {
        text: &'a str,
        opcode: &'a str,
        operands: SmallVec<[&'a str; 4]>,
    },
}

impl<'a> CallParts<'a> {
    /// The `constant_call` or `generic_call` pair.
    fn from_pair(call: Pair<'a, Rule>) -> Option<Self> {
        let text = call.as_str();
        if call.as_rule() == Rule::constant_call {
            let literal = call.into_inner().next().map_or("", |p| p.as_str());
            return Some(CallParts::Constant { text, literal });
        }
        let mut inner = call.into_inner();
        let opcode = inner.next()?.as_str();
        Some(CallParts::Generic {
            text,
            opcode,
            operands: inner.map(|p| p.as_str()).collect(),
        })
    }

    fn text(&self) -> &'a str {
        match self {
            CallParts::Constant { text, .. } | CallParts::Generic { text, .. } => text,
        }
    }
}

impl<'a> Lowerer<'a> {
    fn new(text: &'a str, file: &'a str, scratch: &'a bumpalo::Bump) -> Self {
        Lowerer {
            text,
            file,
            m: Module::new(""),
            shapes: FxMap::default(),
            comps: FxMap::default(),
            names: FxMap::default(),
            pending: Vec::new(),
            scratch,
            inst_offsets: Vec::new(),
            comp_offsets: Vec::new(),
            gte: Default::default(),
            fast: true,
            inst_buf: Vec::new(),
        }
    }

    /// Records the source offset of a newly created instruction.
    fn note_inst_offset(&mut self, id: InstId, offset: usize) {
        let i = id.index();
        if self.inst_offsets.len() <= i {
            self.inst_offsets.resize(i + 1, u32::MAX);
        }
        self.inst_offsets[i] = u32::try_from(offset).unwrap_or(u32::MAX);
    }

    /// Records the source offset of a computation's name.
    fn note_comp_offset(&mut self, id: CompId, offset: usize) {
        let i = id.index();
        if self.comp_offsets.len() <= i {
            self.comp_offsets.resize(i + 1, 0);
        }
        self.comp_offsets[i] = offset as u32;
    }

    /// Turns a finding of [`crate::semantic::check`] into a positioned error:
    /// at `attr=` on the instruction's line when the finding names an
    /// attribute present there, else at the instruction (or computation) name.
    fn finding_error(&self, m: &Module, f: crate::semantic::Finding) -> Error {
        let mut offset = match (f.inst, f.comp) {
            (Some(i), _) => self
                .inst_offsets
                .get(i.index())
                .copied()
                .filter(|&o| o != u32::MAX)
                .unwrap_or(0) as usize,
            (None, Some(c)) => self.comp_offsets.get(c.index()).copied().unwrap_or(0) as usize,
            (None, None) => f
                .attr
                .as_deref()
                .and_then(|key| header_attr_offset(self.text, key))
                .unwrap_or(0),
        };
        if let (Some(key), Some(_)) = (f.attr.as_deref(), f.inst) {
            let line_end = self.text[offset.min(self.text.len())..]
                .find('\n')
                .map_or(self.text.len(), |p| offset + p);
            let line = &self.text[offset.min(line_end)..line_end];
            let needle = format!("{key}=");
            let mut from = 0;
            while let Some(p) = line[from..].find(&needle) {
                let at = from + p;
                let before = line[..at].chars().next_back();
                if matches!(before, Some(' ' | ',' | '\t') | None) {
                    offset += at;
                    break;
                }
                from = at + needle.len();
            }
        }
        let _ = m;
        self.err(offset, f.message)
    }

    fn err(&self, offset: usize, msg: impl Into<String>) -> Error {
        error_at(self.text, self.file, offset, msg)
    }

    /// Parses and lowers the module: the text before the first computation
    /// (`module_head`), then each computation in turn ([`Self::computation_at`]),
    /// lowered as soon as it is read. This is the `module` rule cut at its
    /// repetition, so it accepts exactly what that rule accepts; on any error
    /// the caller parses the whole module once to report the grammar's own
    /// error.
    fn module(&mut self) -> Result<Module> {
        let text = self.text;
        let head = HloParser::parse(Rule::module_head, text)
            .map_err(|e| pest_error(e, text, self.file, 0))?;
        let mut parts: Vec<Pair<'a, Rule>> = Vec::new();
        let mut pos = 0;
        for h in head {
            pos = h.as_span().end();
            parts.extend(h.into_inner());
        }
        let mut name: Option<&str> = None;
        let mut entry: Option<CompId> = None;
        let mut last: Option<CompId> = None;
        for p in parts {
            match p.as_rule() {
                Rule::header => {
                    for h in p.into_inner() {
                        match h.as_rule() {
                            Rule::module_name => {
                                self.name_chars(h.as_str(), self.pos(&h), "module name")?;
                                name = Some(h.as_str());
                            }
                            Rule::attr => {
                                let at = self.pos(&h);
                                let a = self.header_attr(h.as_str())?;
                                if self.m.attrs.iter().any(|x| x.key == a.key) {
                                    return Err(self
                                        .err(at, format!("attribute `{}` appears twice", a.key)));
                                }
                                self.m.attrs.push(a);
                            }
                            _ => {}
                        }
                    }
                }
                Rule::debug_sections => {
                    let at = self.pos(&p);
                    let sf = crate::attrs::xla::stack_frame_index(p.as_str())
                        .map_err(|(off, msg)| self.err(at + off, msg))?;
                    self.m.stack_frames = Some(Box::new(sf));
                }
                _ => {}
            }
        }
        while pos < text.len() {
            let start = pos;
            let (id, is_entry) = self.computation_at(&mut pos)?;
            if is_entry {
                if entry.is_some() {
                    return Err(self.err(start, "more than one ENTRY computation"));
                }
                entry = Some(id);
            }
            last = Some(id);
        }
        // Every referenced computation must be defined.
        let mut undefined: Vec<(&str, usize)> = self
            .comps
            .iter()
            .filter(|(_, c)| !c.defined)
            .map(|(n, c)| (*n, c.first_use))
            .collect();
        undefined.sort_by_key(|&(_, o)| o);
        if let Some(&(n, o)) = undefined.first() {
            return Err(self.err(o, format!("computation %{n} is called but never defined")));
        }
        let entry = match entry.or(last) {
            Some(e) => e,
            None => return Err(self.err(self.text.len(), "module has no computations")),
        };
        self.m.comp_mut(entry).is_entry = true;
        self.m.entry = entry;
        let name = match name {
            Some(n) => n.to_string(),
            None => format!("module_{}", self.m.comp(entry).name),
        };
        self.m.name = name.into();
        let mut m = std::mem::replace(&mut self.m, Module::new(""));
        m.set_source_offsets(self.inst_offsets.clone());
        Ok(m)
    }

    /// Looks up or reserves a computation by name.
    fn comp_ref(&mut self, name: &'a str, offset: usize) -> CompId {
        if let Some(c) = self.comps.get(name) {
            return c.id;
        }
        let id = self.m.reserve_computation(name);
        self.comps.insert(
            name,
            CompRef {
                id,
                defined: false,
                first_use: offset,
            },
        );
        id
    }

    /// Reads the computation at byte `*pos` (`computation ~ w` of the
    /// grammar) and lowers it; `*pos` moves past it and the white space
    /// after it. Its head (`ENTRY`, name, signature, `{`) and any attributes
    /// after its `}` are read by the grammar; each instruction by the fast
    /// path ([`fast::instruction`]) where it applies, else by the grammar's
    /// `instruction` rule. Lowering runs in the order of the grammar's
    /// tokens: name, signature, attributes, then the instructions.
    fn computation_at(&mut self, pos: &mut usize) -> Result<(CompId, bool)> {
        let text = self.text;
        let b = text.as_bytes();
        let start = *pos;
        let fast_head = self.fast.then(|| fast::comp_head(text, start)).flatten();
        let (head, mut p) = match fast_head {
            Some(h) => h,
            None => {
                let pair = HloParser::parse(Rule::comp_head, &text[start..])
                    .map_err(|e| pest_error(e, text, self.file, start))?
                    .next()
                    .ok_or_else(|| self.err(start, "expected a computation"))?;
                let end = start + pair.as_str().len();
                (CompHead::from_pair(pair), end)
            }
        };
        // One buffer for every computation's instructions (a computation
        // written in place, lowered meanwhile, takes a buffer of its own).
        let mut insts = std::mem::take(&mut self.inst_buf);
        insts.clear();
        while b.get(p) != Some(&b'}') {
            if let Some((inst, next)) = self.fast.then(|| fast::instruction(text, p)).flatten() {
                insts.push(inst);
                p = next;
                continue;
            }
            let pair = HloParser::parse(Rule::instruction, &text[p..])
                .map_err(|e| pest_error(e, text, self.file, p))?
                .next()
                .ok_or_else(|| self.err(p, "expected an instruction"))?;
            p = fast::skip_w(b, p + pair.as_str().len());
            insts.push(self.inst_parts(pair)?);
        }
        // `}`, then `(sp ~ "," ~ w ~ attr)*`: read by the grammar when a `,`
        // follows.
        p += 1;
        let mut tail: Vec<Pair<'a, Rule>> = Vec::new();
        let mut q = p;
        while matches!(b.get(q), Some(b' ' | b'\t')) {
            q += 1;
        }
        if b.get(q) == Some(&b',') {
            let attrs = HloParser::parse(Rule::comp_attrs, &text[p..])
                .map_err(|e| pest_error(e, text, self.file, p))?;
            for a in attrs {
                p += a.as_str().len();
                tail.extend(a.into_inner());
            }
        }
        *pos = fast::skip_w(b, p);

        let is_entry = head.entry;
        if head.name.is_empty() {
            return Err(self.err(start, "computation without a name"));
        }
        let off = self.off(head.name);
        self.name_chars(head.name, off, "computation name")?;
        let cid = self.define_computation(strip_pct(head.name), off)?;
        self.note_comp_offset(cid, off);
        for &n in &head.params {
            self.name_chars(n, self.off(n), "parameter name")?;
        }
        let sig_result = match head.result {
            Some(s) => Some((self.shape_text(s)?, self.off(s))),
            None => None,
        };
        let mut attrs = Vec::new();
        for p in tail {
            if p.as_rule() == Rule::attr {
                attrs.push(self.comp_attr(p.as_str())?);
            }
        }
        let root = self.body(cid, &mut insts, start);
        self.inst_buf = insts;
        let root = root?;
        if let Some((sig, off)) = sig_result {
            let root_shape = self.m.inst(root).shape;
            if !shapes_compatible(&self.m, sig, root_shape) {
                return Err(self.err(
                    off,
                    format!(
                        "computation %{} declares result shape {} but its root %{} has shape {}",
                        self.m.comp(cid).name,
                        crate::print::print_shape(&self.m, sig),
                        self.m.inst(root).name,
                        crate::print::print_shape(&self.m, root_shape)
                    ),
                ));
            }
        }
        let c = self.m.comp_mut(cid);
        c.is_entry = is_entry;
        c.attrs = attrs;
        self.m.place_computation(cid);
        Ok((cid, is_entry))
    }

    /// Marks computation `name` defined (reserving its id if it was not
    /// referenced before).
    fn define_computation(&mut self, name: &'a str, off: usize) -> Result<CompId> {
        let cid = match self.comps.get_mut(name) {
            Some(c) if c.defined => {
                return Err(self.err(off, format!("computation %{name} is defined twice")))
            }
            Some(c) => {
                c.defined = true;
                c.id
            }
            None => {
                let cid = self.m.reserve_computation(name);
                self.comps.insert(
                    name,
                    CompRef {
                        id: cid,
                        defined: true,
                        first_use: off,
                    },
                );
                cid
            }
        };
        self.m.comp_mut(cid).is_entry = false;
        Ok(cid)
    }

    /// Lowers the instructions of computation `cid`, resolves references
    /// among them and sets its root and parameters. Returns the root.
    fn body(
        &mut self,
        cid: CompId,
        insts: &mut Vec<InstParts<'a>>,
        start: usize,
    ) -> Result<InstId> {
        let saved_names = std::mem::take(&mut self.names);
        let saved_pending = std::mem::take(&mut self.pending);
        let saved_gte = std::mem::take(&mut self.gte);
        let r = self.body_inner(cid, insts, start);
        self.names = saved_names;
        self.pending = saved_pending;
        self.gte = saved_gte;
        r
    }

    fn body_inner(
        &mut self,
        cid: CompId,
        insts: &mut Vec<InstParts<'a>>,
        start: usize,
    ) -> Result<InstId> {
        let mut root: Option<InstId> = None;
        let mut root_marked = false;
        let mut params: Vec<(i64, InstId, usize)> = Vec::new();
        // One name per instruction (nested ones aside): sized once instead
        // of rehashed as it grows.
        self.names.reserve(insts.len());
        for p in insts.drain(..) {
            let at = p.at;
            let (iid, marked) = self.instruction(p, cid, &mut params)?;
            if marked {
                if root_marked {
                    return Err(self.err(at, "more than one ROOT instruction in this computation"));
                }
                root_marked = true;
                root = Some(iid);
            } else if !root_marked {
                root = Some(iid);
            }
        }
        self.resolve_pending()?;
        self.finish_compact_gtes(cid);
        let comp_name = self.m.comp(cid).name.clone();
        let root = root.ok_or_else(|| {
            self.err(
                start,
                format!("computation %{comp_name} has no instructions"),
            )
        })?;
        // Parameters must be numbered 0..n.
        params.sort_by_key(|&(n, _, _)| n);
        let mut param_ids = Vec::with_capacity(params.len());
        for (i, &(n, pid, off)) in params.iter().enumerate() {
            if n != i as i64 {
                let msg = if n < i as i64 {
                    format!("parameter number {n} is used twice in computation %{comp_name}")
                } else {
                    format!(
                        "parameter numbers of computation %{comp_name} must be 0..{}; {i} is missing",
                        params.len()
                    )
                };
                return Err(self.err(off, msg));
            }
            param_ids.push(pid);
        }
        let c = self.m.comp_mut(cid);
        c.root = root;
        c.params = param_ids;
        Ok(root)
    }

    /// A computation written in place of an attribute value; named `_` like
    /// XLA names it (made unique), placed before the computation using it.
    fn inline_computation(&mut self, text: &'a str, start: usize) -> Result<CompId> {
        let full = HloParser::parse(Rule::inline_comp_full, text)
            .map_err(|e| pest_error(e, self.text, self.file, start))?;
        let mut insts: Vec<InstParts<'a>> = Vec::new();
        for p in full
            .flatten()
            .filter(|p| p.as_rule() == Rule::inline_comp)
            .take(1)
            .flat_map(|p| p.into_inner())
        {
            insts.push(self.inst_parts(p)?);
        }
        let name = self.unique_comp_name("_");
        let cid = self.define_computation(name, start)?;
        self.note_comp_offset(cid, start);
        self.body(cid, &mut insts, start)?;
        self.m.place_computation(cid);
        Ok(cid)
    }

    fn unique_comp_name(&mut self, base: &str) -> &'a str {
        let mut name = base.to_string();
        let mut k = 0usize;
        while self.comps.contains_key(name.as_str()) {
            k += 1;
            name = format!("{base}.{k}");
        }
        self.scratch.alloc_str(&name)
    }

    fn resolve_pending(&mut self) -> Result<()> {
        for i in 0..self.pending.len() {
            let PendingRef {
                user,
                slot,
                name,
                offset,
                written,
            } = self.pending[i];
            let target = match self.names.get(name) {
                Some(&t) => {
                    if let Some((w, woff)) = written {
                        self.check_written_shape(name, w, woff, t)?;
                    }
                    t
                }
                None if name.contains('#') => self.resolve_compact(name, offset, written)?,
                None => {
                    return Err(self.err(offset, format!("use of undefined instruction %{name}")))
                }
            };
            let inst = self.m.inst_mut(user);
            if slot == usize::MAX {
                if let Some(Attr {
                    value: AttrValue::Insts(v),
                    ..
                }) = inst
                    .attrs
                    .iter_mut()
                    .find(|a| &*a.key == "control-predecessors")
                {
                    v.push(target);
                }
            } else if let Some(op) = inst.operands.get_mut(slot) {
                *op = target;
            }
        }
        self.pending.clear();
        Ok(())
    }

    /// A typed operand `f32[2,2] %x` must be written with a shape
    /// compatible with %x's (layouts and dynamic bounds aside), as XLA's
    /// parser requires.
    fn check_written_shape(
        &self,
        name: &str,
        written: ShapeId,
        woff: usize,
        target: InstId,
    ) -> Result<()> {
        let actual = self.m.inst(target).shape;
        if shapes_compatible_ignoring_dynamic(&self.m, written, actual) {
            return Ok(());
        }
        Err(self.err(
            woff,
            format!(
                "operand %{name} is written with shape {} but %{name} has shape {}",
                crate::print::print_shape(&self.m, written),
                crate::print::print_shape(&self.m, actual)
            ),
        ))
    }

    fn raw_attr(&self, attr: &'a str) -> Result<Attr> {
        let (key, value, voff) = self.split_attr(attr)?;
        self.check_raw_value(value, voff)?;
        Ok(Attr {
            key: key.into(),
            value: AttrValue::Raw(value.into()),
        })
    }

    /// A computation attribute (`}, execution_thread="x"`): the string
    /// XLA defines decoded (an error at `key=` when malformed), others kept
    /// verbatim.
    fn comp_attr(&self, attr: &'a str) -> Result<Attr> {
        let (key, value, _) = self.split_attr(attr)?;
        if key != "execution_thread" {
            return self.raw_attr(attr);
        }
        let s = crate::attrs::xla::string_value(value)
            .map_err(|e| self.err(self.off(attr), format!("`execution_thread=`: {e}")))?;
        Ok(Attr {
            key: key.into(),
            value: AttrValue::Str(s.into_boxed_slice()),
        })
    }

    /// A value kept verbatim is printed back as is, so a `/*` comment opened in
    /// it must also close in it: otherwise the comment would swallow text after
    /// the value when the module is read back (the opaque-span scan of the
    /// grammar does not know comments).
    fn check_raw_value(&self, value: &str, voff: usize) -> Result<()> {
        match unclosed_comment(value) {
            None => Ok(()),
            Some(at) => Err(self.err(
                voff + at,
                "comment `/*` inside an attribute value is not closed before the value ends",
            )),
        }
    }

    /// Splits an atomic `attr` token into key, value and the value's offset.
    fn split_attr(&self, text: &'a str) -> Result<(&'a str, &'a str, usize)> {
        let (key, rest) = text.split_once('=').unwrap_or((text, ""));
        let value = rest.trim_start();
        let at = self.off(text);
        let voff = at + text.len() - value.len();
        let key = key.trim_end();
        self.name_chars(key, at, "attribute name")?;
        Ok((key, value, voff))
    }

    /// Every character of a name (`raw`, with or without its `%`, at byte
    /// `off`) must be a name character (`[A-Za-z0-9_.-]`): the grammar only
    /// delimits scanned names, and its `name_char` admits non-ASCII letters.
    fn name_chars(&self, raw: &str, off: usize, what: &str) -> Result<()> {
        let s = strip_pct(raw);
        let Some(i) = s.bytes().position(|b| !NAME_BYTE[b as usize]) else {
            return Ok(());
        };
        // Every byte before `i` is ASCII, so `i` starts a character.
        let c = s[i..].chars().next().unwrap_or('?');
        Err(self.err(
            off + (raw.len() - s.len()) + i,
            format!(
                "{what} `{s}` has the character {}; names use letters, digits, `_`, `.` and `-`",
                describe_char(c)
            ),
        ))
    }

    /// An instruction attribute: called computations and control predecessors
    /// become ids (control predecessors are resolved at the end of the
    /// computation; the list is filled then); the kinds XLA types are decoded
    /// ([`crate::attrs::decode`]; a malformed value is an error at `key=`).
    fn inst_attr(
        &mut self,
        attr: &'a str,
        op: Opcode,
        user: InstId,
        pend: &mut Vec<PendingRef<'a>>,
    ) -> Result<Attr> {
        let (key, value, voff) = self.split_attr(attr)?;
        let v = if COMPUTATION_ATTRS.contains(&key) {
            if value.starts_with('{') && !is_name_list(value) {
                let c = self.inline_computation(value, voff)?;
                AttrValue::Comp(c)
            } else if let Some(inner) = value.strip_prefix('{').and_then(|v| v.strip_suffix('}')) {
                let mut cs = SmallVec::new();
                for (n, o) in split_names(inner, voff + 1) {
                    cs.push(self.comp_ref(n, o));
                }
                AttrValue::Comps(cs)
            } else if is_name(value) {
                AttrValue::Comp(self.comp_ref(strip_pct(value), voff))
            } else {
                return Err(self.err(
                    voff,
                    format!("`{key}` expects a computation name like %comp, found `{value}`"),
                ));
            }
        } else if key == "control-predecessors" {
            let Some(inner) = value.strip_prefix('{').and_then(|v| v.strip_suffix('}')) else {
                return Err(self.err(voff, "`control-predecessors` expects a list `{%a, %b}`"));
            };
            for (n, o) in split_names(inner, voff + 1) {
                if !is_name(n) {
                    return Err(self.err(o, format!("expected an instruction name, found `{n}`")));
                }
                pend.push(PendingRef {
                    user,
                    slot: usize::MAX,
                    name: n,
                    offset: o,
                    written: None,
                });
            }
            AttrValue::Insts(SmallVec::new())
        } else if key == "operand_layout_constraints" {
            let s = self.value_shapes(key, Rule::shape_list_full, value, voff)?;
            AttrValue::Shapes(s.into_iter().collect())
        } else if key == "literal" && op == Opcode::CustomCall {
            self.check_raw_value(value, voff)?;
            let (shape, lit) =
                crate::attrs::literal::decode_shaped(&mut self.m, value, &mut |m, text| {
                    parse_shape_into(m, text).map_err(|e| e.to_string())
                })
                .map_err(|(o, msg)| self.err(voff + o, format!("`literal=`: {msg}")))?;
            AttrValue::Literal(shape, Box::new(lit))
        } else if key == "outfeed_shape" {
            let s = self.value_shapes(key, Rule::shape_one_full, value, voff)?;
            match s[..] {
                [one] => AttrValue::Shape(one),
                _ => return Err(self.err(voff, "`outfeed_shape=` expects one shape")),
            }
        } else {
            return self.typed_or_raw(
                self.off(attr),
                key,
                value,
                voff,
                crate::attrs::decode(key, op, value),
            );
        };
        Ok(Attr {
            key: key.into(),
            value: v,
        })
    }

    /// The attribute `key=value` from its typed decoding (`typed`: `None`
    /// for a key the IR does not type, then kept verbatim; a decoding error
    /// is at `key=`).
    fn typed_or_raw(
        &self,
        at: usize,
        key: &str,
        value: &str,
        voff: usize,
        typed: Option<std::result::Result<AttrValue, String>>,
    ) -> Result<Attr> {
        let value = match typed {
            Some(typed) => typed.map_err(|msg| self.err(at, msg))?,
            None => {
                self.check_raw_value(value, voff)?;
                AttrValue::Raw(value.into())
            }
        };
        Ok(Attr {
            key: key.into(),
            value,
        })
    }

    /// A module header attribute: `entry_computation_layout`'s shapes
    /// interned, `origin_recovery_table` decoded with its recovery modules
    /// (an error where it goes wrong), the kinds
    /// [`crate::attrs::decode_header`] types decoded (a malformed value is an
    /// error at `key=`), others kept verbatim.
    fn header_attr(&mut self, attr: &'a str) -> Result<Attr> {
        let (key, value, voff) = self.split_attr(attr)?;
        let v = if key == "origin_recovery_table" {
            let t = crate::attrs::xla::recovery_table(value, &|body| {
                parse_module_named(body, "recovery module")
            })
            .map_err(|(off, msg)| self.err(voff + off, format!("`{key}=`: {msg}")))?;
            AttrValue::RecoveryTable(Box::new(t))
        } else if key == "entry_computation_layout" {
            let mut s = self.value_shapes(key, Rule::program_shape_full, value, voff)?;
            let result = s
                .pop()
                .ok_or_else(|| self.err(voff, "expected `{(parameters)->result}`"))?;
            AttrValue::ProgramLayout(Box::new(ProgramLayout {
                params: s.into_iter().collect(),
                result,
            }))
        } else {
            return self.typed_or_raw(
                self.off(attr),
                key,
                value,
                voff,
                crate::attrs::decode_header(key, value),
            );
        };
        Ok(Attr {
            key: key.into(),
            value: v,
        })
    }

    /// The shapes of an attribute value (`value`, a slice of the module text
    /// at byte `voff`) read with `rule` (one of the `*_full` rules of
    /// shapes in values), in order; each through the shape cache. Errors are
    /// at their position in the text.
    fn value_shapes(
        &mut self,
        key: &str,
        rule: Rule,
        value: &'a str,
        voff: usize,
    ) -> Result<SmallVec<[ShapeId; 4]>> {
        self.check_raw_value(value, voff)?;
        let mut pairs = HloParser::parse(rule, value).map_err(|e| {
            use pest::error::InputLocation::{Pos, Span};
            match e.location {
                // The value's structure (not one of its shapes) is wrong:
                // say what the key expects.
                Pos(0) | Span((0, _)) => {
                    let shown: String = value.chars().take(60).collect();
                    let more = if shown.len() < value.len() { "..." } else { "" };
                    self.err(
                        voff,
                        format!(
                            "`{key}=` expects {}, found `{shown}{more}`",
                            describe(&rule)
                        ),
                    )
                }
                _ => pest_error(e, self.text, self.file, voff),
            }
        })?;
        let mut out = SmallVec::new();
        if let Some(full) = pairs.next() {
            for p in full.into_inner() {
                if p.as_rule() == Rule::shape {
                    out.push(self.shape(p)?);
                }
            }
        }
        Ok(out)
    }

    /// The parts of an `instruction` pair of the grammar.
    fn inst_parts(&self, pair: Pair<'a, Rule>) -> Result<InstParts<'a>> {
        let at = self.pos(&pair);
        let mut it = pair.into_inner().peekable();
        let root = it.next_if(|p| p.as_rule() == Rule::root_kw).is_some();
        let name = it
            .next()
            .ok_or_else(|| self.err(0, "instruction without a name"))?
            .as_str();
        let shape = it
            .next_if(|p| p.as_rule() == Rule::shape)
            .map(|p| p.as_str());
        let (call, attrs) = self.call_parts(it, self.off(name))?;
        Ok(InstParts {
            at,
            root,
            name,
            shape,
            call,
            attrs,
        })
    }

    /// The call and attributes of an instruction from the grammar's tokens
    /// after its name and shape (`op_call ~ attr_list`).
    fn call_parts(
        &self,
        mut it: impl Iterator<Item = Pair<'a, Rule>>,
        name_off: usize,
    ) -> Result<(CallParts<'a>, SmallVec<[&'a str; 4]>)> {
        let call = it
            .next()
            .ok_or_else(|| self.err(name_off, "instruction without an operation"))?;
        let call_off = self.pos(&call);
        let call =
            CallParts::from_pair(call).ok_or_else(|| self.err(call_off, "expected an opcode"))?;
        let attrs = it
            .filter(|a| a.as_rule() == Rule::attr)
            .map(|a| a.as_str())
            .collect();
        Ok((call, attrs))
    }

    /// Lowers an instruction into computation `cid`. Returns the id and
    /// whether it was marked `ROOT`.
    fn instruction(
        &mut self,
        parts: InstParts<'a>,
        cid: CompId,
        params: &mut Vec<(i64, InstId, usize)>,
    ) -> Result<(InstId, bool)> {
        let raw_name = parts.name.trim_end();
        let name_off = self.off(parts.name);
        self.name_chars(raw_name, name_off, "instruction name")?;
        let name = strip_pct(raw_name);
        let shape = match parts.shape {
            Some(s) => Some(self.shape_text(s)?),
            None => None,
        };
        let id = self.inst_rest(name, name_off, shape, parts.call, &parts.attrs, cid, params)?;
        Ok((id, parts.root))
    }

    /// Lowers the op call and attributes of an instruction named `name`
    /// (already stripped of `%`), appends it to `cid` and registers its name.
    #[allow(clippy::too_many_arguments)]
    fn inst_rest(
        &mut self,
        name: &'a str,
        name_off: usize,
        shape: Option<ShapeId>,
        call: CallParts<'a>,
        attr_texts: &[&'a str],
        cid: CompId,
        params: &mut Vec<(i64, InstId, usize)>,
    ) -> Result<InstId> {
        let call_off = self.off(call.text());
        let mut operands: SmallVec<[InstId; 3]> = SmallVec::new();
        let mut payload: Option<Payload> = None;
        // A constant's literal text, decoded once the shape is known.
        let mut lit_text: Option<&'a str> = None;
        let mut pend: Vec<PendingRef<'a>> = Vec::new();
        let mut wrapped_op: Option<&'a str> = None;
        let opcode = match call {
            CallParts::Constant { literal, .. } => {
                lit_text = Some(literal.trim());
                Opcode::Constant
            }
            CallParts::Generic {
                text: call_text,
                opcode: op,
                operands: inner,
            } => {
                let (opcode, wrapped) = self.opcode(op, call_off)?;
                wrapped_op = wrapped;
                if matches!(opcode, Opcode::Parameter | Opcode::Constant) {
                    (payload, lit_text) = self.generic_payload(opcode, call_text, call_off)?;
                }
                for operand in inner {
                    if payload.is_some() || lit_text.is_some() {
                        break;
                    }
                    self.operand(operand, &mut operands, &mut pend, cid, params)?;
                }
                opcode
            }
        };
        let attrs = self.inst_attrs(attr_texts, opcode, wrapped_op, &mut pend)?;
        let shape = match shape {
            Some(s) => s,
            None => self.inferred_shape(name, opcode, &operands, &attrs, &pend, call_off)?,
        };
        if let Some(lit) = lit_text {
            payload = Some(self.constant_literal(shape, lit, call_off)?);
        }
        // Slot 0 is the placeholder of an operand defined later.
        let first = operands.first().copied().filter(|op| op.index() != 0);
        let id = append_lowered(
            &mut self.m,
            Instruction {
                name: name.into(),
                opcode,
                shape,
                operands,
                payload,
                attrs,
                parent: cid,
            },
            first,
        );
        self.note_inst_offset(id, name_off);
        if let Some(n) = self.m.inst(id).parameter_number() {
            params.push((n, id, call_off));
        }
        if self.names.insert(name, id).is_some() {
            return Err(self.err(
                name_off,
                format!("instruction name %{name} is defined twice in this computation"),
            ));
        }
        for mut p in pend {
            p.user = id;
            self.pending.push(p);
        }
        Ok(id)
    }

    /// A constant's literal decoded against its shape; errors point into the
    /// literal's text.
    fn constant_literal(&self, shape: ShapeId, lit: &str, call_off: usize) -> Result<Payload> {
        let decoded = crate::attrs::literal::decode(&self.m, shape, lit).map_err(|(o, msg)| {
            let lit_off = self
                .text
                .get(call_off..)
                .and_then(|t| t.find(lit))
                .map_or(call_off, |p| call_off + p);
            self.err(lit_off + o, msg)
        })?;
        Ok(Payload::Literal(Box::new(decoded)))
    }

    /// The payload of `parameter(3)` / `constant(1.5)` written in the generic
    /// form (the parenthesised text): a parameter's number, or a constant's
    /// literal text, decoded once the shape is known.
    fn generic_payload(
        &self,
        opcode: Opcode,
        call_text: &'a str,
        call_off: usize,
    ) -> Result<(Option<Payload>, Option<&'a str>)> {
        let text = call_text;
        let open = text.find('(').map_or(text.len(), |p| p + 1);
        let close = text.rfind(')').unwrap_or(text.len()).max(open);
        let inner_text = text[open..close].trim();
        if opcode != Opcode::Parameter {
            return Ok((None, Some(inner_text)));
        }
        if inner_text.is_empty() || !inner_text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.err(
                call_off + open,
                format!(
                    "`parameter` expects its number, e.g. `parameter(0)`, found `{inner_text}`"
                ),
            ));
        }
        let n = inner_text
            .parse::<i64>()
            .map_err(|_| self.err(call_off, "parameter number out of range"))?;
        Ok((Some(Payload::Parameter(n)), None))
    }

    /// One operand of an instruction: a name resolved (or left pending,
    /// `pend`, until its definition), a nested instruction lowered, or a
    /// compact get-tuple-element (`%t#i#j`); written shapes are checked.
    fn operand(
        &mut self,
        operand: &'a str,
        operands: &mut SmallVec<[InstId; 3]>,
        pend: &mut Vec<PendingRef<'a>>,
        cid: CompId,
        params: &mut Vec<(i64, InstId, usize)>,
    ) -> Result<()> {
        let placeholder = InstId::from_index(0);
        let otext = operand;
        // `%x` (white space before the `,` aside): resolved here;
        // anything else is re-parsed below.
        let trimmed = otext.trim_end();
        if is_name(trimmed) {
            let otext = trimmed;
            let n = strip_pct(otext);
            match self.names.get(n) {
                Some(&target) => operands.push(target),
                None => {
                    let offset = self.off(operand);
                    pend.push(PendingRef {
                        user: placeholder,
                        slot: operands.len(),
                        name: n,
                        offset,
                        written: None,
                    });
                    operands.push(placeholder);
                }
            }
            return Ok(());
        }
        let Some((r, typed)) = self.operand_pairs(operand)? else {
            return Ok(());
        };
        if r.as_rule() == Rule::nested_inst {
            let nshape = match typed {
                Some(t) => Some(self.shape(t)?),
                None => None,
            };
            let nested_id = self.nested(r, nshape, cid, params)?;
            operands.push(nested_id);
            return Ok(());
        }
        let roff = self.pos(&r);
        let rtext = strip_pct(r.as_str());
        let mut ri = r.into_inner();
        let n = strip_pct(ri.next().map_or("", |p| p.as_str()));
        // `f32[2] %x`: the written shape must agree with %x's.
        let written = match typed {
            Some(t) => {
                let toff = self.pos(&t);
                Some((self.shape(t)?, toff))
            }
            None => None,
        };
        let resolved = if ri.next().is_some() {
            // `%t#i#j`: XLA's compact get-tuple-element (compact_gte.rs).
            self.compact_operand(rtext, roff, written)?
        } else if let Some(&target) = self.names.get(n) {
            if let Some((w, woff)) = written {
                self.check_written_shape(n, w, woff, target)?;
            }
            Some(target)
        } else {
            None
        };
        match resolved {
            Some(target) => operands.push(target),
            None => {
                pend.push(PendingRef {
                    user: placeholder,
                    slot: operands.len(),
                    name: rtext,
                    offset: roff,
                    written,
                });
                operands.push(placeholder);
            }
        }
        Ok(())
    }

    /// An operand that is not a plain name, parsed: the reference (or nested
    /// instruction) and the shape written before it; `None` for none.
    #[allow(clippy::type_complexity)]
    fn operand_pairs(
        &self,
        operand: &'a str,
    ) -> Result<Option<(Pair<'a, Rule>, Option<Pair<'a, Rule>>)>> {
        let otext = operand;
        let ooff = self.off(operand);
        let full = HloParser::parse(Rule::operand_full, otext).map_err(|e| {
            // The operand ends where the sub-parse expects its end.
            let mut err = pest_error(e, self.text, self.file, ooff);
            if let Error::Parse { message, .. } = &mut err {
                *message = message.replace(
                    "expected end of input",
                    "expected `,` or `)` after the operand",
                );
            }
            err
        })?;
        let mut oi = full
            .flatten()
            .filter(|p| p.as_rule() == Rule::operand_full)
            .take(1)
            .flat_map(|p| p.into_inner())
            .filter(|p| p.as_rule() != Rule::EOI);
        let Some(first) = oi.next() else {
            return Ok(None);
        };
        Ok(Some(if first.as_rule() == Rule::shape {
            match oi.next() {
                Some(r) => (r, Some(first)),
                None => return Ok(None),
            }
        } else {
            (first, None)
        }))
    }

    /// The attributes of an instruction (the wrapped opcode of the async
    /// shorthand first), decoded for `opcode`; a key twice is an error.
    fn inst_attrs(
        &mut self,
        attr_texts: &[&'a str],
        opcode: Opcode,
        wrapped_op: Option<&'a str>,
        pend: &mut Vec<PendingRef<'a>>,
    ) -> Result<Vec<Attr>> {
        let mut attrs = Vec::with_capacity(attr_texts.len() + usize::from(wrapped_op.is_some()));
        if let Some(w) = wrapped_op {
            attrs.push(Attr {
                key: ASYNC_WRAPPED_OPCODE.into(),
                value: AttrValue::Raw(w.into()),
            });
        }
        // Inline computations in the attributes add instructions; the id is
        // known only once they are lowered (pending references get it below).
        let placeholder_user = InstId::from_index(0);
        // The shorthand's async-start carries the wrapped op's attributes
        // (`custom-call-start(...), custom_call_target=...`): they are
        // decoded as that op's (its update and done carry only their own).
        let attr_op = match wrapped_op.and_then(Opcode::from_name) {
            Some(w) if opcode == Opcode::AsyncStart => w,
            _ => opcode,
        };
        for &a in attr_texts {
            let at = self.off(a);
            let attr = self.inst_attr(a, attr_op, placeholder_user, pend)?;
            // XLA: "attribute ... already exists".
            if attrs.iter().any(|x| x.key == attr.key) {
                return Err(self.err(at, format!("attribute `{}` appears twice", attr.key)));
            }
            attrs.push(attr);
        }
        Ok(attrs)
    }

    /// The shape of an instruction written without one, inferred from its
    /// operands (all defined before it) and attributes.
    fn inferred_shape(
        &mut self,
        name: &str,
        opcode: Opcode,
        operands: &[InstId],
        attrs: &[Attr],
        pend: &[PendingRef<'a>],
        call_off: usize,
    ) -> Result<ShapeId> {
        if let Some(p) = pend.iter().find(|p| p.slot != usize::MAX) {
            return Err(self.err(
                p.offset,
                format!(
                    "cannot infer the shape of %{name}: operand %{} is defined later; write the shape",
                    p.name
                ),
            ));
        }
        let s = self.infer_shape(opcode, operands, attrs).map_err(|msg| {
            self.err(
                call_off,
                format!("cannot infer the shape of %{name}: {msg}; write the shape"),
            )
        })?;
        Ok(self.m.intern_shape(s))
    }

    /// A nested instruction operand (`f32[] multiply(%a, %b)`); named like
    /// XLA names it, `<opcode>.anon`, made unique.
    fn nested(
        &mut self,
        pair: Pair<'a, Rule>,
        shape: Option<ShapeId>,
        cid: CompId,
        params: &mut Vec<(i64, InstId, usize)>,
    ) -> Result<InstId> {
        let off = self.pos(&pair);
        let it = pair.clone().into_inner();
        let opname = match it.clone().next() {
            Some(c) => match c.as_rule() {
                Rule::constant_call => "constant",
                _ => c.into_inner().next().map_or("op", |o| o.as_str()),
            },
            None => "op",
        };
        let base = format!("{opname}.anon");
        let mut name = base.clone();
        let mut k = 0usize;
        while self.names.contains_key(name.as_str()) {
            k += 1;
            name = format!("{base}.{k}");
        }
        let name: &'a str = self.scratch.alloc_str(&name);
        let (call, attrs) = self.call_parts(it, off)?;
        self.inst_rest(name, off, shape, call, &attrs, cid, params)
    }

    /// The opcode named `s`: an XLA opcode, or the async shorthand
    /// `<op>-start` / `<op>-update` / `<op>-done` for an opcode without its
    /// own async form (`custom-call-start`), which becomes async-start /
    /// async-update / async-done with the wrapped opcode returned beside it.
    fn opcode(&self, s: &'a str, off: usize) -> Result<(Opcode, Option<&'a str>)> {
        if let Some(op) = Opcode::from_name(s) {
            return Ok((op, None));
        }
        for (suffix, op) in [
            ("-start", Opcode::AsyncStart),
            ("-update", Opcode::AsyncUpdate),
            ("-done", Opcode::AsyncDone),
        ] {
            if let Some(base) = s.strip_suffix(suffix) {
                match Opcode::from_name(base) {
                    Some(w) if w.has_async_shorthand() => return Ok((op, Some(base))),
                    // These have their own async opcodes (or none at all).
                    Some(Opcode::Send | Opcode::Recv) => {
                        return Err(self.err(
                            off,
                            format!("unknown opcode `{s}`: {base} is asynchronous already; use {base} and {base}-done"),
                        ))
                    }
                    Some(Opcode::Parameter | Opcode::Constant) => {
                        return Err(self.err(
                            off,
                            format!("unknown opcode `{s}`: {base} cannot be wrapped in an async op"),
                        ))
                    }
                    Some(_) => {
                        return Err(self.err(
                            off,
                            format!("unknown opcode `{s}`: {base} has its own async form; use {base}-start and {base}-done"),
                        ))
                    }
                    None => {}
                }
            }
        }
        Err(self.err(off, format!("unknown opcode `{s}`")))
    }

    /// XLA's shape inference for an instruction written without a shape, for
    /// the opcodes whose result follows from operands and attributes alone.
    fn infer_shape(&self, opcode: Opcode, ops: &[InstId], attrs: &[Attr]) -> Result<Shape, String> {
        use crate::shape_infer as si;
        use Opcode::*;
        let m = &self.m;
        let ae = |e: crate::attrs::AttrError| e.to_string();
        let missing = |k: &str| format!("attribute `{k}` is missing");
        let shape_of = |i: usize| -> Result<&Shape, String> {
            ops.get(i)
                .map(|&o| m.inst_shape(o))
                .ok_or_else(|| format!("{opcode} needs at least {} operand(s)", i + 1))
        };
        let array_of = |i: usize| -> Result<&ArrayShape, String> {
            shape_of(i)?
                .as_array()
                .ok_or_else(|| format!("operand {i} of {opcode} is not an array"))
        };
        let to_real = |a: &ArrayShape| -> ArrayShape {
            let mut a = a.clone();
            a.elem = match a.elem {
                PrimType::C64 => PrimType::F32,
                PrimType::C128 => PrimType::F64,
                e => e,
            };
            a
        };
        let e = |r: Result<ArrayShape, si::ShapeError>| r.map(Shape::Array).map_err(|e| e.0);
        match opcode {
            Tuple => Ok(Shape::Tuple(ops.iter().map(|&o| m.inst(o).shape).collect())),
            GetTupleElement => {
                let idx = crate::attrs::int_in(attrs, "index")
                    .map_err(ae)?
                    .ok_or_else(|| missing("index"))?;
                let idx =
                    usize::try_from(idx).map_err(|_| "index is not a tuple index".to_string())?;
                match shape_of(0)? {
                    Shape::Tuple(v) => v.get(idx).map(|&s| m.shape(s).clone()).ok_or_else(|| {
                        format!("index={idx} is out of range for a tuple of {}", v.len())
                    }),
                    _ => Err("the operand of get-tuple-element is not a tuple".into()),
                }
            }
            AfterAll => Ok(Shape::Token),
            Compare => {
                let mut a = array_of(0)?.clone();
                a.elem = PrimType::Pred;
                Ok(Shape::Array(a))
            }
            Real | Imag => Ok(Shape::Array(to_real(array_of(0)?))),
            Abs => Ok(Shape::Array(to_real(array_of(0)?))),
            Select | Clamp => Ok(shape_of(1)?.clone()),
            While | OptBarrier | AddDependency => Ok(shape_of(0)?.clone()),
            Conditional => conditional_shape(m, attrs),
            Transpose => {
                let perm = crate::attrs::int_list_in(attrs, "dimensions")
                    .map_err(ae)?
                    .ok_or_else(|| missing("dimensions"))?;
                let operand = array_of(0)?;
                transposed_shape(operand, &perm)
            }
            Dot => {
                let d = crate::attrs::dot_dims_in(attrs)
                    .map_err(ae)?
                    .unwrap_or_default();
                e(si::infer_dot_shape(array_of(0)?, array_of(1)?, &d))
            }
            Pad => {
                let p = crate::attrs::padding_in(attrs)
                    .map_err(ae)?
                    .ok_or_else(|| missing("padding"))?;
                e(si::infer_pad_shape(array_of(0)?, p))
            }
            Slice => {
                let sl = crate::attrs::slice_in(attrs)
                    .map_err(ae)?
                    .ok_or_else(|| missing("slice"))?;
                e(si::infer_slice_shape(array_of(0)?, sl))
            }
            ReduceWindow => {
                let w = crate::attrs::window_in(attrs)
                    .map_err(ae)?
                    .ok_or_else(|| missing("window"))?;
                reduce_window_shape(ops.len(), w, &array_of)
            }
            op if op.is_elementwise()
                && !matches!(op, Convert | BitcastConvert | StochasticConvert) =>
            {
                Ok(Shape::Array(array_of(0)?.clone()))
            }
            _ => Err(format!("the shape of {opcode} is not inferred")),
        }
    }

    // ---- shapes ----

    /// Byte offset of a pair in the module text. Also right for pairs of a
    /// shape re-parsed from a slice of the text (see [`Lowerer::shape`]).
    fn pos(&self, p: &Pair<'a, Rule>) -> usize {
        self.off(p.as_str())
    }

    /// Byte offset of `s`, a slice of the module text.
    fn off(&self, s: &str) -> usize {
        (s.as_ptr() as usize)
            .wrapping_sub(self.text.as_ptr() as usize)
            .min(self.text.len())
    }

    /// Lowers a `shape` pair. The grammar matches shapes atomically (no inner
    /// tokens, which keeps the hot path lean); the structure of a shape not
    /// seen before is re-parsed from its text with `shape_full`. Identical
    /// shape text maps to the interned id directly.
    fn shape(&mut self, pair: Pair<'a, Rule>) -> Result<ShapeId> {
        self.shape_text(pair.as_str())
    }

    /// [`Self::shape`] of a `shape` token's text (a slice of the module text).
    fn shape_text(&mut self, key: &'a str) -> Result<ShapeId> {
        if let Some(&id) = self.shapes.get(key) {
            return Ok(id);
        }
        let off = self.off(key);
        let mut pairs = HloParser::parse(Rule::shape_full, key)
            .map_err(|e| pest_error(e, self.text, self.file, off))?;
        let inner = pairs
            .next()
            .and_then(|full| full.into_inner().next())
            .ok_or_else(|| self.err(off, "expected a shape"))?;
        let s = self.shape_inner(inner)?;
        let id = self.m.intern_shape(s);
        self.shapes.insert(key, id);
        Ok(id)
    }

    fn shape_inner(&mut self, pair: Pair<'a, Rule>) -> Result<Shape> {
        let off = self.pos(&pair);
        match pair.as_rule() {
            Rule::buffer_shape => {
                let inner = pair
                    .into_inner()
                    .next()
                    .ok_or_else(|| self.err(off, "expected a shape inside `b(...)`"))?;
                let id = self.shape(inner)?;
                // As in XLA: the buffer's value is an array.
                if self.m.shape(id).as_array().is_none() {
                    return Err(self.err(off, "a buffer shape `b(...)` must hold an array shape"));
                }
                Ok(Shape::Buffer(id))
            }
            Rule::tuple_shape => {
                let mut elems = SmallVec::new();
                for p in pair.into_inner() {
                    elems.push(self.shape(p)?);
                }
                Ok(Shape::Tuple(elems))
            }
            _ => {
                let mut it = pair.into_inner();
                let ty = it
                    .next()
                    .ok_or_else(|| self.err(off, "expected an element type"))?;
                let elem = PrimType::from_name(ty.as_str()).ok_or_else(|| {
                    self.err(off, format!("unknown element type `{}`", ty.as_str()))
                })?;
                let mut dims: SmallVec<[i64; 6]> = SmallVec::new();
                let mut dynamic: SmallVec<[bool; 6]> = SmallVec::new();
                let mut any_dynamic = false;
                let mut layout = None;
                for p in it {
                    match p.as_rule() {
                        Rule::dim => {
                            let t = p.as_str();
                            let (v, dy) = if t == "?" {
                                (UNBOUNDED_DIM, true)
                            } else if let Some(b) = t.strip_prefix("<=") {
                                (self.int(b.trim(), self.pos(&p))?, true)
                            } else {
                                (self.int(t, self.pos(&p))?, false)
                            };
                            any_dynamic |= dy;
                            dims.push(v);
                            dynamic.push(dy);
                        }
                        Rule::layout => layout = Some(self.layout(p)?),
                        _ => {}
                    }
                }
                if !any_dynamic {
                    dynamic.clear();
                }
                match elem {
                    PrimType::Token => {
                        if !dims.is_empty() {
                            return Err(self.err(off, "a token shape has no dimensions: `token[]`"));
                        }
                        Ok(Shape::Token)
                    }
                    PrimType::Opaque => Ok(Shape::Opaque),
                    _ => {
                        if let Some(l) = &layout {
                            if !l.minor_to_major.is_empty() && l.minor_to_major.len() != dims.len()
                            {
                                return Err(self.err(
                                    off,
                                    format!(
                                        "layout has {} dimensions but the shape has rank {}",
                                        l.minor_to_major.len(),
                                        dims.len()
                                    ),
                                ));
                            }
                        }
                        Ok(Shape::Array(ArrayShape {
                            elem,
                            dims,
                            dynamic,
                            layout,
                        }))
                    }
                }
            }
        }
    }

    fn int(&self, s: &str, off: usize) -> Result<i64> {
        s.parse::<i64>()
            .map_err(|_| self.err(off, format!("integer `{s}` out of range")))
    }

    fn layout(&mut self, pair: Pair<'a, Rule>) -> Result<Layout> {
        let mut l = Layout::from_minor_to_major([]);
        for p in pair.into_inner() {
            let off = self.pos(&p);
            match p.as_rule() {
                Rule::m2m => {
                    for d in p.into_inner() {
                        l.minor_to_major.push(self.int(d.as_str(), self.pos(&d))?);
                    }
                }
                Rule::dim_levels => {
                    for d in p.into_inner() {
                        let s = d.as_str();
                        let kind = match s.as_bytes().first() {
                            Some(b'C') => DimLevelType::Compressed,
                            Some(b'S') => DimLevelType::Singleton,
                            Some(b'H') => DimLevelType::LooseCompressed,
                            _ => DimLevelType::Dense,
                        };
                        l.dim_levels.push(DimLevel {
                            kind,
                            unique: !s.contains('+'),
                            ordered: !s.contains('~'),
                        });
                    }
                }
                Rule::tiles => {
                    for t in p.into_inner() {
                        let mut tile = SmallVec::new();
                        for d in t.into_inner() {
                            let s = d.as_str();
                            tile.push(if s == "*" {
                                Tile::COMBINE_DIM
                            } else {
                                self.int(s, self.pos(&d))?
                            });
                        }
                        l.tiles.push(Tile(tile));
                    }
                }
                Rule::tail_pad => l.tail_padding_alignment_in_elements = self.first_int(p)?,
                Rule::elem_size => l.element_size_in_bits = self.first_int(p)?,
                Rule::mem_space => l.memory_space = self.first_int(p)?,
                Rule::dyn_meta => l.dynamic_shape_metadata_prefix_bytes = self.first_int(p)?,
                Rule::index_type | Rule::pointer_type => {
                    let rule = p.as_rule();
                    let t = p.into_inner().next().map_or("", |t| t.as_str());
                    let ty = PrimType::from_name(t)
                        .ok_or_else(|| self.err(off, format!("unknown element type `{t}`")))?;
                    if rule == Rule::index_type {
                        l.index_primitive_type = Some(ty);
                    } else {
                        l.pointer_primitive_type = Some(ty);
                    }
                }
                Rule::split_config => {
                    let mut it = p.into_inner();
                    let dimension = match it.next() {
                        Some(d) => self.int(d.as_str(), off)?,
                        None => 0,
                    };
                    let mut split_indices = SmallVec::new();
                    for i in it {
                        split_indices.push(self.int(i.as_str(), off)?);
                    }
                    l.split_configs.push(SplitConfig {
                        dimension,
                        split_indices,
                    });
                }
                Rule::phys_shape => {
                    if let Some(s) = p.into_inner().next() {
                        l.physical_shape = Some(self.shape(s)?);
                    }
                }
                _ => {}
            }
        }
        Ok(l)
    }

    fn first_int(&self, p: Pair<'a, Rule>) -> Result<i64> {
        let off = self.pos(&p);
        match p.into_inner().next() {
            Some(i) => self.int(i.as_str(), off),
            None => Err(self.err(off, "expected an integer")),
        }
    }
}

/// Appends a lowered instruction to its computation, its shape
/// [`rederived_shape`] first (`first`: the first operand when it is defined
/// before the instruction).
pub(crate) fn append_lowered(
    m: &mut Module,
    mut inst: Instruction,
    first: Option<InstId>,
) -> InstId {
    inst.shape = rederived_shape(m, inst.opcode, first, inst.shape);
    m.append_inst(inst)
}

/// XLA builds `send` and `recv-done` from their operands and ignores the
/// data element of the written shape: a `send` carries its operand's shape
/// (layout included), a `recv-done` the data element of its `recv`. Doing
/// the same keeps the module XLA reads from our text equal to the one it
/// reads from the original. `first` is the first operand when it is defined
/// before the instruction (else `None`: the shape is left as written, and the
/// verifier reports a mismatch); other opcodes and shapes that are not
/// tuples are left as written too.
fn rederived_shape(
    m: &mut Module,
    opcode: Opcode,
    first: Option<InstId>,
    shape: ShapeId,
) -> ShapeId {
    if !matches!(opcode, Opcode::Send | Opcode::RecvDone) {
        return shape;
    }
    let Some(op) = first else {
        return shape;
    };
    let Shape::Tuple(elems) = m.shape(shape) else {
        return shape;
    };
    let op_shape = m.inst(op).shape;
    let data = match opcode {
        Opcode::Send => op_shape,
        _ => match m.shape(op_shape) {
            Shape::Tuple(e) if !e.is_empty() => e[0],
            _ => return shape,
        },
    };
    if elems.is_empty() || elems[0] == data {
        return shape;
    }
    let mut elems = elems.clone();
    elems[0] = data;
    m.intern_shape(Shape::Tuple(elems))
}

/// The byte offset of a `/*` in `value` that is not closed before its end.
pub(crate) fn unclosed_comment(value: &str) -> Option<usize> {
    if !value.as_bytes().contains(&b'*') {
        return None;
    }
    let mut base = 0;
    while let Some(p) = value[base..].find("/*") {
        match value[base + p + 2..].find("*/") {
            Some(q) => base += p + 2 + q + 2,
            None => return Some(base + p),
        }
    }
    None
}

/// `{%a, %b}`: a brace list of names (called computations), as opposed to a
/// computation written in place.
fn is_name_list(s: &str) -> bool {
    s.strip_prefix('{')
        .and_then(|v| v.strip_suffix('}'))
        .is_some_and(|inner| inner.split(',').all(|n| is_name(n.trim())))
}

/// `` `c` `` for a visible character, its escape (`'\n'`) otherwise.
fn describe_char(c: char) -> String {
    if c.is_whitespace() || c.is_control() {
        format!("{c:?}")
    } else {
        format!("`{c}`")
    }
}

/// The bytes of XLA names: `[A-Za-z0-9_.-]`.
const NAME_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b'-';
        b += 1;
    }
    t
};

fn is_name(s: &str) -> bool {
    is_plain_name(strip_pct(s))
}

/// A name without `%`: one or more of `[A-Za-z0-9_.-]`.
pub(crate) fn is_plain_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| NAME_BYTE[b as usize])
}

/// Splits `%a, %b` (the inside of `{...}`) into names without `%`, with the
/// byte offset of each (relative to the whole text, given the offset of the
/// inside).
fn split_names(inner: &str, base: usize) -> impl Iterator<Item = (&str, usize)> {
    let mut pos = 0usize;
    inner.split(',').filter_map(move |part| {
        let start = pos;
        pos += part.len() + 1;
        let lead = part.len() - part.trim_start().len();
        let t = part.trim();
        if t.is_empty() {
            None
        } else {
            Some((strip_pct(t), base + start + lead))
        }
    })
}

/// Equal but for layouts (dynamic dimensions must agree): a computation's
/// declared result against its root.
fn shapes_compatible(m: &Module, a: ShapeId, b: ShapeId) -> bool {
    shapes_equal_ignoring(m, a, b, false)
}

/// XLA's `ShapeUtil::Compatible`: equal but for layouts and whether a
/// dimension is dynamic (`s32[<=3]` and `s32[3]` agree).
fn shapes_compatible_ignoring_dynamic(m: &Module, a: ShapeId, b: ShapeId) -> bool {
    shapes_equal_ignoring(m, a, b, true)
}

fn shapes_equal_ignoring(m: &Module, a: ShapeId, b: ShapeId, ignore_dynamic: bool) -> bool {
    if a == b {
        return true;
    }
    let same = |p: ShapeId, q: ShapeId| shapes_equal_ignoring(m, p, q, ignore_dynamic);
    match (m.shape(a), m.shape(b)) {
        (Shape::Array(x), Shape::Array(y)) => {
            x.elem == y.elem && x.dims == y.dims && (ignore_dynamic || x.dynamic == y.dynamic)
        }
        (Shape::Tuple(x), Shape::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(&p, &q)| same(p, q))
        }
        (Shape::Buffer(x), Shape::Buffer(y)) => same(*x, *y),
        (Shape::Token, Shape::Token) | (Shape::Opaque, Shape::Opaque) => true,
        _ => false,
    }
}

/// Runs only the grammar (no lowering) and returns the number of tokens; for
/// profiling the parser (`examples/parse_speed`).
#[doc(hidden)]
pub fn grammar_only(text: &str) -> usize {
    HloParser::parse(Rule::module, text).map_or(0, |p| p.flatten().count())
}

/// A conditional's shape, as XLA's parser infers it: the root shape of the
/// first branch (`true_computation`, or the first of `branch_computations`),
/// which must be defined before the conditional.
fn conditional_shape(m: &Module, attrs: &[Attr]) -> Result<Shape, String> {
    let first = attrs
        .iter()
        .find_map(|a| match (&*a.key, &a.value) {
            ("true_computation", AttrValue::Comp(c)) => Some(*c),
            ("branch_computations", AttrValue::Comps(cs)) => cs.first().copied(),
            _ => None,
        })
        .ok_or("attribute `true_computation` or `branch_computations` is missing")?;
    let c = m.comp(first);
    if c.order.is_empty() {
        return Err(format!(
            "its first branch %{} is not defined before it",
            c.name
        ));
    }
    Ok(m.inst_shape(c.root).clone())
}

/// A transpose's shape: the operand's dimensions permuted by `perm`.
fn transposed_shape(operand: &ArrayShape, perm: &[i64]) -> Result<Shape, String> {
    let mut out = crate::shape_infer::infer_transpose_shape(operand, perm).map_err(|e| e.0)?;
    // Like XLA, the result is a bitcast of the operand: its layout is
    // the operand's (default if none) with dimensions renumbered.
    let mut inverse = vec![0i64; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        if let Some(slot) = usize::try_from(p).ok().and_then(|p| inverse.get_mut(p)) {
            *slot = i as i64;
        }
    }
    let src = operand
        .layout
        .clone()
        .unwrap_or_else(|| Layout::default_for_rank(operand.rank()));
    let mut l = src;
    l.minor_to_major = l
        .minor_to_major
        .iter()
        .map(|&d| {
            usize::try_from(d)
                .ok()
                .and_then(|d| inverse.get(d))
                .copied()
                .unwrap_or(d)
        })
        .collect();
    out.layout = Some(l);
    Ok(Shape::Array(out))
}

/// A reduce-window's shape (one input): its input's windowed, of its init
/// value's type. `array_of` gives operand `i`'s array shape.
fn reduce_window_shape<'s>(
    operands: usize,
    w: &[WindowDim],
    array_of: &dyn Fn(usize) -> Result<&'s ArrayShape, String>,
) -> Result<Shape, String> {
    let n = operands / 2;
    if n == 0 {
        return Err("reduce-window needs operands and init values".into());
    }
    let mut outs = Vec::with_capacity(n);
    for i in 0..n {
        let mut a =
            crate::shape_infer::infer_reduce_window_shape(array_of(i)?, w).map_err(|e| e.0)?;
        if let Ok(init) = array_of(n + i) {
            a.elem = init.elem;
        }
        outs.push(a);
    }
    if n == 1 {
        Ok(Shape::Array(outs.remove(0)))
    } else {
        Err("variadic reduce-window shapes are not inferred".into())
    }
}
