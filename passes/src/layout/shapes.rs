//! Shape helpers for layout assignment: reading and replacing the
//! minor-to-major order of interned shapes, filling missing layouts with the
//! default, and the comparison with shapes attributes require
//! (`entry_computation_layout={(...)->...}`, `operand_layout_constraints={...}`,
//! typed by the parser).
//!
//! Invariant: functions that return a [`ShapeId`] intern it in the module;
//! a "filled" shape has a layout on every array (recursively).

use hlo::{Layout, Module, Shape, ShapeId};
use smallvec::SmallVec;

use super::dims::{default_m2m, M2M};

/// The minor-to-major order of an array shape; `None` for non-arrays and
/// arrays without a layout.
pub fn m2m(m: &Module, s: ShapeId) -> Option<M2M> {
    m.shape(s)
        .as_array()?
        .layout
        .as_ref()
        .map(|l| l.minor_to_major.clone())
}

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

/// `s` with every missing array layout replaced by the default layout.
pub fn fill_default(m: &mut Module, s: ShapeId) -> ShapeId {
    match m.shape(s).clone() {
        Shape::Array(mut a) => {
            // A scalar has one layout; XLA writes it without braces.
            if a.layout.is_some() || a.rank() == 0 {
                return s;
            }
            a.layout = Some(Layout::default_for_rank(a.rank()));
            m.intern_shape(Shape::Array(a))
        }
        Shape::Tuple(elems) => {
            let filled: SmallVec<[ShapeId; 4]> =
                elems.iter().map(|&e| fill_default(m, e)).collect();
            if filled == elems {
                s
            } else {
                m.intern_shape(Shape::Tuple(filled))
            }
        }
        // Buffer shapes (`b(...)`) are left alone: layout assignment does
        // not touch them, as their layout belongs to the custom call that
        // creates the buffer.
        Shape::Buffer(_) | Shape::Token | Shape::Opaque => s,
    }
}

/// Whether every array in `s` has a layout.
pub fn is_filled(m: &Module, s: ShapeId) -> bool {
    match m.shape(s) {
        Shape::Array(a) => a.layout.is_some() || a.rank() == 0,
        Shape::Tuple(elems) => elems.iter().all(|&e| is_filled(m, e)),
        // Left alone by layout assignment (see `fill_default`).
        Shape::Buffer(_) | Shape::Token | Shape::Opaque => true,
    }
}

/// The array shape `s` with its minor-to-major order replaced by `order`
/// (other layout fields kept). `s` unchanged for non-arrays or a rank mismatch.
pub fn with_m2m(m: &mut Module, s: ShapeId, order: &[i64]) -> ShapeId {
    let Shape::Array(mut a) = m.shape(s).clone() else {
        return s;
    };
    if a.rank() != order.len() || (a.rank() == 0 && a.layout.is_none()) {
        return s;
    }
    let mut layout = a
        .layout
        .take()
        .unwrap_or_else(|| Layout::default_for_rank(order.len()));
    if layout.minor_to_major.as_slice() == order {
        a.layout = Some(layout);
        return m.intern_shape(Shape::Array(a));
    }
    layout.minor_to_major = SmallVec::from_slice(order);
    a.layout = Some(layout);
    m.intern_shape(Shape::Array(a))
}

/// The default layout of rank `rank`, as a shape of `s`'s element type and dims.
pub fn with_default(m: &mut Module, s: ShapeId) -> ShapeId {
    match rank(m, s) {
        Some(r) => with_m2m(m, s, &default_m2m(r)),
        None => fill_default(m, s),
    }
}

/// Element `k` of a tuple shape.
pub fn tuple_elem(m: &Module, s: ShapeId, k: usize) -> Option<ShapeId> {
    match m.shape(s) {
        Shape::Tuple(e) => e.get(k).copied(),
        _ => None,
    }
}

/// Whether the module shape `s` agrees with `t`, a shape an attribute
/// requires (`entry_computation_layout`, `operand_layout_constraints`), on
/// dimensions and (where `t` has a layout) minor-to-major order.
pub fn agrees(m: &Module, s: ShapeId, t: ShapeId) -> bool {
    match (m.shape(s), m.shape(t)) {
        (Shape::Array(a), Shape::Array(b)) => {
            a.dims == b.dims
                && match (&b.layout, &a.layout) {
                    (Some(o), Some(l)) => l.minor_to_major == o.minor_to_major,
                    _ => true,
                }
        }
        (Shape::Tuple(e), Shape::Tuple(te)) => {
            e.len() == te.len() && e.iter().zip(te).all(|(&x, &y)| agrees(m, x, y))
        }
        (Shape::Token | Shape::Opaque, Shape::Token | Shape::Opaque) => true,
        _ => false,
    }
}

/// `s` with the minor-to-major orders of `t` (where `t` has one; see
/// [`agrees`]).
pub fn apply_layout_of(m: &mut Module, s: ShapeId, t: ShapeId) -> ShapeId {
    match (m.shape(s).clone(), m.shape(t)) {
        (Shape::Array(_), Shape::Array(b)) => match &b.layout {
            Some(l) => {
                let o = l.minor_to_major.clone();
                with_m2m(m, s, &o)
            }
            None => s,
        },
        (Shape::Tuple(e), Shape::Tuple(te)) if e.len() == te.len() => {
            let te = te.clone();
            let elems: SmallVec<[ShapeId; 4]> = e
                .iter()
                .zip(te.iter())
                .map(|(&x, &y)| apply_layout_of(m, x, y))
                .collect();
            m.intern_shape(Shape::Tuple(elems))
        }
        _ => s,
    }
}

/// The first array of `t` (recursively) whose layout is not a permutation
/// of its dimensions, shown.
pub fn bad_layout(m: &Module, t: ShapeId) -> Option<String> {
    match m.shape(t) {
        Shape::Array(a) => match &a.layout {
            Some(l) if !super::dims::is_permutation(&l.minor_to_major, a.rank()) => {
                Some(show(m, t))
            }
            _ => None,
        },
        Shape::Tuple(e) => e.iter().find_map(|&x| bad_layout(m, x)),
        _ => None,
    }
}

/// Human-readable shape text, for messages and `--explain`.
pub fn show(m: &Module, s: ShapeId) -> String {
    match m.shape(s) {
        Shape::Array(a) => {
            let dims: Vec<String> = a.dims.iter().map(|d| d.to_string()).collect();
            let layout = a
                .layout
                .as_ref()
                .map(|l| {
                    format!(
                        "{{{}}}",
                        l.minor_to_major
                            .iter()
                            .map(|d| d.to_string())
                            .collect::<Vec<_>>()
                            .join(",")
                    )
                })
                .unwrap_or_default();
            format!("{}[{}]{}", a.elem, dims.join(","), layout)
        }
        Shape::Tuple(e) => format!(
            "({})",
            e.iter().map(|&x| show(m, x)).collect::<Vec<_>>().join(", ")
        ),
        Shape::Buffer(inner) => format!("b({})", show(m, *inner)),
        Shape::Token => "token[]".into(),
        Shape::Opaque => "opaque[]".into(),
    }
}
