//! Decoding the few attributes layout assignment reads (`dimensions=`,
//! `dim_labels=`, dot dimension numbers, `index=`), from their raw text.
//!
//! Every function returns `None` on text it cannot read; callers fall back
//! to the conservative choice (keep the layout as it is).

use hlo::{AttrValue, Instruction};

/// `{1,0,2}` or `1` -> the integers.
pub fn int_list(raw: &str) -> Option<Vec<i64>> {
    let t = raw.trim();
    let t = t
        .strip_prefix('{')
        .and_then(|x| x.strip_suffix('}'))
        .unwrap_or(t)
        .trim();
    if t.is_empty() {
        return Some(Vec::new());
    }
    t.split(',').map(|x| x.trim().parse::<i64>().ok()).collect()
}

/// An integer-list attribute of an instruction.
pub fn ints(inst: &Instruction, key: &str) -> Option<Vec<i64>> {
    match inst.attr(key)? {
        AttrValue::Raw(r) => int_list(r),
        _ => None,
    }
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

pub fn conv_dims(inst: &Instruction) -> Option<ConvDims> {
    let raw = inst.raw_attr("dim_labels")?;
    let (ops, out) = raw.split_once("->")?;
    let (lhs, rhs) = ops.split_once('_')?;
    let pos = |s: &str, c: char| s.chars().position(|x| x == c).map(|p| p as i64);
    Some(ConvDims {
        lhs_batch: pos(lhs, 'b')?,
        lhs_feature: pos(lhs, 'f')?,
        rhs_input_feature: pos(rhs, 'i')?,
        rhs_output_feature: pos(rhs, 'o')?,
        out_batch: pos(out, 'b')?,
        out_feature: pos(out, 'f')?,
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
    inst.raw_attr("index")?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_lists() {
        assert_eq!(int_list("{1, 0,2}"), Some(vec![1, 0, 2]));
        assert_eq!(int_list("{}"), Some(vec![]));
        assert_eq!(int_list("3"), Some(vec![3]));
        assert_eq!(int_list("{a}"), None);
    }
}
