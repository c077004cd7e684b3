//! Decoding the attribute values an op needs from their MLIR text: integer
//! lists (`array<i64: 1, 2>`, `[1, 2]`, `dense<...>`), integers
//! (`1 : i64`), `#stablehlo.dot<...>`, `#stablehlo.conv<...>`, enum
//! attributes (`#stablehlo<comparison_direction LT>`) and the elements of a
//! `dense<...>` constant. `None` means the text is not of the expected form.

use std::borrow::Cow;
use std::fmt::Write as _;

/// One element of a literal as HLO text writes it.
pub type Elem = Cow<'static, str>;

/// The integers of `array<i64: 1, 2>`, `[1, 2]`, `dense<[[1, 2]]> : ...`
/// (flattened) or `array<i64>` (none).
pub fn ints(s: &str) -> Option<Vec<i64>> {
    let body = if let Some(rest) = s.strip_prefix("array<") {
        let rest = rest.strip_suffix('>')?;
        match rest.split_once(':') {
            Some((_, list)) => list,
            None => "",
        }
    } else if s.starts_with("dense<") {
        dense_body(s)?
    } else {
        s
    };
    body.split(|c: char| c == ',' || c == '[' || c == ']' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(|t| t.parse().ok())
        .collect()
}

/// `1 : i64` -> 1.
pub fn int(s: &str) -> Option<i64> {
    s.split(':').next()?.trim().parse().ok()
}

/// The text inside `dense<...>` (before the `: type` that follows).
pub fn dense_body(s: &str) -> Option<&str> {
    let rest = s.strip_prefix("dense<")?;
    let mut depth = 0usize;
    for (i, ch) in rest.char_indices() {
        match ch {
            '<' | '[' | '(' => depth += 1,
            ']' | ')' => depth = depth.saturating_sub(1),
            '>' if depth == 0 => return Some(rest[..i].trim()),
            '>' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// The word of an enum attribute: `#stablehlo<comparison_direction LT>` ->
/// `LT`.
pub fn enum_word(s: &str) -> Option<&str> {
    s.strip_suffix('>')?.rsplit(' ').next()
}

/// `#stablehlo.dot<lhs_batching_dimensions = [0], ...>` as HLO attributes
/// (`lhs_batch_dims={0}, ..., rhs_contracting_dims={1}`).
pub fn dot_dims(s: &str) -> Option<String> {
    let body = s.strip_prefix("#stablehlo.dot<")?.strip_suffix('>')?;
    let mut out = Vec::new();
    for (key, hlo) in [
        ("lhs_batching_dimensions", "lhs_batch_dims"),
        ("rhs_batching_dimensions", "rhs_batch_dims"),
        ("lhs_contracting_dimensions", "lhs_contracting_dims"),
        ("rhs_contracting_dimensions", "rhs_contracting_dims"),
    ] {
        if let Some(list) = field(body, key) {
            out.push(format!("{hlo}={{{}}}", join(&ints(list)?)));
        }
    }
    Some(out.join(", "))
}

/// The `[...]` list after `key = ` in `body`.
fn field<'a>(body: &'a str, key: &str) -> Option<&'a str> {
    let start = body.find(&format!("{key} = "))? + key.len() + 3;
    let rest = &body[start..];
    let end = rest.find(']')? + 1;
    Some(&rest[..end])
}

/// `#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>` ->
/// `b01f_01io->b01f`.
pub fn conv_labels(s: &str) -> Option<String> {
    let body = s.strip_prefix("#stablehlo.conv<")?.strip_suffix('>')?;
    let (ins, out) = body.split_once("->")?;
    let (lhs, rhs) = ins.split_once("]x[")?;
    let labels = |t: &str| -> String {
        t.chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
    };
    Some(format!("{}_{}->{}", labels(lhs), labels(rhs), labels(out)))
}

pub fn join(v: &[i64]) -> String {
    let mut out = String::with_capacity(4 * v.len());
    write_joined(&mut out, v, ",");
    out
}

/// Appends `v` separated by `sep`.
pub fn write_joined<T: std::fmt::Display>(out: &mut String, v: &[T], sep: &str) {
    for (i, d) in v.iter().enumerate() {
        if i > 0 {
            out.push_str(sep);
        }
        let _ = write!(out, "{d}");
    }
}

/// The elements of a `dense<...>` value with `n` elements of MLIR element
/// type `elem`, as HLO literal tokens, in row-major order. A splat is its
/// one element (none when `n` is 0).
pub fn dense_elements(s: &str, elem: &str, n: usize) -> Option<Vec<Elem>> {
    let body = dense_body(s)?;
    let body = body.split(" : ").next()?.trim();
    if let Some(hex) = body.strip_prefix("\"0x").and_then(|h| h.strip_suffix('"')) {
        return hex_elements(hex, elem, n);
    }
    let tokens: Vec<&str> = body
        .split(|c: char| c == ',' || c == '[' || c == ']' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .collect();
    let one = |t: &str| scalar(t, elem);
    match tokens.as_slice() {
        [t] => Some(vec![one(t)?; n.min(1)]),
        ts if ts.len() == n => ts.iter().map(|t| one(t)).collect(),
        _ => None,
    }
}

fn hex_elements(hex: &str, elem: &str, n: usize) -> Option<Vec<Elem>> {
    let bytes: Vec<u8> = (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
        .collect::<Option<_>>()?;
    let width = elem_bytes(elem)?;
    let count = bytes.len() / width;
    let mut out: Vec<Elem> = bytes
        .chunks(width)
        .map(|c| {
            let mut v = 0u64;
            for (i, b) in c.iter().enumerate() {
                v |= u64::from(*b) << (8 * i);
            }
            bits_to_text(v, elem)
        })
        .collect::<Option<_>>()?;
    match count {
        1 => {
            out.truncate(n.min(1));
            Some(out)
        }
        c if c == n => Some(out),
        _ => None,
    }
}

fn elem_bytes(elem: &str) -> Option<usize> {
    Some(match elem {
        "i1" => 1,
        "f64" | "i64" | "ui64" => 8,
        "f32" | "i32" | "ui32" => 4,
        "f16" | "bf16" | "i16" | "ui16" => 2,
        "i8" | "ui8" => 1,
        _ => return None,
    })
}

/// One element of a literal: a number, `true`/`false`, or bits in hex.
fn scalar(t: &str, elem: &str) -> Option<Elem> {
    if let Some(hex) = t.strip_prefix("0x") {
        return bits_to_text(u64::from_str_radix(hex, 16).ok()?, elem);
    }
    match t {
        "true" => return Some(Cow::Borrowed("true")),
        "false" => return Some(Cow::Borrowed("false")),
        _ => {}
    }
    if elem.starts_with('f') || elem == "bf16" {
        return Some(float_text(t.parse::<f64>().ok()?).into());
    }
    t.parse::<i128>().ok().map(|v| v.to_string().into())
}

fn bits_to_text(v: u64, elem: &str) -> Option<Elem> {
    let f = match elem {
        "f32" => f64::from(f32::from_bits(v as u32)),
        "bf16" => f64::from(f32::from_bits((v as u32) << 16)),
        "f16" => f16_to_f64(v as u16),
        "f64" => f64::from_bits(v),
        "i1" => return Some(Cow::Borrowed(if v != 0 { "true" } else { "false" })),
        e if e.starts_with("ui") => return Some(v.to_string().into()),
        e if e.starts_with('i') => {
            let bits = e[1..].parse::<u32>().ok()?;
            let shift = 64 - bits;
            return Some((((v << shift) as i64) >> shift).to_string().into());
        }
        _ => return None,
    };
    Some(float_text(f).into())
}

fn f16_to_f64(h: u16) -> f64 {
    let sign = if h >> 15 == 1 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let frac = f64::from(h & 0x3ff);
    match exp {
        0 => sign * frac * 2f64.powi(-24),
        31 if frac == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        _ => sign * (1.0 + frac / 1024.0) * 2f64.powi(exp - 15),
    }
}

/// A float as HLO text writes it (`nan`, `inf`, `-inf`, else Rust's
/// shortest round-trip form).
pub fn float_text(f: f64) -> String {
    if f.is_nan() {
        "nan".into()
    } else if f.is_infinite() {
        if f > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{f:?}")
    }
}

/// The integer list after `key = ` in a `#stablehlo.gather<...>`-style body.
pub fn list_field(body: &str, key: &str) -> Option<Vec<i64>> {
    ints(field(body, key)?)
}

/// The integer after `key = ` in a `#stablehlo.gather<...>`-style body.
pub fn int_field(body: &str, key: &str) -> Option<i64> {
    let start = body.find(&format!("{key} = "))? + key.len() + 3;
    let digits: String = body[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    digits.parse().ok()
}
