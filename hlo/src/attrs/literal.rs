//! Constant literals: the one decoder of literal text, the typed form the IR
//! keeps ([`Literal`]), its printer, and its conversion to and from XLA's
//! `LiteralProto` values.
//!
//! A literal is decoded once, at parse time, against its constant's shape by
//! [`decode`], with XLA's parser rules. `{...}` (values XLA did not print) is
//! kept as [`Literal::Elided`]; [`ElidedFill`] makes the values XLA's parser
//! makes up for it, for the proto writer. Errors carry the byte offset of the
//! problem in the literal text (the parser turns it into `file:line:col`).
//!
//! Invariants of an [`ArrayLiteral`]: its bytes hold exactly one element
//! ([`ArrayLiteral::is_single`]) or the product of its dimensions in
//! row-major order, each element in its type's little-endian encoding of
//! [`PrimType::byte_size`] bytes (sub-byte integers one byte each, sign
//! extended; small floats their bit pattern; complex numbers real then
//! imaginary part). Memory is bounded by the text or proto it came from: a
//! single value written for four billion elements is stored once.
//!
//! The printer writes the values in a form XLA's parser reads as the same
//! values: integers in decimal, floats as the shortest decimal that reads
//! back as the element type's value (`-0.0` for negative zero, which XLA
//! would read as the integer 0 if written `-0`), `nan`, `-nan`, `inf`,
//! `-inf`, and NaN payloads as XLA's `RoundTripFpToString` writes them
//! (`nan(0x1)`: the mantissa bits, omitted for the quiet NaN without
//! payload).

use crate::ir::xla::LiteralProto;
use crate::ir::{ArrayShape, Module, PrimType, Shape, ShapeId};

/// A decoding error: byte offset in the literal text and message.
pub type DecodeError = (usize, String);

use crate::ir::literal::{count_of, width};
pub use crate::ir::literal::{ArrayLiteral, Literal};

/// Whether `lit` has shape `shape` (element types equal, dimensions equal,
/// a dynamic one at most its bound, tuples element by element; an elided
/// literal fits every shape): the verifier's check of a module edited in
/// code. Decoded and proto-read literals fit by construction.
pub fn fits(m: &Module, shape: ShapeId, lit: &Literal) -> Result<(), String> {
    match (m.shape(shape), lit) {
        (_, Literal::Elided) => Ok(()),
        (Shape::Array(a), Literal::Array(v)) => {
            let dims_fit = v.dims.len() == a.dims.len()
                && v.dims
                    .iter()
                    .zip(&a.dims)
                    .enumerate()
                    .all(|(d, (&n, &bound))| {
                        n == bound || bound < 0 || a.is_dynamic_dim(d) && n <= bound
                    });
            if v.elem != a.elem || !dims_fit {
                return Err(format!(
                    "the literal is a {}{:?}, not of the constant's shape",
                    v.elem, v.dims
                ));
            }
            Ok(())
        }
        (Shape::Tuple(elems), Literal::Tuple(values)) if elems.len() == values.len() => elems
            .iter()
            .zip(values.iter())
            .try_for_each(|(&e, v)| fits(m, e, v)),
        _ => Err("the literal's structure is not the constant's shape".into()),
    }
}

// ---------------------------------------------------------------------------
// decoding text

/// Decodes the literal text of a constant of shape `shape` with XLA's
/// parser rules: nesting depth equal to the rank, element counts equal to
/// the dimensions (a dynamic dimension holds at most its bound), each value
/// in range of the element type, NaN payloads that fit the type, complex
/// values written `(re, im)`, tuple literals `( {1, 2}, 3 )`, a single value
/// written for an array (XLA sets the first element to it and leaves the
/// others zero), `{...}` for a whole array's values XLA did not print (a
/// scalar's, a tuple's or a sub-array's `{...}` is an error, as in XLA's
/// parser). [`ElidedFill`] makes the elided values for the proto writer, as
/// a literal or a chunk at a time straight into the writer's output.
pub fn decode(m: &Module, shape: ShapeId, text: &str) -> Result<Literal, DecodeError> {
    let mut c = Cursor {
        s: text.as_bytes(),
        i: 0,
    };
    let lit = c.literal(m, shape)?;
    c.skip_ws();
    if c.i < c.s.len() {
        return Err((c.i, "unexpected text after the literal".into()));
    }
    Ok(lit)
}

/// Decodes a literal written with its shapes, as a custom call's
/// `literal=` is (XLA's `ParseLiteral` without a shape): an array shape
/// with its layout, then the values (`s32[2]{0} {1, 2}`, `f32[] 3`), or a
/// tuple of such literals, each with its own shape
/// (`( s32[4]{0} {...}, ( pred[] true, f32[] 3 ) )`). `shape_of` reads
/// and interns one array shape's text. Returns the literal's shape (a
/// tuple's interned from its elements') and values, decoded by the same
/// rules as a constant's.
pub fn decode_shaped(
    m: &mut Module,
    text: &str,
    shape_of: &mut dyn FnMut(&mut Module, &str) -> Result<ShapeId, String>,
) -> Result<(ShapeId, Literal), DecodeError> {
    let mut c = Cursor {
        s: text.as_bytes(),
        i: 0,
    };
    let out = c.shaped(m, shape_of, 0)?;
    c.skip_ws();
    if c.i < c.s.len() {
        return Err((c.i, "unexpected text after the literal".into()));
    }
    Ok(out)
}

/// Deepest tuple nesting [`decode_shaped`] reads (XLA's parser stops
/// recursing at a depth limit too).
const MAX_TUPLE_DEPTH: usize = 64;

struct Cursor<'s> {
    s: &'s [u8],
    i: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn skip_ws(&mut self) {
        loop {
            while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
                self.i += 1;
            }
            // `/*index=5*/`-style comments XLA prints in long literals.
            if self.s.get(self.i..self.i + 2) != Some(b"/*") {
                return;
            }
            match self.s[self.i + 2..].windows(2).position(|w| w == b"*/") {
                Some(p) => self.i += p + 4,
                None => return,
            }
        }
    }
    fn eat(&mut self, b: u8) -> bool {
        self.skip_ws();
        if self.peek() == Some(b) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn at(&self, lit: &[u8]) -> bool {
        self.s.get(self.i..self.i + lit.len()) == Some(lit)
    }

    /// One literal with its shapes (see [`decode_shaped`]).
    fn shaped(
        &mut self,
        m: &mut Module,
        shape_of: &mut dyn FnMut(&mut Module, &str) -> Result<ShapeId, String>,
        depth: usize,
    ) -> Result<(ShapeId, Literal), DecodeError> {
        if depth > MAX_TUPLE_DEPTH {
            return Err((self.i, "tuple literals nest too deeply".into()));
        }
        if self.eat(b'(') {
            let mut shapes = smallvec::SmallVec::new();
            let mut values = Vec::new();
            if !self.eat(b')') {
                loop {
                    let (s, v) = self.shaped(m, shape_of, depth + 1)?;
                    shapes.push(s);
                    values.push(v);
                    if self.eat(b')') {
                        break;
                    }
                    if !self.eat(b',') {
                        return Err((self.i, "expects `,` or `)` in a tuple literal".into()));
                    }
                }
            }
            let shape = m.intern_shape(Shape::Tuple(shapes));
            return Ok((shape, Literal::Tuple(values.into())));
        }
        let start = self.i;
        let len = shape_prefix_len(&self.s[start..]).ok_or((
            start,
            "expects a shape with its layout, then the values (`s32[2]{0} {1, 2}`)".into(),
        ))?;
        let text = std::str::from_utf8(&self.s[start..start + len])
            .map_err(|_| (start, "a shape is ASCII text".to_string()))?;
        let shape = shape_of(m, text).map_err(|msg| (start, msg))?;
        if !matches!(m.shape(shape), Shape::Array(_)) {
            return Err((start, "expects an array shape".into()));
        }
        self.i = start + len;
        Ok((shape, self.literal(m, shape)?))
    }

    fn literal(&mut self, m: &Module, shape: ShapeId) -> Result<Literal, DecodeError> {
        self.skip_ws();
        // `{...}`: XLA elides an array's values only (a scalar's and a
        // tuple's `{...}` are errors below, as in XLA's parser).
        if self.at(b"{...}") && matches!(m.shape(shape), Shape::Array(a) if a.rank() > 0) {
            self.i += 5;
            return Ok(Literal::Elided);
        }
        match m.shape(shape) {
            Shape::Array(a) => Ok(match self.array(a)? {
                Some(a) => Literal::Array(a),
                None => Literal::Elided,
            }),
            Shape::Tuple(elems) => {
                if !self.eat(b'(') {
                    return Err((
                        self.i,
                        "a tuple-shaped literal is written `(element, ...)`".into(),
                    ));
                }
                let mut out = Vec::with_capacity(elems.len());
                for (k, &e) in elems.iter().enumerate() {
                    if k > 0 && !self.eat(b',') {
                        return Err((self.i, "expects `,` to separate tuple elements".into()));
                    }
                    out.push(self.literal(m, e)?);
                }
                if !self.eat(b')') {
                    return Err((
                        self.i,
                        format!(
                            "expects `)` at the end of the tuple literal with {} elements",
                            elems.len()
                        ),
                    ));
                }
                Ok(Literal::Tuple(out.into()))
            }
            _ => Err((self.i, "only array and tuple shapes have literals".into())),
        }
    }

    /// An array literal; `None` when some part is elided (`{...}`).
    fn array(&mut self, a: &ArrayShape) -> Result<Option<ArrayLiteral>, DecodeError> {
        let rank = a.rank();
        let w = width(a.elem).ok_or((self.i, format!("{} has no literal values", a.elem)))?;
        self.skip_ws();
        if self.peek() != Some(b'{') {
            // A scalar, or one value written for an array: XLA's parser sets
            // the first element to it and leaves the others zero
            // (`f32[3,3] constant(1)`).
            let start = self.i;
            let mut data = Vec::with_capacity(w);
            self.value(a.elem, &mut data)?;
            if rank > 0 && count_of(&a.dims).is_none() {
                return Err((
                    start,
                    "one value cannot stand for an array of unbounded size".into(),
                ));
            }
            return Ok(Some(ArrayLiteral {
                elem: a.elem,
                dims: a.dims.iter().copied().collect(),
                data: data.into(),
                single: rank > 0,
            }));
        }
        if rank == 0 {
            return Err((
                self.i,
                "a scalar constant takes a single value, not a nested array `{...}`".into(),
            ));
        }
        let hint = count_of(&a.dims).unwrap_or(0).min(1 << 20) as usize;
        let mut data = Vec::with_capacity(hint * w);
        let mut sizes: Vec<Option<i64>> = vec![None; rank];
        if self.level(a, 0, &mut data, &mut sizes)? {
            return Ok(None);
        }
        let dims: Box<[i64]> = sizes
            .iter()
            .zip(&a.dims)
            .map(|(s, &bound)| s.unwrap_or(bound.max(0)))
            .collect();
        if count_of(&dims).map(|n| n as u128 * w as u128) != Some(data.len() as u128) {
            // Only an empty dimension in front of a dynamic one gets here.
            return Err((0, "the literal's sub-arrays differ in size".into()));
        }
        Ok(Some(ArrayLiteral {
            elem: a.elem,
            dims,
            data: data.into(),
            single: false,
        }))
    }

    /// One nesting level `{...}` for dimension `d`; true when elided.
    fn level(
        &mut self,
        a: &ArrayShape,
        d: usize,
        data: &mut Vec<u8>,
        sizes: &mut [Option<i64>],
    ) -> Result<bool, DecodeError> {
        let rank = a.rank();
        let start = self.i;
        if !self.eat(b'{') {
            return Err((
                self.i,
                format!(
                    "expects a nested array `{{...}}` for dimension {d} of a rank-{rank} literal"
                ),
            ));
        }
        self.skip_ws();
        if self.at(b"...") {
            if d > 0 {
                // XLA elides the whole array, never a sub-array.
                return Err((
                    self.i,
                    format!(
                        "expects `...` at nest level 1, but sees it at nest level {}",
                        d + 1
                    ),
                ));
            }
            self.i += 3;
            if !self.eat(b'}') {
                return Err((self.i, "expects `}` after `...`".into()));
            }
            return Ok(true);
        }
        let mut elided = false;
        let mut count: i64 = 0;
        if !self.eat(b'}') {
            loop {
                self.skip_ws();
                if d + 1 < rank {
                    if self.peek() != Some(b'{') {
                        return Err((
                            self.i,
                            format!("expects nested array in rank {rank}, but sees {}", d + 1),
                        ));
                    }
                    elided |= self.level(a, d + 1, data, sizes)?;
                } else {
                    if self.peek() == Some(b'{') {
                        return Err((
                            self.i,
                            format!("expects nested array in rank {rank}, but sees larger"),
                        ));
                    }
                    self.value(a.elem, data)?;
                }
                count += 1;
                if self.eat(b',') {
                    continue;
                }
                if self.eat(b'}') {
                    break;
                }
                return Err((self.i, "expects `,` or `}` in the literal".into()));
            }
        }
        let bound = a.dims[d];
        if a.is_dynamic_dim(d) || bound < 0 {
            if bound >= 0 && count > bound {
                return Err((
                    start,
                    format!("dimension {d} of the shape has at most {bound} elements but the literal has {count}"),
                ));
            }
            match sizes[d] {
                None => sizes[d] = Some(count),
                Some(s) if s != count && !elided => {
                    return Err((
                        start,
                        format!("the sub-arrays of dimension {d} differ in size ({s} and {count})"),
                    ))
                }
                Some(_) => {}
            }
        } else if count != bound {
            return Err((
                start,
                format!(
                    "dimension {d} of the shape has {bound} elements but the literal has {count}"
                ),
            ));
        }
        Ok(elided)
    }

    /// One element value of type `t`, appended to `out`.
    fn value(&mut self, t: PrimType, out: &mut Vec<u8>) -> Result<(), DecodeError> {
        self.skip_ws();
        let start = self.i;
        if t.is_complex() {
            if !self.eat(b'(') {
                return Err((self.i, format!("a {t} value is written `(real, imag)`")));
            }
            let part = if t == PrimType::C64 {
                PrimType::F32
            } else {
                PrimType::F64
            };
            self.value(part, out)
                .map_err(|(o, m)| (o, format!("real part: {m}")))?;
            if !self.eat(b',') {
                return Err((
                    self.i,
                    "expects `,` between the real and imaginary parts".into(),
                ));
            }
            self.value(part, out)
                .map_err(|(o, m)| (o, format!("imaginary part: {m}")))?;
            if !self.eat(b')') {
                return Err((self.i, "expects `)` after the imaginary part".into()));
            }
            return Ok(());
        }
        self.i = token_end(self.s, start);
        let tok = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
        if tok.is_empty() {
            return Err((start, "expects a value".into()));
        }
        encode(t, tok, out).map_err(|m| (start, m))
    }
}

/// Length of the array shape at the start of `s` (`s32[2]{0} {1, 2}`):
/// through the closing `]` and the layout `{...}` that directly follows
/// it, if any.
fn shape_prefix_len(s: &[u8]) -> Option<usize> {
    let close = s.iter().position(|&b| b == b']')? + 1;
    if s.get(close) == Some(&b'{') {
        let end = s[close..].iter().position(|&b| b == b'}')? + close + 1;
        return Some(end);
    }
    Some(close)
}

/// The end of the value token starting at `start`: up to a `,`, `}`, `)`
/// or white space; a `(` (a `nan(0x...)` payload) extends it to the
/// closing `)`.
fn token_end(s: &[u8], start: usize) -> usize {
    let mut i = start;
    while let Some(&b) = s.get(i) {
        if matches!(b, b',' | b'}' | b')' | b' ' | b'\t' | b'\n' | b'\r') {
            break;
        }
        if b == b'(' {
            while let Some(&b) = s.get(i) {
                i += 1;
                if b == b')' {
                    break;
                }
            }
            break;
        }
        i += 1;
    }
    i
}

/// The range XLA accepts for an integer type (u64 is read through int64
/// as well: `u64[] constant(-1)` is all ones).
fn int_range(t: PrimType) -> Option<(i128, i128)> {
    use PrimType::*;
    Some(match t {
        S1 => (-1, 0),
        S2 => (-2, 1),
        S4 => (-8, 7),
        S8 => (i8::MIN as i128, i8::MAX as i128),
        S16 => (i16::MIN as i128, i16::MAX as i128),
        S32 => (i32::MIN as i128, i32::MAX as i128),
        S64 => (i64::MIN as i128, i64::MAX as i128),
        U1 => (0, 1),
        U2 => (0, 3),
        U4 => (0, 15),
        U8 => (0, u8::MAX as i128),
        U16 => (0, u16::MAX as i128),
        U32 => (0, u32::MAX as i128),
        U64 => (i64::MIN as i128, u64::MAX as i128),
        _ => return None,
    })
}

/// Encodes one value token of (non-complex) type `t` onto `out`.
fn encode(t: PrimType, tok: &str, out: &mut Vec<u8>) -> Result<(), String> {
    if t == PrimType::Pred {
        let b = match tok {
            "true" => 1,
            "false" => 0,
            _ => match tok.parse::<i64>() {
                Ok(v @ (0 | 1)) => v as u8,
                Ok(_) => return Err(format!("value {tok} is out of range for pred [0, 1]")),
                Err(_) => return Err(format!("`{tok}` is not a pred value (true, false, 0 or 1)")),
            },
        };
        out.push(b);
        return Ok(());
    }
    if let Some((lo, hi)) = int_range(t) {
        let v = tok
            .parse::<i128>()
            .map_err(|_| format!("expects an integer for {t}, found `{tok}`"))?;
        if v < lo || v > hi {
            return Err(format!("value {tok} is out of range for {t} [{lo}, {hi}]"));
        }
        let w = t.byte_size() as usize;
        out.extend_from_slice(&(v as u128).to_le_bytes()[..w]);
        return Ok(());
    }
    if !t.is_float() {
        return Err(format!("{t} has no literal values"));
    }
    match float_token(t, tok)? {
        Float::Nan { neg, payload } => {
            let bits = nan_bits(t, neg, payload);
            push_bits(t, bits, out);
        }
        Float::Num(v) => {
            let bits = match t {
                PrimType::F64 => v.to_bits(),
                PrimType::F32 => (v as f32).to_bits() as u64,
                _ => small_float_bits(t, v).unwrap_or(0) as u64,
            };
            push_bits(t, bits, out);
        }
    }
    Ok(())
}

fn push_bits(t: PrimType, bits: u64, out: &mut Vec<u8>) {
    let w = t.byte_size() as usize;
    out.extend_from_slice(&bits.to_le_bytes()[..w]);
}

enum Float {
    Num(f64),
    /// `payload`: `None` for the quiet NaN without payload.
    Nan {
        neg: bool,
        payload: Option<u64>,
    },
}

/// Exponent and mantissa bits of the types whose NaNs carry payloads
/// (IEEE-like: an all-ones exponent is infinity or NaN).
fn ieee_layout(t: PrimType) -> Option<(u32, u32)> {
    use PrimType::*;
    Some(match t {
        F64 => (11, 52),
        F32 => (8, 23),
        F16 => (5, 10),
        Bf16 => (8, 7),
        F8E5M2 => (5, 2),
        F8E4M3 => (4, 3),
        F8E3M4 => (3, 4),
        _ => return None,
    })
}

/// The bits of a NaN of type `t`.
fn nan_bits(t: PrimType, neg: bool, payload: Option<u64>) -> u64 {
    match ieee_layout(t) {
        Some((e, m)) => {
            let sign = u64::from(neg) << (e + m);
            sign | (((1u64 << e) - 1) << m) | payload.unwrap_or(1 << (m - 1))
        }
        None => small_float_bits(t, if neg { -f64::NAN } else { f64::NAN }).unwrap_or(0) as u64,
    }
}

/// A floating-point token of type `t`: decimal, integer, `inf`, `nan`,
/// `nan(0x...)`, signed; checked against the type's range and payload bits.
fn float_token(t: PrimType, tok: &str) -> Result<Float, String> {
    let (neg, body) = match tok.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, tok.strip_prefix('+').unwrap_or(tok)),
    };
    let head = body.get(..3);
    if head.is_some_and(|h| h.eq_ignore_ascii_case("nan")) {
        let payload = nan_payload(t, &body[3..], tok)?;
        return Ok(Float::Nan { neg, payload });
    }
    if body.eq_ignore_ascii_case("inf") {
        return Ok(Float::Num(if neg {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        }));
    }
    // XLA reads an integer token as an integer first (`-0` is 0).
    let v = match tok.parse::<i64>() {
        Ok(i) => i as f64,
        Err(_) => match tok.parse::<f64>() {
            Ok(v) if !v.is_nan() => v,
            _ => {
                return Err(format!(
                    "expects a floating-point value for {t}, found `{tok}`"
                ))
            }
        },
    };
    if v.is_infinite() {
        return Err(format!(
            "value {tok} is out of range for a double (±1.79769e+308)"
        ));
    }
    // Largest finite value and the bound past which it rounds to infinity
    // (largest value plus half a unit in the last place).
    let (max, limit) = match t {
        PrimType::F16 => (65504.0, 65520.0),
        PrimType::Bf16 => (
            3.3895313892515355e38,
            3.3895313892515355e38 + 2f64.powi(119),
        ),
        PrimType::F32 => (f32::MAX as f64, f32::MAX as f64 + 2f64.powi(103)),
        _ => {
            // The f8 and f4 types: a finite value that rounds to infinity or
            // NaN (e8m0fnu: also zero and negative values, which have no
            // code) is out of range, as XLA reads it; e2m1fn saturates.
            if let Some(bits) = small_float_bits(t, v) {
                let back = small_float_value(t, bits);
                let unsigned = t == PrimType::F8E8M0FNU;
                if !back.is_finite() || unsigned && v <= 0.0 {
                    let (lo, hi) = small_float_range(t);
                    return Err(format!(
                        "value {tok} is out of range for {t} [{lo:e}, {hi:e}]"
                    ));
                }
            }
            return Ok(Float::Num(v));
        }
    };
    if v.abs() >= limit {
        return Err(format!(
            "value {tok} is out of range for {t} [-{max:e}, {max:e}]"
        ));
    }
    Ok(Float::Num(v))
}

/// `nan` or `nan(0x<hex>)` (`rest` is what follows `nan`): XLA reads the
/// payload into a double NaN, then requires it to fit the element type's
/// payload bits (the mantissa bits of types with signaling NaNs, none for
/// the `fn`/`fnuz`/`fnu` types). The payload of a plain quiet NaN
/// (`0x8000000000000`) fits every type and reads as `nan`.
fn nan_payload(t: PrimType, rest: &str, tok: &str) -> Result<Option<u64>, String> {
    if rest.is_empty() {
        return Ok(None);
    }
    let hex = rest
        .strip_prefix("(0x")
        .or_else(|| rest.strip_prefix("(0X"))
        .and_then(|r| r.strip_suffix(')'))
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()));
    let payload = hex.and_then(|h| u64::from_str_radix(h, 16).ok());
    const DOUBLE_MASK: u64 = (1 << 52) - 1;
    const QUIET_WITHOUT_PAYLOAD: u64 = 1 << 51;
    let Some(payload) = payload.filter(|p| (1..=DOUBLE_MASK).contains(p)) else {
        return Err(format!(
            "a NaN with payload is written `nan(0x<hex>)` with a payload between 0x1 and 0x{DOUBLE_MASK:x}, found `{tok}`"
        ));
    };
    if payload == QUIET_WITHOUT_PAYLOAD {
        return Ok(None);
    }
    let Some((_, bits)) = ieee_layout(t) else {
        return Err(format!(
            "{t} does not support NaN payloads; write `nan` instead of `{tok}`"
        ));
    };
    let largest = (1u64 << bits) - 1;
    if payload > largest {
        return Err(format!(
            "NaN payload 0x{payload:x} is out of range for {t}: the largest payload is 0x{largest:x}"
        ));
    }
    Ok(Some(payload))
}

// ---------------------------------------------------------------------------
// printing

impl Literal {
    /// Appends the literal as HLO text (what goes between `constant(` and `)`).
    pub fn write_text(&self, out: &mut String) {
        match self {
            Literal::Elided => out.push_str("{...}"),
            Literal::Array(a) => a.write_text(out),
            Literal::Tuple(elems) => {
                out.push('(');
                for (k, e) in elems.iter().enumerate() {
                    if k > 0 {
                        out.push_str(", ");
                    }
                    e.write_text(out);
                }
                out.push(')');
            }
        }
    }
    /// Whether some part is elided (`{...}`).
    pub fn has_elided(&self) -> bool {
        match self {
            Literal::Elided => true,
            Literal::Array(_) => false,
            Literal::Tuple(elems) => elems.iter().any(Literal::has_elided),
        }
    }
    /// The literal as HLO text.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        self.write_text(&mut s);
        s
    }
}

impl ArrayLiteral {
    /// Appends the values as HLO text: a scalar or a single value written for an array
    /// alone, otherwise nested braces by dimension (`{ {1, 2}, {3, 4} }`).
    pub fn write_text(&self, out: &mut String) {
        if self.dims.is_empty() || self.single {
            elem_text(self.elem, &self.data, out);
            return;
        }
        let mut k = 0;
        self.nest(out, 0, &mut k);
    }
    fn nest(&self, out: &mut String, d: usize, k: &mut usize) {
        let inner = d + 1 < self.dims.len();
        out.push_str(if inner { "{ " } else { "{" });
        for j in 0..self.dims[d] {
            if j > 0 {
                out.push_str(", ");
            }
            if inner {
                self.nest(out, d + 1, k);
            } else {
                elem_text(self.elem, self.element(*k), out);
                *k += 1;
            }
        }
        if self.dims[d] == 0 {
            out.push('}');
        } else {
            out.push_str(if inner { " }" } else { "}" });
        }
    }
}

fn le_bits(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
    u64::from_le_bytes(a)
}

/// An integer or pred element's value.
fn int_of(t: PrimType, b: &[u8]) -> Option<i128> {
    use PrimType::*;
    let u = le_bits(b);
    Some(match t {
        Pred => i128::from(u != 0),
        S1 | S2 | S4 | S8 => i128::from(u as u8 as i8),
        S16 => i128::from(u as u16 as i16),
        S32 => i128::from(u as u32 as i32),
        S64 => i128::from(u as i64),
        U1 | U2 | U4 | U8 | U16 | U32 | U64 => i128::from(u),
        _ => return None,
    })
}

fn elem_text(t: PrimType, b: &[u8], out: &mut String) {
    use std::fmt::Write as _;
    match t {
        PrimType::Pred => out.push_str(if b[0] != 0 { "true" } else { "false" }),
        PrimType::C64 | PrimType::C128 => {
            let part = if t == PrimType::C64 {
                PrimType::F32
            } else {
                PrimType::F64
            };
            let h = b.len() / 2;
            out.push('(');
            float_text(part, le_bits(&b[..h]), out);
            out.push_str(", ");
            float_text(part, le_bits(&b[h..]), out);
            out.push(')');
        }
        _ => match int_of(t, b) {
            Some(i) => {
                let _ = write!(out, "{i}");
            }
            None => float_text(t, le_bits(b), out),
        },
    }
}

/// A number as XLA's text writes one: shortest decimal that reads back,
/// exponent form outside [1e-5, 1e16); negative zero `-0.0`.
fn number_text(v: f64, out: &mut String) {
    use std::fmt::Write as _;
    let a = v.abs();
    if a == 0.0 && v.is_sign_negative() {
        out.push_str("-0.0");
    } else if a != 0.0 && !(1e-5..1e16).contains(&a) {
        let _ = write!(out, "{v:e}");
    } else {
        let _ = write!(out, "{v}");
    }
}

/// The float of type `t` with bits `bits`.
fn float_text(t: PrimType, bits: u64, out: &mut String) {
    use std::fmt::Write as _;
    let v = match t {
        PrimType::F64 => f64::from_bits(bits),
        PrimType::F32 => f32::from_bits(bits as u32) as f64,
        _ => small_float_value(t, bits as u32),
    };
    if v.is_nan() {
        let neg = match ieee_layout(t) {
            Some((e, m)) => bits >> (e + m) & 1 == 1,
            None => v.is_sign_negative(),
        };
        out.push_str(if neg { "-nan" } else { "nan" });
        if let Some((_, m)) = ieee_layout(t) {
            let payload = bits & ((1u64 << m) - 1);
            if payload != 1 << (m - 1) {
                let _ = write!(out, "(0x{payload:x})");
            }
        }
        return;
    }
    if v.is_infinite() {
        out.push_str(if v < 0.0 { "-inf" } else { "inf" });
        return;
    }
    match t {
        PrimType::F64 => number_text(v, out),
        PrimType::F32 => {
            // Shortest for f32, as long as XLA's reading (through a double)
            // gives the same f32 back.
            let f = v as f32;
            let a = f.abs();
            let s = if a != 0.0 && !(1e-5..1e16).contains(&a) {
                format!("{f:e}")
            } else {
                format!("{f}")
            };
            match s.parse::<f64>() {
                Ok(d)
                    if (d as f32).to_bits() == f.to_bits()
                        && !(a == 0.0 && f.is_sign_negative()) =>
                {
                    out.push_str(&s)
                }
                _ => number_text(v, out),
            }
        }
        _ => {
            // The fewest significant digits that read back as these bits.
            for p in 1..=17usize {
                let s = format!("{:.*e}", p - 1, v);
                if let Ok(d) = s.parse::<f64>() {
                    if small_float_bits(t, d).map(u64::from) == Some(bits) {
                        number_text(d, out);
                        return;
                    }
                }
            }
            number_text(v, out);
        }
    }
}

// ---------------------------------------------------------------------------
// LiteralProto values

/// The `bytes` field of `LiteralProto` that holds values of type `$t` (the
/// types XLA stores as raw little-endian bytes, one byte each for sub-byte
/// types), borrowed as `$r` (`&` or `&mut`); `None` for the other types.
macro_rules! bytes_field {
    ($l:expr, $t:expr, $($r:tt)+) => {
        match $t {
            PrimType::S1 => Some($($r)+ $l.s1s),
            PrimType::S2 => Some($($r)+ $l.s2s),
            PrimType::S4 => Some($($r)+ $l.s4s),
            PrimType::S8 => Some($($r)+ $l.s8s),
            PrimType::U1 => Some($($r)+ $l.u1s),
            PrimType::U2 => Some($($r)+ $l.u2s),
            PrimType::U4 => Some($($r)+ $l.u4s),
            PrimType::U8 => Some($($r)+ $l.u8s),
            PrimType::S16 => Some($($r)+ $l.s16s),
            PrimType::U16 => Some($($r)+ $l.u16s),
            PrimType::F16 => Some($($r)+ $l.f16s),
            PrimType::Bf16 => Some($($r)+ $l.bf16s),
            PrimType::F8E5M2 => Some($($r)+ $l.f8e5m2s),
            PrimType::F8E4M3 => Some($($r)+ $l.f8e4m3s),
            PrimType::F8E4M3FN => Some($($r)+ $l.f8e4m3fns),
            PrimType::F8E4M3B11FNUZ => Some($($r)+ $l.f8e4m3b11fnuzs),
            PrimType::F8E5M2FNUZ => Some($($r)+ $l.f8e5m2fnuzs),
            PrimType::F8E4M3FNUZ => Some($($r)+ $l.f8e4m3fnuzs),
            PrimType::F8E3M4 => Some($($r)+ $l.f8e3m4s),
            PrimType::F8E8M0FNU => Some($($r)+ $l.f8e8m0fnus),
            PrimType::F4E2M1FN => Some($($r)+ $l.f4e2m1fns),
            _ => None,
        }
    };
}

/// Largest serialized message protobuf reads or writes (2 GiB - 1 bytes):
/// XLA can neither write nor read a larger `HloModuleProto`, so no literal
/// (elided or not) and no whole proto hlo-opt writes goes above it.
pub const MAX_PROTO_BYTES: u64 = i32::MAX as u64;

/// XLA's values for elided literals (`{...}`), which its text parser makes
/// up (`HloParserOptions::fill_shortform_constants_with_random_values`, on
/// by default, as in jaxlib): two counters that live as long as the
/// process, a 32-bit word counter and an 8-bit byte counter, both from 0.
/// Each elided array, in the order the parser meets them (text order;
/// tuple elements in order), is filled in row-major order over the `n`
/// bytes of its in-memory literal: word `i < n / 4` (bytes `4i..4i+4`,
/// little-endian) takes the next word, then each of the `n % 4` leftover
/// bytes takes the next byte, stored at byte `n / 4 + j` (not
/// `4 * (n / 4) + j`: XLA indexes the bytes with the word count, so they
/// overwrite bytes of the first words and the last `n % 4` bytes stay zero
/// when `n >= 4`). For `pred` each byte keeps only its low bit. The bytes
/// of sub-byte types keep their high bits (XLA writes them to the proto
/// as they are). A fresh XLA process parsing the module alone makes exactly
/// these values; a process that parsed elided literals before continues
/// its counters.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ElidedFill {
    word: u32,
    byte: u8,
}

impl ElidedFill {
    /// Bytes of XLA's in-memory array literal of `count` elements of `elem`
    /// (`None` for token and opaque, or past `u64`).
    pub fn literal_bytes(elem: PrimType, count: u64) -> Option<u64> {
        count.checked_mul(width(elem)? as u64)
    }

    /// Moves the counters past an elided array of `n` in-memory bytes
    /// without making its values.
    pub fn skip(&mut self, n: u64) {
        self.word = self.word.wrapping_add((n / 4) as u32);
        self.byte = self.byte.wrapping_add((n % 4) as u8);
    }

    /// Moves the counters past every elided array of `lit` (of shape
    /// `shape`), as XLA's parser does when it reads it.
    pub fn skip_literal(&mut self, m: &Module, shape: ShapeId, lit: &Literal) {
        match (m.shape(shape), lit) {
            (Shape::Array(a), Literal::Elided) => {
                let n = count_of(&a.dims).and_then(|c| Self::literal_bytes(a.elem, c));
                self.skip(n.unwrap_or(0));
            }
            (Shape::Tuple(elems), Literal::Elided) => {
                for &e in elems {
                    self.skip_literal(m, e, &Literal::Elided);
                }
            }
            (Shape::Tuple(elems), Literal::Tuple(values)) => {
                for (&e, v) in elems.iter().zip(values.iter()) {
                    self.skip_literal(m, e, v);
                }
            }
            _ => {}
        }
    }

    /// In-memory bytes of an elided `elem` array of dimensions `dims`
    /// (`n`), checked against [`MAX_PROTO_BYTES`].
    fn elided_bytes(elem: PrimType, dims: &[i64]) -> Result<u64, String> {
        let n = count_of(dims)
            .and_then(|c| Self::literal_bytes(elem, c))
            .ok_or_else(|| format!("an elided {elem} literal of a negative or huge size"))?;
        if n > MAX_PROTO_BYTES {
            return Err(format!(
                "an elided literal `{{...}}` of {n} bytes: XLA's values for it are larger \
                 than a proto can hold ({MAX_PROTO_BYTES} bytes)"
            ));
        }
        Ok(n)
    }

    /// Makes XLA's in-memory bytes of an elided `elem` array of `n` bytes
    /// (see the type's docs), in order, a chunk at a time (each a multiple
    /// of 8 bytes but the last), handing each to `f`; moves the counters
    /// past the array. Nothing of size `n` is allocated.
    fn generate(&mut self, elem: PrimType, n: u64, mut f: impl FnMut(&[u8])) {
        const CHUNK: u64 = 1 << 16;
        let mask: u8 = if elem == PrimType::Pred { 0x01 } else { 0xff };
        let (words, leftover) = (n / 4, n % 4);
        let mut buf = vec![0u8; CHUNK.min(n) as usize];
        let mut at = 0u64;
        while at < n {
            let len = CHUNK.min(n - at);
            let chunk = &mut buf[..len as usize];
            // `at` is a multiple of 4: word `at / 4 + k` fills bytes 4k..4k+4.
            for (k, w) in chunk.chunks_mut(4).enumerate() {
                let i = at / 4 + k as u64;
                if i < words {
                    let v = self.word.wrapping_add(i as u32).to_le_bytes();
                    for (b, x) in w.iter_mut().zip(v) {
                        *b = x & mask;
                    }
                } else {
                    w.fill(0);
                }
            }
            // The leftover bytes land at `words + j` (XLA's indexing).
            for j in 0..leftover {
                let p = words + j;
                if (at..at + len).contains(&p) {
                    chunk[(p - at) as usize] = self.byte.wrapping_add(j as u8) & mask;
                }
            }
            f(chunk);
            at += len;
        }
        self.skip(n);
    }

    /// XLA's values of an elided `elem` array of dimensions `dims`
    /// (row-major), moving the counters past it. Fails above
    /// [`MAX_PROTO_BYTES`]. The literal's sub-byte elements may carry bits
    /// above their width (see the type's docs): it is meant for the proto
    /// writer, which writes such bytes as they are.
    pub fn array(&mut self, elem: PrimType, dims: &[i64]) -> Result<ArrayLiteral, String> {
        let n = Self::elided_bytes(elem, dims)?;
        let mut data = Vec::with_capacity(n as usize);
        self.generate(elem, n, |c| data.extend_from_slice(c));
        ArrayLiteral::new(elem, dims, data, false)
    }

    /// The `LiteralProto` field holding the values of an elided `elem`
    /// array of dimensions `dims` (row-major), as prost writes it for the
    /// literal [`ElidedFill::array`] makes: its tag and the length of its
    /// body (0: prost writes no field). The counters do not move.
    pub fn values_field(&self, elem: PrimType, dims: &[i64]) -> Result<(u32, u64), String> {
        let n = Self::elided_bytes(elem, dims)?;
        let tag = values_tag(elem)?;
        let len = match varint_value(elem) {
            None => n,
            Some(value) => {
                let w = elem.byte_size() as usize;
                let mut len = 0u64;
                let mut probe = *self;
                probe.generate(elem, n, |c| {
                    for e in c.chunks_exact(w) {
                        len += prost::encoding::encoded_len_varint(value(e)) as u64;
                    }
                });
                len
            }
        };
        Ok((tag, len))
    }

    /// Appends the body of [`ElidedFill::values_field`]'s field to `out`
    /// (the values straight from the counters, a chunk at a time), moving
    /// the counters past the array.
    pub fn write_values(
        &mut self,
        elem: PrimType,
        dims: &[i64],
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let n = Self::elided_bytes(elem, dims)?;
        values_tag(elem)?;
        match varint_value(elem) {
            None => self.generate(elem, n, |c| out.extend_from_slice(c)),
            Some(value) => {
                let w = elem.byte_size() as usize;
                self.generate(elem, n, |c| {
                    for e in c.chunks_exact(w) {
                        prost::encoding::encode_varint(value(e), out);
                    }
                })
            }
        }
        Ok(())
    }
}

/// The tag of the `LiteralProto` field [`ArrayLiteral::fill_proto`] puts
/// `elem` values in (read back from prost's encoding of a one-element
/// literal, so that the field table stays in one place).
fn values_tag(elem: PrimType) -> Result<u32, String> {
    let w = width(elem).ok_or_else(|| format!("{elem} has no literal"))?;
    let mut lit = LiteralProto::default();
    ArrayLiteral::new(elem, &[1], vec![1; w], false)?.fill_proto(&mut lit)?;
    let bytes = prost::Message::encode_to_vec(&lit);
    let (tag, _) = prost::encoding::decode_key(&mut &bytes[..])
        .map_err(|e| format!("{elem} literal field: {e}"))?;
    Ok(tag)
}

/// For the element types whose `LiteralProto` field is packed varints
/// (`int32`, `int64`, `uint32`, `uint64`), the varint of an element's
/// little-endian bytes as prost encodes it (an `int32` sign-extended);
/// `None` for the types whose field body is the in-memory bytes themselves
/// (fixed-width floats and complex, the `bytes` fields, and `pred`, whose
/// bytes are 0 or 1, one a value).
fn varint_value(elem: PrimType) -> Option<fn(&[u8]) -> u64> {
    match elem {
        PrimType::S32 => Some(|b| le_bits(b) as u32 as i32 as i64 as u64),
        PrimType::S64 | PrimType::U32 | PrimType::U64 => Some(le_bits),
        _ => None,
    }
}

impl ArrayLiteral {
    /// Stores the values (row-major) in the `LiteralProto` field of the
    /// element type; a single value is written out in full (the others
    /// zero).
    pub fn fill_proto(&self, lit: &mut LiteralProto) -> Result<(), String> {
        use PrimType::*;
        let n = self.len();
        let t = self.elem;
        if n as u128 * t.byte_size() as u128 > MAX_PROTO_BYTES as u128 {
            return Err(format!(
                "a {t} literal of {n} elements is larger than a proto can hold"
            ));
        }
        let bytes = || -> Vec<u8> {
            if self.single {
                let mut b = vec![0u8; n * self.data.len()];
                b[..self.data.len()].copy_from_slice(&self.data);
                b
            } else {
                self.data.to_vec()
            }
        };
        let each = |k: usize| le_bits(self.element(k));
        match t {
            Pred => lit.preds = (0..n).map(|k| self.element(k)[0] != 0).collect(),
            S32 => lit.s32s = (0..n).map(|k| each(k) as u32 as i32).collect(),
            S64 => lit.s64s = (0..n).map(|k| each(k) as i64).collect(),
            U32 => lit.u32s = (0..n).map(|k| each(k) as u32).collect(),
            U64 => lit.u64s = (0..n).map(each).collect(),
            F32 => lit.f32s = (0..n).map(|k| f32::from_bits(each(k) as u32)).collect(),
            F64 => lit.f64s = (0..n).map(|k| f64::from_bits(each(k))).collect(),
            C64 => {
                lit.c64s = bytes()
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect()
            }
            C128 => {
                lit.c128s = bytes()
                    .chunks_exact(8)
                    .map(|c| f64::from_bits(le_bits(c)))
                    .collect()
            }
            Token | Opaque => return Err(format!("{t} has no literal")),
            _ => {
                *bytes_field!(lit, t, &mut).ok_or_else(|| format!("{t} has no literal"))? = bytes()
            }
        }
        Ok(())
    }

    /// The same values stored in the physical order of the layout `m2m`
    /// (a permutation of the dimensions, minor-most first: it varies
    /// fastest), as a `LiteralProto` of that layout holds them. A single
    /// value stays first.
    pub fn in_physical_order(&self, m2m: &[i64]) -> ArrayLiteral {
        let rank = self.dims.len();
        if self.single || m2m.len() != rank {
            return self.clone();
        }
        let mut stride = vec![0usize; rank];
        let mut s = 1usize;
        for &d in m2m {
            let d = d as usize;
            stride[d] = s;
            s *= self.dims[d].max(0) as usize;
        }
        let w = self.elem.byte_size() as usize;
        let mut data = vec![0u8; self.data.len()];
        let mut idx = vec![0i64; rank];
        for k in 0..self.len() {
            let at: usize = idx.iter().zip(&stride).map(|(&i, s)| i as usize * s).sum();
            data[at * w..(at + 1) * w].copy_from_slice(self.element(k));
            for d in (0..rank).rev() {
                idx[d] += 1;
                if idx[d] < self.dims[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        ArrayLiteral {
            elem: self.elem,
            dims: self.dims.clone(),
            data: data.into(),
            single: false,
        }
    }

    /// The values of `lit` (of element type `elem`, dimensions `dims`),
    /// ordered by `order` (the position in the proto's data of each value
    /// in row-major order; `None` when the data is row-major). The value
    /// count is checked before anything is allocated.
    pub fn from_proto(
        elem: PrimType,
        dims: &[i64],
        lit: &LiteralProto,
        order: Option<&[usize]>,
    ) -> Result<Self, String> {
        use PrimType::*;
        let count = count_of(dims)
            .and_then(|c| usize::try_from(c).ok())
            .ok_or("a literal shape with a negative or huge size")?;
        let have = match elem {
            Pred => lit.preds.len(),
            S32 => lit.s32s.len(),
            S64 => lit.s64s.len(),
            U32 => lit.u32s.len(),
            U64 => lit.u64s.len(),
            F32 => lit.f32s.len(),
            F64 => lit.f64s.len(),
            C64 => lit.c64s.len() / 2,
            C128 => lit.c128s.len() / 2,
            Token | Opaque => return Err("token and opaque literals are not supported".into()),
            _ => {
                let b = bytes_field!(lit, elem, &).ok_or("unsupported literal element type")?;
                b.len() / elem.byte_size() as usize
            }
        };
        let odd = match elem {
            C64 => lit.c64s.len() % 2,
            C128 => lit.c128s.len() % 2,
            S16 | U16 | F16 | Bf16 => bytes_field!(lit, elem, &).map_or(0, |b| b.len() % 2),
            _ => 0,
        };
        if have != count || odd != 0 {
            return Err(format!(
                "a {elem} literal of {count} elements holds {have} values"
            ));
        }
        let w = elem.byte_size() as usize;
        let mut phys: Vec<u8> = Vec::with_capacity(count * w);
        let bits = elem.bit_width();
        let raw: &[u8] = bytes_field!(lit, elem, &).map_or(&[], |v| v);
        match elem {
            Pred => phys.extend(lit.preds.iter().map(|&b| u8::from(b))),
            S32 => phys.extend(lit.s32s.iter().flat_map(|v| v.to_le_bytes())),
            S64 => phys.extend(lit.s64s.iter().flat_map(|v| v.to_le_bytes())),
            U32 => phys.extend(lit.u32s.iter().flat_map(|v| v.to_le_bytes())),
            U64 => phys.extend(lit.u64s.iter().flat_map(|v| v.to_le_bytes())),
            F32 => phys.extend(lit.f32s.iter().flat_map(|v| v.to_le_bytes())),
            F64 => phys.extend(lit.f64s.iter().flat_map(|v| v.to_le_bytes())),
            C64 => phys.extend(lit.c64s.iter().flat_map(|v| v.to_le_bytes())),
            C128 => phys.extend(lit.c128s.iter().flat_map(|v| v.to_le_bytes())),
            S1 | S2 | S4 => {
                // One byte an element: keep the low bits, sign extended.
                let shift = 8 - bits;
                let b = raw;
                phys.extend(b.iter().map(|&x| (((x << shift) as i8) >> shift) as u8));
            }
            U1 | U2 | U4 | F4E2M1FN => {
                let mask = (1u8 << bits) - 1;
                let b = raw;
                phys.extend(b.iter().map(|&x| x & mask));
            }
            _ => phys.extend_from_slice(raw),
        }
        let data = match order {
            None => phys,
            Some(ord) => {
                let mut d = Vec::with_capacity(phys.len());
                for &at in ord.iter().take(count) {
                    d.extend_from_slice(&phys[at * w..(at + 1) * w]);
                }
                d
            }
        };
        ArrayLiteral::new(elem, dims, data, false)
    }
}

// ---------------------------------------------------------------------------
// small floats

/// A small float format: exponent and mantissa bits, bias, and how it
/// spells infinity and NaN.
#[derive(Clone, Copy)]
struct Fmt {
    e: u32,
    m: u32,
    bias: i32,
    /// IEEE-like: all-ones exponent is inf/NaN.
    ieee: bool,
    /// `fn`: no inf, NaN is all ones (exponent and mantissa).
    /// `fnuz`: no inf, no negative zero, NaN is the sign bit alone.
    fnuz: bool,
    /// No sign bit (`e8m0fnu`).
    unsigned: bool,
    /// No NaN at all (`e2m1fn`).
    no_nan: bool,
}

fn fmt_of(t: PrimType) -> Option<Fmt> {
    use PrimType::*;
    let f = |e, m, bias, ieee, fnuz| Fmt {
        e,
        m,
        bias,
        ieee,
        fnuz,
        unsigned: false,
        no_nan: false,
    };
    Some(match t {
        F16 => f(5, 10, 15, true, false),
        Bf16 => f(8, 7, 127, true, false),
        F8E5M2 => f(5, 2, 15, true, false),
        F8E4M3 => f(4, 3, 7, true, false),
        F8E3M4 => f(3, 4, 3, true, false),
        F8E4M3FN => f(4, 3, 7, false, false),
        F8E4M3FNUZ => f(4, 3, 8, false, true),
        F8E5M2FNUZ => f(5, 2, 16, false, true),
        F8E4M3B11FNUZ => f(4, 3, 11, false, true),
        F8E8M0FNU => Fmt {
            unsigned: true,
            ..f(8, 0, 127, false, false)
        },
        F4E2M1FN => Fmt {
            no_nan: true,
            ..f(2, 1, 1, false, false)
        },
        _ => return None,
    })
}

/// The bits of `v` in small float type `t` (f16, bf16, the f8 and f4
/// types), rounded to nearest even; `None` for other types.
pub fn small_float_bits(t: PrimType, v: f64) -> Option<u32> {
    let f = fmt_of(t)?;
    let sign_shift = f.e + f.m;
    let exp_all = (1u32 << f.e) - 1;
    let nan = if f.ieee {
        (exp_all << f.m) | (1 << f.m.saturating_sub(1)).max(1)
    } else if f.fnuz {
        1 << sign_shift
    } else if f.unsigned {
        0xff
    } else if f.no_nan {
        // No NaN: saturate to the largest value.
        (exp_all << f.m) | ((1 << f.m) - 1)
    } else {
        (exp_all << f.m) | ((1 << f.m) - 1)
    };
    if v.is_nan() && f.no_nan {
        // e2m1fn has no NaN: XLA (jaxlib 0.10.2) reads `nan` as -0 and
        // `-nan` as 0.
        return Some(if v.is_sign_negative() {
            0
        } else {
            1 << sign_shift
        });
    }
    if v.is_nan() {
        let s = if v.is_sign_negative() && !f.fnuz && !f.unsigned {
            1 << sign_shift
        } else {
            0
        };
        return Some(nan | s);
    }
    let neg = v.is_sign_negative() && !f.unsigned;
    let sign = if neg { 1u32 << sign_shift } else { 0 };
    let a = v.abs();
    // Largest exponent field of a finite value and its largest mantissa.
    let (max_exp_field, max_mant_at_max) = if f.ieee {
        (exp_all - 1, (1u32 << f.m) - 1)
    } else if f.fnuz || f.unsigned && f.m == 0 {
        if f.unsigned {
            (exp_all - 1, 0)
        } else {
            (exp_all, (1u32 << f.m) - 1)
        }
    } else if f.no_nan {
        (exp_all, (1u32 << f.m) - 1)
    } else {
        (exp_all, (1u32 << f.m) - 2)
    };
    let overflow = || -> u32 {
        if f.ieee {
            sign | (exp_all << f.m)
        } else if f.no_nan {
            sign | (max_exp_field << f.m) | max_mant_at_max
        } else {
            nan | if f.fnuz || f.unsigned { 0 } else { sign }
        }
    };
    if a.is_infinite() {
        return Some(overflow());
    }
    if a == 0.0 {
        if f.unsigned {
            return Some(0); // smallest value (2^-127); e8m0 has no zero
        }
        return Some(if f.fnuz { 0 } else { sign });
    }
    // Exponent of the smallest normal (e8m0fnu: exponent field 0 is 2^-127).
    let min_exp = if f.unsigned { -f.bias } else { 1 - f.bias };
    let mut e = a.log2().floor() as i32;
    // Guard against log2 rounding.
    if 2f64.powi(e) > a {
        e -= 1;
    }
    if 2f64.powi(e + 1) <= a {
        e += 1;
    }
    let (exp_field, mant) = if e < min_exp && !f.unsigned {
        // Subnormal: units of 2^(min_exp - m).
        let q = round_even(a / 2f64.powi(min_exp - f.m as i32));
        if q >= (1u64 << f.m) as f64 {
            (1u32, 0u32)
        } else {
            (0, q as u32)
        }
    } else {
        let e = e.max(min_exp);
        let q = round_even(a / 2f64.powi(e - f.m as i32));
        let (e, q) = if q >= (1u64 << (f.m + 1)) as f64 {
            (e + 1, q / 2.0)
        } else {
            (e, q)
        };
        let field = e + f.bias;
        if field < 0 {
            return Some(if f.unsigned { 0 } else { sign });
        }
        (field as u32, (q as u32) & ((1u32 << f.m) - 1))
    };
    if exp_field > max_exp_field || (exp_field == max_exp_field && mant > max_mant_at_max) {
        return Some(overflow());
    }
    let bits = sign | (exp_field << f.m) | mant;
    if f.fnuz && bits == 1 << sign_shift {
        return Some(0); // no negative zero
    }
    Some(bits)
}

fn round_even(x: f64) -> f64 {
    let r = x.round();
    if (r - x).abs() == 0.5 && r % 2.0 != 0.0 {
        r - x.signum()
    } else {
        r
    }
}

/// The lowest and the largest finite value of an f8 or f4 type `t` (the
/// lowest of e8m0fnu is its smallest positive value).
fn small_float_range(t: PrimType) -> (f64, f64) {
    let finite = || {
        (0u32..256)
            .map(|b| small_float_value(t, b))
            .filter(|v| v.is_finite())
    };
    let hi = finite().fold(f64::MIN, f64::max);
    let lo = if t == PrimType::F8E8M0FNU {
        finite().filter(|v| *v > 0.0).fold(f64::MAX, f64::min)
    } else {
        -hi
    };
    (lo, hi)
}

/// The value of a small float of type `t` with bits `b`.
fn small_float_value(t: PrimType, b: u32) -> f64 {
    // Decode by search over the encoder: exact for every type here (at most
    // 2^16 codes, but only for f16/bf16 do we need the direct formula).
    let (e, m, bias): (u32, u32, i32) = match t {
        PrimType::F16 => (5, 10, 15),
        PrimType::Bf16 => (8, 7, 127),
        PrimType::F8E5M2 => (5, 2, 15),
        PrimType::F8E4M3 => (4, 3, 7),
        PrimType::F8E3M4 => (3, 4, 3),
        PrimType::F8E4M3FN => (4, 3, 7),
        PrimType::F8E4M3FNUZ => (4, 3, 8),
        PrimType::F8E5M2FNUZ => (5, 2, 16),
        PrimType::F8E4M3B11FNUZ => (4, 3, 11),
        PrimType::F8E8M0FNU => {
            return if b == 0xff {
                f64::NAN
            } else {
                2f64.powi(b as i32 - 127)
            }
        }
        PrimType::F4E2M1FN => (2, 1, 1),
        _ => return f64::NAN,
    };
    let sign = (b >> (e + m)) & 1 == 1;
    let ef = (b >> m) & ((1 << e) - 1);
    let mf = b & ((1 << m) - 1);
    let ieee = matches!(
        t,
        PrimType::F16 | PrimType::Bf16 | PrimType::F8E5M2 | PrimType::F8E4M3 | PrimType::F8E3M4
    );
    let fnuz = matches!(
        t,
        PrimType::F8E4M3FNUZ | PrimType::F8E5M2FNUZ | PrimType::F8E4M3B11FNUZ
    );
    if ieee && ef == (1 << e) - 1 {
        return if mf == 0 {
            if sign {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        } else if sign {
            -f64::NAN
        } else {
            f64::NAN
        };
    }
    if fnuz && sign && ef == 0 && mf == 0 {
        return f64::NAN;
    }
    if t == PrimType::F8E4M3FN && ef == 15 && mf == 7 {
        return if sign { -f64::NAN } else { f64::NAN };
    }
    let v = if ef == 0 {
        mf as f64 * 2f64.powi(1 - bias - m as i32)
    } else {
        (1.0 + mf as f64 / (1u32 << m) as f64) * 2f64.powi(ef as i32 - bias)
    };
    if sign {
        -v
    } else {
        v
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn bits_of(t: PrimType, tok: &str) -> Result<u64, String> {
        let mut out = Vec::new();
        encode(t, tok, &mut out)?;
        Ok(le_bits(&out))
    }

    fn text_of(t: PrimType, bits: u64) -> String {
        let mut s = String::new();
        let w = t.byte_size() as usize;
        elem_text(t, &bits.to_le_bytes()[..w], &mut s);
        s
    }

    #[test]
    fn small_floats_round_to_nearest_even() {
        assert_eq!(small_float_bits(PrimType::F16, 1.0), Some(0x3c00));
        assert_eq!(small_float_bits(PrimType::F16, -2.0), Some(0xc000));
        assert_eq!(small_float_bits(PrimType::F16, 65504.0), Some(0x7bff));
        assert_eq!(small_float_bits(PrimType::F16, 1e6), Some(0x7c00));
        assert_eq!(
            small_float_bits(PrimType::F16, 5.960464477539063e-8),
            Some(1)
        );
        assert_eq!(small_float_bits(PrimType::Bf16, 1.0), Some(0x3f80));
        assert_eq!(small_float_bits(PrimType::Bf16, 3.140625), Some(0x4049));
        assert_eq!(small_float_bits(PrimType::F8E4M3FN, 448.0), Some(0x7e));
        assert_eq!(small_float_bits(PrimType::F8E4M3FN, f64::NAN), Some(0x7f));
        assert_eq!(small_float_bits(PrimType::F8E5M2, 1.0), Some(0x3c));
        assert_eq!(small_float_bits(PrimType::F8E4M3FNUZ, f64::NAN), Some(0x80));
        assert_eq!(small_float_bits(PrimType::F8E4M3FNUZ, -0.0), Some(0));
        assert_eq!(small_float_bits(PrimType::F4E2M1FN, 6.0), Some(0x7));
        assert_eq!(small_float_bits(PrimType::F4E2M1FN, -0.5), Some(0x9));
        assert_eq!(small_float_bits(PrimType::F8E8M0FNU, 1.0), Some(127));
        assert_eq!(small_float_bits(PrimType::F8E8M0FNU, 0.25), Some(125));
    }

    #[test]
    fn nan_payloads_fit_the_element_type() {
        // XLA: payload bits are the mantissa bits of types with signaling NaNs.
        assert_eq!(bits_of(PrimType::Bf16, "nan(0x7f)").unwrap(), 0x7fff);
        assert!(bits_of(PrimType::Bf16, "-nan(0x3ff)")
            .unwrap_err()
            .contains("0x7f"));
        assert_eq!(bits_of(PrimType::F16, "nan(0x3ff)").unwrap(), 0x7fff);
        assert_eq!(
            bits_of(PrimType::F32, "nan(0x400000)").unwrap(),
            0x7fc0_0000
        );
        assert_eq!(bits_of(PrimType::F32, "-nan(0x1)").unwrap(), 0xff80_0001);
        // The payload of a plain quiet NaN fits every type.
        assert_eq!(
            bits_of(PrimType::F8E4M3FN, "nan(0x8000000000000)").unwrap(),
            0x7f
        );
        assert_eq!(bits_of(PrimType::F8E4M3FN, "nan").unwrap(), 0x7f);
        assert!(bits_of(PrimType::F8E4M3FN, "nan(0x1)")
            .unwrap_err()
            .contains("does not support NaN payloads"));
        assert!(bits_of(PrimType::F32, "nan(0x)").is_err());
        assert!(bits_of(PrimType::F32, "nan(0x0)").is_err());
        assert!(bits_of(PrimType::F64, "nan(0x10000000000000)").is_err());
    }

    #[test]
    fn values_are_read_without_case_sensitivity() {
        assert_eq!(bits_of(PrimType::F32, "INF").unwrap(), 0x7f80_0000);
        assert_eq!(bits_of(PrimType::F32, "-NaN").unwrap(), 0xffc0_0000);
        assert_eq!(
            bits_of(PrimType::F32, "1E3").unwrap(),
            1000f32.to_bits() as u64
        );
        assert!(bits_of(PrimType::F16, "7e4").is_err());
        assert!(bits_of(PrimType::S8, "128").is_err());
    }

    #[test]
    fn integers_read_as_xla_reads_them() {
        // `-0` is the integer 0: positive zero.
        assert_eq!(bits_of(PrimType::F32, "-0").unwrap(), 0);
        assert_eq!(bits_of(PrimType::F32, "-0.0").unwrap(), 0x8000_0000);
        assert_eq!(bits_of(PrimType::U64, "-1").unwrap(), u64::MAX);
        assert_eq!(bits_of(PrimType::S4, "-8").unwrap(), 0xf8);
        assert!(bits_of(PrimType::S32, "1.5").is_err());
        assert_eq!(bits_of(PrimType::Pred, "1").unwrap(), 1);
        assert!(bits_of(PrimType::Pred, "2").is_err());
    }

    #[test]
    fn floats_print_shortest_and_read_back() {
        assert_eq!(text_of(PrimType::F32, 0.1f32.to_bits() as u64), "0.1");
        assert_eq!(text_of(PrimType::F32, 0x8000_0000), "-0.0");
        assert_eq!(text_of(PrimType::F32, 1e30f32.to_bits() as u64), "1e30");
        assert_eq!(text_of(PrimType::F32, 0x7fc0_0000), "nan");
        assert_eq!(text_of(PrimType::F32, 0xffc0_0000), "-nan");
        assert_eq!(text_of(PrimType::F32, 0x7f80_0001), "nan(0x1)");
        assert_eq!(text_of(PrimType::F32, 0xff80_0000), "-inf");
        assert_eq!(text_of(PrimType::Bf16, 0x3dcd), "0.1");
        assert_eq!(text_of(PrimType::F16, 0x7c01), "nan(0x1)");
        assert_eq!(text_of(PrimType::F8E4M3FN, 0xff), "-nan");
        assert_eq!(text_of(PrimType::F8E4M3FNUZ, 0x80), "nan");
        assert_eq!(text_of(PrimType::C64, 0x4000_0000_3f80_0000), "(1, 2)");
        assert_eq!(text_of(PrimType::S4, 0xf8), "-8");
        assert_eq!(text_of(PrimType::U64, u64::MAX), "18446744073709551615");
        // Every code of every small float type reads back as itself (the
        // types with one NaN read every NaN code as that one).
        use PrimType::*;
        for t in [
            F16,
            Bf16,
            F8E5M2,
            F8E4M3,
            F8E3M4,
            F8E4M3FN,
            F8E4M3FNUZ,
            F8E5M2FNUZ,
            F8E4M3B11FNUZ,
            F8E8M0FNU,
            F4E2M1FN,
        ] {
            let codes: u64 = 1 << t.bit_width();
            for b in 0..codes {
                let v = small_float_value(t, b as u32);
                let canonical = if v.is_nan() && ieee_layout(t).is_none() {
                    nan_bits(t, v.is_sign_negative(), None)
                } else {
                    b
                };
                let s = text_of(t, b);
                assert_eq!(
                    bits_of(t, &s).unwrap(),
                    canonical,
                    "{t} 0x{b:x} printed as {s}"
                );
            }
        }
    }
}
