//! The few attributes layout assignment reads (`dimensions=`, `dim_labels=`,
//! dot dimension numbers, `index=`), decoded by [`hlo::attrs`].
//!
//! Every function returns `None` on text it cannot read; callers fall back
//! to the conservative choice (keep the layout as it is).

use hlo::Instruction;

/// An integer-list attribute of an instruction.
pub fn ints(inst: &Instruction, key: &str) -> Option<Vec<i64>> {
    inst.int_list_attr(key).ok().flatten().map(|d| d.to_vec())
}

/// The dimension roles of a convolution, from `dim_labels=b01f_01io->b01f`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvDims {
    pub lhs_batch: i64,
    pub lhs_feature: i64,
    pub rhs_input_feature: i64,
    pub rhs_output_feature: i64,
    pub out_batch: i64,
    pub out_feature: i64,
}

/// `None` when the labels are absent, malformed or leave a role unassigned.
pub fn conv_dims(inst: &Instruction) -> Option<ConvDims> {
    let d = inst.conv_dims().ok()??;
    Some(ConvDims {
        lhs_batch: d.input_batch?,
        lhs_feature: d.input_feature?,
        rhs_input_feature: d.kernel_input_feature?,
        rhs_output_feature: d.kernel_output_feature?,
        out_batch: d.output_batch?,
        out_feature: d.output_feature?,
    })
}

/// Dot dimension numbers (missing lists are empty).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DotDims {
    pub lhs_batch: Vec<i64>,
    pub lhs_contracting: Vec<i64>,
    pub rhs_batch: Vec<i64>,
    pub rhs_contracting: Vec<i64>,
}

pub fn dot_dims(inst: &Instruction) -> DotDims {
    DotDims {
        lhs_batch: ints(inst, "lhs_batch_dims").unwrap_or_default(),
        lhs_contracting: ints(inst, "lhs_contracting_dims").unwrap_or_default(),
        rhs_batch: ints(inst, "rhs_batch_dims").unwrap_or_default(),
        rhs_contracting: ints(inst, "rhs_contracting_dims").unwrap_or_default(),
    }
}

/// `index=N` of a get-tuple-element.
pub fn tuple_index(inst: &Instruction) -> Option<usize> {
    usize::try_from(inst.tuple_index().ok()??).ok()
}
