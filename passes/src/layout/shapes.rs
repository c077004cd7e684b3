//! Shape accessors the layout pass reads its shapes with, and its check of
//! required layouts. The layout operations themselves (minor-to-major
//! order, default layout, agreement, short form) are the IR's
//! ([`hlo::ir::layout`]).

use hlo::{Module, Shape, ShapeId};
use smallvec::SmallVec;

/// Dimensions of an array shape (empty for non-arrays).
pub fn dims(m: &Module, s: ShapeId) -> SmallVec<[i64; 6]> {
    m.shape(s)
        .as_array()
        .map(|a| a.dims.clone())
        .unwrap_or_default()
}

/// Rank of an array shape; `None` for non-arrays.
pub fn rank(m: &Module, s: ShapeId) -> Option<usize> {
    m.shape(s).as_array().map(|a| a.rank())
}

/// Element `k` of a tuple shape.
pub fn tuple_elem(m: &Module, s: ShapeId, k: usize) -> Option<ShapeId> {
    match m.shape(s) {
        Shape::Tuple(e) => e.get(k).copied(),
        _ => None,
    }
}

/// The first array of `t` (recursively) whose layout is not a permutation
/// of its dimensions, shown.
pub fn bad_layout(m: &Module, t: ShapeId) -> Option<String> {
    match m.shape(t) {
        Shape::Array(a) => match a.minor_to_major() {
            Some(o) if !super::dims::is_permutation(o, a.rank()) => Some(m.show_shape(t)),
            _ => None,
        },
        Shape::Tuple(e) => e.iter().find_map(|&x| bad_layout(m, x)),
        _ => None,
    }
}
