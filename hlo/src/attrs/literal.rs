//! Decoding of constant literals (`constant({1,2})`) into values of every
//! primitive type, and the bit encodings of XLA's small floating-point
//! types (round to nearest even, as XLA's conversions from double do).
//!
//! Values come out in row-major (logical) order; a single value for an array
//! shape fills every element, as XLA's parser does.

use crate::ir::{ArrayShape, PrimType};

type R<T> = Result<T, String>;

/// One decoded element.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    Bool(bool),
    /// Any integer type (u64 values above `i64::MAX` are kept as their bits).
    Int(i128),
    Float(f64),
    Complex(f64, f64),
}

/// Decodes the literal text of an array-shaped constant: the values in
/// row-major order (`None` for an elided literal `{...}`).
pub fn decode(a: &ArrayShape, text: &str) -> R<Option<Vec<Value>>> {
    let t = strip_comments(text);
    let t = t.trim();
    if t == "{...}" {
        return Ok(None);
    }
    let count = a
        .element_count()
        .ok_or("the constant's shape has an unbounded or overflowing size")?;
    let mut out = Vec::with_capacity(usize::try_from(count).unwrap_or(0).min(1 << 24));
    let mut c = Lit {
        s: t.as_bytes(),
        i: 0,
    };
    c.ws();
    if c.peek() != Some(b'{') {
        let v = c.value(a.elem)?;
        c.ws();
        if c.i < c.s.len() {
            return Err("unexpected text after the literal".into());
        }
        for _ in 0..count {
            out.push(v);
        }
        return Ok(Some(out));
    }
    c.level(a, 0, &mut out)?;
    c.ws();
    if c.i < c.s.len() {
        return Err("unexpected text after the literal".into());
    }
    if out.len() as i64 != count {
        return Err(format!(
            "the literal has {} values, the shape {count}",
            out.len()
        ));
    }
    Ok(Some(out))
}

fn strip_comments(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains("/*") {
        return s.into();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(p) = rest.find("/*") {
        out.push_str(&rest[..p]);
        match rest[p + 2..].find("*/") {
            Some(e) => rest = &rest[p + 2 + e + 2..],
            None => {
                rest = "";
                break;
            }
        }
    }
    out.push_str(rest);
    out.into()
}

struct Lit<'s> {
    s: &'s [u8],
    i: usize,
}

impl Lit<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }
    fn eat(&mut self, b: u8) -> bool {
        self.ws();
        if self.peek() == Some(b) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn level(&mut self, a: &ArrayShape, d: usize, out: &mut Vec<Value>) -> R<()> {
        if !self.eat(b'{') {
            return Err(format!("expected `{{` for dimension {d}"));
        }
        if self.eat(b'}') {
            return Ok(());
        }
        loop {
            if d + 1 < a.rank() {
                self.level(a, d + 1, out)?;
            } else {
                out.push(self.value(a.elem)?);
            }
            if self.eat(b',') {
                continue;
            }
            if self.eat(b'}') {
                return Ok(());
            }
            return Err("expected `,` or `}` in the literal".into());
        }
    }
    fn token(&mut self) -> R<&str> {
        self.ws();
        let start = self.i;
        self.i = token_end(self.s, start);
        let tok = std::str::from_utf8(&self.s[start..self.i]).map_err(|_| "not UTF-8")?;
        if tok.is_empty() {
            return Err("expected a value".into());
        }
        Ok(tok)
    }
    fn value(&mut self, t: PrimType) -> R<Value> {
        if t.is_complex() {
            if !self.eat(b'(') {
                return Err(format!("a {t} value is written `(real, imag)`"));
            }
            let re = parse_float(self.token()?)?;
            if !self.eat(b',') {
                return Err("expected `,` in a complex value".into());
            }
            let im = parse_float(self.token()?)?;
            if !self.eat(b')') {
                return Err("expected `)` after a complex value".into());
            }
            return Ok(Value::Complex(re, im));
        }
        let tok = self.token()?;
        if t == PrimType::Pred {
            return match tok {
                "true" | "1" => Ok(Value::Bool(true)),
                "false" | "0" => Ok(Value::Bool(false)),
                _ => Err(format!("`{tok}` is not a pred value")),
            };
        }
        if t.is_float() {
            // XLA reads an integer token as an integer first (`-0` is 0).
            if let Ok(i) = tok.parse::<i64>() {
                return Ok(Value::Float(i as f64));
            }
            return parse_float(tok).map(Value::Float);
        }
        if let Ok(v) = tok.parse::<i128>() {
            return Ok(Value::Int(v));
        }
        // XLA reads integers as doubles too (`s32[] constant(1e3)`? no): reject.
        Err(format!("`{tok}` is not an integer"))
    }
}

/// The end of the literal value token starting at `start`: up to a `,`,
/// `}`, `)` or white space; a `(` (a `nan(0x...)` payload) extends it to
/// the closing `)`. Shared by the decoder here and the parser's literal check.
pub(crate) fn token_end(s: &[u8], start: usize) -> usize {
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

/// A floating-point token: decimal, `inf`, `-inf`, `nan`, `nan(0x...)`.
pub fn parse_float(tok: &str) -> R<f64> {
    let (neg, body) = match tok.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, tok.strip_prefix('+').unwrap_or(tok)),
    };
    let lower = body.to_ascii_lowercase();
    let v = if lower == "inf" {
        f64::INFINITY
    } else if let Some(rest) = lower.strip_prefix("nan") {
        if rest.is_empty() {
            f64::NAN
        } else {
            let hex = rest
                .strip_prefix("(0x")
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| format!("`{tok}` is not a NaN payload"))?;
            let p = u64::from_str_radix(hex, 16).map_err(|_| format!("`{tok}` bad payload"))?;
            f64::from_bits(0x7ff0_0000_0000_0000 | (p & ((1 << 52) - 1)))
        }
    } else {
        body.parse::<f64>()
            .map_err(|_| format!("`{tok}` is not a number"))?
    };
    Ok(if neg { -v } else { v })
}

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
    let min_exp = 1 - f.bias; // exponent of the smallest normal
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
}
