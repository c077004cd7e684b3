//! Rules XLA's HLO parser enforces beyond the syntax: attribute values in the
//! format their opcode expects, the operand counts and attributes an opcode
//! requires, the conditional's branch index, custom-call fields, and the
//! structure of async wrappers. [`check`] runs after lowering, over the whole
//! module, and reports the first violation as a [`Finding`]; the parser turns
//! it into a `file:line:col` error (at `attr=` when the finding names an
//! attribute, else at the instruction's name).
//!
//! The rules follow `xla/hlo/parser/hlo_parser.cc` (jaxlib 0.10.2), except
//! where newer XLA accepts more: `<op>-update` of the async shorthand may bind
//! further operands (late binding), and attributes XLA does not know are kept
//! (an attribute of a newer XLA must not break the tool).
//!
//! Invariants: checks only read the module; a module the printer produced
//! from a module that passed [`check`] passes it again (the printer never
//! changes attribute text); every finding names what is wrong and what is
//! expected. Cost: one pass over the instructions dispatching on the opcode
//! and the attribute keys, plus one pass over the interned shapes; nothing is
//! allocated unless a module has async-starts (a small list) or a finding.

use crate::attrs::validate as v;
use crate::ir::*;
use crate::opcode::Opcode;
use crate::print::print_shape;

/// One violation: where (instruction, or computation when no instruction is
/// to blame; optionally the attribute) and what. With neither an instruction
/// nor a computation, `attr` names a module attribute (`HloModule m, key=...`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub inst: Option<InstId>,
    pub comp: Option<CompId>,
    pub attr: Option<String>,
    pub message: String,
}

impl Finding {
    /// A finding about attribute `key` of instruction `inst`.
    pub fn attr(inst: InstId, key: &str, message: impl Into<String>) -> Self {
        Finding {
            inst: Some(inst),
            comp: None,
            attr: Some(key.to_string()),
            message: message.into(),
        }
    }

    /// A finding about instruction `inst` as a whole.
    pub fn inst(inst: InstId, message: impl Into<String>) -> Self {
        Finding {
            inst: Some(inst),
            comp: None,
            attr: None,
            message: message.into(),
        }
    }

    /// A finding about the module attribute `key` (in the `HloModule` header).
    pub fn module_attr(key: &str, message: impl Into<String>) -> Self {
        Finding {
            inst: None,
            comp: None,
            attr: Some(key.to_string()),
            message: message.into(),
        }
    }
}

type Check = Result<(), Finding>;

/// Checks `m`; the first violation (module attributes, then layouts, then
/// instructions in print order).
pub fn check(m: &Module) -> Check {
    check_module_attrs(m)?;
    check_physical_shapes(m)?;
    // Computations called by an async-start, with their caller.
    let mut async_callers: Vec<(CompId, InstId)> = Vec::new();
    for id in m.all_instructions() {
        let inst = m.inst(id);
        check_attr_values(id, inst)?;
        check_result_accuracy(id, inst)?;
        check_operand_count(m, id, inst)?;
        check_required_attrs(m, id, inst)?;
        match inst.opcode {
            Opcode::Conditional => check_conditional(m, id, inst)?,
            Opcode::CustomCall => check_custom_call(m, id, inst)?,
            Opcode::Infeed => check_infeed(m, id, inst)?,
            Opcode::AsyncStart => check_async_start(m, id, inst, &mut async_callers)?,
            Opcode::AsyncUpdate | Opcode::AsyncDone => check_async_continuation(m, id, inst)?,
            Opcode::AllGather
            | Opcode::AllGatherStart
            | Opcode::ReduceScatter
            | Opcode::GetDimensionSize
            | Opcode::SetDimensionSize => check_dimension_count(id, inst, DimCount::AtLeastOne)?,
            Opcode::Sort | Opcode::Concatenate | Opcode::Scan => {
                check_dimension_count(id, inst, DimCount::ExactlyOne)?
            }
            Opcode::AllToAll | Opcode::RaggedAllToAll => {
                check_dimension_count(id, inst, DimCount::OneIfPresent)?
            }
            _ => {}
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// module attributes and layouts

/// `debug_attributes` of the header (the attributes XLA types are decoded
/// by the parser), and the input-output aliasing against the entry: each
/// output index names a subshape of the entry's result and each parameter
/// number is not negative (XLA's `HloInputOutputAliasConfig` refuses
/// others; a parameter number past the entry's parameters it takes), nor is
/// a buffer donor's (`HloBufferDonorConfig`).
fn check_module_attrs(m: &Module) -> Check {
    for a in &m.attrs {
        match (&*a.key, &a.value) {
            ("debug_attributes", AttrValue::Raw(text)) => {
                v::check_debug_attributes(text).map_err(|msg| Finding::module_attr(&a.key, msg))?
            }
            ("input_output_alias", AttrValue::InputOutputAlias(alias)) => {
                let result = m.inst(m.entry_computation().root).shape;
                for (k, e) in alias.entries.iter().enumerate() {
                    if !shape_index_is_valid(m, result, &e.output_shape_index) {
                        let mut index = String::new();
                        crate::attrs::xla::write_shape_index(&e.output_shape_index, &mut index);
                        return Err(Finding::module_attr(
                            &a.key,
                            format!(
                                "alias {k}: output index {index} is not a subshape of the entry's result {}",
                                print_shape(m, result)
                            ),
                        ));
                    }
                    if e.parameter_number < 0 {
                        return Err(Finding::module_attr(
                            &a.key,
                            format!(
                                "alias {k}: parameter number {} is negative",
                                e.parameter_number
                            ),
                        ));
                    }
                }
            }
            ("buffer_donor", AttrValue::BufferDonor(donors)) => {
                if let Some((k, e)) = donors
                    .entries
                    .iter()
                    .enumerate()
                    .find(|(_, e)| e.parameter_number < 0)
                {
                    return Err(Finding::module_attr(
                        &a.key,
                        format!(
                            "donor {k}: parameter number {} is negative",
                            e.parameter_number
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Whether `index` walks from `shape` through tuple elements (XLA's
/// `ShapeUtil::IndexIsValid`; `{}` is the shape itself).
fn shape_index_is_valid(m: &Module, shape: ShapeId, index: &[i64]) -> bool {
    let mut at = shape;
    for &k in index {
        match m.shape(at) {
            Shape::Tuple(es) => match usize::try_from(k).ok().and_then(|k| es.get(k)) {
                Some(&e) => at = e,
                None => return false,
            },
            _ => return false,
        }
    }
    true
}

/// A layout's physical shape `P(...)` describes the storage of a sparse
/// array; XLA rejects it on a dense layout (every dimension level `D`).
fn check_physical_shapes(m: &Module) -> Check {
    for i in 0..m.num_shapes() {
        let sid = ShapeId(i as u32);
        let Shape::Array(a) = m.shape(sid) else {
            continue;
        };
        let Some(l) = &a.layout else { continue };
        if l.physical_shape.is_none() || l.dim_levels.iter().any(|d| d.kind != DimLevelType::Dense)
        {
            continue;
        }
        let message = format!(
            "layout of {} has a physical shape P(...), but physical shapes are only allowed on sparse arrays (a D(...) level other than D); remove P(...)",
            print_shape(m, sid)
        );
        let culprit = m
            .all_instructions()
            .find(|&id| shape_contains(m, m.inst(id).shape, sid));
        return Err(match culprit {
            Some(id) => Finding::inst(id, message),
            None => Finding {
                inst: None,
                comp: None,
                attr: None,
                message,
            },
        });
    }
    Ok(())
}

fn shape_contains(m: &Module, s: ShapeId, needle: ShapeId) -> bool {
    if s == needle {
        return true;
    }
    match m.shape(s) {
        Shape::Tuple(es) => es.iter().any(|&e| shape_contains(m, e, needle)),
        Shape::Buffer(inner) => shape_contains(m, *inner, needle),
        _ => false,
    }
}

// ---------------------------------------------------------------------------
// attribute values

/// Every attribute whose key XLA types (integers, booleans, integer lists,
/// windows, padding, result accuracy, API versions) has a value of that type.
fn check_attr_values(id: InstId, inst: &Instruction) -> Check {
    for a in &inst.attrs {
        let AttrValue::Raw(text) = &a.value else {
            continue;
        };
        // Typed kinds are decoded by the parser (a malformed one is a parse
        // error there); raw text under such a key comes only from a module
        // edited in code.
        let key = &*a.key;
        let r =
            crate::attrs::decode(key, inst.opcode, text.trim()).map_or(Ok(()), |r| r.map(|_| ()));
        r.map_err(|msg| Finding::attr(id, key, msg))?;
    }
    Ok(())
}

/// Whether XLA takes `result_accuracy=` on `op`: its unary transcendental
/// ops. XLA's text parser refuses the attribute on any other op
/// (`unexpected attribute "result_accuracy"`, its parser test
/// `TranscendentalAccuracyInvalidOp`) and its proto reader drops it there.
/// The list is jaxlib 0.10.2's: every unary and binary opcode was tried
/// with `result_accuracy={mode=highest}`, these were taken.
pub(crate) fn takes_result_accuracy(op: Opcode) -> bool {
    use Opcode::*;
    matches!(
        op,
        Acos | Acosh
            | Asin
            | Asinh
            | Atanh
            | Cbrt
            | Cosine
            | Cosh
            | Erf
            | Exponential
            | ExponentialMinusOne
            | Log
            | LogPlusOne
            | Logistic
            | Rsqrt
            | Sine
            | Sinh
            | Sqrt
            | Tan
            | Tanh
    )
}

/// `result_accuracy=` only on an op that takes it ([`takes_result_accuracy`]).
/// An async op's attributes belong to the op it wraps (its opcode is that
/// op's), so async ops are left to the wrapped op's own rules.
fn check_result_accuracy(id: InstId, inst: &Instruction) -> Check {
    if inst.attr("result_accuracy").is_none()
        || takes_result_accuracy(inst.opcode)
        || matches!(
            inst.opcode,
            Opcode::AsyncStart | Opcode::AsyncUpdate | Opcode::AsyncDone
        )
    {
        return Ok(());
    }
    Err(Finding::attr(
        id,
        "result_accuracy",
        format!(
            "unexpected attribute \"result_accuracy\": `{}` does not take a result accuracy (only unary transcendental ops do: exponential, log, sqrt, rsqrt, cbrt, tanh, sine, cosine, tan, erf, logistic, ...)",
            inst.opcode.name()
        ),
    ))
}

// ---------------------------------------------------------------------------
// operand counts and required attributes

enum Arity {
    Exactly(usize),
    AtLeast(usize),
    /// A positive even number: inputs and as many init values.
    Even,
    /// An odd number of at least 3: inputs, indices, as many updates.
    Odd,
}

/// XLA's operand count of `op`, where its parser checks one.
fn arity(op: Opcode) -> Option<Arity> {
    use Arity::*;
    use Opcode::*;
    Some(match op {
        Iota | ReplicaId | PartitionId | RngGetAndUpdateState => Exactly(0),
        Abs
        | AllGatherDone
        | AllReduceDone
        | RoundNearestAfz
        | RoundNearestEven
        | Bitcast
        | Ceil
        | Clz
        | CollectivePermuteDone
        | Copy
        | CopyDone
        | OptBarrier
        | Imag
        | IsFinite
        | Floor
        | Not
        | Negate
        | Popcnt
        | Real
        | Sign
        | Acos
        | Acosh
        | Asin
        | Asinh
        | Atanh
        | ExponentialMinusOne
        | Log
        | LogPlusOne
        | Logistic
        | Sqrt
        | Cbrt
        | Rsqrt
        | Tanh
        | Erf
        | Sine
        | Sinh
        | Cosine
        | Cosh
        | Tan
        | Exponential
        | Convert
        | BitcastConvert
        | Topk
        | CopyStart
        | Reshape
        | While
        | Recv
        | RecvDone
        | SendDone
        | GetTupleElement
        | Fft
        | Cholesky
        | Broadcast
        | Reverse
        | Slice
        | Transpose
        | Infeed
        | ReducePrecision
        | Domain
        | GetDimensionSize => Exactly(1),
        Add | Divide | Multiply | Subtract | Atan2 | Complex | Maximum | Minimum | Power
        | Remainder | And | Or | Xor | ShiftLeft | ShiftRightArithmetic | ShiftRightLogical
        | StochasticConvert | Compare | AddDependency | Convolution | Send | SetDimensionSize
        | Pad | Gather | Outfeed | TriangularSolve => Exactly(2),
        Clamp | Select | BatchNormTraining | SelectAndScatter | RaggedDot => Exactly(3),
        ScaledDot => Exactly(4),
        BatchNormInference | BatchNormGrad => Exactly(5),
        Dot => AtLeast(2),
        DynamicReshape | DynamicSlice | RngBitGenerator | Conditional => AtLeast(1),
        DynamicUpdateSlice => AtLeast(2),
        Reduce | ReduceWindow => Even,
        Scatter => Odd,
        _ => return None,
    })
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The operand count XLA's parser checks for the opcode; a tuple has one
/// operand per element of its shape.
fn check_operand_count(m: &Module, id: InstId, inst: &Instruction) -> Check {
    let n = inst.operands.len();
    let op = inst.opcode;
    if op == Opcode::Tuple {
        return match m.shape(inst.shape) {
            Shape::Tuple(es) if es.len() == n => Ok(()),
            Shape::Tuple(es) => Err(Finding::inst(
                id,
                format!(
                    "tuple %{} has {} element{} in its shape but {n} operand{}; they must match",
                    inst.name,
                    es.len(),
                    plural(es.len()),
                    plural(n)
                ),
            )),
            _ => Err(Finding::inst(
                id,
                format!(
                    "tuple %{} must have a tuple shape `(...)`, found {}",
                    inst.name,
                    print_shape(m, inst.shape)
                ),
            )),
        };
    }
    let Some(arity) = arity(op) else {
        return Ok(());
    };
    let expected = match arity {
        Arity::Exactly(k) if n != k => format!("{k} operand{}", plural(k)),
        Arity::AtLeast(k) if n < k => format!("at least {k} operand{}", plural(k)),
        Arity::Even if n == 0 || !n.is_multiple_of(2) => {
            "an even number of operands (the inputs, then one init value per input)".to_string()
        }
        Arity::Odd if n < 3 || n.is_multiple_of(2) => {
            "an odd number of operands, at least 3 (the inputs, the indices, then one update per input)"
                .to_string()
        }
        _ => return Ok(()),
    };
    Err(Finding::inst(
        id,
        format!(
            "{op} expects {expected}, but %{} has {n} operand{}",
            inst.name,
            plural(n)
        ),
    ))
}

/// Attributes XLA's parser requires of the opcode.
pub(crate) fn required_attrs(op: Opcode) -> &'static [&'static str] {
    use Opcode::*;
    match op {
        Iota => &["iota_dimension"],
        Topk => &["k"],
        AllGather | AllGatherStart => &["dimensions"],
        AllReduce | AllReduceStart => &["to_apply"],
        ReduceScatter => &["to_apply", "dimensions"],
        CollectivePermute | CollectivePermuteStart => &["source_target_pairs"],
        Sort => &["dimensions", "to_apply"],
        While => &["condition", "body"],
        GetTupleElement => &["index"],
        Call | ReduceWindow | Map => &["to_apply"],
        Convolution => &["dim_labels"],
        Fft => &["fft_type", "fft_length"],
        Compare => &["direction"],
        Concatenate | Reverse | Transpose | GetDimensionSize | SetDimensionSize => &["dimensions"],
        Scan => &["to_apply", "dimensions", "num_carries"],
        Reduce => &["to_apply", "dimensions"],
        SelectAndScatter => &["select", "scatter"],
        Slice => &["slice"],
        DynamicSlice => &["dynamic_slice_sizes"],
        BatchNormTraining | BatchNormInference | BatchNormGrad => &["epsilon", "feature_index"],
        Pad => &["padding"],
        Fusion => &["calls", "kind"],
        Rng => &["distribution"],
        RngGetAndUpdateState => &["delta"],
        RngBitGenerator => &["algorithm"],
        ReducePrecision => &["exponent_bits", "mantissa_bits"],
        CustomCall => &["custom_call_target"],
        Gather => &[
            "offset_dims",
            "collapsed_slice_dims",
            "start_index_map",
            "index_vector_dim",
            "slice_sizes",
        ],
        Scatter => &[
            "update_window_dims",
            "inserted_window_dims",
            "scatter_dims_to_operand_dims",
            "index_vector_dim",
            "to_apply",
        ],
        Domain => &["domain"],
        _ => &[],
    }
}

fn check_required_attrs(m: &Module, id: InstId, inst: &Instruction) -> Check {
    for &key in required_attrs(inst.opcode) {
        if inst.attr(key).is_none() {
            return Err(Finding::inst(
                id,
                format!("{} %{} needs `{key}=`", inst.opcode, inst.name),
            ));
        }
    }
    match inst.opcode {
        // `dimensions=` may be left out only when broadcasting a scalar.
        Opcode::Broadcast if inst.attr("dimensions").is_none() => {
            let scalar = inst
                .operands
                .first()
                .is_some_and(|&o| matches!(m.inst_shape(o), Shape::Array(a) if a.rank() == 0));
            if !scalar {
                return Err(Finding::inst(
                    id,
                    format!(
                        "broadcast %{} of a non-scalar operand needs `dimensions=` (the output dimension of each operand dimension)",
                        inst.name
                    ),
                ));
            }
        }
        // The explicit form names its computation; the shorthand
        // (`custom-call-start`) wraps the op itself.
        Opcode::AsyncStart
            if inst.attr(ASYNC_WRAPPED_OPCODE).is_none() && inst.attr("calls").is_none() =>
        {
            return Err(Finding::inst(
                id,
                format!(
                    "async-start %{} needs `calls=` (the computation it runs asynchronously)",
                    inst.name
                ),
            ));
        }
        _ => {}
    }
    Ok(())
}

#[derive(Copy, Clone)]
enum DimCount {
    AtLeastOne,
    ExactlyOne,
    OneIfPresent,
}

/// The number of entries of `dimensions=` the opcode uses (XLA reads the
/// first entry: an empty list is an error there, and it crashes jaxlib's
/// parser for all-gather).
fn check_dimension_count(id: InstId, inst: &Instruction, want: DimCount) -> Check {
    let Some(AttrValue::Ints(dims)) = inst.attr("dimensions") else {
        return Ok(());
    };
    let n = dims.len();
    let ok = match want {
        DimCount::AtLeastOne => n >= 1,
        DimCount::ExactlyOne | DimCount::OneIfPresent => n == 1,
    };
    if ok {
        return Ok(());
    }
    let what = match inst.opcode {
        Opcode::AllGather | Opcode::AllGatherStart => "the all-gather dimension",
        Opcode::ReduceScatter => "the scatter dimension",
        Opcode::AllToAll | Opcode::RaggedAllToAll => "the split dimension",
        Opcode::Sort => "the sort dimension",
        Opcode::Concatenate => "the concatenation dimension",
        Opcode::Scan => "the scan dimension",
        _ => "the dimension",
    };
    Err(Finding::attr(
        id,
        "dimensions",
        format!(
            "{} expects exactly one entry in `dimensions=` ({what}), found `{{{}}}`",
            inst.opcode,
            dims.iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
    ))
}

// ---------------------------------------------------------------------------
// per-opcode rules

/// `conditional(index, args...)`: the index is `pred[]` (with
/// `true_computation=` and `false_computation=`) or `s32[]` (with
/// `branch_computations={...}`), and there is one argument per branch.
fn check_conditional(m: &Module, id: InstId, inst: &Instruction) -> Check {
    let Some(&index) = inst.operands.first() else {
        return Ok(()); // reported by check_operand_count
    };
    let elem = match m.inst_shape(index) {
        Shape::Array(a) if a.rank() == 0 => a.elem,
        _ => {
            return Err(Finding::inst(
                id,
                format!(
                    "the first operand of conditional %{} (the branch index) must be a scalar pred[] or s32[], found {}",
                    inst.name,
                    print_shape(m, m.inst(index).shape)
                ),
            ))
        }
    };
    let branches = match elem {
        PrimType::Pred => {
            if inst.attr("branch_computations").is_some() {
                return Err(Finding::attr(
                    id,
                    "branch_computations",
                    "a conditional with a pred[] branch index takes `true_computation=` and `false_computation=`, not `branch_computations=` (which needs an s32[] index)",
                ));
            }
            for key in ["true_computation", "false_computation"] {
                if inst.attr(key).is_none() {
                    return Err(Finding::inst(
                        id,
                        format!(
                            "conditional %{} with a pred[] branch index needs `true_computation=` and `false_computation=`",
                            inst.name
                        ),
                    ));
                }
            }
            2
        }
        PrimType::S32 => {
            for key in ["true_computation", "false_computation"] {
                if inst.attr(key).is_some() {
                    return Err(Finding::attr(
                        id,
                        key,
                        format!(
                            "a conditional with an s32[] branch index takes `branch_computations={{...}}`, not `{key}=` (which needs a pred[] index)"
                        ),
                    ));
                }
            }
            match inst.attr("branch_computations") {
                Some(AttrValue::Comps(cs)) if !cs.is_empty() => cs.len(),
                Some(AttrValue::Comp(_)) => 1,
                Some(_) => {
                    return Err(Finding::attr(
                        id,
                        "branch_computations",
                        "`branch_computations=` must name at least one computation, e.g. `{%b0, %b1}`",
                    ))
                }
                None => {
                    return Err(Finding::inst(
                        id,
                        format!(
                            "conditional %{} with an s32[] branch index needs `branch_computations={{...}}`",
                            inst.name
                        ),
                    ))
                }
            }
        }
        other => {
            return Err(Finding::inst(
                id,
                format!(
                    "the first operand of conditional %{} (the branch index) must be a scalar of PRED or S32, found {other}[]",
                    inst.name
                ),
            ))
        }
    };
    let n = inst.operands.len();
    if n != branches + 1 {
        return Err(Finding::inst(
            id,
            format!(
                "conditional %{} has {branches} branch{} and so takes {} operands (the branch index and one argument per branch), but has {n}",
                inst.name,
                if branches == 1 { "" } else { "es" },
                branches + 1
            ),
        ));
    }
    Ok(())
}

/// `operand_layout_constraints={shape, ...}` of a custom-call: one shape per
/// operand, each with that operand's element type and dimensions.
fn check_custom_call(m: &Module, id: InstId, inst: &Instruction) -> Check {
    let key = "operand_layout_constraints";
    let shapes = match inst.operand_layout_constraints() {
        Ok(Some(s)) => s,
        Ok(None) => return Ok(()),
        Err(e) => return Err(Finding::attr(id, key, e.message)),
    };
    let n = inst.operands.len();
    let given = shapes.len();
    if given != n {
        return Err(Finding::attr(
            id,
            key,
            format!(
                "custom-call %{} has {n} operand{} but {given} operand layout constraint{}; give one shape per operand",
                inst.name,
                plural(n),
                plural(given)
            ),
        ));
    }
    for (k, (&c, &operand)) in shapes.iter().zip(&inst.operands).enumerate() {
        let compatible = match (m.shape(c), m.inst_shape(operand)) {
            (Shape::Token, s) => matches!(s, Shape::Token),
            (Shape::Array(ca), Shape::Array(a)) => ca.elem == a.elem && ca.dims == a.dims,
            (Shape::Array(_), _) => false,
            // A tuple constraint needs a tuple operand; other forms are not
            // compared.
            (Shape::Tuple(_), s) => s.is_tuple(),
            _ => true,
        };
        if !compatible {
            return Err(Finding::attr(
                id,
                key,
                format!(
                    "operand layout constraint {} for operand {k} is not compatible with the operand's shape {}; it must have the same element type and dimensions",
                    print_shape(m, c),
                    print_shape(m, m.inst(operand).shape)
                ),
            ));
        }
    }
    Ok(())
}

/// `infeed` produces `(data, token[])`: a non-empty tuple.
fn check_infeed(m: &Module, id: InstId, inst: &Instruction) -> Check {
    match m.shape(inst.shape) {
        Shape::Tuple(es) if !es.is_empty() => Ok(()),
        _ => Err(Finding::inst(
            id,
            format!(
                "infeed %{} must have a non-empty tuple shape `(data, token[])`, found {}",
                inst.name,
                print_shape(m, inst.shape)
            ),
        )),
    }
}

// ---------------------------------------------------------------------------
// async wrappers

/// The opcode an async op wraps: its shorthand's opcode (`custom-call` of
/// `custom-call-start`), else the root opcode of its `calls=` computation.
fn wrapped_opcode<'m>(m: &'m Module, start: &'m Instruction) -> Option<&'m str> {
    if let Some(w) = start.raw_attr(ASYNC_WRAPPED_OPCODE) {
        return Some(w);
    }
    match start.attr("calls") {
        Some(AttrValue::Comp(c)) => Some(m.inst(m.comp(*c).root).opcode.name()),
        _ => None,
    }
}

/// The computation an explicit async-start (`async-start(...), calls=f`)
/// runs; `None` for the shorthand, which wraps its op itself.
fn async_computation(start: &Instruction) -> Option<CompId> {
    if start.attr(ASYNC_WRAPPED_OPCODE).is_some() {
        return None;
    }
    match start.attr("calls") {
        Some(AttrValue::Comp(c)) => Some(*c),
        _ => None,
    }
}

fn async_thread(inst: &Instruction) -> String {
    inst.string_attr("async_execution_thread")
        .unwrap_or_else(|| "main".to_string())
}

/// `async-start` has shape `((operands...), outputs, state...)` and is the
/// only async-start calling its computation.
fn check_async_start(
    m: &Module,
    id: InstId,
    inst: &Instruction,
    callers: &mut Vec<(CompId, InstId)>,
) -> Check {
    let ok = matches!(m.shape(inst.shape), Shape::Tuple(es)
        if es.len() >= 2 && matches!(m.shape(es[0]), Shape::Tuple(_)));
    if !ok {
        return Err(Finding::inst(
            id,
            format!(
                "async-start %{} must have a shape of the form ((operands...), outputs, state...), found {}",
                inst.name,
                print_shape(m, inst.shape)
            ),
        ));
    }
    // The shorthand (`fusion-start(...), calls=f`) wraps its op in a
    // computation of its own; its `calls=` belongs to the wrapped op.
    if let Some(c) = async_computation(inst) {
        if let Some(&(_, first)) = callers.iter().find(|(k, _)| *k == c) {
            return Err(Finding::attr(
                id,
                "calls",
                format!(
                    "computation %{} is already called by async-start %{}; each async computation is wrapped by exactly one async-start",
                    m.comp(c).name,
                    m.inst(first).name
                ),
            ));
        }
        callers.push((c, id));
    }
    Ok(())
}

/// `async-update` / `async-done` continue one async op: their operand is an
/// async-start or async-update (an async-update of the shorthand form may
/// pass further operands, XLA's late binding), an async-update with just
/// that operand keeps its shape, and the wrapped opcode, `calls=` and
/// `async_execution_thread=` they repeat must match the async-start's.
fn check_async_continuation(m: &Module, id: InstId, inst: &Instruction) -> Check {
    let op = inst.opcode;
    let shorthand = inst.raw_attr(ASYNC_WRAPPED_OPCODE);
    let n = inst.operands.len();
    let count_ok = match (op, shorthand) {
        (Opcode::AsyncUpdate, Some(_)) => n >= 1,
        _ => n == 1,
    };
    let first = inst.operands.first().map(|&o| m.inst(o));
    let operand_ok =
        first.is_some_and(|o| matches!(o.opcode, Opcode::AsyncStart | Opcode::AsyncUpdate));
    if !count_ok || !operand_ok {
        let found = match first {
            None => "no operand".to_string(),
            Some(o) if n == 1 => format!("operand %{} ({})", o.name, o.opcode),
            Some(o) => format!("{n} operands, the first %{} ({})", o.name, o.opcode),
        };
        return Err(Finding::inst(
            id,
            format!(
                "{op} %{} expects a single async op (an async-start or async-update) as its operand, found {found}",
                inst.name
            ),
        ));
    }
    let Some(&prev) = inst.operands.first() else {
        return Ok(());
    };
    if op == Opcode::AsyncUpdate && n == 1 && !same_shape(m, m.inst(prev).shape, inst.shape) {
        return Err(Finding::inst(
            id,
            format!(
                "async-update %{} must have the shape of its operand %{}, {}, but has {}",
                inst.name,
                m.inst(prev).name,
                print_shape(m, m.inst(prev).shape),
                print_shape(m, inst.shape)
            ),
        ));
    }
    // The async-start of the chain (operands may refer forward, so the walk
    // is bounded).
    let mut start = prev;
    for _ in 0..m.num_insts() {
        let s = m.inst(start);
        if s.opcode != Opcode::AsyncUpdate {
            break;
        }
        match s.operands.first() {
            Some(&p) => start = p,
            None => break,
        }
    }
    let s = m.inst(start);
    if s.opcode != Opcode::AsyncStart {
        return Ok(());
    }
    if let Some(w) = shorthand {
        if let Some(expected) = wrapped_opcode(m, s) {
            if expected != w {
                return Err(Finding::inst(
                    id,
                    format!(
                        "%{} continues async-start %{}, which wraps {expected}: expects {expected}-{} here, but got {w}-{}",
                        inst.name,
                        s.name,
                        suffix(op),
                        suffix(op)
                    ),
                ));
            }
        }
    }
    if inst.attr("async_execution_thread").is_some() && async_thread(inst) != async_thread(s) {
        return Err(Finding::attr(
            id,
            "async_execution_thread",
            format!(
                "async_execution_thread must be the one of async-start %{}, \"{}\", but is \"{}\"",
                s.name,
                async_thread(s),
                async_thread(inst)
            ),
        ));
    }
    if let Some(AttrValue::Comp(c)) = inst.attr("calls") {
        let expected = async_computation(s);
        if expected != Some(*c) {
            let want = match expected {
                Some(sc) => format!("%{}", m.comp(sc).name),
                None => "its own wrapped computation".to_string(),
            };
            return Err(Finding::attr(
                id,
                "calls",
                format!(
                    "`calls=` must name the computation of async-start %{}, {want}, but names %{}",
                    s.name,
                    m.comp(*c).name
                ),
            ));
        }
    }
    Ok(())
}

fn suffix(op: Opcode) -> &'static str {
    match op {
        Opcode::AsyncStart => "start",
        Opcode::AsyncUpdate => "update",
        _ => "done",
    }
}

/// Equal shapes, ignoring layouts (XLA compares with layouts, where a
/// missing layout means the default one).
fn same_shape(m: &Module, a: ShapeId, b: ShapeId) -> bool {
    if a == b {
        return true;
    }
    match (m.shape(a), m.shape(b)) {
        (Shape::Array(x), Shape::Array(y)) => {
            x.elem == y.elem && x.dims == y.dims && x.dynamic == y.dynamic
        }
        (Shape::Tuple(x), Shape::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(&p, &q)| same_shape(m, p, q))
        }
        (Shape::Buffer(x), Shape::Buffer(y)) => same_shape(m, *x, *y),
        (Shape::Token, Shape::Token) | (Shape::Opaque, Shape::Opaque) => true,
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::parse_module;

    fn error(text: &str) -> String {
        match parse_module(text) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    const LATE_BINDING: &str = r#"HloModule m
ENTRY e {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  s = ((), (), s32[]) fusion-start(), kind=kLoop, calls={
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT add = f32[] add(a, b)
  }
  u = ((f32[]), (), s32[]) fusion-update(s, p0)
  ROOT d = f32[] fusion-done(u)
}"#;

    #[test]
    fn shorthand_async_update_may_bind_further_operands() {
        assert_eq!(error(LATE_BINDING), "");
    }

    #[test]
    fn explicit_async_update_takes_only_the_async_op() {
        let text = r#"HloModule m
c {
  a = f32[2] parameter(0)
  b = f32[2] parameter(1)
  ROOT add = f32[2] add(a, b)
}
ENTRY e {
  p0 = f32[2] parameter(0)
  p1 = f32[2] parameter(1)
  s = ((f32[2]), f32[2], s32[]) async-start(p0), calls=c
  u = ((f32[2], f32[2]), f32[2], s32[]) async-update(s, p1)
  ROOT d = f32[2] async-done(u)
}"#;
        let e = error(text);
        assert!(e.contains("expects a single async op"), "{e}");
    }

    #[test]
    fn conditional_index_type_selects_the_branch_attributes() {
        let branches = "t {\n  p = f32[] parameter(0)\n  ROOT n = f32[] negate(p)\n}\nf {\n  p = f32[] parameter(0)\n  ROOT c = f32[] copy(p)\n}\n";
        let pred = format!("HloModule m\n{branches}ENTRY e {{\n  i = pred[] parameter(0)\n  x = f32[] parameter(1)\n  ROOT r = f32[] conditional(i, x, x), true_computation=t, false_computation=f\n}}");
        assert_eq!(error(&pred), "");
        let s32 = format!("HloModule m\n{branches}ENTRY e {{\n  i = s32[] parameter(0)\n  x = f32[] parameter(1)\n  ROOT r = f32[] conditional(i, x, x), branch_computations={{t, f}}\n}}");
        assert_eq!(error(&s32), "");
        let wrong = s32.replace("s32[] parameter(0)", "f32[] parameter(0)");
        assert!(error(&wrong).contains("PRED or S32"));
        let too_few = s32.replace("conditional(i, x, x)", "conditional(i, x)");
        assert!(error(&too_few).contains("takes 3 operands"));
    }

    #[test]
    fn operand_layout_constraints_match_operands() {
        let text = r#"HloModule m
ENTRY e {
  p = f32[2,3]{1,0} parameter(0)
  t = token[] after-all()
  ROOT cc = f32[2,3]{1,0} custom-call(p, t), custom_call_target="x", operand_layout_constraints={f32[2,3]{0,1}, token[]}
}"#;
        assert_eq!(error(text), "");
        let e = error(&text.replace("{f32[2,3]{0,1}, token[]}", "{f32[2,3]{0,1}}"));
        assert!(
            e.contains("2 operands but 1 operand layout constraint"),
            "{e}"
        );
    }
}
