//! Decoders for the attribute text the featurizer reads (`window=`,
//! `dim_labels=`, `slice=`, `padding=`, integer lists), following XLA's
//! printer (`window_util::ToString`, `ConvolutionDimensionNumbersToString`,
//! `PaddingConfigToString`).
//!
//! Invariants: decoders never panic; malformed text is an `Err(String)`
//! describing what was expected, which the caller wraps with the
//! instruction's name. Values default the way the proto fields default
//! (stride, dilations 1; padding 0; reversal false).

use smallvec::SmallVec;

pub type Ints = SmallVec<[i64; 8]>;

fn strip_braces(s: &str) -> &str {
    let s = s.trim();
    s.strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .unwrap_or(s)
        .trim()
}

pub fn int(s: &str) -> Result<i64, String> {
    let t = s.trim();
    t.parse::<i64>()
        .map_err(|_| format!("expected an integer, found `{t}`"))
}

/// `{1,2,3}`, `1,2,3` or `{}`.
pub fn int_list(s: &str) -> Result<Ints, String> {
    let body = strip_braces(s);
    if body.is_empty() {
        return Ok(Ints::new());
    }
    body.split(',').map(int).collect()
}

pub fn boolean(s: &str) -> Result<bool, String> {
    match s.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        t => Err(format!("expected true or false, found `{t}`")),
    }
}

/// One dimension of an XLA `Window`.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowDim {
    pub size: i64,
    pub stride: i64,
    pub padding_low: i64,
    pub padding_high: i64,
    pub window_dilation: i64,
    pub base_dilation: i64,
    pub window_reversal: bool,
}

impl Default for WindowDim {
    fn default() -> Self {
        WindowDim {
            size: 0,
            stride: 1,
            padding_low: 0,
            padding_high: 0,
            window_dilation: 1,
            base_dilation: 1,
            window_reversal: false,
        }
    }
}

/// `{size=3x3 stride=2x2 pad=0_1x0_1 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x1}`.
pub fn window(s: &str) -> Result<Vec<WindowDim>, String> {
    let body = strip_braces(s);
    let mut fields: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut rank: Option<usize> = None;
    for tok in body.split_whitespace() {
        let (key, value) = tok
            .split_once('=')
            .ok_or_else(|| format!("window: expected key=value, found `{tok}`"))?;
        let parts: Vec<&str> = value.split('x').collect();
        if key == "size" {
            rank = Some(parts.len());
        }
        fields.push((key, parts));
    }
    let Some(rank) = rank else {
        return if fields.is_empty() {
            Ok(Vec::new())
        } else {
            Err("window: no size=".into())
        };
    };
    let mut dims = vec![WindowDim::default(); rank];
    for (key, parts) in fields {
        if parts.len() != rank {
            return Err(format!(
                "window: {key} has {} dimensions, size has {rank}",
                parts.len()
            ));
        }
        for (d, p) in dims.iter_mut().zip(parts) {
            match key {
                "size" => d.size = int(p)?,
                "stride" => d.stride = int(p)?,
                "lhs_dilate" => d.base_dilation = int(p)?,
                "rhs_dilate" => d.window_dilation = int(p)?,
                "rhs_reversal" => d.window_reversal = int(p)? != 0,
                "pad" => {
                    let (lo, hi) = p
                        .split_once('_')
                        .ok_or_else(|| format!("window: pad `{p}` is not low_high"))?;
                    d.padding_low = int(lo)?;
                    d.padding_high = int(hi)?;
                }
                other => return Err(format!("window: unknown field `{other}`")),
            }
        }
    }
    Ok(dims)
}

/// XLA's `ConvolutionDimensionNumbers` (the fields TpuGraphs reads).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConvDims {
    pub input_batch: i64,
    pub input_feature: i64,
    pub input_spatial: Ints,
    pub kernel_input_feature: i64,
    pub kernel_output_feature: i64,
    pub kernel_spatial: Ints,
    pub output_batch: i64,
    pub output_feature: i64,
    pub output_spatial: Ints,
}

/// Positions of the spatial labels `0`, `1`, ... in one side of `dim_labels`.
fn spatial_positions(side: &str, n: usize) -> Result<Ints, String> {
    (0..n)
        .map(|k| {
            let label = char::from_digit(k as u32, 10)
                .ok_or("dim_labels: more than 10 spatial dimensions")?;
            side.chars()
                .position(|c| c == label)
                .map(|p| p as i64)
                .ok_or_else(|| format!("dim_labels: `{side}` lacks spatial dimension {k}"))
        })
        .collect()
}

fn label_position(side: &str, label: char) -> Result<i64, String> {
    side.chars()
        .position(|c| c == label)
        .map(|p| p as i64)
        .ok_or_else(|| format!("dim_labels: `{side}` lacks `{label}`"))
}

/// `b012f_012io->b012f`.
pub fn dim_labels(s: &str) -> Result<ConvDims, String> {
    let s = s.trim();
    let (lhs_rhs, out) = s
        .split_once("->")
        .ok_or_else(|| format!("dim_labels: no `->` in `{s}`"))?;
    let (lhs, rhs) = lhs_rhs
        .split_once('_')
        .ok_or_else(|| format!("dim_labels: no `_` in `{s}`"))?;
    let n = lhs.chars().filter(char::is_ascii_digit).count();
    if rhs.len() != lhs.len() || out.len() != lhs.len() {
        return Err(format!("dim_labels: sides of `{s}` differ in rank"));
    }
    Ok(ConvDims {
        input_batch: label_position(lhs, 'b')?,
        input_feature: label_position(lhs, 'f')?,
        input_spatial: spatial_positions(lhs, n)?,
        kernel_input_feature: label_position(rhs, 'i')?,
        kernel_output_feature: label_position(rhs, 'o')?,
        kernel_spatial: spatial_positions(rhs, n)?,
        output_batch: label_position(out, 'b')?,
        output_feature: label_position(out, 'f')?,
        output_spatial: spatial_positions(out, n)?,
    })
}

/// One dimension of a `slice={[start:limit:stride], ...}`.
#[derive(Clone, Debug, PartialEq)]
pub struct SliceDim {
    pub start: i64,
    pub limit: i64,
    pub stride: i64,
}

/// `{[0:2], [1:9:2]}`.
pub fn slice(s: &str) -> Result<Vec<SliceDim>, String> {
    let body = strip_braces(s);
    if body.is_empty() {
        return Ok(Vec::new());
    }
    body.split(',')
        .map(|part| {
            let p = part.trim();
            let inner = p
                .strip_prefix('[')
                .and_then(|r| r.strip_suffix(']'))
                .ok_or_else(|| format!("slice: expected [start:limit], found `{p}`"))?;
            let nums: Vec<&str> = inner.split(':').collect();
            match nums.as_slice() {
                [a, b] => Ok(SliceDim {
                    start: int(a)?,
                    limit: int(b)?,
                    stride: 1,
                }),
                [a, b, c] => Ok(SliceDim {
                    start: int(a)?,
                    limit: int(b)?,
                    stride: int(c)?,
                }),
                _ => Err(format!(
                    "slice: expected [start:limit(:stride)], found `{p}`"
                )),
            }
        })
        .collect()
}

/// One dimension of a pad's `padding=low_high(_interior)x...`.
#[derive(Clone, Debug, PartialEq)]
pub struct PadDim {
    pub low: i64,
    pub high: i64,
    pub interior: i64,
}

/// `0_0x1_2_1`; empty for a rank-0 pad.
pub fn padding(s: &str) -> Result<Vec<PadDim>, String> {
    let body = strip_braces(s);
    if body.is_empty() {
        return Ok(Vec::new());
    }
    body.split('x')
        .map(|d| {
            let nums: Vec<&str> = d.split('_').collect();
            match nums.as_slice() {
                [lo, hi] => Ok(PadDim {
                    low: int(lo)?,
                    high: int(hi)?,
                    interior: 0,
                }),
                [lo, hi, i] => Ok(PadDim {
                    low: int(lo)?,
                    high: int(hi)?,
                    interior: int(i)?,
                }),
                _ => Err(format!(
                    "padding: expected low_high(_interior), found `{d}`"
                )),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_defaults_and_fields() {
        let w = window(
            "{size=3x2 stride=1x2 pad=1_1x-1_0 lhs_dilate=1x3 rhs_dilate=2x1 rhs_reversal=0x1}",
        )
        .expect("valid window");
        assert_eq!(w.len(), 2);
        assert_eq!(
            (w[0].size, w[0].stride, w[0].padding_low, w[0].padding_high),
            (3, 1, 1, 1)
        );
        assert_eq!(
            (w[1].size, w[1].stride, w[1].padding_low, w[1].padding_high),
            (2, 2, -1, 0)
        );
        assert_eq!(
            (
                w[1].base_dilation,
                w[0].window_dilation,
                w[1].window_reversal
            ),
            (3, 2, true)
        );
        let d = window("{size=5}").expect("valid");
        assert_eq!(
            d[0],
            WindowDim {
                size: 5,
                ..WindowDim::default()
            }
        );
        assert!(window("{}").expect("empty").is_empty());
        assert!(window("{size=3x3 stride=2}").is_err());
        assert!(window("{stride=2}").is_err());
    }

    #[test]
    fn dim_labels_positions() {
        let c = dim_labels("b012f_012io->b012f").expect("valid");
        assert_eq!((c.input_batch, c.input_feature), (0, 4));
        assert_eq!(c.input_spatial.as_slice(), &[1, 2, 3]);
        assert_eq!((c.kernel_input_feature, c.kernel_output_feature), (3, 4));
        assert_eq!(c.kernel_spatial.as_slice(), &[0, 1, 2]);
        assert_eq!((c.output_batch, c.output_feature), (0, 4));
        let c = dim_labels("f012b_i012o->012bf").expect("valid");
        assert_eq!(
            (
                c.input_batch,
                c.input_feature,
                c.output_batch,
                c.output_feature
            ),
            (4, 0, 3, 4)
        );
        assert!(dim_labels("bf_io").is_err());
        assert!(dim_labels("b0f_0i->b0f").is_err());
    }

    #[test]
    fn slices_pads_lists() {
        let s = slice("{[0:1], [2:96:3]}").expect("valid");
        assert_eq!(
            s[1],
            SliceDim {
                start: 2,
                limit: 96,
                stride: 3
            }
        );
        assert_eq!(s[0].stride, 1);
        let p = padding("0_1x2_3_4").expect("valid");
        assert_eq!(
            p[0],
            PadDim {
                low: 0,
                high: 1,
                interior: 0
            }
        );
        assert_eq!(
            p[1],
            PadDim {
                low: 2,
                high: 3,
                interior: 4
            }
        );
        assert_eq!(int_list("{4, 0}").expect("valid").as_slice(), &[4, 0]);
        assert!(int_list("{}").expect("valid").is_empty());
        assert!(int_list("{a}").is_err());
        assert!(slice("{0:1}").is_err());
    }
}
