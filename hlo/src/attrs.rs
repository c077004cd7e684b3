//! Typed, lazy decoding of instruction attributes.
//!
//! The parser keeps attribute values as their source text
//! ([`AttrValue::Raw`](crate::ir::AttrValue::Raw)); this module decodes them
//! on demand into the types of [`crate::shape_infer`] (dot and convolution
//! dimension numbers, windows, slices, padding) and plain integers, lists,
//! booleans and strings.
//!
//! Convention of every accessor: `Ok(None)` when the attribute is absent,
//! `Err` when it is present but malformed (the message names the key and the
//! text), `Ok(Some(v))` otherwise. Nothing here panics on any text.

use crate::ir::Instruction;
use crate::shape_infer::{self as si, Dims};

pub use crate::shape_infer::{ConvDims, DotDims, PadDim, SliceDim, WindowDim};

/// Format checks of attribute text as XLA's parser applies them (used by
/// [`crate::semantic`]).
pub mod validate;

/// Constant literals decoded to values; small float encodings.
pub mod literal;

/// Attribute kinds whose typed form is an XLA proto message (shardings,
/// metadata, replica groups, ...).
pub mod xla;

/// An attribute that is present but cannot be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("attribute `{key}`: {message}")]
pub struct AttrError {
    pub key: String,
    pub message: String,
}

impl From<AttrError> for crate::Error {
    fn from(e: AttrError) -> Self {
        crate::Error::Module(e.to_string())
    }
}

pub type AttrResult<T> = Result<Option<T>, AttrError>;

fn bad(key: &str, message: impl Into<String>) -> AttrError {
    AttrError {
        key: key.to_string(),
        message: message.into(),
    }
}

/// Removes one level of surrounding quotes and undoes `\"`, `\\`, `\n`, `\t`
/// escapes. Text without quotes is returned as is.
pub fn unquote(text: &str) -> String {
    let t = text.trim();
    let Some(inner) = t.strip_prefix('"').and_then(|r| r.strip_suffix('"')) else {
        return t.to_string();
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(o) => out.push(o),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl Instruction {
    /// Attribute `key` decoded by `decode`, under the module's convention.
    fn decoded<T>(
        &self,
        key: &str,
        decode: fn(&str) -> Result<T, si::ShapeError>,
    ) -> AttrResult<T> {
        match self.raw_attr(key) {
            None => Ok(None),
            Some(t) => decode(t).map(Some).map_err(|e| bad(key, e.0)),
        }
    }

    /// An integer list attribute such as `dimensions={1,0}`.
    pub fn int_list_attr(&self, key: &str) -> AttrResult<Dims> {
        self.decoded(key, si::parse_int_list)
    }

    /// An integer attribute such as `index=2`, `iota_dimension=0`, `channel_id=5`.
    pub fn int_attr(&self, key: &str) -> AttrResult<i64> {
        match self.raw_attr(key) {
            None => Ok(None),
            Some(t) => t
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| bad(key, format!("`{t}` is not an integer"))),
        }
    }

    /// A boolean attribute such as `is_stable=true`.
    pub fn bool_attr(&self, key: &str) -> AttrResult<bool> {
        match self.raw_attr(key).map(str::trim) {
            None => Ok(None),
            Some("true") => Ok(Some(true)),
            Some("false") => Ok(Some(false)),
            Some(t) => Err(bad(key, format!("`{t}` is not true or false"))),
        }
    }

    /// A string attribute with quotes removed (`custom_call_target="foo"` ->
    /// `foo`); unquoted values (`kind=kLoop`) are returned as written.
    pub fn string_attr(&self, key: &str) -> Option<String> {
        self.raw_attr(key).map(unquote)
    }

    /// `dimensions={...}` (broadcast, transpose, reduce, reverse, sort, concatenate, ...).
    pub fn dimensions(&self) -> AttrResult<Dims> {
        self.int_list_attr("dimensions")
    }

    /// `index=N` of a get-tuple-element.
    pub fn tuple_index(&self) -> AttrResult<i64> {
        self.int_attr("index")
    }

    /// `iota_dimension=N`.
    pub fn iota_dimension(&self) -> AttrResult<i64> {
        self.int_attr("iota_dimension")
    }

    /// `dynamic_slice_sizes={...}`.
    pub fn dynamic_slice_sizes(&self) -> AttrResult<Dims> {
        self.int_list_attr("dynamic_slice_sizes")
    }

    /// The dimension numbers of a dot: `lhs_batch_dims`, `rhs_batch_dims`,
    /// `lhs_contracting_dims`, `rhs_contracting_dims` (each empty when
    /// absent). `None` when none of the four is present.
    pub fn dot_dims(&self) -> AttrResult<DotDims> {
        let keys = [
            "lhs_batch_dims",
            "rhs_batch_dims",
            "lhs_contracting_dims",
            "rhs_contracting_dims",
        ];
        if keys.iter().all(|k| self.attr(k).is_none()) {
            return Ok(None);
        }
        let get =
            |k: &str| -> Result<Dims, AttrError> { Ok(self.int_list_attr(k)?.unwrap_or_default()) };
        Ok(Some(DotDims {
            lhs_batch: get(keys[0])?,
            rhs_batch: get(keys[1])?,
            lhs_contracting: get(keys[2])?,
            rhs_contracting: get(keys[3])?,
        }))
    }

    /// `window={size=3x3 stride=2x2 pad=0_1x0_1 ...}`.
    pub fn window(&self) -> AttrResult<Vec<WindowDim>> {
        self.decoded("window", si::parse_window)
    }

    /// `dim_labels=b01f_01io->b01f` of a convolution.
    pub fn conv_dims(&self) -> AttrResult<ConvDims> {
        self.decoded("dim_labels", ConvDims::parse)
    }

    /// `slice={[0:2], [1:5:2]}`.
    pub fn slice(&self) -> AttrResult<Vec<SliceDim>> {
        self.decoded("slice", si::parse_slice)
    }

    /// `padding=0_1x2_3_1` of a pad.
    pub fn padding(&self) -> AttrResult<Vec<PadDim>> {
        self.decoded("padding", si::parse_padding)
    }

    /// `kind=kLoop` of a fusion.
    pub fn fusion_kind(&self) -> Option<&str> {
        self.raw_attr("kind").map(str::trim)
    }

    /// `direction=LT` of a compare.
    pub fn comparison_direction(&self) -> Option<&str> {
        self.raw_attr("direction").map(str::trim)
    }

    /// `custom_call_target="..."`, unquoted.
    pub fn custom_call_target(&self) -> Option<String> {
        self.string_attr("custom_call_target")
    }

    /// `feature_group_count=N` (1 when absent).
    pub fn feature_group_count(&self) -> Result<i64, AttrError> {
        Ok(self.int_attr("feature_group_count")?.unwrap_or(1))
    }

    /// `batch_group_count=N` (1 when absent).
    pub fn batch_group_count(&self) -> Result<i64, AttrError> {
        Ok(self.int_attr("batch_group_count")?.unwrap_or(1))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::parse_module;

    fn inst(text: &str, name: &str) -> Instruction {
        let m = parse_module(text).expect("test module parses");
        let id = m
            .all_instructions()
            .find(|&i| &*m.inst(i).name == name)
            .expect("instruction exists");
        m.inst(id).clone()
    }

    const M: &str = r#"HloModule m
ENTRY e {
  p = f32[4,6]{1,0} parameter(0)
  q = f32[6,8]{1,0} parameter(1)
  t = f32[6,4]{0,1} transpose(p), dimensions={1,0}
  d = f32[4,8]{1,0} dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  s = f32[2,3]{1,0} slice(p), slice={[0:4:2], [1:4]}
  tup = (f32[4,6], f32[6,8]) tuple(p, q)
  g = f32[6,8]{1,0} get-tuple-element(tup), index=1
  c = f32[] constant(0)
  pd = f32[5,9]{1,0} pad(p, c), padding=0_1x1_2
  ROOT cc = f32[4,6]{1,0} custom-call(p), custom_call_target="my\"target", api_version=API_VERSION_TYPED_FFI
}"#;

    #[test]
    fn decodes_dimension_lists_and_indices() {
        assert_eq!(
            inst(M, "t").dimensions().unwrap().unwrap().as_slice(),
            &[1, 0]
        );
        assert_eq!(inst(M, "g").tuple_index().unwrap(), Some(1));
        assert_eq!(inst(M, "p").dimensions().unwrap(), None);
    }

    #[test]
    fn decodes_dot_dimension_numbers() {
        let d = inst(M, "d").dot_dims().unwrap().unwrap();
        assert_eq!(d.lhs_contracting.as_slice(), &[1]);
        assert_eq!(d.rhs_contracting.as_slice(), &[0]);
        assert!(d.lhs_batch.is_empty());
    }

    #[test]
    fn decodes_slice_and_padding() {
        let s = inst(M, "s").slice().unwrap().unwrap();
        assert_eq!((s[0].start, s[0].limit, s[0].stride), (0, 4, 2));
        assert_eq!((s[1].start, s[1].limit, s[1].stride), (1, 4, 1));
        let p = inst(M, "pd").padding().unwrap().unwrap();
        assert_eq!((p[1].lo, p[1].hi, p[1].interior), (1, 2, 0));
    }

    #[test]
    fn unquotes_strings() {
        assert_eq!(
            inst(M, "cc").custom_call_target().as_deref(),
            Some("my\"target")
        );
        assert_eq!(
            inst(M, "cc").string_attr("api_version").as_deref(),
            Some("API_VERSION_TYPED_FFI")
        );
    }

    #[test]
    fn malformed_values_are_errors_not_panics() {
        // The parser rejects such text (semantic.rs); decoders of an IR
        // built or edited in code must still not panic on it.
        let mut t = inst(M, "t");
        t.set_attr("dimensions", crate::ir::AttrValue::Raw("{1,x}".into()));
        let e = t.dimensions().unwrap_err();
        assert_eq!(e.key, "dimensions");
    }
}
