//! Attribute values against the grammar XLA's parser applies to them
//! (`xla/hlo/parser/hlo_parser.cc`). The decoders ([`integer`], [`boolean`],
//! [`int_list`], [`window`], [`padding`], [`slice`]) are the one place the
//! parser turns that text into typed values, with [`float`], [`bool_list`]
//! and the enumerations; [`check_debug_attributes`] validates an attribute
//! the IR keeps as text.
//!
//! Every function takes the verbatim attribute text and returns `Err(message)`
//! naming what is wrong and what was expected. The checks do not allocate on
//! well-formed input (they run on every parse) and nothing here panics on any
//! text.

use crate::ir::{PadDim, SliceDim, WindowDim};

/// Splits `text` at `sep` characters that are not nested inside `()`, `[]`,
/// `{}` or a string, without allocating.
pub fn split_top_level(text: &str, sep: u8) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0usize;
    let mut i = 0usize;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let mut depth = 0i32;
        let mut in_str = false;
        while i < bytes.len() {
            let b = bytes[i];
            if in_str {
                if b == b'\\' {
                    i += 1;
                } else if b == b'"' {
                    in_str = false;
                }
            } else {
                match b {
                    b'"' => in_str = true,
                    b'(' | b'[' | b'{' => depth += 1,
                    b')' | b']' | b'}' => depth -= 1,
                    _ if b == sep && depth == 0 => {
                        let item = &text[start..i];
                        i += 1;
                        start = i;
                        return Some(item);
                    }
                    _ => {}
                }
            }
            i += 1;
        }
        done = true;
        Some(&text[start.min(text.len())..])
    })
}

fn strip_outer(text: &str, open: char, close: char) -> Option<&str> {
    text.trim()
        .strip_prefix(open)
        .and_then(|r| r.strip_suffix(close))
        .map(str::trim)
}

fn int(s: &str) -> Option<i64> {
    s.trim().parse::<i64>().ok()
}

const WINDOW_FIELDS: [&str; 6] = [
    "size",
    "stride",
    "pad",
    "lhs_dilate",
    "rhs_dilate",
    "rhs_reversal",
];

/// The inside of a braced value `{...}`; otherwise an error that says what
/// was expected (`expects`) and what was found.
fn braced<'t>(text: &'t str, expects: &str) -> Result<&'t str, String> {
    strip_outer(text, '{', '}').ok_or_else(|| format!("{expects}, found `{}`", text.trim()))
}

/// `window={size=3x3 stride=2x2 pad=0_1x0_1 lhs_dilate=1x1 rhs_dilate=1x1
/// rhs_reversal=0x0}`: known fields, each at most once, integers joined by
/// `x` (`low_high` pairs for `pad`), every field with as many dimensions as
/// `size`. Absent fields take their defaults; `rhs_reversal` is reversed
/// where it is 1 (XLA's reading).
pub fn window(text: &str) -> Result<Box<[WindowDim]>, String> {
    let inner = braced(text, "window expects `{size=... stride=... pad=...}`")?;
    let mut counts: [Option<usize>; 6] = [None; 6];
    let mut dims: Vec<WindowDim> = Vec::new();
    for field in inner.split_whitespace() {
        let Some((key, value)) = field.split_once('=') else {
            return Err(format!(
                "window expects `key=value` sub-attributes (size, stride, pad, lhs_dilate, rhs_dilate, rhs_reversal), found `{field}`"
            ));
        };
        let Some(k) = WINDOW_FIELDS.iter().position(|f| *f == key) else {
            return Err(format!(
                "window has no sub-attribute `{key}`; expected size, stride, pad, lhs_dilate, rhs_dilate or rhs_reversal"
            ));
        };
        if counts[k].is_some() {
            return Err(format!("window sub-attribute `{key}=` appears twice"));
        }
        let mut n = 0usize;
        for part in value.split('x') {
            if dims.len() <= n {
                dims.push(WindowDim::default());
            }
            let d = &mut dims[n];
            n += 1;
            if key == "pad" {
                let mut it = part.split('_');
                match (it.next().map(int), it.next().map(int), it.next()) {
                    (Some(Some(lo)), Some(Some(hi)), None) => (d.pad_lo, d.pad_hi) = (lo, hi),
                    _ => return Err(format!(
                        "window pad expects `low_high` pairs separated by '_' (one per dimension, joined by 'x'), found `{value}`"
                    )),
                }
                continue;
            }
            let Some(x) = int(part) else {
                return Err(format!(
                    "window `{key}=` expects integers joined by 'x' (e.g. `3x3`), found `{value}`"
                ));
            };
            match k {
                0 => d.size = x,
                1 => d.stride = x,
                3 => d.lhs_dilation = x,
                4 => d.rhs_dilation = x,
                _ => d.reversal = x == 1,
            }
        }
        counts[k] = Some(n);
    }
    let rank = counts[0].unwrap_or(0);
    for (k, c) in counts.iter().enumerate().skip(1) {
        if let Some(c) = *c {
            if c != rank {
                return Err(format!(
                    "window `{}=` has {c} dimensions but `size=` has {rank}; they must match",
                    WINDOW_FIELDS[k]
                ));
            }
        }
    }
    Ok(dims.into_boxed_slice())
}

/// `padding=0_0x1_1_2` of a pad: per dimension `low_high` or
/// `low_high_interior`, dimensions joined by `x`; empty for a scalar.
pub fn padding(text: &str) -> Result<Box<[PadDim]>, String> {
    let t = text.trim();
    if t.is_empty() {
        return Ok(Box::default());
    }
    t.split('x')
        .map(|part| {
            let mut nums = [0i64; 3];
            let mut n = 0usize;
            for num in part.split('_') {
                match (nums.get_mut(n), int(num)) {
                    (Some(slot), Some(x)) => *slot = x,
                    _ => {
                        n = 0;
                        break;
                    }
                }
                n += 1;
            }
            if n != 2 && n != 3 {
                return Err(format!(
                    "padding expects `low_high` or `low_high_interior` per dimension, joined by 'x' (e.g. `0_1x2_2_1`), found `{t}`"
                ));
            }
            // XLA's lexer reads no sign on the interior padding.
            if nums[2] < 0 {
                return Err(format!(
                    "interior padding {} in `{t}` is negative",
                    nums[2]
                ));
            }
            Ok(PadDim {
                lo: nums[0],
                hi: nums[1],
                interior: nums[2],
            })
        })
        .collect()
}

/// An integer attribute (`index=1`).
pub fn integer(key: &str, text: &str) -> Result<i64, String> {
    let t = text.trim();
    int(t).ok_or_else(|| format!("`{key}=` expects an integer, found `{t}`"))
}

/// A boolean attribute (`is_stable=true`).
pub fn boolean(key: &str, text: &str) -> Result<bool, String> {
    match text.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        t => Err(format!("`{key}=` expects true or false, found `{t}`")),
    }
}

/// A floating-point attribute (`epsilon=0.001`) as XLA holds it, an `f32`:
/// finite and within the `f32` range.
pub fn float(key: &str, text: &str) -> Result<f32, String> {
    let t = text.trim();
    match t.parse::<f64>() {
        Ok(x) if x.is_finite() && x.abs() <= f32::MAX as f64 && !t.starts_with('+') => Ok(x as f32),
        _ => Err(format!("`{key}=` expects a float number, found `{t}`")),
    }
}

/// A boolean list in braces (`parameter_replication={false,true}`, `{}`
/// is empty).
pub fn bool_list(key: &str, text: &str) -> Result<Box<[bool]>, String> {
    let t = text.trim();
    let Some(inner) = t.strip_prefix('{').and_then(|r| r.strip_suffix('}')) else {
        return Err(format!(
            "`{key}=` expects a list of booleans in braces, e.g. `{{true,false}}`, found `{t}`"
        ));
    };
    if inner.trim().is_empty() {
        return Ok(Box::default());
    }
    inner
        .split(',')
        .map(|item| match item.trim() {
            "true" => Ok(true),
            "false" => Ok(false),
            o => Err(format!(
                "`{key}=` expects a list of booleans in braces, found `{o}` in `{t}`"
            )),
        })
        .collect()
}

/// An integer list attribute in braces (`dimensions={1,0}`, `{}` is empty).
pub fn int_list(key: &str, text: &str) -> Result<Box<[i64]>, String> {
    let t = text.trim();
    let Some(inner) = t.strip_prefix('{').and_then(|r| r.strip_suffix('}')) else {
        return Err(format!(
            "`{key}=` expects a list of integers in braces, e.g. `{{0,1}}`, found `{t}`"
        ));
    };
    if inner.trim().is_empty() {
        return Ok(Box::default());
    }
    inner
        .split(',')
        .map(|item| {
            int(item).ok_or_else(|| {
                format!(
                    "`{key}=` expects a list of integers in braces, found `{}` in `{t}`",
                    item.trim()
                )
            })
        })
        .collect()
}

/// The custom-call API versions XLA accepts in `api_version=`
/// (`CustomCallApiVersion`, without `API_VERSION_UNSPECIFIED`).
pub const CUSTOM_CALL_API_VERSIONS: [&str; 4] = [
    "API_VERSION_ORIGINAL",
    "API_VERSION_STATUS_RETURNING",
    "API_VERSION_STATUS_RETURNING_UNIFIED",
    "API_VERSION_TYPED_FFI",
];

/// `api_version=API_VERSION_TYPED_FFI` of a custom-call.
pub fn api_version(text: &str) -> Result<&'static str, String> {
    let v = text.trim();
    if let Some(known) = CUSTOM_CALL_API_VERSIONS.iter().find(|k| **k == v) {
        return Ok(known);
    }
    let expected = CUSTOM_CALL_API_VERSIONS.join(", ");
    if v == "API_VERSION_UNSPECIFIED" {
        Err(format!(
            "API_VERSION_UNSPECIFIED is not a usable custom-call API version; expected one of {expected}"
        ))
    } else {
        Err(format!(
            "unknown custom-call API version `{v}`; expected one of {expected}"
        ))
    }
}

/// Log modes of a module's `debug_attributes={ {"inst"}:({log_mode=...}) }`.
pub const DEBUG_LOG_MODES: [&str; 2] = ["default", "fusion_debugger"];

/// Module attribute `debug_attributes`: every `log_mode=` names a known mode.
pub fn check_debug_attributes(text: &str) -> Result<(), String> {
    let mut rest = text;
    while let Some(p) = rest.find("log_mode=") {
        let after = &rest[p + "log_mode=".len()..];
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let mode = &after[..end];
        if !DEBUG_LOG_MODES.contains(&mode) {
            return Err(format!(
                "unknown debug log mode `{mode}` in debug_attributes; expected one of {}",
                DEBUG_LOG_MODES.join(", ")
            ));
        }
        rest = &after[end..];
    }
    Ok(())
}

/// `slice={[0:2], [1:5:2]}`: per dimension `[start:limit]` or
/// `[start:limit:stride]` (stride 1 when absent).
pub fn slice(text: &str) -> Result<Box<[SliceDim]>, String> {
    let inner = braced(text, "slice expects `{[start:limit:stride], ...}`")?;
    if inner.is_empty() {
        return Ok(Box::default());
    }
    inner
        .split(',')
        .map(|item| {
            let mut nums = [0i64, 0, 1];
            let ok = strip_outer(item, '[', ']').is_some_and(|body| {
                let mut n = 0usize;
                body.split(':').all(|x| {
                    let slot = nums.get_mut(n);
                    n += 1;
                    match (slot, int(x)) {
                        (Some(s), Some(v)) => {
                            *s = v;
                            true
                        }
                        _ => false,
                    }
                }) && (n == 2 || n == 3)
            });
            if !ok {
                return Err(format!(
                    "slice expects `[start:limit]` or `[start:limit:stride]` per dimension, found `{}`",
                    item.trim()
                ));
            }
            Ok(SliceDim {
                start: nums[0],
                limit: nums[1],
                stride: nums[2],
            })
        })
        .collect()
}

/// `source_target_pairs={{0,1},{1,2}}`: a list of pairs of integers.
pub fn source_target_pairs(text: &str) -> Result<Box<[[i64; 2]]>, String> {
    let inner = braced(text, "source_target_pairs expects `{{source,target}, ...}`")?;
    if inner.is_empty() {
        return Ok(Box::default());
    }
    split_top_level(inner, b',')
        .map(|item| {
            let pair = strip_outer(item, '{', '}').and_then(|pair| {
                let mut it = pair.split(',');
                match (it.next().and_then(int), it.next().and_then(int), it.next()) {
                    (Some(a), Some(b), None) => Some([a, b]),
                    _ => None,
                }
            });
            pair.ok_or_else(|| {
                format!(
                    "source_target_pairs expects a list of pairs `{{source,target}}`, found `{}`",
                    item.trim()
                )
            })
        })
        .collect()
}

/// One of `allowed` (ASCII case ignored when `any_case`), for enumerated
/// attributes such as `kind=kLoop` or `fft_type=FFT`.
pub fn enum_value(
    key: &str,
    text: &str,
    allowed: &'static [&'static str],
    any_case: bool,
) -> Result<&'static str, String> {
    let t = text.trim();
    let found = allowed.iter().find(|a| {
        if any_case {
            a.eq_ignore_ascii_case(t)
        } else {
            **a == t
        }
    });
    found.copied().ok_or_else(|| {
        format!(
            "unknown `{key}=` value `{t}`; expected one of {}",
            allowed.join(", ")
        )
    })
}

/// Comparison directions of `compare`'s `direction=`.
pub const DIRECTIONS: [&str; 6] = ["EQ", "NE", "GE", "GT", "LE", "LT"];

/// `direction=LT` of a compare.
pub fn direction(text: &str) -> Result<&'static str, String> {
    let d = text.trim();
    DIRECTIONS
        .iter()
        .find(|k| **k == d)
        .copied()
        .ok_or_else(|| {
            format!(
                "unknown comparison direction `{d}`; expected one of {}",
                DIRECTIONS.join(", ")
            )
        })
}

/// Operand precisions of `operand_precision={...}` (`PrecisionConfig::Precision`).
pub const PRECISIONS: [&str; 4] = ["default", "high", "highest", "packed_nibble"];

/// `operand_precision={highest,default}` (case ignored): the index of each
/// name in [`PRECISIONS`], which is XLA's enum value.
pub fn precisions(text: &str) -> Result<Box<[u8]>, String> {
    let Some(inner) = strip_outer(text, '{', '}') else {
        return Err(format!(
            "operand_precision expects `{{p, ...}}` with p one of {}, found `{}`",
            PRECISIONS.join(", "),
            text.trim()
        ));
    };
    if inner.is_empty() {
        return Ok(Box::default());
    }
    inner
        .split(',')
        .map(|item| {
            let name = enum_value("operand_precision", item, &PRECISIONS, true)?;
            Ok(PRECISIONS.iter().position(|p| *p == name).unwrap_or(0) as u8)
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn window_pad_takes_low_high_pairs_only() {
        assert!(window("{size=3x3 stride=2x2 pad=0_1x1_1}").is_ok());
        assert!(window("{}").is_ok());
        let e = window("{pad=1_1_0 size=1}").unwrap_err();
        assert!(e.contains("`low_high`") && e.contains("1_1_0"), "{e}");
        assert!(window("{size=3 stride=1x1}").is_err());
        assert!(window("{size=3 size=3}").is_err());
        assert!(window("{size=3 bogus=1}").is_err());
    }

    #[test]
    fn padding_takes_two_or_three_numbers_per_dimension() {
        assert!(padding("0_0x1_1_2").is_ok());
        assert!(padding("1").is_err());
        assert!(padding("1_2_3_4").is_err());
    }

    #[test]
    fn aliasing_and_donor_lists_need_integers_and_shape_indices() {
        use crate::attrs::xla::{buffer_donor, input_output_alias};
        assert!(input_output_alias("{ {0}: (0, {}, may-alias), {1}: (1, {}) }").is_ok());
        assert!(input_output_alias("{}").is_ok());
        assert!(input_output_alias("{ {0, a}: (0, {0}) }").is_err());
        assert!(input_output_alias("{ {0, 0}: (0, {0}), (0, {1}) }").is_err());
        assert!(input_output_alias("{ {0}: (zero, {0}) }").is_err());
        assert!(input_output_alias("{ {0}: (0, {}, maybe-alias) }").is_err());
        assert!(buffer_donor("{ (0, {0}), (0, {1}) }").is_ok());
        assert!(buffer_donor("{ (0, {0, a}) }").is_err());
        assert!(buffer_donor("{ (zero, {0}) }").is_err());
    }

    #[test]
    fn floats_and_boolean_lists() {
        assert_eq!(float("epsilon", "1e-05"), Ok(1e-5));
        assert!(float("epsilon", "1e39").is_err());
        assert!(float("epsilon", "nan").is_err());
        assert_eq!(
            bool_list("p", "{false,true}").unwrap().as_ref(),
            &[false, true]
        );
        assert!(bool_list("p", "{}").unwrap().is_empty());
        assert!(bool_list("p", "{yes}").is_err());
        assert!(bool_list("p", "true").is_err());
    }

    #[test]
    fn api_versions() {
        assert!(api_version("API_VERSION_TYPED_FFI").is_ok());
        assert!(api_version("API_VERSION_UNSPECIFIED").is_err());
        assert!(api_version("API_VERSION_THAT_DOESNT_EXIST").is_err());
    }

    #[test]
    fn slices_pairs_and_enums() {
        assert!(slice("{[0:2], [1:5:2]}").is_ok());
        assert!(slice("{[0:2:1:1]}").is_err());
        assert!(slice("{0:2}").is_err());
        assert_eq!(
            source_target_pairs("{{0,1},{1,2}}").unwrap().as_ref(),
            &[[0, 1], [1, 2]]
        );
        assert!(source_target_pairs("{{0,1,2}}").is_err());
        assert_eq!(precisions("{HIGH,highest}").unwrap().as_ref(), &[1, 2]);
        assert!(precisions("{higher}").is_err());
        assert_eq!(
            enum_value("type", "totalorder", &["TOTALORDER"], true),
            Ok("TOTALORDER")
        );
        assert!(enum_value("kind", "kLoop", &["kLoop"], false).is_ok());
        assert!(enum_value("kind", "kloop", &["kLoop"], false).is_err());
        assert_eq!(direction("LT"), Ok("LT"));
        assert!(direction("lt").is_err());
    }

    #[test]
    fn top_level_split() {
        let items: Vec<&str> = split_top_level("f32[1,2]{1,0}, (s32[], f32[3])", b',').collect();
        assert_eq!(items, vec!["f32[1,2]{1,0}", " (s32[], f32[3])"]);
    }
}
