//! Deterministic inputs for a module's entry parameters and the comparison
//! of results.
//!
//! Invariants: the inputs are a function of the entry signature and the
//! seed only (a SplitMix64 stream per parameter); floating-point inputs are
//! in [0.1, 1) (no NaN from log/sqrt/rsqrt of negatives), integers in
//! [1, 4) (in range as gather/dynamic-slice indices of any non-trivial
//! dimension), predicates 0/1.

use crate::{ElementType, HostArray, PjrtError, Result};

struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Largest input we generate (elements per parameter), so that a module
/// with a huge parameter is refused instead of exhausting memory.
pub const MAX_INPUT_ELEMENTS: usize = 1 << 28;

/// The inputs of `m`'s entry computation, one per parameter, for `seed`.
/// An entry whose only parameter is a tuple of arrays gets one input per
/// element (PJRT feeds such a tuple as its leaves, see
/// [`crate::proto::entry_takes_a_tuple`]); leaf `k` gets the values a
/// parameter `k` of the same shape would get.
pub fn inputs_for(m: &hlo::Module, seed: u64) -> Result<Vec<HostArray>> {
    let entry = m.entry_computation();
    let mut leaves: Vec<(String, &hlo::ArrayShape)> = Vec::new();
    for &p in &entry.params {
        let name = &m.inst(p).name;
        match m.inst_shape(p) {
            hlo::Shape::Array(a) => leaves.push((format!("entry parameter %{name}"), a)),
            hlo::Shape::Tuple(elems) if entry.params.len() == 1 => {
                for (j, &s) in elems.iter().enumerate() {
                    let hlo::Shape::Array(a) = m.shape(s) else {
                        return Err(PjrtError::Unsupported(format!(
                            "element {j} of the entry parameter %{name} is not an array (PJRT \
                             feeds a tuple parameter as its leaves; nested tuples are not fed)"
                        )));
                    };
                    leaves.push((format!("element {j} of the entry parameter %{name}"), a));
                }
            }
            hlo::Shape::Tuple(_) => {
                return Err(PjrtError::Unsupported(format!(
                    "entry parameter %{name} is a tuple beside other parameters (PJRT feeds a \
                     tuple only as the entry's single parameter)"
                )))
            }
            _ => {
                return Err(PjrtError::Unsupported(format!(
                    "entry parameter %{name} is not an array or a tuple of arrays"
                )))
            }
        }
    }
    let mut out = Vec::with_capacity(leaves.len());
    for (k, (what, a)) in leaves.into_iter().enumerate() {
        if a.dynamic.iter().any(|&d| d) {
            return Err(PjrtError::Unsupported(format!(
                "{what} has dynamic dimensions"
            )));
        }
        let ty = ElementType::from_prim(a.elem).ok_or_else(|| {
            PjrtError::Unsupported(format!("{what} of element type {}", a.elem.name()))
        })?;
        let n = a
            .element_count()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n <= MAX_INPUT_ELEMENTS)
            .ok_or_else(|| PjrtError::Unsupported(format!("{what} is too large to feed")))?;
        let mut rng = SplitMix(seed ^ (k as u64).wrapping_mul(0xa076_1d64_78bd_642f));
        let mut data = Vec::with_capacity(n * ty.byte_size());
        for _ in 0..n {
            push_value(&mut data, ty, &mut rng);
        }
        out.push(HostArray {
            ty,
            dims: a.dims.to_vec(),
            data,
        });
    }
    Ok(out)
}

fn push_value(out: &mut Vec<u8>, ty: ElementType, rng: &mut SplitMix) {
    use ElementType::*;
    let f = 0.1 + 0.9 * rng.unit();
    let i = 1 + (rng.next() % 3) as i64;
    match ty {
        Pred => out.push((rng.next() & 1) as u8),
        S8 | U8 => out.push(i as u8),
        S16 | U16 => out.extend_from_slice(&(i as u16).to_le_bytes()),
        S32 | U32 => out.extend_from_slice(&(i as u32).to_le_bytes()),
        S64 | U64 => out.extend_from_slice(&(i as u64).to_le_bytes()),
        F16 => out.extend_from_slice(&f32_to_f16(f as f32).to_le_bytes()),
        Bf16 => out.extend_from_slice(&f32_to_bf16(f as f32).to_le_bytes()),
        F32 => out.extend_from_slice(&(f as f32).to_le_bytes()),
        F64 => out.extend_from_slice(&f.to_le_bytes()),
        C64 => {
            out.extend_from_slice(&(f as f32).to_le_bytes());
            out.extend_from_slice(&((0.1 + 0.9 * rng.unit()) as f32).to_le_bytes());
        }
        C128 => {
            out.extend_from_slice(&f.to_le_bytes());
            out.extend_from_slice(&(0.1 + 0.9 * rng.unit()).to_le_bytes());
        }
    }
}

/// bf16 of a finite f32, rounded to nearest even.
fn f32_to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    let round = 0x7fff + ((b >> 16) & 1);
    (b.wrapping_add(round) >> 16) as u16
}

/// f16 of an f32 in the normal f16 range (our inputs: [0.1, 1)), rounded
/// to nearest even.
fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
    let mant = b & 0x7f_ffff;
    if exp <= 0 {
        return sign;
    }
    let half = ((exp as u32) << 10) | (mant >> 13);
    let rest = mant & 0x1fff;
    let rounded = if rest > 0x1000 || (rest == 0x1000 && (half & 1) == 1) {
        half + 1
    } else {
        half
    };
    sign | rounded as u16
}

fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let mant = (h & 0x3ff) as f64;
    sign * match exp {
        0 => mant * 2f64.powi(-24),
        31 if mant == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1.0 + mant / 1024.0) * 2f64.powi(e - 15),
    }
}

/// The values of an array as f64 (complex: real and imaginary parts interleaved).
pub fn values(a: &HostArray) -> Vec<f64> {
    use ElementType::*;
    let b = &a.data;
    let w = a.ty.byte_size();
    let part = match a.ty {
        C64 => 4,
        C128 => 8,
        _ => w,
    };
    b.chunks_exact(part)
        .map(|c| match (a.ty, part) {
            (Pred | U8, _) => c[0] as f64,
            (S8, _) => c[0] as i8 as f64,
            (S16, _) => i16::from_le_bytes([c[0], c[1]]) as f64,
            (U16, _) => u16::from_le_bytes([c[0], c[1]]) as f64,
            (F16, _) => f16_to_f64(u16::from_le_bytes([c[0], c[1]])),
            (Bf16, _) => f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16) as f64,
            (S32, _) => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
            (U32, _) => u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
            (F32 | C64, _) => f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
            (S64, _) => i64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f64,
            (U64, _) => u64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f64,
            (F64 | C128, _) => f64::from_le_bytes(c.try_into().unwrap_or([0; 8])),
        })
        .collect()
}

/// The first difference between two results.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    pub output: usize,
    pub message: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "output {}: {}", self.output, self.message)
    }
}

/// Compares `got` with `want`: same number, types and dimensions; integers
/// and predicates exactly; floating point within `|g - w| <= atol + rtol *
/// |w|` (NaN equals NaN, infinities must match). Returns the first
/// mismatch, or the largest relative error seen.
pub fn compare(
    got: &[HostArray],
    want: &[HostArray],
    rtol: f64,
    atol: f64,
) -> std::result::Result<f64, Mismatch> {
    if got.len() != want.len() {
        return Err(Mismatch {
            output: 0,
            message: format!("{} outputs, expected {}", got.len(), want.len()),
        });
    }
    let mut worst = 0f64;
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        if g.ty != w.ty || g.dims != w.dims {
            return Err(Mismatch {
                output: k,
                message: format!(
                    "{}{:?}, expected {}{:?}",
                    g.ty.name(),
                    g.dims,
                    w.ty.name(),
                    w.dims
                ),
            });
        }
        let exact = !matches!(
            g.ty,
            ElementType::F16
                | ElementType::Bf16
                | ElementType::F32
                | ElementType::F64
                | ElementType::C64
                | ElementType::C128
        );
        for (j, (a, b)) in values(g).into_iter().zip(values(w)).enumerate() {
            let ok = if exact {
                a == b
            } else if a.is_nan() || b.is_nan() {
                a.is_nan() && b.is_nan()
            } else if a.is_infinite() || b.is_infinite() {
                a == b
            } else {
                let d = (a - b).abs();
                worst = worst.max(d / (atol + rtol * b.abs()).max(f64::MIN_POSITIVE));
                d <= atol + rtol * b.abs()
            };
            if !ok {
                return Err(Mismatch {
                    output: k,
                    message: format!("element {j}: {a} instead of {b}"),
                });
            }
        }
    }
    Ok(worst)
}

/// Whether any result is of a 16-bit float type (compared more loosely).
pub fn has_half_floats(outs: &[HostArray]) -> bool {
    outs.iter()
        .any(|o| matches!(o.ty, ElementType::Bf16 | ElementType::F16))
}

/// Compares each labelled result with `want` ([`compare`], rtol = atol =
/// `tol`): one `LABEL DIFFERS (first mismatch)` per result that differs.
pub fn differences(got: &[(&str, &[HostArray])], want: &[HostArray], tol: f64) -> Vec<String> {
    got.iter()
        .filter_map(|(label, outs)| {
            compare(outs, want, tol, tol)
                .err()
                .map(|m| format!("{label} DIFFERS ({m})"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_conversions_round_trip_our_inputs() {
        for x in [0.1f32, 0.5, 0.999, 0.3337] {
            assert!((f16_to_f64(f32_to_f16(x)) - x as f64).abs() < 1e-3, "{x}");
            let bf = f32::from_bits((f32_to_bf16(x) as u32) << 16);
            assert!((bf - x).abs() < 4e-3, "{x}");
        }
    }

    #[test]
    fn comparison_catches_a_changed_element_and_accepts_rounding() {
        let a = |v: &[f32]| HostArray {
            ty: ElementType::F32,
            dims: vec![v.len() as i64],
            data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        };
        assert!(compare(&[a(&[1.0, 2.0])], &[a(&[1.0, 2.00001])], 1e-4, 1e-4).is_ok());
        let e = compare(&[a(&[1.0, 2.0])], &[a(&[1.0, 2.1])], 1e-4, 1e-4).expect_err("differs");
        assert!(e.message.contains("element 1"), "{e}");
        assert!(compare(&[a(&[1.0])], &[a(&[1.0, 2.0])], 1e-4, 1e-4).is_err());
    }
}
