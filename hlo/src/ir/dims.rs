//! Typed dimension attributes: the dimension numbers of dots, convolutions
//! and gathers, and the per-dimension windows, slices and paddings, as the
//! parser decodes them (decoding: [`crate::attrs`]; the shapes they imply:
//! [`crate::shape_infer`]).

use smallvec::SmallVec;

/// Dimension sizes, as in [`ArrayShape::dims`](crate::ir::ArrayShape::dims), or dimension numbers.
pub type Dims = SmallVec<[i64; 6]>;

/// The dimension numbers of a `dot`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DotDims {
    pub lhs_batch: Dims,
    pub rhs_batch: Dims,
    pub lhs_contracting: Dims,
    pub rhs_contracting: Dims,
}

/// One dimension of a `window={...}` attribute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowDim {
    pub size: i64,
    pub stride: i64,
    pub pad_lo: i64,
    pub pad_hi: i64,
    pub lhs_dilation: i64,
    pub rhs_dilation: i64,
    pub reversal: bool,
}

impl Default for WindowDim {
    fn default() -> Self {
        WindowDim {
            size: 1,
            stride: 1,
            pad_lo: 0,
            pad_hi: 0,
            lhs_dilation: 1,
            rhs_dilation: 1,
            reversal: false,
        }
    }
}

/// Convolution dimension numbers, decoded from `dim_labels=b01f_01io->b01f`.
/// `None` where the labels hold `?` (an unassigned dimension).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConvDims {
    pub input_batch: Option<i64>,
    pub input_feature: Option<i64>,
    pub input_spatial: Dims,
    pub kernel_input_feature: Option<i64>,
    pub kernel_output_feature: Option<i64>,
    pub kernel_spatial: Dims,
    pub output_batch: Option<i64>,
    pub output_feature: Option<i64>,
    pub output_spatial: Dims,
    /// Whether any part of the labels holds `?` (a dimension with no role).
    pub has_unknown: bool,
    /// The number of labels of each part (input, kernel, output): the rank
    /// the labels were written for, `?` labels included.
    pub part_ranks: [usize; 3],
}

/// One dimension of `slice={[start:limit:stride], ...}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SliceDim {
    pub start: i64,
    pub limit: i64,
    pub stride: i64,
}

/// One dimension of `padding=lo_hi_interior x ...`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PadDim {
    pub lo: i64,
    pub hi: i64,
    pub interior: i64,
}

/// The dimension numbers and slice sizes of a `gather`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GatherDims {
    pub offset_dims: Dims,
    pub collapsed_slice_dims: Dims,
    pub start_index_map: Dims,
    pub operand_batching_dims: Dims,
    pub start_indices_batching_dims: Dims,
    pub index_vector_dim: i64,
    pub slice_sizes: Dims,
}
