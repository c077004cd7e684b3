//! Typed instruction attributes: how XLA types each attribute key
//! ([`value_kind`]), the parse-time decoding of the typed kinds into
//! [`AttrValue`] variants ([`decode`]), and the accessors consumers read them
//! through.
//!
//! The parser decodes each typed kind once ([`decode`]; the module header's
//! through [`decode_header`]); a malformed value is a parse error with
//! `file:line:col`. The accessors (of instructions and of the module header)
//! return the stored values and never parse text. What the IR keeps as text
//! (`backend_config`, a newer XLA's attributes) is checked at parse time by
//! [`crate::semantic`] where XLA checks it.
//!
//! Convention of every accessor: `Ok(None)` when the attribute is absent,
//! `Err` when it is present with a value of another kind (only possible in a
//! module edited in code), `Ok(Some(v))` otherwise. Nothing here panics.

use crate::ir::{Attr, AttrValue, Instruction};
use crate::opcode::Opcode;
use crate::shape_infer::Dims;

pub use crate::shape_infer::{ConvDims, DotDims, PadDim, SliceDim, WindowDim};

/// Decoders of attribute text (the typed kinds) and format checks of the
/// attributes kept as text (used by [`crate::semantic`]).
pub mod validate;

/// Constant literals: the one decoder of literal text, the typed
/// [`literal::Literal`] the IR keeps, its printer and proto values.
pub mod literal;

/// Attribute kinds whose typed form is an XLA proto message (shardings,
/// metadata, replica groups, ...).
pub mod xla;

/// An attribute that is present but cannot be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("attribute `{key}`: {message}")]
pub struct AttrError {
    pub key: String,
    pub message: String,
}

impl From<AttrError> for crate::Error {
    fn from(e: AttrError) -> Self {
        crate::Error::Module(e.to_string())
    }
}

pub type AttrResult<T> = Result<Option<T>, AttrError>;

fn bad(key: &str, message: impl Into<String>) -> AttrError {
    AttrError {
        key: key.to_string(),
        message: message.into(),
    }
}

/// Removes one level of surrounding quotes and undoes `\"`, `\\`, `\n`, `\t`
/// escapes. Text without quotes is returned as is.
pub fn unquote(text: &str) -> String {
    let t = text.trim();
    let Some(inner) = t.strip_prefix('"').and_then(|r| r.strip_suffix('"')) else {
        return t.to_string();
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(o) => out.push(o),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// How XLA types an attribute value, by key.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ValueKind {
    Int,
    Float,
    Bool,
    IntList,
    Window,
    Padding,
    ResultAccuracy,
    ApiVersion,
    Slice,
    SourceTargetPairs,
    Precisions,
    Metadata,
    Sharding,
    ReplicaGroups,
    FrontendAttributes,
    Aliasing,
    ConvDims,
    Domain,
    Statistics,
    OriginalValue,
    Sparsity,
    Str,
    BoolList,
    IntLists,
    /// `algorithm=` of a dot (`PrecisionConfig.Algorithm`).
    DotAlgorithm,
    /// `direction=` of a compare.
    Direction,
    /// One of the listed names; ASCII case ignored when the flag is set.
    Enum(&'static [&'static str], bool),
}

pub(crate) fn value_kind(key: &str, op: Opcode) -> Option<ValueKind> {
    use ValueKind::*;
    Some(match key {
        "index"
        | "iota_dimension"
        | "channel_id"
        | "feature_group_count"
        | "batch_group_count"
        | "k"
        | "inferred_dimension"
        | "exponent_bits"
        | "mantissa_bits"
        | "delta"
        | "index_vector_dim"
        | "num_carries"
        | "cross_program_prefetch_index"
        | "feature_index" => Int,
        "epsilon" => Float,
        "is_stable"
        | "constrain_layout"
        | "use_global_device_ids"
        | "indices_are_sorted"
        | "unique_indices"
        | "is_host_transfer"
        | "custom_call_has_side_effect"
        | "largest"
        | "is_composite"
        | "is_reverse"
        | "is_associative"
        | "left_side"
        | "unit_diagonal"
        | "lower" => Bool,
        "dimensions"
        | "dynamic_slice_sizes"
        | "lhs_batch_dims"
        | "rhs_batch_dims"
        | "lhs_contracting_dims"
        | "rhs_contracting_dims"
        | "lhs_ragged_dims"
        | "rhs_group_dims"
        | "offset_dims"
        | "collapsed_slice_dims"
        | "start_index_map"
        | "operand_batching_dims"
        | "start_indices_batching_dims"
        | "update_window_dims"
        | "inserted_window_dims"
        | "scatter_dims_to_operand_dims"
        | "input_batching_dims"
        | "scatter_indices_batching_dims"
        | "fft_length" => IntList,
        // collective-permute's `slice_sizes={{..},{..}}` is a list of lists.
        "slice_sizes" if op == Opcode::Gather => IntList,
        "slice_sizes" => IntLists,
        "window" => Window,
        "padding" => Padding,
        "result_accuracy" => ResultAccuracy,
        "api_version" => ApiVersion,
        "slice" => Slice,
        "source_target_pairs" => SourceTargetPairs,
        "operand_precision" => Precisions,
        "metadata" => Metadata,
        "sharding" => Sharding,
        "replica_groups" => ReplicaGroups,
        "frontend_attributes" => FrontendAttributes,
        "output_to_operand_aliasing" => Aliasing,
        "dim_labels" => ConvDims,
        "domain" => Domain,
        "statistics" => Statistics,
        "origin" => OriginalValue,
        "sparsity_config" if op == Opcode::Convolution => Sparsity,
        "custom_call_target" | "async_execution_thread" | "infeed_config" | "outfeed_config" => Str,
        "direction" if op == Opcode::Compare => Direction,
        // Keys with another meaning on other opcodes, or too generic to
        // claim everywhere.
        "kind" if op == Opcode::Fusion => Enum(&["kLoop", "kInput", "kOutput", "kCustom"], false),
        // Upper case only, as XLA's parser reads it.
        "type" if op == Opcode::Compare => {
            Enum(&["FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"], false)
        }
        "algorithm" if op == Opcode::RngBitGenerator => {
            Enum(&["rng_default", "rng_three_fry", "rng_philox"], true)
        }
        "algorithm"
            if matches!(
                op,
                Opcode::Dot | Opcode::RaggedDot | Opcode::ScaledDot | Opcode::Convolution
            ) =>
        {
            DotAlgorithm
        }
        "parameter_replication" => BoolList,
        "fft_type" => Enum(&["FFT", "IFFT", "RFFT", "IRFFT"], false),
        "transpose_a" if op == Opcode::TriangularSolve => {
            Enum(&["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"], false)
        }
        "distribution" => Enum(&["rng_invalid", "rng_uniform", "rng_normal"], true),
        "schedule" => Enum(
            &["SCHEDULE_NONE", "SCHEDULE_LATEST", "SCHEDULE_EARLIEST"],
            false,
        ),
        "padding_type" => Enum(&["PADDING_INVALID", "PADDING_VALID", "PADDING_SAME"], false),
        "conv_kind" => Enum(&["fprop", "wgrad", "dgrad", "unset"], false),
        _ => return None,
    })
}

/// Decodes `text` as the value of attribute `key` of an `op` instruction:
/// `None` when the IR keeps that attribute as text, else the typed value or
/// the message saying what is wrong.
pub(crate) fn decode(key: &str, op: Opcode, text: &str) -> Option<Result<AttrValue, String>> {
    match value_kind(key, op)? {
        // A named sharding in newer syntax is kept as text.
        ValueKind::Sharding => match xla::sharding(text) {
            Err(e) if e == xla::NAMED_SHARDING_NEWER => None,
            r => Some(r.map(|s| AttrValue::Sharding(Box::new(s)))),
        },
        kind => Some(decode_typed(key, kind, text)),
    }
}

/// Decodes `text` as the value of the module header attribute `key`
/// (`HloModule name, key=value, ...`): `None` when the IR keeps it as text
/// (`entry_computation_layout` is read by the parser, whose shapes it holds),
/// else the typed value or the message saying what is wrong.
pub(crate) fn decode_header(key: &str, text: &str) -> Option<Result<AttrValue, String>> {
    Some(match key {
        "is_scheduled" | "alias_passthrough_params" | "use_spmd_partitioning" => {
            validate::boolean(key, text).map(AttrValue::Bool)
        }
        "replica_count" | "num_partitions" => validate::integer(key, text).map(AttrValue::Int),
        // A single boolean or one per parameter (output).
        "allow_spmd_sharding_propagation_to_parameters"
        | "allow_spmd_sharding_propagation_to_output" => {
            if text.trim_start().starts_with('{') {
                validate::bool_list(key, text).map(AttrValue::Bools)
            } else {
                validate::boolean(key, text).map(AttrValue::Bool)
            }
        }
        "input_output_alias" => xla::input_output_alias(text)
            .map(|a| AttrValue::InputOutputAlias(Box::new(a)))
            .map_err(|e| format!("`input_output_alias=`: {e}")),
        "buffer_donor" => xla::buffer_donor(text)
            .map(|b| AttrValue::BufferDonor(Box::new(b)))
            .map_err(|e| format!("`buffer_donor=`: {e}")),
        "frontend_attributes" => {
            xla::frontend_attributes(text).map(|f| AttrValue::FrontendAttributes(Box::new(f)))
        }
        _ => return None,
    })
}

/// The typed value of a typed `kind` (see [`decode`]).
pub(crate) fn decode_typed(key: &str, kind: ValueKind, text: &str) -> Result<AttrValue, String> {
    use validate as v;
    Ok(match kind {
        ValueKind::Int => AttrValue::Int(v::integer(key, text)?),
        ValueKind::Bool => AttrValue::Bool(v::boolean(key, text)?),
        ValueKind::IntList => AttrValue::Ints(v::int_list(key, text)?),
        ValueKind::Window => AttrValue::Window(v::window(text)?),
        ValueKind::Padding => AttrValue::Padding(v::padding(text)?),
        ValueKind::Slice => AttrValue::Slice(v::slice(text)?),
        ValueKind::ApiVersion => AttrValue::Enum(v::api_version(text)?),
        ValueKind::Direction => AttrValue::Enum(v::direction(text)?),
        ValueKind::Enum(allowed, any_case) => {
            AttrValue::Enum(v::enum_value(key, text, allowed, any_case)?)
        }
        ValueKind::SourceTargetPairs => AttrValue::Pairs(v::source_target_pairs(text)?),
        ValueKind::Precisions => AttrValue::Precisions(v::precisions(text)?),
        ValueKind::Metadata => AttrValue::Metadata(Box::new(xla::metadata(text)?)),
        ValueKind::Sharding => AttrValue::Sharding(Box::new(xla::sharding(text)?)),
        ValueKind::ReplicaGroups => AttrValue::ReplicaGroups(Box::new(xla::replica_groups(text)?)),
        ValueKind::ResultAccuracy => {
            AttrValue::ResultAccuracy(Box::new(xla::result_accuracy(text)?))
        }
        ValueKind::Str => AttrValue::Str(xla::string_value(text)?.into_boxed_slice()),
        ValueKind::Domain => AttrValue::Domain(Box::new(xla::domain(text)?)),
        ValueKind::Statistics => AttrValue::Statistics(Box::new(xla::statistics(text)?)),
        ValueKind::Sparsity => AttrValue::Sparsity(Box::new(xla::sparsity_config(text)?)),
        ValueKind::OriginalValue => AttrValue::OriginalValue(Box::new(xla::original_value(text)?)),
        ValueKind::ConvDims => {
            AttrValue::ConvDims(Box::new(ConvDims::parse(text).map_err(|e| e.0)?))
        }
        ValueKind::Aliasing => {
            AttrValue::Aliasing(xla::output_operand_aliasing(text)?.into_boxed_slice())
        }
        ValueKind::FrontendAttributes => {
            AttrValue::FrontendAttributes(Box::new(xla::frontend_attributes(text)?))
        }
        ValueKind::Float => AttrValue::Float(v::float(key, text)?),
        ValueKind::BoolList => AttrValue::Bools(v::bool_list(key, text)?),
        ValueKind::IntLists => AttrValue::IntLists(
            xla::int_list_list(text)
                .map_err(|e| format!("`{key}=` expects a list of integer lists: {e}"))?
                .into_iter()
                .map(Vec::into_boxed_slice)
                .collect(),
        ),
        ValueKind::DotAlgorithm => {
            AttrValue::Enum(xla::DOT_ALGORITHMS[xla::dot_algorithm(text)? as usize])
        }
    })
}

/// The value of attribute `key` in `attrs` (an instruction's, or one being built).
pub fn find<'a>(attrs: &'a [Attr], key: &str) -> Option<&'a AttrValue> {
    attrs.iter().find(|a| &*a.key == key).map(|a| &a.value)
}

fn mismatch(key: &str, v: &AttrValue, want: &str) -> AttrError {
    bad(key, format!("expected {want}, found {}", describe(v)))
}

/// Whether `value` is what the parser's decoding of attribute `key` of an
/// `op` instruction gives ([`value_kind`]): the variant of the key's kind
/// on that opcode, and for an enumeration one of its names. The parser's
/// values are so by construction; the proto reader, which types fields
/// straight from their messages, checks each against it, so that a field
/// an opcode does not carry in that form (a gather's `slice_sizes` set on
/// an add, where the key means a collective-permute's list of lists) is the
/// error its text would be. A key the table does not type for `op` passes.
pub(crate) fn check_kind(key: &str, op: Opcode, value: &AttrValue) -> Result<(), String> {
    use AttrValue as V;
    use ValueKind as K;
    let Some(kind) = value_kind(key, op) else {
        return Ok(());
    };
    let names: &[&str] = match kind {
        K::ApiVersion => &validate::CUSTOM_CALL_API_VERSIONS,
        K::DotAlgorithm => &xla::DOT_ALGORITHMS,
        K::Direction => &validate::DIRECTIONS,
        K::Enum(allowed, _) => allowed,
        _ => &[],
    };
    let ok = match (kind, value) {
        (K::ApiVersion | K::DotAlgorithm | K::Direction | K::Enum(..), V::Enum(e)) => {
            names.contains(e)
        }
        (K::Int, V::Int(_))
        | (K::Float, V::Float(_))
        | (K::Bool, V::Bool(_))
        | (K::IntList, V::Ints(_))
        | (K::Window, V::Window(_))
        | (K::Padding, V::Padding(_))
        | (K::ResultAccuracy, V::ResultAccuracy(_))
        | (K::Slice, V::Slice(_))
        | (K::SourceTargetPairs, V::Pairs(_))
        | (K::Precisions, V::Precisions(_))
        | (K::Metadata, V::Metadata(_))
        | (K::Sharding, V::Sharding(_))
        | (K::ReplicaGroups, V::ReplicaGroups(_))
        | (K::FrontendAttributes, V::FrontendAttributes(_))
        | (K::Aliasing, V::Aliasing(_))
        | (K::ConvDims, V::ConvDims(_))
        | (K::Domain, V::Domain(_))
        | (K::Statistics, V::Statistics(_))
        | (K::OriginalValue, V::OriginalValue(_))
        | (K::Sparsity, V::Sparsity(_))
        | (K::Str, V::Str(_))
        | (K::BoolList, V::Bools(_))
        | (K::IntLists, V::IntLists(_)) => true,
        _ => false,
    };
    if ok {
        return Ok(());
    }
    if names.is_empty() {
        Err(format!(
            "{} is not a value of `{key}=` on {op}",
            describe(value)
        ))
    } else {
        Err(format!(
            "{} is not a value of `{key}=` on {op}; expected one of {}",
            describe(value),
            names.join(", ")
        ))
    }
}

/// What a value is, for messages (`an integer list`, `` `LT` ``).
fn describe(v: &AttrValue) -> String {
    match v {
        AttrValue::Raw(t) => format!("the text `{t}`"),
        AttrValue::Comp(_) | AttrValue::Comps(_) => "computations".to_string(),
        AttrValue::Insts(_) => "instructions".to_string(),
        AttrValue::Int(_) => "an integer".to_string(),
        AttrValue::Bool(_) => "a boolean".to_string(),
        AttrValue::Ints(_) => "an integer list".to_string(),
        AttrValue::Window(_) => "a window".to_string(),
        AttrValue::Padding(_) => "a padding config".to_string(),
        AttrValue::Slice(_) => "a slice".to_string(),
        AttrValue::Enum(e) => format!("`{e}`"),
        AttrValue::Precisions(_) => "operand precisions".to_string(),
        AttrValue::Pairs(_) => "source-target pairs".to_string(),
        AttrValue::Metadata(_) => "op metadata".to_string(),
        AttrValue::Sharding(_) => "a sharding".to_string(),
        AttrValue::ReplicaGroups(_) => "replica groups".to_string(),
        AttrValue::FrontendAttributes(_) => "frontend attributes".to_string(),
        AttrValue::Aliasing(_) => "output-operand aliasing".to_string(),
        AttrValue::ConvDims(_) => "convolution dimension labels".to_string(),
        AttrValue::Domain(_) => "a sharding domain".to_string(),
        AttrValue::Str(_) => "a string".to_string(),
        AttrValue::Statistics(_) => "statistics".to_string(),
        AttrValue::ResultAccuracy(_) => "a result accuracy".to_string(),
        AttrValue::OriginalValue(_) => "an original value".to_string(),
        AttrValue::Sparsity(_) => "a sparsity config".to_string(),
        AttrValue::Float(_) => "a float".to_string(),
        AttrValue::Bools(_) => "a boolean list".to_string(),
        AttrValue::IntLists(_) => "a list of integer lists".to_string(),
        AttrValue::Shape(_) => "a shape".to_string(),
        AttrValue::Literal(..) => "a literal".to_string(),
        AttrValue::Shapes(_) => "a shape list".to_string(),
        AttrValue::ProgramLayout(_) => "a computation layout".to_string(),
        AttrValue::InputOutputAlias(_) => "input-output aliasing".to_string(),
        AttrValue::BufferDonor(_) => "buffer donors".to_string(),
        AttrValue::RecoveryTable(_) => "an original value recovery table".to_string(),
    }
}

/// An integer list in `attrs` (`dimensions={1,0}`).
pub fn int_list_in(attrs: &[Attr], key: &str) -> AttrResult<Dims> {
    match find(attrs, key) {
        None => Ok(None),
        Some(AttrValue::Ints(v)) => Ok(Some(v.iter().copied().collect())),
        Some(o) => Err(mismatch(key, o, "an integer list")),
    }
}

/// An integer in `attrs` (`index=1`).
pub fn int_in(attrs: &[Attr], key: &str) -> AttrResult<i64> {
    match find(attrs, key) {
        None => Ok(None),
        Some(AttrValue::Int(v)) => Ok(Some(*v)),
        Some(o) => Err(mismatch(key, o, "an integer")),
    }
}

/// The window in `attrs`.
pub fn window_in(attrs: &[Attr]) -> AttrResult<&[WindowDim]> {
    match find(attrs, "window") {
        None => Ok(None),
        Some(AttrValue::Window(v)) => Ok(Some(v)),
        Some(o) => Err(mismatch("window", o, "a window")),
    }
}

/// The padding config in `attrs`.
pub fn padding_in(attrs: &[Attr]) -> AttrResult<&[PadDim]> {
    match find(attrs, "padding") {
        None => Ok(None),
        Some(AttrValue::Padding(v)) => Ok(Some(v)),
        Some(o) => Err(mismatch("padding", o, "a padding config")),
    }
}

/// The slice in `attrs`.
pub fn slice_in(attrs: &[Attr]) -> AttrResult<&[SliceDim]> {
    match find(attrs, "slice") {
        None => Ok(None),
        Some(AttrValue::Slice(v)) => Ok(Some(v)),
        Some(o) => Err(mismatch("slice", o, "a slice")),
    }
}

/// The dot dimension numbers in `attrs` (see [`Instruction::dot_dims`]).
pub fn dot_dims_in(attrs: &[Attr]) -> AttrResult<DotDims> {
    let keys = [
        "lhs_batch_dims",
        "rhs_batch_dims",
        "lhs_contracting_dims",
        "rhs_contracting_dims",
    ];
    if keys.iter().all(|k| find(attrs, k).is_none()) {
        return Ok(None);
    }
    let get =
        |k: &str| -> Result<Dims, AttrError> { Ok(int_list_in(attrs, k)?.unwrap_or_default()) };
    Ok(Some(DotDims {
        lhs_batch: get(keys[0])?,
        rhs_batch: get(keys[1])?,
        lhs_contracting: get(keys[2])?,
        rhs_contracting: get(keys[3])?,
    }))
}

impl Instruction {
    /// An integer list attribute such as `dimensions={1,0}`.
    pub fn int_list_attr(&self, key: &str) -> AttrResult<Dims> {
        int_list_in(&self.attrs, key)
    }

    /// An integer attribute such as `index=2`, `iota_dimension=0`, `channel_id=5`.
    pub fn int_attr(&self, key: &str) -> AttrResult<i64> {
        int_in(&self.attrs, key)
    }

    /// A boolean attribute such as `is_stable=true`.
    pub fn bool_attr(&self, key: &str) -> AttrResult<bool> {
        match self.attr(key) {
            None => Ok(None),
            Some(AttrValue::Bool(b)) => Ok(Some(*b)),
            Some(o) => Err(mismatch(key, o, "true or false")),
        }
    }

    /// A string attribute with quotes removed (`custom_call_target="foo"` ->
    /// `foo`; bytes that are not UTF-8 replaced); a value kept as text
    /// (`backend_config=...`, `kind=kLoop` on an opcode XLA does not type
    /// it for) is returned unquoted.
    pub fn string_attr(&self, key: &str) -> Option<String> {
        match self.attr(key)? {
            AttrValue::Str(b) => Some(String::from_utf8_lossy(b).into_owned()),
            AttrValue::Raw(t) => Some(unquote(t)),
            _ => None,
        }
    }

    /// `dimensions={...}` (broadcast, transpose, reduce, reverse, sort, concatenate, ...).
    pub fn dimensions(&self) -> AttrResult<Dims> {
        self.int_list_attr("dimensions")
    }

    /// `index=N` of a get-tuple-element.
    pub fn tuple_index(&self) -> AttrResult<i64> {
        self.int_attr("index")
    }

    /// `iota_dimension=N`.
    pub fn iota_dimension(&self) -> AttrResult<i64> {
        self.int_attr("iota_dimension")
    }

    /// `dynamic_slice_sizes={...}`.
    pub fn dynamic_slice_sizes(&self) -> AttrResult<Dims> {
        self.int_list_attr("dynamic_slice_sizes")
    }

    /// The dimension numbers of a dot: `lhs_batch_dims`, `rhs_batch_dims`,
    /// `lhs_contracting_dims`, `rhs_contracting_dims` (each empty when
    /// absent). `None` when none of the four is present.
    pub fn dot_dims(&self) -> AttrResult<DotDims> {
        dot_dims_in(&self.attrs)
    }

    /// `window={size=3x3 stride=2x2 pad=0_1x0_1 ...}`.
    pub fn window(&self) -> AttrResult<Vec<WindowDim>> {
        Ok(window_in(&self.attrs)?.map(<[WindowDim]>::to_vec))
    }

    /// `dim_labels=b01f_01io->b01f` of a convolution.
    pub fn conv_dims(&self) -> AttrResult<ConvDims> {
        match self.attr("dim_labels") {
            None => Ok(None),
            Some(AttrValue::ConvDims(d)) => Ok(Some(ConvDims::clone(d))),
            Some(o) => Err(mismatch("dim_labels", o, "convolution dimension labels")),
        }
    }

    /// `slice={[0:2], [1:5:2]}`.
    pub fn slice(&self) -> AttrResult<Vec<SliceDim>> {
        Ok(slice_in(&self.attrs)?.map(<[SliceDim]>::to_vec))
    }

    /// `padding=0_1x2_3_1` of a pad.
    pub fn padding(&self) -> AttrResult<Vec<PadDim>> {
        Ok(padding_in(&self.attrs)?.map(<[PadDim]>::to_vec))
    }

    /// An enumerated attribute (`kind=kLoop`, `api_version=...`,
    /// `schedule=...`) in XLA's spelling; `None` when absent or not decoded
    /// as one (a key XLA does not type on this opcode).
    pub fn enum_attr(&self, key: &str) -> Option<&'static str> {
        match self.attr(key) {
            Some(AttrValue::Enum(e)) => Some(e),
            _ => None,
        }
    }

    /// `kind=kLoop` of a fusion.
    pub fn fusion_kind(&self) -> Option<&'static str> {
        self.enum_attr("kind")
    }

    /// `direction=LT` of a compare.
    pub fn comparison_direction(&self) -> Option<&'static str> {
        self.enum_attr("direction")
    }

    /// `operand_precision={...}` as XLA's `PrecisionConfig::Precision` values.
    pub fn operand_precision(&self) -> AttrResult<&[u8]> {
        match self.attr("operand_precision") {
            None => Ok(None),
            Some(AttrValue::Precisions(p)) => Ok(Some(p)),
            Some(o) => Err(mismatch("operand_precision", o, "operand precisions")),
        }
    }

    /// `source_target_pairs={{0,1},...}` of a collective-permute.
    pub fn source_target_pairs(&self) -> AttrResult<&[[i64; 2]]> {
        match self.attr("source_target_pairs") {
            None => Ok(None),
            Some(AttrValue::Pairs(p)) => Ok(Some(p)),
            Some(o) => Err(mismatch("source_target_pairs", o, "source-target pairs")),
        }
    }

    /// `metadata={...}`.
    pub fn metadata(&self) -> AttrResult<&crate::ir::xla::OpMetadata> {
        match self.attr("metadata") {
            None => Ok(None),
            Some(AttrValue::Metadata(md)) => Ok(Some(md)),
            Some(o) => Err(mismatch("metadata", o, "op metadata")),
        }
    }

    /// `sharding={...}`.
    pub fn sharding(&self) -> AttrResult<&crate::ir::xla::OpSharding> {
        match self.attr("sharding") {
            None => Ok(None),
            Some(AttrValue::Sharding(s)) => Ok(Some(s)),
            Some(o) => Err(mismatch("sharding", o, "a sharding")),
        }
    }

    /// `replica_groups=...` of a collective.
    pub fn replica_groups(&self) -> AttrResult<&xla::ReplicaGroups> {
        match self.attr("replica_groups") {
            None => Ok(None),
            Some(AttrValue::ReplicaGroups(g)) => Ok(Some(g)),
            Some(o) => Err(mismatch("replica_groups", o, "replica groups")),
        }
    }

    /// `frontend_attributes={...}`.
    pub fn frontend_attributes(&self) -> AttrResult<&crate::ir::xla::FrontendAttributes> {
        match self.attr("frontend_attributes") {
            None => Ok(None),
            Some(AttrValue::FrontendAttributes(f)) => Ok(Some(f)),
            Some(o) => Err(mismatch("frontend_attributes", o, "frontend attributes")),
        }
    }

    /// `output_to_operand_aliasing={...}`.
    pub fn output_operand_aliasing(&self) -> AttrResult<&[crate::ir::xla::OutputOperandAliasing]> {
        match self.attr("output_to_operand_aliasing") {
            None => Ok(None),
            Some(AttrValue::Aliasing(v)) => Ok(Some(v)),
            Some(o) => Err(mismatch(
                "output_to_operand_aliasing",
                o,
                "output-operand aliasing",
            )),
        }
    }

    /// `domain={kind="sharding", entry=..., exit=...}`.
    pub fn domain(&self) -> AttrResult<&xla::DomainShardings> {
        match self.attr("domain") {
            None => Ok(None),
            Some(AttrValue::Domain(d)) => Ok(Some(d)),
            Some(o) => Err(mismatch("domain", o, "a sharding domain")),
        }
    }

    /// `statistics={...}`.
    pub fn statistics(&self) -> AttrResult<&crate::ir::xla::StatisticsViz> {
        match self.attr("statistics") {
            None => Ok(None),
            Some(AttrValue::Statistics(s)) => Ok(Some(s)),
            Some(o) => Err(mismatch("statistics", o, "statistics")),
        }
    }

    /// `sparsity_config={...}`.
    pub fn sparsity_config(&self) -> AttrResult<&crate::ir::xla::SparsityConfig> {
        match self.attr("sparsity_config") {
            None => Ok(None),
            Some(AttrValue::Sparsity(s)) => Ok(Some(s)),
            Some(o) => Err(mismatch("sparsity_config", o, "a sparsity config")),
        }
    }

    /// `origin={...}`.
    pub fn original_value(&self) -> AttrResult<&crate::attrs::xla::OriginalValue> {
        match self.attr("origin") {
            None => Ok(None),
            Some(AttrValue::OriginalValue(v)) => Ok(Some(v)),
            Some(o) => Err(mismatch("origin", o, "an original value")),
        }
    }

    /// `result_accuracy={...}`.
    pub fn result_accuracy(&self) -> AttrResult<&crate::ir::xla::ResultAccuracy> {
        match self.attr("result_accuracy") {
            None => Ok(None),
            Some(AttrValue::ResultAccuracy(r)) => Ok(Some(r)),
            Some(o) => Err(mismatch("result_accuracy", o, "a result accuracy")),
        }
    }

    /// A floating-point attribute (`epsilon=0.001`).
    pub fn float_attr(&self, key: &str) -> AttrResult<f32> {
        match self.attr(key) {
            None => Ok(None),
            Some(AttrValue::Float(x)) => Ok(Some(*x)),
            Some(o) => Err(mismatch(key, o, "a float")),
        }
    }

    /// A boolean list (`parameter_replication={false,true}`).
    pub fn bool_list_attr(&self, key: &str) -> AttrResult<&[bool]> {
        match self.attr(key) {
            None => Ok(None),
            Some(AttrValue::Bools(v)) => Ok(Some(v)),
            Some(o) => Err(mismatch(key, o, "a boolean list")),
        }
    }

    /// `operand_layout_constraints={shape, ...}` of a custom-call: one shape
    /// (with its layout) an operand.
    pub fn operand_layout_constraints(&self) -> AttrResult<&[crate::ir::ShapeId]> {
        match self.attr("operand_layout_constraints") {
            None => Ok(None),
            Some(AttrValue::Shapes(v)) => Ok(Some(v)),
            Some(o) => Err(mismatch("operand_layout_constraints", o, "a shape list")),
        }
    }

    /// `literal=...` of a custom call: the literal's shape and values.
    pub fn custom_call_literal(
        &self,
    ) -> AttrResult<(crate::ir::ShapeId, &crate::attrs::literal::Literal)> {
        match self.attr("literal") {
            None => Ok(None),
            Some(AttrValue::Literal(s, l)) => Ok(Some((*s, l))),
            Some(o) => Err(mismatch("literal", o, "a literal")),
        }
    }

    /// `outfeed_shape=...` of an outfeed.
    pub fn outfeed_shape(&self) -> AttrResult<crate::ir::ShapeId> {
        match self.attr("outfeed_shape") {
            None => Ok(None),
            Some(AttrValue::Shape(s)) => Ok(Some(*s)),
            Some(o) => Err(mismatch("outfeed_shape", o, "a shape")),
        }
    }

    /// `custom_call_target="..."`, unquoted.
    pub fn custom_call_target(&self) -> Option<String> {
        self.string_attr("custom_call_target")
    }

    /// `feature_group_count=N` (1 when absent).
    pub fn feature_group_count(&self) -> Result<i64, AttrError> {
        Ok(self.int_attr("feature_group_count")?.unwrap_or(1))
    }

    /// `batch_group_count=N` (1 when absent).
    pub fn batch_group_count(&self) -> Result<i64, AttrError> {
        Ok(self.int_attr("batch_group_count")?.unwrap_or(1))
    }
}

impl crate::ir::Module {
    /// The value of the module header attribute `key` (`HloModule m, key=...`).
    pub fn header_attr(&self, key: &str) -> Option<&AttrValue> {
        find(&self.attrs, key)
    }

    /// `entry_computation_layout={(params)->result}` of the header.
    pub fn entry_computation_layout(&self) -> AttrResult<&crate::ir::ProgramLayout> {
        let key = "entry_computation_layout";
        match self.header_attr(key) {
            None => Ok(None),
            Some(AttrValue::ProgramLayout(l)) => Ok(Some(l)),
            Some(o) => Err(mismatch(key, o, "a computation layout")),
        }
    }

    /// `is_scheduled=true` of the header (false when absent).
    pub fn is_scheduled(&self) -> Result<bool, AttrError> {
        match self.header_attr("is_scheduled") {
            None => Ok(false),
            Some(AttrValue::Bool(b)) => Ok(*b),
            Some(o) => Err(mismatch("is_scheduled", o, "true or false")),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::parse_module;

    fn inst(text: &str, name: &str) -> Instruction {
        let m = parse_module(text).expect("test module parses");
        let id = m.find_instruction(name).expect("instruction exists");
        m.inst(id).clone()
    }

    const M: &str = r#"HloModule m
ENTRY e {
  p = f32[4,6]{1,0} parameter(0)
  q = f32[6,8]{1,0} parameter(1)
  t = f32[6,4]{0,1} transpose(p), dimensions={1,0}
  d = f32[4,8]{1,0} dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  s = f32[2,3]{1,0} slice(p), slice={[0:4:2], [1:4]}
  tup = (f32[4,6], f32[6,8]) tuple(p, q)
  g = f32[6,8]{1,0} get-tuple-element(tup), index=1
  c = f32[] constant(0)
  pd = f32[5,9]{1,0} pad(p, c), padding=0_1x1_2
  ROOT cc = f32[4,6]{1,0} custom-call(p), custom_call_target="my\"target", api_version=API_VERSION_TYPED_FFI
}"#;

    #[test]
    fn decodes_dimension_lists_and_indices() {
        assert_eq!(
            inst(M, "t").dimensions().unwrap().unwrap().as_slice(),
            &[1, 0]
        );
        assert_eq!(inst(M, "g").tuple_index().unwrap(), Some(1));
        assert_eq!(inst(M, "p").dimensions().unwrap(), None);
    }

    #[test]
    fn decodes_dot_dimension_numbers() {
        let d = inst(M, "d").dot_dims().unwrap().unwrap();
        assert_eq!(d.lhs_contracting.as_slice(), &[1]);
        assert_eq!(d.rhs_contracting.as_slice(), &[0]);
        assert!(d.lhs_batch.is_empty());
    }

    #[test]
    fn decodes_slice_and_padding() {
        let s = inst(M, "s").slice().unwrap().unwrap();
        assert_eq!((s[0].start, s[0].limit, s[0].stride), (0, 4, 2));
        assert_eq!((s[1].start, s[1].limit, s[1].stride), (1, 4, 1));
        let p = inst(M, "pd").padding().unwrap().unwrap();
        assert_eq!((p[1].lo, p[1].hi, p[1].interior), (1, 2, 0));
    }

    #[test]
    fn unquotes_strings() {
        assert_eq!(
            inst(M, "cc").custom_call_target().as_deref(),
            Some("my\"target")
        );
        assert_eq!(
            inst(M, "cc").enum_attr("api_version"),
            Some("API_VERSION_TYPED_FFI")
        );
    }

    #[test]
    fn values_of_another_kind_are_errors_not_panics() {
        // The parser stores typed values; an IR edited in code may hold text
        // under a typed key, which the accessors report (never re-parse).
        let mut t = inst(M, "t");
        t.set_attr("dimensions", crate::ir::AttrValue::Raw("{1,x}".into()));
        let e = t.dimensions().unwrap_err();
        assert_eq!(e.key, "dimensions");
    }
}
