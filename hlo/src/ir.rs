//! The HLO intermediate representation: one [`Module`] owning typed arenas of
//! computations and instructions, plus interned shapes.
//!
//! Invariants (checked by the parser and the verifier, relied on everywhere else):
//! - every [`InstId`] / [`CompId`] stored in the module indexes its arena;
//! - an instruction belongs to exactly one computation ([`Instruction::parent`]),
//!   and appears exactly once in that computation's `order` (the schedule /
//!   text order), unless it was removed (tombstoned) by a rewrite;
//! - operands of an instruction live in the same computation;
//! - shapes are interned: two equal shapes have the same [`ShapeId`], so shape
//!   comparison is an integer comparison;
//! - "layout" always means the minor-to-major physical order of an array (plus
//!   XLA's tiling mini-language); instruction order is the *schedule*.

use std::fmt;
use std::num::NonZeroU32;

use indexmap::IndexSet;
use smallvec::SmallVec;

use crate::opcode::Opcode;

pub mod dims;
pub(crate) mod hash;
pub mod layout;
pub mod literal;
pub mod values;
pub mod xla;

pub use dims::{PadDim, SliceDim, WindowDim};

macro_rules! arena_id {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(NonZeroU32);

        impl $name {
            /// The id of the `index`-th element of its arena.
            #[inline]
            pub fn from_index(index: usize) -> Self {
                let raw = u32::try_from(index + 1).expect("arena overflow (more than u32::MAX entries)");
                // SAFETY-free: index + 1 >= 1.
                Self(NonZeroU32::new(raw).expect("index + 1 is non-zero"))
            }
            /// Position in its arena.
            #[inline]
            pub fn index(self) -> usize {
                (self.0.get() - 1) as usize
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self.index())
            }
        }
    };
}

arena_id!(
    /// An instruction of a [`Module`]. 4 bytes; `Option<InstId>` is 4 bytes too.
    InstId
);
arena_id!(
    /// A computation of a [`Module`].
    CompId
);

/// An interned [`Shape`] of a [`Module`].
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct ShapeId(pub(crate) u32);

impl ShapeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// XLA primitive (element) types. `Display` prints XLA's spelling (`f32`, `bf16`, `f8e4m3fn`, ...).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum PrimType {
    Pred,
    S1,
    S2,
    S4,
    S8,
    S16,
    S32,
    S64,
    U1,
    U2,
    U4,
    U8,
    U16,
    U32,
    U64,
    F16,
    Bf16,
    F32,
    F64,
    F8E5M2,
    F8E4M3,
    F8E4M3FN,
    F8E4M3B11FNUZ,
    F8E5M2FNUZ,
    F8E4M3FNUZ,
    F8E3M4,
    F8E8M0FNU,
    F4E2M1FN,
    C64,
    C128,
    Token,
    Opaque,
}

impl PrimType {
    /// XLA's text spelling of the type.
    pub fn name(self) -> &'static str {
        use PrimType::*;
        match self {
            Pred => "pred",
            S1 => "s1",
            S2 => "s2",
            S4 => "s4",
            S8 => "s8",
            S16 => "s16",
            S32 => "s32",
            S64 => "s64",
            U1 => "u1",
            U2 => "u2",
            U4 => "u4",
            U8 => "u8",
            U16 => "u16",
            U32 => "u32",
            U64 => "u64",
            F16 => "f16",
            Bf16 => "bf16",
            F32 => "f32",
            F64 => "f64",
            F8E5M2 => "f8e5m2",
            F8E4M3 => "f8e4m3",
            F8E4M3FN => "f8e4m3fn",
            F8E4M3B11FNUZ => "f8e4m3b11fnuz",
            F8E5M2FNUZ => "f8e5m2fnuz",
            F8E4M3FNUZ => "f8e4m3fnuz",
            F8E3M4 => "f8e3m4",
            F8E8M0FNU => "f8e8m0fnu",
            F4E2M1FN => "f4e2m1fn",
            C64 => "c64",
            C128 => "c128",
            Token => "token",
            Opaque => "opaque",
        }
    }

    /// Parses XLA's spelling; `None` for an unknown name.
    pub fn from_name(s: &str) -> Option<Self> {
        use PrimType::*;
        Some(match s {
            "pred" => Pred,
            "s1" => S1,
            "s2" => S2,
            "s4" => S4,
            "s8" => S8,
            "s16" => S16,
            "s32" => S32,
            "s64" => S64,
            "u1" => U1,
            "u2" => U2,
            "u4" => U4,
            "u8" => U8,
            "u16" => U16,
            "u32" => U32,
            "u64" => U64,
            "f16" => F16,
            "bf16" => Bf16,
            "f32" => F32,
            "f64" => F64,
            "f8e5m2" => F8E5M2,
            "f8e4m3" => F8E4M3,
            "f8e4m3fn" => F8E4M3FN,
            "f8e4m3b11fnuz" => F8E4M3B11FNUZ,
            "f8e5m2fnuz" => F8E5M2FNUZ,
            "f8e4m3fnuz" => F8E4M3FNUZ,
            "f8e3m4" => F8E3M4,
            "f8e8m0fnu" => F8E8M0FNU,
            "f4e2m1fn" => F4E2M1FN,
            "c64" => C64,
            "c128" => C128,
            "token" => Token,
            "opaque" => Opaque,
            _ => return None,
        })
    }

    /// Size of one element in bits (sub-byte types report their true width).
    pub fn bit_width(self) -> u32 {
        use PrimType::*;
        match self {
            Pred | S8 | U8 => 8,
            S1 | U1 => 1,
            S2 | U2 => 2,
            S4 | U4 | F4E2M1FN => 4,
            S16 | U16 | F16 | Bf16 => 16,
            S32 | U32 | F32 => 32,
            S64 | U64 | F64 | C64 => 64,
            C128 => 128,
            F8E5M2 | F8E4M3 | F8E4M3FN | F8E4M3B11FNUZ | F8E5M2FNUZ | F8E4M3FNUZ | F8E3M4
            | F8E8M0FNU => 8,
            Token | Opaque => 0,
        }
    }

    /// Size in bytes as XLA's `ShapeUtil::ByteSizeOfPrimitiveType` reports it (sub-byte types take one byte).
    pub fn byte_size(self) -> u32 {
        match self {
            PrimType::Token | PrimType::Opaque => 0,
            t => t.bit_width().div_ceil(8),
        }
    }

    pub fn is_float(self) -> bool {
        use PrimType::*;
        matches!(
            self,
            F16 | Bf16
                | F32
                | F64
                | F8E5M2
                | F8E4M3
                | F8E4M3FN
                | F8E4M3B11FNUZ
                | F8E5M2FNUZ
                | F8E4M3FNUZ
                | F8E3M4
                | F8E8M0FNU
                | F4E2M1FN
        )
    }

    pub fn is_complex(self) -> bool {
        matches!(self, PrimType::C64 | PrimType::C128)
    }
}

impl fmt::Display for PrimType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Size of an unbounded dynamic dimension (`?` in text), as in XLA (`Shape::kUnboundedSize`).
pub const UNBOUNDED_DIM: i64 = i64::MIN;

/// One tile of a tiled layout, e.g. `(8,128)`. A dimension of
/// [`Tile::COMBINE_DIM`] prints as `*` (XLA's `kCombineDimension`).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Tile(pub SmallVec<[i64; 2]>);

impl Tile {
    pub const COMBINE_DIM: i64 = i64::MIN;
}

/// A split config of a layout, `SC(dim:idx,idx,...)`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct SplitConfig {
    pub dimension: i64,
    pub split_indices: SmallVec<[i64; 2]>,
}

/// Level type of a dimension in a layout's `D(...)` section (sparse layouts).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum DimLevelType {
    Dense,
    Compressed,
    Singleton,
    LooseCompressed,
}

/// Per-dimension attributes of the `D(...)` section: the level type and the
/// `+` (not unique) and `~` (not ordered) markers.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct DimLevel {
    pub kind: DimLevelType,
    pub unique: bool,
    pub ordered: bool,
}

/// XLA's layout of an array shape: `{minor_to_major:D(..)T(..)(..)L(n)#(type)*(type)E(n)S(n)SC(..)P(shape)M(n)}`.
/// Fields at their default value are not printed.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct Layout {
    /// Dimension numbers from most minor to most major. Empty for scalars.
    pub minor_to_major: SmallVec<[i64; 6]>,
    pub dim_levels: Vec<DimLevel>,
    pub tiles: SmallVec<[Tile; 2]>,
    /// `L(n)`; 1 (the default) is not printed.
    pub tail_padding_alignment_in_elements: i64,
    /// `#(type)`.
    pub index_primitive_type: Option<PrimType>,
    /// `*(type)`.
    pub pointer_primitive_type: Option<PrimType>,
    /// `E(n)`; 0 = the element type's natural size.
    pub element_size_in_bits: i64,
    /// `S(n)`; 0 = default memory space.
    pub memory_space: i64,
    /// `SC(...)`.
    pub split_configs: Vec<SplitConfig>,
    /// `P(shape)`.
    pub physical_shape: Option<ShapeId>,
    /// `M(n)`.
    pub dynamic_shape_metadata_prefix_bytes: i64,
}

impl Layout {
    /// A plain (untiled) layout with the given minor-to-major order.
    pub fn from_minor_to_major(m2m: impl IntoIterator<Item = i64>) -> Self {
        Layout {
            minor_to_major: m2m.into_iter().collect(),
            tail_padding_alignment_in_elements: 1,
            ..Default::default()
        }
    }

    /// The default (descending, row-major) layout of a rank-`rank` array: `{rank-1,...,1,0}`.
    pub fn default_for_rank(rank: usize) -> Self {
        Self::from_minor_to_major(Self::default_order(rank))
    }
}

/// An array shape `f32[2,<=3,?]{...}`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ArrayShape {
    pub elem: PrimType,
    /// Dimension sizes; the bound for `<=N` dims, [`UNBOUNDED_DIM`] for `?`.
    pub dims: SmallVec<[i64; 6]>,
    /// Empty when no dimension is dynamic, otherwise one flag per dimension.
    pub dynamic: SmallVec<[bool; 6]>,
    /// `None` when the text had no layout.
    pub layout: Option<Layout>,
}

impl ArrayShape {
    pub fn rank(&self) -> usize {
        self.dims.len()
    }
    pub fn is_dynamic_dim(&self, d: usize) -> bool {
        self.dynamic.get(d).copied().unwrap_or(false)
    }
    /// Number of elements (bounds of dynamic dims); `None` if unbounded or overflowing.
    pub fn element_count(&self) -> Option<i64> {
        self.dims.iter().try_fold(
            1i64,
            |acc, &d| if d < 0 { None } else { acc.checked_mul(d) },
        )
    }
}

/// A shape: an array, a tuple of shapes, a buffer, a token, or opaque.
// Arrays are nearly every shape and each distinct shape is stored once (the
// module interns them), so boxing the large variant would only add an
// allocation and an indirection to the common case.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Shape {
    Array(ArrayShape),
    Tuple(SmallVec<[ShapeId; 4]>),
    /// XLA's buffer shape `b(f32[2,4]{1,0})` (`Shape::IsBuffer` in
    /// xla/shape.h): a mutable buffer holding a value of the inner shape,
    /// which is always an array (XLA's parser and `ShapeUtil::MakeBufferShape`
    /// accept only an array inside).
    Buffer(ShapeId),
    Token,
    Opaque,
}

impl Shape {
    pub fn as_array(&self) -> Option<&ArrayShape> {
        match self {
            Shape::Array(a) => Some(a),
            _ => None,
        }
    }
    pub fn is_tuple(&self) -> bool {
        matches!(self, Shape::Tuple(_))
    }
}

/// The value of an instruction attribute (`key=value` after the operands).
///
/// The parser decodes every attribute whose key XLA types into a typed
/// variant (integers, floats, booleans and boolean lists, integer lists and
/// lists of them, windows, padding, slices, enumerations, operand
/// precisions, source-target pairs, op metadata, shardings, replica groups,
/// frontend attributes, output-operand aliasing, convolution dimension
/// labels, domains, statistics, result accuracy, strings, shapes
/// (`operand_layout_constraints`, `outfeed_shape`), called computations,
/// control predecessors; in the module header also the entry computation
/// layout, input-output aliasing, buffer donors and the original value
/// recovery table, its recovery modules parsed); the printer prints the
/// typed form in XLA's spelling, and consumers read the typed value through
/// the accessors of [`crate::attrs`] (never re-parsing text). Everything
/// else (`backend_config`, a newer XLA's attributes) is kept as the exact
/// source text and printed back verbatim, so nothing is lost in a round trip.
#[derive(Clone, PartialEq, Debug)]
pub enum AttrValue {
    /// Verbatim text of the value, e.g. `"{...json...}"` (`backend_config`),
    /// or an attribute the IR does not type.
    Raw(Box<str>),
    /// A single called computation (`to_apply=`, `calls=` with one callee, `body=`, `condition=`, ...).
    Comp(CompId),
    /// A list of called computations (`branch_computations={%a, %b}`, `called_computations={...}`, `calls={...}`).
    Comps(SmallVec<[CompId; 2]>),
    /// A list of instructions (`control-predecessors={%a, %b}`).
    Insts(SmallVec<[InstId; 2]>),
    /// An integer (`index=1`, `channel_id=5`, `feature_group_count=2`, ...).
    Int(i64),
    /// `true` / `false` (`is_stable=true`, ...).
    Bool(bool),
    /// An integer list (`dimensions={1,0}`, `lhs_contracting_dims={1}`, ...).
    Ints(Box<[i64]>),
    /// `window={size=3x3 stride=2x2 pad=0_1x0_1 ...}`, one entry a dimension.
    Window(Box<[WindowDim]>),
    /// `padding=0_1x2_2_1` of a pad, one entry a dimension.
    Padding(Box<[PadDim]>),
    /// `slice={[0:2], [1:5:2]}`, one entry a dimension.
    Slice(Box<[SliceDim]>),
    /// One of the names XLA defines for the key, in XLA's spelling
    /// (`kind=kLoop`, `direction=LT`, `type=TOTALORDER`,
    /// `api_version=API_VERSION_TYPED_FFI`, `schedule=SCHEDULE_LATEST`, ...).
    Enum(&'static str),
    /// `operand_precision={highest,default}`: XLA's `PrecisionConfig::Precision`
    /// values (0 default, 1 high, 2 highest, 3 packed_nibble), one an operand.
    Precisions(Box<[u8]>),
    /// `source_target_pairs={{0,1},{1,2}}`.
    Pairs(Box<[[i64; 2]]>),
    /// `metadata={op_type="..." op_name="..." source_file="..." ...}`, as
    /// XLA's `OpMetadata` message (the fields its text carries).
    Metadata(Box<xla::OpMetadata>),
    /// `sharding={devices=[2,1]0,1}`, `{{replicated}, {maximal device=0}}`,
    /// as XLA's `OpSharding` message (the fields its text carries).
    Sharding(Box<xla::OpSharding>),
    /// `replica_groups={{0,1},{2,3}}` or the iota form `[2,2]<=[4]`.
    ReplicaGroups(Box<values::ReplicaGroups>),
    /// `frontend_attributes={key="value",...}` of an instruction, as XLA's
    /// `FrontendAttributes` message (keys in order).
    FrontendAttributes(Box<xla::FrontendAttributes>),
    /// `output_to_operand_aliasing={{1}: (0, {}), ...}`: which output
    /// (shape index) aliases which operand (number, shape index).
    Aliasing(Box<[xla::OutputOperandAliasing]>),
    /// `dim_labels=b01f_01io->b01f`: the convolution dimension numbers.
    ConvDims(Box<dims::ConvDims>),
    /// `domain={kind="sharding", entry={...}, exit={...}}`.
    Domain(Box<values::DomainShardings>),
    /// `statistics={visualizing_index=1,stat-1=33}`, as XLA's `StatisticsViz`.
    Statistics(Box<xla::StatisticsViz>),
    /// `result_accuracy={mode=highest}` or `{tolerance={...}}`, as XLA's
    /// `ResultAccuracy`.
    ResultAccuracy(Box<xla::ResultAccuracy>),
    /// `origin={{"name"}}`, `{({"a"}, {"b" {1}})}`, `{[synthetic_call]}`:
    /// the value's origin in the unoptimized module.
    OriginalValue(Box<values::OriginalValue>),
    /// `sparsity_config={rhs={sparsity=3x4 dimension=0 stride=1}}`, as
    /// XLA's `SparsityConfig`.
    Sparsity(Box<xla::SparsityConfig>),
    /// A string XLA defines (`custom_call_target="foo"`,
    /// `async_execution_thread=`, `infeed_config=`, `outfeed_config=`),
    /// unescaped; `backend_config` stays [`AttrValue::Raw`].
    Str(Box<[u8]>),
    /// A floating-point value (`epsilon=0.001` of the batch-norms; XLA holds
    /// it as an `f32`).
    Float(f32),
    /// A list of integer lists (`slice_sizes={{128,32},{1}}` of a
    /// collective-permute).
    IntLists(Box<[Box<[i64]>]>),
    /// A list of booleans (`parameter_replication={false,true}`,
    /// `allow_spmd_sharding_propagation_to_output={true}` of the header).
    Bools(Box<[bool]>),
    /// A shape with its layout (`outfeed_shape=(u32[3]{0}, pred[])`).
    Shape(ShapeId),
    /// Shapes with their layouts, one an operand
    /// (`operand_layout_constraints={f32[2,3]{1,0}, token[]}` of a custom-call).
    Shapes(Box<[ShapeId]>),
    /// A custom call's `literal=s32[2]{0} {1, 2}` (a tuple written with each
    /// element's shape: `( s32[4]{0} {...}, pred[] true )`): the literal's
    /// shape (with its layout; a tuple's from its elements') and values.
    Literal(ShapeId, Box<literal::Literal>),
    /// `entry_computation_layout={(f32[2]{0}, ...)->f32[2]{0}}` of the module
    /// header: the entry's parameter and result shapes as the caller sees them.
    ProgramLayout(Box<ProgramLayout>),
    /// `input_output_alias={ {0}: (0, {}, may-alias), ... }` of the module
    /// header, as XLA's `HloInputOutputAliasProto`.
    InputOutputAlias(Box<xla::HloInputOutputAliasProto>),
    /// `buffer_donor={ (0, {}), ... }` of the module header, as XLA's
    /// `HloBufferDonorProto`.
    BufferDonor(Box<xla::HloBufferDonorProto>),
    /// `origin_recovery_table={ {"a"} : {"b"}, "module text" ... }` of the
    /// module header: each recovery module parsed into a [`Module`].
    RecoveryTable(Box<values::RecoveryTable>),
}

/// The shapes of `entry_computation_layout={(params)->result}`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ProgramLayout {
    pub params: Box<[ShapeId]>,
    pub result: ShapeId,
}

/// Key of the attribute that records the wrapped opcode of XLA's async
/// shorthand: `custom-call-start(...)` is kept as [`Opcode::AsyncStart`] with
/// this attribute (first, value `custom-call`); likewise `-update` / `-done`.
/// The key cannot occur in text (`#` is not an attribute-name character);
/// the printer turns it back into the shorthand.
pub const ASYNC_WRAPPED_OPCODE: &str = "#wrapped_opcode";

/// A `key=value` attribute, in source order.
#[derive(Clone, PartialEq, Debug)]
pub struct Attr {
    pub key: Box<str>,
    pub value: AttrValue,
}

/// What a parameter or constant holds in place of operands.
#[derive(Clone, Debug, PartialEq)]
pub enum Payload {
    /// `parameter(3)`: the parameter number.
    Parameter(i64),
    /// `constant(...)`: the literal, decoded against the constant's shape.
    Literal(Box<literal::Literal>),
}

/// One HLO instruction.
#[derive(Clone, Debug)]
pub struct Instruction {
    /// Name without the leading `%`.
    pub name: Box<str>,
    pub opcode: Opcode,
    pub shape: ShapeId,
    pub operands: SmallVec<[InstId; 3]>,
    /// The operation's payload in parentheses that is not an operand list,
    /// decoded at parse time: `parameter(3)`'s number, `constant({1,2})`'s
    /// literal. `None` for every other opcode (`iota()` has no payload,
    /// just no operands).
    pub payload: Option<Payload>,
    /// `key=value` attributes in source order (including `control-predecessors`,
    /// calls, metadata, backend_config, sharding, ...).
    pub attrs: Vec<Attr>,
    /// The computation this instruction belongs to.
    pub parent: CompId,
}

impl Instruction {
    pub fn attr(&self, key: &str) -> Option<&AttrValue> {
        self.attrs.iter().find(|a| &*a.key == key).map(|a| &a.value)
    }
    /// The raw text of an attribute kept verbatim.
    pub fn raw_attr(&self, key: &str) -> Option<&str> {
        match self.attr(key)? {
            AttrValue::Raw(s) => Some(s),
            _ => None,
        }
    }
    /// Sets (replacing) or appends an attribute.
    pub fn set_attr(&mut self, key: &str, value: AttrValue) {
        match self.attrs.iter_mut().find(|a| &*a.key == key) {
            Some(a) => a.value = value,
            None => self.attrs.push(Attr {
                key: key.into(),
                value,
            }),
        }
    }
    pub fn remove_attr(&mut self, key: &str) -> Option<AttrValue> {
        let pos = self.attrs.iter().position(|a| &*a.key == key)?;
        Some(self.attrs.remove(pos).value)
    }
    /// Every computation this instruction calls, in attribute order.
    pub fn called_computations(&self) -> impl Iterator<Item = CompId> + '_ {
        self.attrs.iter().flat_map(|a| {
            let s: &[CompId] = match &a.value {
                AttrValue::Comp(c) => std::slice::from_ref(c),
                AttrValue::Comps(cs) => cs,
                _ => &[],
            };
            s.iter().copied()
        })
    }
    /// Control predecessors (`control-predecessors={...}`).
    pub fn control_predecessors(&self) -> &[InstId] {
        match self.attr("control-predecessors") {
            Some(AttrValue::Insts(v)) => v,
            _ => &[],
        }
    }
    /// `parameter(N)`'s number.
    pub fn parameter_number(&self) -> Option<i64> {
        if self.opcode != Opcode::Parameter {
            return None;
        }
        match self.payload {
            Some(Payload::Parameter(n)) => Some(n),
            _ => None,
        }
    }
    /// A constant's literal.
    pub fn literal(&self) -> Option<&literal::Literal> {
        match &self.payload {
            Some(Payload::Literal(l)) => Some(l),
            _ => None,
        }
    }
}

/// A computation: a named list of instructions with a root.
#[derive(Clone, Debug)]
pub struct Computation {
    /// Name without the leading `%`.
    pub name: Box<str>,
    /// Instructions in schedule (text) order. Removed instructions are absent.
    pub order: Vec<InstId>,
    /// Parameters by parameter number.
    pub params: Vec<InstId>,
    pub root: InstId,
    pub is_entry: bool,
    /// Trailing attributes after the body, e.g. `, execution_thread="foo"`
    /// (a [`AttrValue::Str`]; others verbatim).
    pub attrs: Vec<Attr>,
}

/// The parts of XLA's module config that an `HloModuleProto` carries and
/// HLO text does not: XLA keeps them on the module it reads from a proto
/// (its config, and its proto when it writes one again) and prints none of
/// them, and its text parser has no header attribute for them. The
/// shardings are as [`crate::attrs::xla::sharding_from_proto`] reads them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProtoConfig {
    /// `device_assignment` (15): the device of each replica of each
    /// computation (partition).
    pub device_assignment: Option<xla::DeviceAssignmentProto>,
    /// `spmd_output_sharding` (12): the entry result's sharding.
    pub spmd_output_sharding: Option<xla::OpSharding>,
    /// `spmd_parameters_shardings` (14): the entry parameters' shardings.
    pub spmd_parameters_shardings: Vec<xla::OpSharding>,
}

impl ProtoConfig {
    /// None of the fields is set.
    pub fn is_empty(&self) -> bool {
        self.device_assignment.is_none()
            && self.spmd_output_sharding.is_none()
            && self.spmd_parameters_shardings.is_empty()
    }
}

/// An HLO module.
#[derive(Clone, Debug)]
pub struct Module {
    pub name: Box<str>,
    /// Header attributes (`is_scheduled=true`, `entry_computation_layout={...}`, ...) in source order.
    pub attrs: Vec<Attr>,
    /// The `FileNames`/`FunctionNames`/`FileLocations`/`StackFrames`
    /// sections, as XLA's stack frame index (the ids op metadata's
    /// `stack_frame_id` refers to; a frame's `parent_frame_id` as the proto
    /// counts it, one less than the text's). `None` when the module has none.
    pub stack_frames: Option<Box<xla::StackFrameIndexProto>>,
    /// The device assignment and SPMD shardings an `HloModuleProto` carries
    /// ([`ProtoConfig`]); `None` for a module parsed from text, which cannot
    /// say them.
    pub config: Option<Box<ProtoConfig>>,
    pub entry: CompId,
    insts: Vec<Instruction>,
    comps: Vec<Computation>,
    /// Computations in print order (the source order).
    comp_order: Vec<CompId>,
    /// Interned shapes (FxHash: hashing a shape with SipHash cost more
    /// than the rest of interning it; the order is insertion order either way).
    shapes: IndexSet<Shape, std::hash::BuildHasherDefault<hash::FxHasher>>,
    /// Side table keyed by [`InstId`]: the byte offset of each instruction's
    /// name in the text it was parsed from ([`NO_SOURCE`] for none). Set by
    /// the parser; instructions added later have none. Errors found on the IR
    /// (the verifier) use it to point at `file:line:col`.
    source_offsets: Vec<u32>,
    /// Ids that instructions and computations had in an `HloModuleProto`
    /// this module was read from (indexed by arena position; absent where
    /// the IR made or parsed the element). Kept so ids survive a proto round
    /// trip; text does not carry them.
    proto_ids: ProtoIds,
}

/// Ids of an `HloModuleProto` (see [`Module::inst_proto_id`]).
#[derive(Clone, Debug, Default)]
struct ProtoIds {
    insts: Vec<Option<i64>>,
    comps: Vec<Option<i64>>,
    module: Option<i64>,
}

/// "No source offset" in [`Module`]'s side table.
const NO_SOURCE: u32 = u32::MAX;

impl Module {
    /// An empty module. The entry computation must be added before use; `entry`
    /// is a placeholder until then.
    pub fn new(name: impl Into<Box<str>>) -> Self {
        Module {
            name: name.into(),
            attrs: Vec::new(),
            stack_frames: None,
            config: None,
            entry: CompId::from_index(0),
            insts: Vec::new(),
            comps: Vec::new(),
            comp_order: Vec::new(),
            shapes: IndexSet::default(),
            source_offsets: Vec::new(),
            proto_ids: ProtoIds::default(),
        }
    }

    // ---- source positions ----
    /// Byte offset of `id`'s name in the text the module was parsed from;
    /// `None` for instructions a pass added (or a module built in code).
    pub fn source_offset(&self, id: InstId) -> Option<usize> {
        match self.source_offsets.get(id.index()) {
            Some(&o) if o != NO_SOURCE => Some(o as usize),
            _ => None,
        }
    }
    /// Records the source offset of each instruction (indexed by
    /// [`InstId::index`]); offsets past `u32::MAX - 1` are dropped.
    pub(crate) fn set_source_offsets(&mut self, offsets: Vec<u32>) {
        self.source_offsets = offsets;
    }

    // ---- proto ids ----
    /// The id instruction `i` had in the `HloModuleProto` it was read from.
    pub fn inst_proto_id(&self, i: InstId) -> Option<i64> {
        self.proto_ids.insts.get(i.index()).copied().flatten()
    }
    /// Records the proto id of instruction `i` (see [`Module::inst_proto_id`]).
    pub fn set_inst_proto_id(&mut self, i: InstId, id: i64) {
        let v = &mut self.proto_ids.insts;
        if v.len() <= i.index() {
            v.resize(i.index() + 1, None);
        }
        v[i.index()] = Some(id);
    }
    /// The id computation `c` had in the `HloModuleProto` it was read from.
    pub fn comp_proto_id(&self, c: CompId) -> Option<i64> {
        self.proto_ids.comps.get(c.index()).copied().flatten()
    }
    /// Records the proto id of computation `c`.
    pub fn set_comp_proto_id(&mut self, c: CompId, id: i64) {
        let v = &mut self.proto_ids.comps;
        if v.len() <= c.index() {
            v.resize(c.index() + 1, None);
        }
        v[c.index()] = Some(id);
    }
    /// The module id of the `HloModuleProto` this module was read from.
    pub fn module_proto_id(&self) -> Option<i64> {
        self.proto_ids.module
    }
    /// Records the module's proto id.
    pub fn set_module_proto_id(&mut self, id: i64) {
        self.proto_ids.module = Some(id);
    }

    // ---- shapes ----
    pub fn intern_shape(&mut self, s: Shape) -> ShapeId {
        let (i, _) = self.shapes.insert_full(s);
        ShapeId(i as u32)
    }
    pub fn shape(&self, id: ShapeId) -> &Shape {
        &self.shapes[id.index()]
    }
    /// The id of a shape already interned, if any.
    pub fn find_shape(&self, s: &Shape) -> Option<ShapeId> {
        self.shapes.get_index_of(s).map(|i| ShapeId(i as u32))
    }
    pub fn num_shapes(&self) -> usize {
        self.shapes.len()
    }

    // ---- computations ----
    /// Adds a computation at the end of the print order.
    pub fn add_computation(&mut self, c: Computation) -> CompId {
        let id = CompId::from_index(self.comps.len());
        if c.is_entry {
            self.entry = id;
        }
        self.comps.push(c);
        self.comp_order.push(id);
        id
    }
    /// Reserves a computation id before its body is known (for forward references
    /// while parsing); fill it with [`Module::comp_mut`]. Not in the print order
    /// until [`Module::place_computation`].
    pub fn reserve_computation(&mut self, name: impl Into<Box<str>>) -> CompId {
        let id = CompId::from_index(self.comps.len());
        self.comps.push(Computation {
            name: name.into(),
            order: Vec::new(),
            params: Vec::new(),
            root: InstId::from_index(0),
            is_entry: false,
            attrs: Vec::new(),
        });
        id
    }
    /// Appends a reserved computation to the print order.
    pub fn place_computation(&mut self, id: CompId) {
        if self.comps[id.index()].is_entry {
            self.entry = id;
        }
        self.comp_order.push(id);
    }
    /// Moves `id` in the print order to just before `before` (a new callee must print before its caller).
    pub fn move_computation_before(&mut self, id: CompId, before: CompId) {
        if let Some(p) = self.comp_order.iter().position(|&c| c == id) {
            self.comp_order.remove(p);
        }
        let at = self
            .comp_order
            .iter()
            .position(|&c| c == before)
            .unwrap_or(self.comp_order.len());
        self.comp_order.insert(at, id);
    }
    /// Drops `id` from the print order (nothing may call it any more); its
    /// instructions stay in the arena, unscheduled.
    pub fn remove_computation(&mut self, id: CompId) {
        self.comp_order.retain(|&c| c != id);
    }
    pub fn comp(&self, id: CompId) -> &Computation {
        &self.comps[id.index()]
    }
    pub fn comp_mut(&mut self, id: CompId) -> &mut Computation {
        &mut self.comps[id.index()]
    }
    /// Computations in print order.
    pub fn computations(&self) -> impl ExactSizeIterator<Item = CompId> + '_ {
        self.comp_order.iter().copied()
    }
    pub fn num_computations(&self) -> usize {
        self.comp_order.len()
    }
    pub fn entry_computation(&self) -> &Computation {
        self.comp(self.entry)
    }
    pub fn find_computation(&self, name: &str) -> Option<CompId> {
        self.comp_order
            .iter()
            .copied()
            .find(|&c| &*self.comps[c.index()].name == name)
    }
    /// The instruction named `name`: the first in print order (computations
    /// in print order, each in schedule order), since a name is unique only
    /// within its computation. Ids past the arena (a module not verified
    /// yet) are passed over.
    pub fn find_instruction(&self, name: &str) -> Option<InstId> {
        self.computations()
            .find_map(|c| self.find_instruction_in(c, name))
    }
    /// The instruction named `name` in computation `c`'s schedule (the first
    /// one; ids past the arena are passed over, as in [`Module::find_instruction`]).
    pub fn find_instruction_in(&self, c: CompId, name: &str) -> Option<InstId> {
        self.comps[c.index()]
            .order
            .iter()
            .copied()
            .find(|&i| self.insts.get(i.index()).is_some_and(|x| &*x.name == name))
    }

    // ---- instructions ----
    /// Adds an instruction to the arena (not to any schedule; see [`Module::append_inst`]).
    pub fn add_inst(&mut self, inst: Instruction) -> InstId {
        let id = InstId::from_index(self.insts.len());
        self.insts.push(inst);
        id
    }
    /// Adds an instruction at the end of its parent computation's order.
    pub fn append_inst(&mut self, inst: Instruction) -> InstId {
        let parent = inst.parent;
        let id = self.add_inst(inst);
        self.comps[parent.index()].order.push(id);
        id
    }
    /// Adds an instruction just before `before` in its parent computation's order.
    pub fn insert_inst_before(&mut self, before: InstId, inst: Instruction) -> InstId {
        let parent = inst.parent;
        let id = self.add_inst(inst);
        let order = &mut self.comps[parent.index()].order;
        let at = order
            .iter()
            .position(|&i| i == before)
            .unwrap_or(order.len());
        order.insert(at, id);
        id
    }
    pub fn inst(&self, id: InstId) -> &Instruction {
        &self.insts[id.index()]
    }
    pub fn inst_mut(&mut self, id: InstId) -> &mut Instruction {
        &mut self.insts[id.index()]
    }
    /// Arena size (including instructions no longer scheduled).
    pub fn num_insts(&self) -> usize {
        self.insts.len()
    }
    /// Number of scheduled instructions over all computations.
    pub fn instruction_count(&self) -> usize {
        self.comp_order
            .iter()
            .map(|c| self.comps[c.index()].order.len())
            .sum()
    }
    /// Every scheduled instruction: computations in print order, instructions in schedule order.
    pub fn all_instructions(&self) -> impl Iterator<Item = InstId> + '_ {
        self.comp_order
            .iter()
            .flat_map(move |c| self.comps[c.index()].order.iter().copied())
    }
    /// Shape of an instruction.
    pub fn inst_shape(&self, id: InstId) -> &Shape {
        self.shape(self.insts[id.index()].shape)
    }
    /// Replaces every use of `old` by `new` among the operands of `users`.
    pub fn replace_operand(&mut self, user: InstId, old: InstId, new: InstId) {
        for op in self.insts[user.index()].operands.iter_mut() {
            if *op == old {
                *op = new;
            }
        }
    }
    /// Users of each instruction of `comp` (by operand edges), indexed by arena
    /// position; deterministic (schedule order, deduplicated).
    pub fn users(&self, comp: CompId) -> Vec<SmallVec<[InstId; 4]>> {
        let mut users: Vec<SmallVec<[InstId; 4]>> = vec![SmallVec::new(); self.insts.len()];
        for &u in &self.comps[comp.index()].order {
            for &op in &self.insts[u.index()].operands {
                let list = &mut users[op.index()];
                if list.last() != Some(&u) {
                    list.push(u);
                }
            }
        }
        users
    }
    /// A name not used by any instruction of the module, built from `base`.
    pub fn unique_inst_name(&self, base: &str) -> String {
        let stem = base.split('.').next().unwrap_or(base);
        let mut max = 0u64;
        for i in &self.insts {
            if let Some(rest) = i.name.strip_prefix(stem).and_then(|r| r.strip_prefix('.')) {
                if let Ok(n) = rest.parse::<u64>() {
                    max = max.max(n);
                }
            }
        }
        format!("{stem}.{}", max + 1)
    }
}
