//! The 140 TpuGraphs node features of one instruction: `FeaturizeHloInstruction`
//! of `tpu_graphs/process_data/xla/featurizers.h` with the layout task's
//! feature set (`FEATURE_OP_NON_ZERO`), read from our IR instead of an
//! `HloInstructionProto`.
//!
//! Invariants:
//! - the layout of the vector is the README's "Node Features" table; [`idx`]
//!   names each position;
//! - a field an instruction does not carry takes its proto default (0; so the
//!   `_product` of an empty list is 1, the dataset's convention);
//! - lists longer than 6 (rank > 6) are truncated to 6 leading values while
//!   `_sum` / `_product` cover every element, as the dataset does; sums and
//!   products are 64-bit integers that saturate at the i64 range (a wrapped
//!   product would turn a huge shape into a small or negative one), then
//!   rounded to `f32`.

use crate::error::{CostModelError, Result};
use crate::graph::NODE_FEAT_DIM;
use hlo::attrs::{AttrError, ConvDims};
use hlo::{InstId, Instruction, Module, Opcode, PrimType, Shape};

/// Start index of each feature group (and single features) in the node feature vector.
pub mod idx {
    pub const IS_ROOT: usize = 0;
    pub const ELEMENT_SIZE_IN_BITS: usize = 1;
    /// 19 one-hot entries: invalid, pred, s8, s16, s32, s64, u8, u16, u32, u64,
    /// f16, f32, f64, bf16, c64, c128, tuple, opaque, token.
    pub const ELEMENT_TYPE: usize = 2;
    /// 6 leading sizes, sum, product.
    pub const SHAPE_DIMS: usize = 21;
    pub const TUPLE_SHAPES_SIZE: usize = 29;
    pub const PARAMETER_NUMBER: usize = 30;
    /// 6 leading values, no aggregates.
    pub const DIMENSIONS: usize = 31;
    /// 7 groups of 8: size, stride, padding_low, padding_high, window_dilation,
    /// base_dilation (6 leading, sum, product), window_reversal (6 leading, true count, false count).
    pub const WINDOW: usize = 37;
    /// input batch, input feature, 4 input spatial, kernel input feature,
    /// kernel output feature, 4 kernel spatial, output batch, output feature.
    pub const CONV_DIMS: usize = 93;
    pub const FEATURE_GROUP_COUNT: usize = 107;
    pub const BATCH_GROUP_COUNT: usize = 108;
    /// start, stride, limit: 2 leading, sum, product each.
    pub const SLICE_DIMS: usize = 109;
    /// 2 leading, sum, product.
    pub const DYNAMIC_SLICE_SIZES: usize = 121;
    /// edge_padding_low, edge_padding_high: 2 leading, sum, product each.
    pub const PADDING: usize = 125;
    pub const IS_STABLE: usize = 133;
    /// 6 leading minor-to-major entries, no aggregates.
    pub const LAYOUT_MINOR_TO_MAJOR: usize = 134;
}

/// Writes features left to right, like the dataset's builder.
struct Writer<'a> {
    out: &'a mut [f32; NODE_FEAT_DIM],
    at: usize,
}

impl Writer<'_> {
    fn push(&mut self, v: f32) {
        self.out[self.at] = v;
        self.at += 1;
    }
    fn push_i(&mut self, v: i64) {
        self.push(v as f32);
    }
    fn push_bool(&mut self, b: bool) {
        self.push(if b { 1.0 } else { 0.0 });
    }
    /// `FixedNumericSequenceFeatures<N>`: N leading values (0-padded), sum, product
    /// (both saturating at the i64 range: a dimension near `i64::MAX` gives
    /// the largest feature, never a wrapped negative one).
    fn seq<const N: usize>(&mut self, vals: impl IntoIterator<Item = i64>) {
        let (mut sum, mut product, mut n) = (0i64, 1i64, 0usize);
        for v in vals {
            sum = sum.saturating_add(v);
            product = product.saturating_mul(v);
            if n < N {
                self.push_i(v);
            }
            n += 1;
        }
        for _ in n.min(N)..N {
            self.push(0.0);
        }
        self.push_i(sum);
        self.push_i(product);
    }
    /// `FixedNumericSequenceFeaturesNoAggregate<N>`.
    fn seq_no_agg<const N: usize>(&mut self, vals: impl IntoIterator<Item = i64>) {
        let mut n = 0usize;
        for v in vals.into_iter().take(N) {
            self.push_i(v);
            n += 1;
        }
        for _ in n..N {
            self.push(0.0);
        }
    }
    /// `FeaturizeVariableLengthBools<N>`: N leading flags, true count, false count.
    fn bools<const N: usize>(&mut self, vals: impl IntoIterator<Item = bool>) {
        let (mut t, mut f, mut n) = (0i64, 0i64, 0usize);
        for b in vals {
            if n < N {
                self.push_bool(b);
            }
            n += 1;
            if b {
                t += 1
            } else {
                f += 1
            }
        }
        for _ in n.min(N)..N {
            self.push(0.0);
        }
        self.push_i(t);
        self.push_i(f);
    }
}

/// Position of an element type in the one-hot group, as `PRIMITIVE_TYPE_FEATURES` orders it;
/// `None` for types the dataset has no slot for (sub-byte ints, fp8, ...): all zeros.
fn element_type_slot(t: PrimType) -> Option<usize> {
    use PrimType::*;
    Some(match t {
        Pred => 1,
        S8 => 2,
        S16 => 3,
        S32 => 4,
        S64 => 5,
        U8 => 6,
        U16 => 7,
        U32 => 8,
        U64 => 9,
        F16 => 10,
        F32 => 11,
        F64 => 12,
        Bf16 => 13,
        C64 => 14,
        C128 => 15,
        Opaque => 17,
        Token => 18,
        _ => return None,
    })
}
const TUPLE_SLOT: usize = 16;

/// An attribute the instruction carries but [`hlo::attrs`] cannot decode,
/// named with the instruction.
fn attr_err(inst: &Instruction, e: AttrError) -> CostModelError {
    CostModelError::Featurize(format!("%{}: {e}", inst.name))
}

/// The convolution dimension numbers as the proto holds them (all 0 when
/// absent); labels that leave a role unassigned (`?`) are an error, since
/// the proto has no value for them.
fn conv_dims(inst: &Instruction) -> Result<ConvDims> {
    let Some(c) = inst.conv_dims().map_err(|e| attr_err(inst, e))? else {
        return Ok(ConvDims::default());
    };
    if !c.is_complete() {
        return Err(attr_err(
            inst,
            AttrError {
                key: "dim_labels".into(),
                message: "a dimension has no role (`?` or a missing label)".into(),
            },
        ));
    }
    Ok(c)
}

/// The 140 features of instruction `id` of `m`.
pub fn node_features(m: &Module, id: InstId, out: &mut [f32; NODE_FEAT_DIM]) -> Result<()> {
    let inst = m.inst(id);
    // A buffer shape `b(f32[2,4])` (newer than TpuGraphs, which never shows
    // one) is featurized as the array it holds: same element type and dims.
    let shape = match m.shape(inst.shape) {
        Shape::Buffer(held) => m.shape(*held),
        s => s,
    };
    let mut w = Writer { out, at: 0 };
    let attr = |e: AttrError| attr_err(inst, e);

    w.push_bool(m.comp(inst.parent).root == id);
    w.push(0.0); // element_size_in_bits: deprecated, always 0.

    // Shape: element type one-hot, dimensions, tuple size.
    let slot = match shape {
        Shape::Array(a) => element_type_slot(a.elem),
        Shape::Tuple(_) => Some(TUPLE_SLOT),
        // Unreachable after the unwrapping above (a buffer holds an array).
        Shape::Buffer(_) => None,
        Shape::Token => element_type_slot(PrimType::Token),
        Shape::Opaque => element_type_slot(PrimType::Opaque),
    };
    for k in 0..19 {
        w.push_bool(slot == Some(k));
    }
    let dims: &[i64] = match shape {
        Shape::Array(a) => &a.dims,
        _ => &[],
    };
    w.seq::<6>(dims.iter().copied());
    w.push_i(match shape {
        Shape::Tuple(t) => t.len() as i64,
        _ => 0,
    });

    w.push_i(if inst.opcode == Opcode::Parameter {
        inst.parameter_number().ok_or_else(|| {
            CostModelError::Featurize(format!("%{}: parameter without a number", inst.name))
        })?
    } else {
        0
    });

    // `dimensions` of the proto: `dimensions={...}`, or iota's `iota_dimension=`.
    let dimensions = match inst.dimensions().map_err(attr)? {
        Some(d) => d,
        None => inst.iota_dimension().map_err(attr)?.into_iter().collect(),
    };
    w.seq_no_agg::<6>(dimensions.iter().copied());

    let window = inst.window().map_err(attr)?.unwrap_or_default();
    w.seq::<6>(window.iter().map(|d| d.size));
    w.seq::<6>(window.iter().map(|d| d.stride));
    w.seq::<6>(window.iter().map(|d| d.pad_lo));
    w.seq::<6>(window.iter().map(|d| d.pad_hi));
    w.seq::<6>(window.iter().map(|d| d.rhs_dilation)); // window_dilation
    w.seq::<6>(window.iter().map(|d| d.lhs_dilation)); // base_dilation
    w.bools::<6>(window.iter().map(|d| d.reversal));

    let conv = conv_dims(inst)?;
    w.push_i(conv.input_batch.unwrap_or(0));
    w.push_i(conv.input_feature.unwrap_or(0));
    w.seq_no_agg::<4>(conv.input_spatial.iter().copied());
    w.push_i(conv.kernel_input_feature.unwrap_or(0));
    w.push_i(conv.kernel_output_feature.unwrap_or(0));
    w.seq_no_agg::<4>(conv.kernel_spatial.iter().copied());
    w.push_i(conv.output_batch.unwrap_or(0));
    w.push_i(conv.output_feature.unwrap_or(0));

    // Group counts live on convolutions and custom-calls (default 1); other protos leave them 0.
    let has_groups = matches!(inst.opcode, Opcode::Convolution | Opcode::CustomCall);
    let group_default = if has_groups { 1 } else { 0 };
    for key in ["feature_group_count", "batch_group_count"] {
        w.push_i(inst.int_attr(key).map_err(attr)?.unwrap_or(group_default));
    }

    let slice = inst.slice().map_err(attr)?.unwrap_or_default();
    w.seq::<2>(slice.iter().map(|d| d.start));
    w.seq::<2>(slice.iter().map(|d| d.stride));
    w.seq::<2>(slice.iter().map(|d| d.limit));

    let ds = inst
        .dynamic_slice_sizes()
        .map_err(attr)?
        .unwrap_or_default();
    w.seq::<2>(ds.iter().copied());

    let pad = if inst.opcode == Opcode::Pad {
        inst.padding().map_err(attr)?.unwrap_or_default()
    } else {
        Vec::new()
    };
    w.seq::<2>(pad.iter().map(|d| d.lo)); // edge_padding_low
    w.seq::<2>(pad.iter().map(|d| d.hi)); // edge_padding_high

    w.push_bool(inst.bool_attr("is_stable").map_err(attr)?.unwrap_or(false));

    // Layout: the shape's minor-to-major; an array printed without a layout
    // gets XLA's default (descending) layout, as XLA's parser assigns it.
    match shape {
        Shape::Array(a) => w.seq_no_agg::<6>(a.minor_to_major_or_default()),
        _ => w.seq_no_agg::<6>(std::iter::empty()),
    }
    debug_assert_eq!(w.at, NODE_FEAT_DIM);
    Ok(())
}
