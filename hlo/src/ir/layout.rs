//! Operations on layouts: an array's minor-to-major order, XLA's default
//! order, whether a shape's layouts agree with a required shape's, the
//! default filled in, and the short form messages show. Used by the
//! parser's and the proto reader's checks, the layout and tile passes, the
//! featurizer and the PJRT legalizer; each is written here once.
//!
//! Invariant: the [`Module`] methods that return a [`ShapeId`] intern the
//! shape they make; a shape whose arrays all have a layout is "filled"
//! (buffers, tokens and opaques need none; a scalar has one layout).

use smallvec::SmallVec;

use crate::ir::{ArrayShape, Layout, Module, Shape, ShapeId};

/// A minor-to-major order: dimension numbers from most minor to most major.
pub type MinorToMajor = SmallVec<[i64; 6]>;

/// Whether `order` names each of `rank` dimensions once (a layout's
/// minor-to-major order, a transpose's permutation).
pub fn is_permutation(order: &[i64], rank: usize) -> bool {
    let mut seen = vec![false; rank];
    order.len() == rank
        && order.iter().all(|&d| {
            usize::try_from(d)
                .ok()
                .and_then(|d| seen.get_mut(d))
                .is_some_and(|s| !std::mem::replace(s, true))
        })
}

impl Layout {
    /// `{rank-1, ..., 1, 0}`: XLA's default (descending, row-major) order.
    pub fn default_order(rank: usize) -> MinorToMajor {
        (0..rank as i64).rev().collect()
    }

    /// Whether `order` is the default order of its length.
    pub fn is_default_order(order: &[i64]) -> bool {
        order.iter().rev().enumerate().all(|(i, &d)| d == i as i64)
    }

    /// `{1,0}`: an order as a shape's layout shows it.
    pub fn order_text(order: &[i64]) -> String {
        let v: Vec<String> = order.iter().map(i64::to_string).collect();
        format!("{{{}}}", v.join(","))
    }
}

impl ArrayShape {
    /// The layout's minor-to-major order; `None` without a layout.
    pub fn minor_to_major(&self) -> Option<&[i64]> {
        self.layout.as_ref().map(|l| l.minor_to_major.as_slice())
    }

    /// The order the array is laid out in: its layout's, or the default
    /// order when it has none (as XLA's parser assigns it).
    pub fn minor_to_major_or_default(&self) -> MinorToMajor {
        match &self.layout {
            Some(l) => l.minor_to_major.clone(),
            None => Layout::default_order(self.rank()),
        }
    }
}

impl Module {
    /// The minor-to-major order of array shape `s`; `None` for non-arrays and
    /// arrays without a layout.
    pub fn minor_to_major(&self, s: ShapeId) -> Option<MinorToMajor> {
        self.shape(s)
            .as_array()?
            .minor_to_major()
            .map(MinorToMajor::from_slice)
    }

    /// The order array shape `s` is laid out in (the default without a
    /// layout); `None` for non-arrays.
    pub fn minor_to_major_or_default(&self, s: ShapeId) -> Option<MinorToMajor> {
        self.shape(s)
            .as_array()
            .map(ArrayShape::minor_to_major_or_default)
    }

    /// `s` with every missing array layout replaced by the default layout.
    pub fn fill_default_layouts(&mut self, s: ShapeId) -> ShapeId {
        match self.shape(s).clone() {
            Shape::Array(mut a) => {
                // A scalar has one layout; XLA writes it without braces.
                if a.layout.is_some() || a.rank() == 0 {
                    return s;
                }
                a.layout = Some(Layout::default_for_rank(a.rank()));
                self.intern_shape(Shape::Array(a))
            }
            Shape::Tuple(elems) => {
                let filled: SmallVec<[ShapeId; 4]> = elems
                    .iter()
                    .map(|&e| self.fill_default_layouts(e))
                    .collect();
                if filled == elems {
                    s
                } else {
                    self.intern_shape(Shape::Tuple(filled))
                }
            }
            // Buffer shapes (`b(...)`) are left alone: their layout belongs
            // to the custom call that creates the buffer.
            Shape::Buffer(_) | Shape::Token | Shape::Opaque => s,
        }
    }

    /// Whether every array in `s` has a layout (see
    /// [`Module::fill_default_layouts`]).
    pub fn has_all_layouts(&self, s: ShapeId) -> bool {
        match self.shape(s) {
            Shape::Array(a) => a.layout.is_some() || a.rank() == 0,
            Shape::Tuple(elems) => elems.iter().all(|&e| self.has_all_layouts(e)),
            Shape::Buffer(_) | Shape::Token | Shape::Opaque => true,
        }
    }

    /// Array shape `s` with its minor-to-major order replaced by `order`
    /// (other layout fields kept); `s` unchanged for non-arrays, a rank
    /// mismatch, or a scalar without a layout.
    pub fn with_minor_to_major(&mut self, s: ShapeId, order: &[i64]) -> ShapeId {
        let Shape::Array(mut a) = self.shape(s).clone() else {
            return s;
        };
        if a.rank() != order.len() || (a.rank() == 0 && a.layout.is_none()) {
            return s;
        }
        let mut layout = a
            .layout
            .take()
            .unwrap_or_else(|| Layout::default_for_rank(order.len()));
        if layout.minor_to_major.as_slice() != order {
            layout.minor_to_major = SmallVec::from_slice(order);
        }
        a.layout = Some(layout);
        self.intern_shape(Shape::Array(a))
    }

    /// Array shape `s` in the default order (other layout fields kept);
    /// other shapes with their missing layouts filled in.
    pub fn with_default_layout(&mut self, s: ShapeId) -> ShapeId {
        match self.shape(s).as_array().map(ArrayShape::rank) {
            Some(r) => self.with_minor_to_major(s, &Layout::default_order(r)),
            None => self.fill_default_layouts(s),
        }
    }

    /// Whether shape `s` agrees with `t`, a shape an attribute requires
    /// (`entry_computation_layout`, `operand_layout_constraints`): equal
    /// dimensions and, where both have a layout, equal minor-to-major orders.
    pub fn layouts_agree(&self, s: ShapeId, t: ShapeId) -> bool {
        match (self.shape(s), self.shape(t)) {
            (Shape::Array(a), Shape::Array(b)) => {
                a.dims == b.dims
                    && match (&b.layout, &a.layout) {
                        (Some(o), Some(l)) => l.minor_to_major == o.minor_to_major,
                        _ => true,
                    }
            }
            (Shape::Tuple(e), Shape::Tuple(te)) => {
                e.len() == te.len() && e.iter().zip(te).all(|(&x, &y)| self.layouts_agree(x, y))
            }
            (Shape::Token | Shape::Opaque, Shape::Token | Shape::Opaque) => true,
            _ => false,
        }
    }

    /// `s` with the minor-to-major orders of `t` where `t` has them (see
    /// [`Module::layouts_agree`]).
    pub fn with_layouts_of(&mut self, s: ShapeId, t: ShapeId) -> ShapeId {
        match (self.shape(s).clone(), self.shape(t)) {
            (Shape::Array(_), Shape::Array(b)) => match &b.layout {
                Some(l) => {
                    let o = l.minor_to_major.clone();
                    self.with_minor_to_major(s, &o)
                }
                None => s,
            },
            (Shape::Tuple(e), Shape::Tuple(te)) if e.len() == te.len() => {
                let te = te.clone();
                let elems: SmallVec<[ShapeId; 4]> = e
                    .iter()
                    .zip(te.iter())
                    .map(|(&x, &y)| self.with_layouts_of(x, y))
                    .collect();
                self.intern_shape(Shape::Tuple(elems))
            }
            _ => s,
        }
    }

    /// `f32[2,3]{1,0}`: shape `s` in short, for messages (element type,
    /// dimensions and minor-to-major order only; the HLO text form is
    /// [`crate::print_shape`]'s).
    pub fn show_shape(&self, s: ShapeId) -> String {
        match self.shape(s) {
            Shape::Array(a) => {
                let dims: Vec<String> = a.dims.iter().map(|d| d.to_string()).collect();
                let layout = a
                    .minor_to_major()
                    .map(Layout::order_text)
                    .unwrap_or_default();
                format!("{}[{}]{}", a.elem, dims.join(","), layout)
            }
            Shape::Tuple(e) => format!(
                "({})",
                e.iter()
                    .map(|&x| self.show_shape(x))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Shape::Buffer(inner) => format!("b({})", self.show_shape(*inner)),
            Shape::Token => "token[]".into(),
            Shape::Opaque => "opaque[]".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shapes of the entry's parameters `a`, `b`, `c` of `text`.
    fn params(text: &str) -> (Module, Vec<ShapeId>) {
        let m = crate::parse_module(text).expect("parses");
        let e = m.entry_computation();
        let shapes = e.params.iter().map(|&p| m.inst(p).shape).collect();
        (m, shapes)
    }

    const TEXT: &str = "HloModule m\n\nENTRY e {\n  a = f32[2,3]{0,1} parameter(0)\n  \
        b = f32[2,3] parameter(1)\n  c = (f32[2,3]{1,0}, s32[]) parameter(2)\n  \
        ROOT r = f32[2,3]{0,1} add(a, b)\n}\n";

    #[test]
    fn orders() {
        assert_eq!(Layout::default_order(3).as_slice(), &[2, 1, 0]);
        assert!(Layout::is_default_order(&[1, 0]));
        assert!(Layout::is_default_order(&[]));
        assert!(!Layout::is_default_order(&[0, 1]));
        assert_eq!(Layout::order_text(&[0, 1]), "{0,1}");
        assert!(is_permutation(&[1, 0, 2], 3));
        assert!(!is_permutation(&[1, 1, 0], 3));
        assert!(!is_permutation(&[0, 1], 3));
        assert!(!is_permutation(&[-1, 0], 2));
    }

    #[test]
    fn read_fill_agree_apply_show() {
        let (mut m, s) = params(TEXT);
        let (a, b, c) = (s[0], s[1], s[2]);
        assert_eq!(m.minor_to_major(a).as_deref(), Some(&[0i64, 1][..]));
        assert_eq!(m.minor_to_major(b), None);
        assert_eq!(
            m.minor_to_major_or_default(b).as_deref(),
            Some(&[1i64, 0][..])
        );
        assert_eq!(m.minor_to_major_or_default(c), None);

        assert!(!m.has_all_layouts(b));
        let filled = m.fill_default_layouts(b);
        assert!(m.has_all_layouts(filled));
        assert_eq!(m.minor_to_major(filled).as_deref(), Some(&[1i64, 0][..]));
        assert_eq!(
            m.fill_default_layouts(c),
            c,
            "already filled: the same shape"
        );

        assert!(m.layouts_agree(a, b), "no layout required");
        assert!(!m.layouts_agree(filled, a));
        assert_eq!(m.with_layouts_of(filled, a), a);
        assert_eq!(m.with_minor_to_major(a, &[1, 0, 2]), a, "rank mismatch");
        assert_eq!(m.with_default_layout(a), filled);

        assert_eq!(m.show_shape(c), "(f32[2,3]{1,0}, s32[])");
        assert_eq!(m.show_shape(b), "f32[2,3]");
    }
}
