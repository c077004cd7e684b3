//! Shape helpers for layout assignment: reading and replacing the
//! minor-to-major order of interned shapes, filling missing layouts with the
//! default, and a small reader for the shapes XLA writes in attribute text
//! (`entry_computation_layout={(...)->...}`, `operand_layout_constraints={...}`).
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

/// A shape as written in attribute text, reduced to what layout checks need.
#[derive(Clone, Debug, PartialEq)]
pub enum TextShape {
    Array {
        dims: Vec<i64>,
        m2m: Option<Vec<i64>>,
    },
    Tuple(Vec<TextShape>),
    Other,
}

/// Reads `(shape, shape, ...)->shape` (the entry computation layout).
pub fn parse_program_shape(text: &str) -> Option<(Vec<TextShape>, TextShape)> {
    let mut r = Reader {
        s: text.as_bytes(),
        i: 0,
    };
    let params = match r.shape()? {
        TextShape::Tuple(p) => p,
        _ => return None,
    };
    r.ws();
    if !r.eat("->") {
        return None;
    }
    let result = r.shape()?;
    Some((params, result))
}

/// Reads a `{shape, shape, ...}` list (operand layout constraints).
pub fn parse_shape_list(text: &str) -> Option<Vec<TextShape>> {
    let mut r = Reader {
        s: text.as_bytes(),
        i: 0,
    };
    r.ws();
    if !r.eat("{") {
        return None;
    }
    let mut out = Vec::new();
    loop {
        r.ws();
        if r.eat("}") {
            return Some(out);
        }
        out.push(r.shape()?);
        r.ws();
        r.eat(",");
    }
}

struct Reader<'a> {
    s: &'a [u8],
    i: usize,
}

impl Reader<'_> {
    fn ws(&mut self) {
        loop {
            while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
                self.i += 1;
            }
            if self.s[self.i..].starts_with(b"/*") {
                match self.s[self.i..].windows(2).position(|w| w == b"*/") {
                    Some(p) => self.i += p + 2,
                    None => self.i = self.s.len(),
                }
            } else {
                return;
            }
        }
    }
    fn eat(&mut self, t: &str) -> bool {
        if self.s[self.i..].starts_with(t.as_bytes()) {
            self.i += t.len();
            true
        } else {
            false
        }
    }
    fn int(&mut self) -> Option<i64> {
        let start = self.i;
        if self.i < self.s.len() && self.s[self.i] == b'-' {
            self.i += 1;
        }
        while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
            self.i += 1;
        }
        std::str::from_utf8(&self.s[start..self.i])
            .ok()?
            .parse()
            .ok()
    }
    fn shape(&mut self) -> Option<TextShape> {
        self.ws();
        if self.eat("(") {
            let mut elems = Vec::new();
            loop {
                self.ws();
                if self.eat(")") {
                    return Some(TextShape::Tuple(elems));
                }
                elems.push(self.shape()?);
                self.ws();
                self.eat(",");
            }
        }
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric() || self.s[self.i] == b'_')
        {
            self.i += 1;
        }
        if self.i == start {
            return None;
        }
        if !self.eat("[") {
            return Some(TextShape::Other);
        }
        let mut dims = Vec::new();
        loop {
            self.ws();
            if self.eat("]") {
                break;
            }
            self.eat("<=");
            if self.eat("?") {
                dims.push(hlo::UNBOUNDED_DIM);
            } else {
                dims.push(self.int()?);
            }
            self.ws();
            self.eat(",");
        }
        if !self.eat("{") {
            return Some(TextShape::Array { dims, m2m: None });
        }
        let mut order = Vec::new();
        loop {
            self.ws();
            if self.i < self.s.len() && (self.s[self.i].is_ascii_digit()) {
                order.push(self.int()?);
                self.ws();
                self.eat(",");
                continue;
            }
            break;
        }
        // Skip the rest of the layout (tiles, memory space, ...), balancing parentheses.
        let mut depth = 0i32;
        while self.i < self.s.len() {
            match self.s[self.i] {
                b'(' => depth += 1,
                b')' => depth -= 1,
                b'}' if depth == 0 => {
                    self.i += 1;
                    return Some(TextShape::Array {
                        dims,
                        m2m: Some(order),
                    });
                }
                _ => {}
            }
            self.i += 1;
        }
        None
    }
}

/// Whether the module shape `s` agrees with the text shape `t` on dims and
/// (where the text gives one) minor-to-major order.
pub fn agrees(m: &Module, s: ShapeId, t: &TextShape) -> bool {
    match (m.shape(s), t) {
        (Shape::Array(a), TextShape::Array { dims, m2m }) => {
            a.dims.as_slice() == dims.as_slice()
                && match (m2m, &a.layout) {
                    (Some(o), Some(l)) => l.minor_to_major.as_slice() == o.as_slice(),
                    _ => true,
                }
        }
        (Shape::Tuple(e), TextShape::Tuple(te)) => {
            e.len() == te.len() && e.iter().zip(te).all(|(&x, y)| agrees(m, x, y))
        }
        (Shape::Token | Shape::Opaque, TextShape::Other) => true,
        _ => false,
    }
}

/// `s` with the minor-to-major orders given by `t` (where `t` has one).
pub fn apply_text_layout(m: &mut Module, s: ShapeId, t: &TextShape) -> ShapeId {
    match (m.shape(s).clone(), t) {
        (Shape::Array(_), TextShape::Array { m2m: Some(o), .. }) => with_m2m(m, s, o),
        (Shape::Tuple(e), TextShape::Tuple(te)) if e.len() == te.len() => {
            let elems: SmallVec<[ShapeId; 4]> = e
                .iter()
                .zip(te)
                .map(|(&x, y)| apply_text_layout(m, x, y))
                .collect();
            m.intern_shape(Shape::Tuple(elems))
        }
        _ => s,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_entry_computation_layout_with_index_comments() {
        let (params, result) =
            parse_program_shape("(f32[3072]{0}, f32[768,3072]{1,0}, /*index=2*/bf16[2,3]{0,1:T(8,128)})->(f32[2]{0}, s32[])")
                .expect("parses");
        assert_eq!(params.len(), 3);
        assert_eq!(
            params[2],
            TextShape::Array {
                dims: vec![2, 3],
                m2m: Some(vec![0, 1])
            }
        );
        assert_eq!(
            result,
            TextShape::Tuple(vec![
                TextShape::Array {
                    dims: vec![2],
                    m2m: Some(vec![0])
                },
                TextShape::Array {
                    dims: vec![],
                    m2m: None
                }
            ])
        );
    }

    #[test]
    fn reads_operand_layout_constraints() {
        let l = parse_shape_list("{f32[2,3]{0,1}, f32[5]{0}}").expect("parses");
        assert_eq!(
            l[0],
            TextShape::Array {
                dims: vec![2, 3],
                m2m: Some(vec![0, 1])
            }
        );
        assert_eq!(l.len(), 2);
    }
}
