//! Constant literals as the IR keeps them: [`Literal`] and the values of an
//! array-shaped one, [`ArrayLiteral`]. Decoding from text and protos,
//! printing and checking against a shape: [`crate::attrs::literal`].
//!
//! Invariants of an [`ArrayLiteral`]: its bytes hold exactly one element
//! ([`ArrayLiteral::is_single`]) or the product of its dimensions in
//! row-major order, each element in its type's little-endian encoding of
//! [`PrimType::byte_size`] bytes (sub-byte integers one byte each, sign
//! extended; small floats their bit pattern; complex numbers real then
//! imaginary part).

use crate::ir::PrimType;

/// The value of a `constant(...)` (or a custom call's `literal=`).
#[derive(Clone, Debug)]
pub enum Literal {
    /// `{...}`: XLA printed the constant without its values.
    Elided,
    Array(ArrayLiteral),
    /// A tuple-shaped constant's elements, one a tuple element.
    Tuple(Box<[Literal]>),
}

/// The values of an array-shaped literal (see the module invariants).
#[derive(Clone, Debug)]
pub struct ArrayLiteral {
    pub(crate) elem: PrimType,
    /// Dimension sizes the values have (a dynamic dimension's may be below
    /// its bound).
    pub(crate) dims: Box<[i64]>,
    pub(crate) data: Box<[u8]>,
    /// One value written for an array: the first element; the others
    /// are zero.
    pub(crate) single: bool,
}

impl PartialEq for Literal {
    /// Same values, bit for bit (NaN payloads and the sign of zero count); a
    /// single value written for an array equals the array written out.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Literal::Elided, Literal::Elided) => true,
            (Literal::Array(a), Literal::Array(b)) => a == b,
            (Literal::Tuple(a), Literal::Tuple(b)) => a == b,
            _ => false,
        }
    }
}

impl PartialEq for ArrayLiteral {
    fn eq(&self, other: &Self) -> bool {
        if self.elem != other.elem || self.dims != other.dims {
            return false;
        }
        if self.single == other.single {
            return self.data == other.data;
        }
        let n = self.len();
        (0..n).all(|k| self.element(k) == other.element(k))
    }
}

impl ArrayLiteral {
    /// A literal of `elem` values with dimensions `dims` from row-major
    /// element bytes (see the module invariants); `single`: `data` is the
    /// first element, the others are zero.
    pub fn new(elem: PrimType, dims: &[i64], data: Vec<u8>, single: bool) -> Result<Self, String> {
        let w = width(elem).ok_or_else(|| format!("{elem} has no literal values"))?;
        let count = count_of(dims).ok_or("a literal with a negative or overflowing size")?;
        let want = if single {
            w as u128
        } else {
            count as u128 * w as u128
        };
        if data.len() as u128 != want {
            return Err(format!(
                "a {elem} literal of {count} elements holds {} bytes",
                data.len()
            ));
        }
        Ok(ArrayLiteral {
            elem,
            dims: dims.into(),
            data: data.into(),
            single,
        })
    }
    pub fn elem(&self) -> PrimType {
        self.elem
    }
    pub fn dims(&self) -> &[i64] {
        &self.dims
    }
    /// The number of elements (the product of the dimensions).
    pub fn len(&self) -> usize {
        count_of(&self.dims).unwrap_or(0) as usize
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// One value was written for the array: it is the first element, the
    /// others are zero.
    pub fn is_single(&self) -> bool {
        self.single
    }
    /// The bytes of element `k` (row-major).
    pub fn element(&self, k: usize) -> &[u8] {
        let w = self.elem.byte_size() as usize;
        match (self.single, k) {
            (true, 0) => &self.data,
            (true, _) => &ZEROS[..w],
            (false, _) => &self.data[k * w..(k + 1) * w],
        }
    }
}

/// The bytes of a zero element of any type.
pub(crate) const ZEROS: [u8; 16] = [0; 16];

/// Bytes of one element of `t` (`None` for token and opaque).
pub(crate) fn width(t: PrimType) -> Option<usize> {
    match t.byte_size() {
        0 => None,
        w => Some(w as usize),
    }
}

pub(crate) fn count_of(dims: &[i64]) -> Option<u64> {
    dims.iter().try_fold(1u64, |a, &d| {
        u64::try_from(d).ok().and_then(|d| a.checked_mul(d))
    })
}
