//! Shape inference for the common HLO operations, shared by the verifier and
//! the layout pass.
//!
//! Everything here works on dimensions and element types only; layouts are the
//! verifier's separate concern. Functions take already decoded attributes
//! ([`DotDims`], [`ConvDims`], [`WindowDim`], [`SliceDim`], [`PadDim`]) and
//! return the inferred [`ArrayShape`] (with `layout: None`) or a
//! [`ShapeError`] whose message a person can act on.
//!
//! Invariants:
//! - no function panics or overflows on any input: sizes are combined with
//!   checked arithmetic and an overflow is an error;
//! - dynamic dimensions are handled leniently, as XLA does: a bounded dynamic
//!   dimension (`<=N`) takes part in inference through its bound, and an
//!   unbounded one (`?`, [`UNBOUNDED_DIM`]) matches any size and makes every
//!   size derived from it unbounded.
//!
//! The parser decodes windows, slices, padding and dimension lists
//! ([`crate::attrs::validate`]); [`ConvDims::parse`] reads `dim_labels`.

use smallvec::SmallVec;

use crate::ir::{ArrayShape, PrimType, UNBOUNDED_DIM};

/// Why a shape could not be inferred (or does not match what was inferred).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShapeError(pub String);

type Result<T> = std::result::Result<T, ShapeError>;

pub use crate::ir::dims::{ConvDims, Dims, DotDims, GatherDims, PadDim, SliceDim, WindowDim};

fn err<T>(msg: impl Into<String>) -> Result<T> {
    Err(ShapeError(msg.into()))
}

// ---------------------------------------------------------------------------
// Comparing and printing
// ---------------------------------------------------------------------------

/// Whether two dimension sizes agree: equal, or either is unbounded (`?`).
pub fn dim_matches(a: i64, b: i64) -> bool {
    a == b || a == UNBOUNDED_DIM || b == UNBOUNDED_DIM
}

/// Whether two dimension lists agree (same rank, every size [`dim_matches`]).
pub fn dims_match(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(&x, &y)| dim_matches(x, y))
}

/// Whether two arrays have the same element type and matching dimensions
/// (layouts and dynamic-dimension markers ignored).
pub fn arrays_compatible(a: &ArrayShape, b: &ArrayShape) -> bool {
    a.elem == b.elem && dims_match(&a.dims, &b.dims)
}

/// [`arrays_compatible`], but floating-point types of different precision
/// match (XLA's `CompatibleIgnoringFpPrecision`).
pub fn arrays_compatible_ignoring_fp_precision(a: &ArrayShape, b: &ArrayShape) -> bool {
    same_type_ignoring_fp_precision(a.elem, b.elem) && dims_match(&a.dims, &b.dims)
}

/// XLA's `SameElementTypeIgnoringFpPrecision`: equal, or both floating point.
pub fn same_type_ignoring_fp_precision(a: PrimType, b: PrimType) -> bool {
    a == b || (a.is_float() && b.is_float())
}

/// Prints an array shape in HLO syntax without its layout: `f32[2,<=3,?]`.
pub fn fmt_array(a: &ArrayShape) -> String {
    let mut s = String::with_capacity(16);
    s.push_str(a.elem.name());
    s.push('[');
    for (i, &d) in a.dims.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        if d == UNBOUNDED_DIM {
            s.push('?');
        } else {
            if a.is_dynamic_dim(i) {
                s.push_str("<=");
            }
            s.push_str(&d.to_string());
        }
    }
    s.push(']');
    s
}

/// Prints a dimension list as HLO prints attribute lists: `{1,0}`.
pub fn fmt_list(v: &[i64]) -> String {
    let items: Vec<String> = v.iter().map(|d| d.to_string()).collect();
    format!("{{{}}}", items.join(","))
}

fn array(elem: PrimType, dims: Dims, dynamic: SmallVec<[bool; 6]>) -> ArrayShape {
    let dynamic = if dynamic.iter().any(|&d| d) {
        dynamic
    } else {
        SmallVec::new()
    };
    ArrayShape {
        elem,
        dims,
        dynamic,
        layout: None,
    }
}

/// Checks that `dims` lists distinct dimension numbers of a rank-`rank` array.
fn check_dim_numbers(what: &str, dims: &[i64], rank: usize) -> Result<()> {
    for (i, &d) in dims.iter().enumerate() {
        if d < 0 || d as u64 >= rank as u64 {
            return err(format!(
                "{what} {} names dimension {d}, out of range for rank {rank}",
                fmt_list(dims)
            ));
        }
        if dims[..i].contains(&d) {
            return err(format!(
                "{what} {} names dimension {d} twice",
                fmt_list(dims)
            ));
        }
    }
    Ok(())
}

pub(crate) use crate::ir::layout::is_permutation;

// ---------------------------------------------------------------------------
// Shape-preserving and rearranging ops
// ---------------------------------------------------------------------------

/// `transpose(operand), dimensions=perm`: output dimension `i` is operand
/// dimension `perm[i]`.
pub fn infer_transpose_shape(operand: &ArrayShape, perm: &[i64]) -> Result<ArrayShape> {
    if !is_permutation(perm, operand.rank()) {
        return err(format!(
            "dimensions={} is not a permutation of the {} dimensions of {}",
            fmt_list(perm),
            operand.rank(),
            fmt_array(operand)
        ));
    }
    let dims = perm.iter().map(|&p| operand.dims[p as usize]).collect();
    let dynamic = perm
        .iter()
        .map(|&p| operand.is_dynamic_dim(p as usize))
        .collect();
    Ok(array(operand.elem, dims, dynamic))
}

/// `broadcast(operand), dimensions=map` into `output`: operand dimension `i`
/// becomes output dimension `map[i]`, with the same size.
pub fn check_broadcast(operand: &ArrayShape, output: &ArrayShape, map: &[i64]) -> Result<()> {
    if map.len() != operand.rank() {
        return err(format!(
            "dimensions={} has length {}, but the operand {} has rank {}",
            fmt_list(map),
            map.len(),
            fmt_array(operand),
            operand.rank()
        ));
    }
    check_dim_numbers("dimensions=", map, output.rank())?;
    for (i, &o) in map.iter().enumerate() {
        let (have, want) = (operand.dims[i], output.dims[o as usize]);
        if !dim_matches(have, want) {
            return err(format!(
                "operand dimension {i} (size {have}) maps to output dimension {o} (size {want}); \
                 broadcasting {} to {} needs equal sizes",
                fmt_array(operand),
                fmt_array(output)
            ));
        }
    }
    Ok(())
}

/// `reshape(operand)` to `output`: same number of elements (skipped when an
/// unbounded dimension is involved).
pub fn check_reshape(operand: &ArrayShape, output: &ArrayShape) -> Result<()> {
    if operand.dims.contains(&UNBOUNDED_DIM) || output.dims.contains(&UNBOUNDED_DIM) {
        return Ok(());
    }
    match (operand.element_count(), output.element_count()) {
        (Some(a), Some(b)) if a == b => Ok(()),
        (Some(a), Some(b)) => err(format!(
            "reshape changes the element count: operand {} has {a} elements, output {} has {b}",
            fmt_array(operand),
            fmt_array(output)
        )),
        _ => err(format!(
            "element count of {} or {} overflows",
            fmt_array(operand),
            fmt_array(output)
        )),
    }
}

/// `bitcast-convert(operand)` to element type `to`: equal bit widths keep the
/// dimensions; converting to a narrower type appends a minor dimension of size
/// `wide / narrow`; converting to a wider type removes that minor dimension.
pub fn infer_bitcast_convert_shape(operand: &ArrayShape, to: PrimType) -> Result<ArrayShape> {
    let (from_bits, to_bits) = (operand.elem.bit_width(), to.bit_width());
    let mut dims = operand.dims.clone();
    let mut dynamic: SmallVec<[bool; 6]> = (0..operand.rank())
        .map(|d| operand.is_dynamic_dim(d))
        .collect();
    if from_bits == 0 || to_bits == 0 {
        return err(format!(
            "cannot bitcast-convert between {} and {to}",
            operand.elem
        ));
    }
    if from_bits > to_bits {
        dims.push(i64::from(from_bits / to_bits));
        dynamic.push(false);
    } else if from_bits < to_bits {
        let ratio = i64::from(to_bits / from_bits);
        match dims.last() {
            Some(&last) if dim_matches(last, ratio) => {
                dims.pop();
                dynamic.pop();
            }
            _ => {
                return err(format!(
                "bitcast-convert from {} to the wider {to} needs a minor dimension of size {ratio}",
                fmt_array(operand)
            ))
            }
        }
    }
    Ok(array(to, dims, dynamic))
}

// ---------------------------------------------------------------------------
// Dot
// ---------------------------------------------------------------------------

/// `dot(lhs, rhs)`: the output dimensions are the batch dimensions (in
/// `lhs_batch` order), then lhs's free dimensions, then rhs's free dimensions,
/// each in operand order. The element type is `lhs`'s (a dot may choose a
/// different output type, which callers check separately).
pub fn infer_dot_shape(lhs: &ArrayShape, rhs: &ArrayShape, d: &DotDims) -> Result<ArrayShape> {
    check_dim_numbers("lhs_batch_dims=", &d.lhs_batch, lhs.rank())?;
    check_dim_numbers("rhs_batch_dims=", &d.rhs_batch, rhs.rank())?;
    check_dim_numbers("lhs_contracting_dims=", &d.lhs_contracting, lhs.rank())?;
    check_dim_numbers("rhs_contracting_dims=", &d.rhs_contracting, rhs.rank())?;
    if d.lhs_batch.len() != d.rhs_batch.len() {
        return err(format!(
            "lhs_batch_dims={} and rhs_batch_dims={} differ in length",
            fmt_list(&d.lhs_batch),
            fmt_list(&d.rhs_batch)
        ));
    }
    if d.lhs_contracting.len() != d.rhs_contracting.len() {
        return err(format!(
            "lhs_contracting_dims={} and rhs_contracting_dims={} differ in length",
            fmt_list(&d.lhs_contracting),
            fmt_list(&d.rhs_contracting)
        ));
    }
    for (side, batch, contracting) in [
        ("lhs", &d.lhs_batch, &d.lhs_contracting),
        ("rhs", &d.rhs_batch, &d.rhs_contracting),
    ] {
        if let Some(x) = batch.iter().find(|x| contracting.contains(x)) {
            return err(format!(
                "{side} dimension {x} is both a batch and a contracting dimension"
            ));
        }
    }
    let pairs = d.lhs_batch.iter().zip(&d.rhs_batch).map(|p| ("batch", p));
    let pairs = pairs.chain(
        d.lhs_contracting
            .iter()
            .zip(&d.rhs_contracting)
            .map(|p| ("contracting", p)),
    );
    for (kind, (&l, &r)) in pairs {
        let (ls, rs) = (lhs.dims[l as usize], rhs.dims[r as usize]);
        if !dim_matches(ls, rs) {
            return err(format!(
                "{kind} dimensions differ in size: lhs {} dimension {l} is {ls}, rhs {} dimension {r} is {rs}",
                fmt_array(lhs),
                fmt_array(rhs)
            ));
        }
    }
    let mut dims = Dims::new();
    let mut dynamic = SmallVec::new();
    for &b in &d.lhs_batch {
        dims.push(lhs.dims[b as usize]);
        dynamic.push(lhs.is_dynamic_dim(b as usize));
    }
    for (s, batch, contracting) in [
        (lhs, &d.lhs_batch, &d.lhs_contracting),
        (rhs, &d.rhs_batch, &d.rhs_contracting),
    ] {
        for i in 0..s.rank() {
            let i64i = i as i64;
            if !batch.contains(&i64i) && !contracting.contains(&i64i) {
                dims.push(s.dims[i]);
                dynamic.push(s.is_dynamic_dim(i));
            }
        }
    }
    Ok(array(lhs.elem, dims, dynamic))
}

// ---------------------------------------------------------------------------
// Windows (convolution, reduce-window)
// ---------------------------------------------------------------------------

fn overflow<T>(what: &str) -> Result<T> {
    err(format!("{what} overflows a 64-bit size"))
}

/// The shape of an operation with one `what=` entry per operand dimension
/// (reduce-window, slice, pad): dimension `i` has size `size(i, operand
/// size, entry)`; element type and dynamic dimensions are the operand's.
fn per_dimension<T>(
    operand: &ArrayShape,
    what: &str,
    entries: &[T],
    mut size: impl FnMut(usize, i64, &T) -> Result<i64>,
) -> Result<ArrayShape> {
    if entries.len() != operand.rank() {
        return err(format!(
            "{what} has {} dimensions but the operand {} has rank {}",
            entries.len(),
            fmt_array(operand),
            operand.rank()
        ));
    }
    let dims = entries
        .iter()
        .enumerate()
        .map(|(i, e)| size(i, operand.dims[i], e))
        .collect::<Result<Dims>>()?;
    let dynamic = (0..operand.rank())
        .map(|d| operand.is_dynamic_dim(d))
        .collect();
    Ok(array(operand.elem, dims, dynamic))
}

/// Output size of one window dimension over a base of size `base` (XLA's
/// `InferWindowOutputShape`): the base is dilated and padded, the window is
/// dilated, and the window is placed every `stride` elements.
pub fn window_output_dim(base: i64, w: &WindowDim) -> Result<i64> {
    if base == UNBOUNDED_DIM {
        return Ok(UNBOUNDED_DIM);
    }
    if w.size < 0 || w.stride <= 0 || w.lhs_dilation <= 0 || w.rhs_dilation <= 0 {
        return err(format!(
            "window dimension has size {}, stride {}, lhs_dilate {}, rhs_dilate {}: sizes must be \
             non-negative and strides and dilations positive",
            w.size, w.stride, w.lhs_dilation, w.rhs_dilation
        ));
    }
    let dilated_base = if base == 0 {
        0
    } else {
        match (base - 1)
            .checked_mul(w.lhs_dilation)
            .and_then(|x| x.checked_add(1))
        {
            Some(v) => v,
            None => return overflow("dilated window base"),
        }
    };
    let Some(padded) = dilated_base
        .checked_add(w.pad_lo)
        .and_then(|x| x.checked_add(w.pad_hi))
    else {
        return overflow("padded window base");
    };
    let dilated_window = if w.size == 0 {
        0
    } else {
        match (w.size - 1)
            .checked_mul(w.rhs_dilation)
            .and_then(|x| x.checked_add(1))
        {
            Some(v) => v,
            None => return overflow("dilated window"),
        }
    };
    if padded < 0 {
        return err(format!(
            "negative padding {}_{} leaves nothing of a base of size {base}",
            w.pad_lo, w.pad_hi
        ));
    }
    if dilated_window > padded {
        return Ok(0);
    }
    Ok((padded - dilated_window) / w.stride + 1)
}

/// `reduce-window`: one window dimension per operand dimension.
pub fn infer_reduce_window_shape(operand: &ArrayShape, window: &[WindowDim]) -> Result<ArrayShape> {
    per_dimension(operand, "window", window, |i, size, w| {
        window_output_dim(size, w).map_err(|e| ShapeError(format!("window dimension {i}: {e}")))
    })
}

// ---------------------------------------------------------------------------
// Convolution

// ---------------------------------------------------------------------------

impl ConvDims {
    /// Decodes `b01f_01io->b01f`: in each part, the position of a letter is the
    /// operand dimension holding that role (`b`atch, `f`eature, `i`nput and
    /// `o`utput feature of the kernel, digit = spatial dimension number).
    pub fn parse(text: &str) -> Result<ConvDims> {
        let text = text.trim();
        let bad = |why: &str| err(format!("dim_labels={text}: {why}"));
        let Some((inputs, out)) = text.split_once("->") else {
            return bad("expected `lhs_rhs->out`");
        };
        let Some((lhs, rhs)) = inputs.split_once('_') else {
            return bad("expected `lhs_rhs->out`");
        };
        let mut d = ConvDims::default();
        let spatial_count = lhs.chars().filter(|c| c.is_ascii_digit()).count();
        let parts: [(&str, [char; 2]); 3] =
            [(lhs, ['b', 'f']), (rhs, ['i', 'o']), (out, ['b', 'f'])];
        for (part_index, (part, letters)) in parts.into_iter().enumerate() {
            d.part_ranks[part_index] = part.chars().count();
            let mut spatial: Vec<Option<i64>> = vec![None; spatial_count];
            let (mut a, mut b) = (None, None);
            for (pos, c) in part.chars().enumerate() {
                let pos = pos as i64;
                let slot = if c == letters[0] {
                    &mut a
                } else if c == letters[1] {
                    &mut b
                } else if let Some(n) = c.to_digit(10) {
                    match spatial.get_mut(n as usize) {
                        Some(s) => s,
                        None => {
                            return bad(&format!(
                            "spatial dimension {n} is not one of the {spatial_count} of the input"
                        ))
                        }
                    }
                } else if c == '?' {
                    d.has_unknown = true;
                    continue;
                } else {
                    return bad(&format!("unexpected label `{c}`"));
                };
                if slot.is_some() {
                    return bad(&format!("label `{c}` appears twice in `{part}`"));
                }
                *slot = Some(pos);
            }
            // A spatial dimension absent from a part is left out (its
            // numbering must then still be dense: missing ones are `?`).
            let spatial: Dims = spatial.into_iter().map(|s| s.unwrap_or(-1)).collect();
            match part_index {
                0 => (d.input_batch, d.input_feature, d.input_spatial) = (a, b, spatial),
                1 => {
                    (
                        d.kernel_input_feature,
                        d.kernel_output_feature,
                        d.kernel_spatial,
                    ) = (a, b, spatial)
                }
                _ => (d.output_batch, d.output_feature, d.output_spatial) = (a, b, spatial),
            }
        }
        Ok(d)
    }

    /// The labels in XLA's spelling (`b01f_01io->b01f`): in each part, the
    /// role of each dimension, `?` for a dimension without one; what
    /// [`ConvDims::parse`] reads back as these numbers.
    pub fn labels(&self) -> String {
        type Roles = [(Option<i64>, char); 2];
        let parts: [(usize, Roles, &Dims); 3] = [
            (
                self.part_ranks[0],
                [(self.input_batch, 'b'), (self.input_feature, 'f')],
                &self.input_spatial,
            ),
            (
                self.part_ranks[1],
                [
                    (self.kernel_input_feature, 'i'),
                    (self.kernel_output_feature, 'o'),
                ],
                &self.kernel_spatial,
            ),
            (
                self.part_ranks[2],
                [(self.output_batch, 'b'), (self.output_feature, 'f')],
                &self.output_spatial,
            ),
        ];
        let mut out = String::new();
        for (k, (rank, roles, spatial)) in parts.into_iter().enumerate() {
            let mut v = vec!['?'; rank];
            let mut put = |pos: i64, c: char| {
                if let Some(slot) = usize::try_from(pos).ok().and_then(|p| v.get_mut(p)) {
                    *slot = c;
                }
            };
            for (pos, c) in roles {
                if let Some(pos) = pos {
                    put(pos, c);
                }
            }
            for (n, &pos) in spatial.iter().enumerate() {
                put(pos, char::from_digit(n as u32, 10).unwrap_or('?'));
            }
            out.extend(v);
            out.push_str(match k {
                0 => "_",
                1 => "->",
                _ => "",
            });
        }
        out
    }

    /// Whether every dimension is assigned (no `?` and no missing spatial dim).
    pub fn is_complete(&self) -> bool {
        !self.has_unknown
            && [
                self.input_batch,
                self.input_feature,
                self.kernel_input_feature,
                self.kernel_output_feature,
                self.output_batch,
                self.output_feature,
            ]
            .iter()
            .all(Option::is_some)
            && [
                &self.input_spatial,
                &self.kernel_spatial,
                &self.output_spatial,
            ]
            .iter()
            .all(|s| s.iter().all(|&x| x >= 0))
    }

    /// The rank of each operand and of the output these numbers describe.
    pub fn rank(&self) -> usize {
        self.input_spatial.len() + 2
    }
}

/// `convolution(lhs, rhs)`: batch = input batch / `batch_group_count`,
/// feature = kernel output feature, each spatial size from
/// [`window_output_dim`] over the input's spatial size. The element type is
/// `lhs`'s (callers check the output type separately).
pub fn infer_conv_shape(
    lhs: &ArrayShape,
    rhs: &ArrayShape,
    d: &ConvDims,
    window: &[WindowDim],
    feature_group_count: i64,
    batch_group_count: i64,
) -> Result<ArrayShape> {
    if !d.is_complete() {
        return err("dim_labels leave a dimension unassigned (`?`)");
    }
    let rank = d.rank();
    for (what, s) in [("lhs", lhs), ("rhs", rhs)] {
        if s.rank() != rank {
            return err(format!(
                "dim_labels describe rank-{rank} operands but {what} is {}",
                fmt_array(s)
            ));
        }
    }
    let labels_ok = |dims: Vec<i64>| is_permutation(&dims, rank);
    let mut lhs_dims = vec![d.input_batch.unwrap_or(-1), d.input_feature.unwrap_or(-1)];
    lhs_dims.extend(&d.input_spatial);
    let mut rhs_dims = vec![
        d.kernel_input_feature.unwrap_or(-1),
        d.kernel_output_feature.unwrap_or(-1),
    ];
    rhs_dims.extend(&d.kernel_spatial);
    let mut out_dims = vec![d.output_batch.unwrap_or(-1), d.output_feature.unwrap_or(-1)];
    out_dims.extend(&d.output_spatial);
    if !labels_ok(lhs_dims) || !labels_ok(rhs_dims) || !labels_ok(out_dims.clone()) {
        return err(format!(
            "dim_labels do not label each of the {rank} dimensions exactly once"
        ));
    }
    if feature_group_count <= 0 || batch_group_count <= 0 {
        return err(format!(
            "feature_group_count={feature_group_count} and batch_group_count={batch_group_count} must be positive"
        ));
    }
    if feature_group_count > 1 && batch_group_count > 1 {
        return err("feature_group_count and batch_group_count cannot both be greater than 1");
    }
    let at = |s: &ArrayShape, i: Option<i64>| s.dims[i.unwrap_or(0) as usize];
    let input_batch = at(lhs, d.input_batch);
    let input_features = at(lhs, d.input_feature);
    let kernel_input_features = at(rhs, d.kernel_input_feature);
    let kernel_output_features = at(rhs, d.kernel_output_feature);
    let unb = |x: i64| x == UNBOUNDED_DIM;
    if !unb(input_features)
        && !unb(kernel_input_features)
        && (input_features % feature_group_count != 0
            || input_features / feature_group_count != kernel_input_features)
    {
        return err(format!(
            "input feature dimension (size {input_features}) must equal kernel input feature dimension \
             (size {kernel_input_features}) times feature_group_count={feature_group_count}"
        ));
    }
    if !unb(kernel_output_features) {
        if kernel_output_features % feature_group_count != 0 {
            return err(format!(
                "kernel output feature dimension (size {kernel_output_features}) is not a multiple of \
                 feature_group_count={feature_group_count}"
            ));
        }
        if kernel_output_features % batch_group_count != 0 {
            return err(format!(
                "kernel output feature dimension (size {kernel_output_features}) is not a multiple of \
                 batch_group_count={batch_group_count}"
            ));
        }
    }
    if !unb(input_batch) && input_batch % batch_group_count != 0 {
        return err(format!(
            "input batch dimension (size {input_batch}) is not a multiple of batch_group_count={batch_group_count}"
        ));
    }
    let spatial = d.input_spatial.len();
    if window.len() != spatial {
        return err(format!(
            "window has {} dimensions but the convolution has {spatial} spatial dimensions",
            window.len()
        ));
    }
    let mut dims: Dims = SmallVec::from_elem(0, rank);
    let mut dynamic: SmallVec<[bool; 6]> = SmallVec::from_elem(false, rank);
    let ob = d.output_batch.unwrap_or(0) as usize;
    dims[ob] = if unb(input_batch) {
        input_batch
    } else {
        input_batch / batch_group_count
    };
    dynamic[ob] = lhs.is_dynamic_dim(d.input_batch.unwrap_or(0) as usize);
    dims[d.output_feature.unwrap_or(0) as usize] = kernel_output_features;
    for (i, w) in window.iter().enumerate() {
        let kernel_size = rhs.dims[d.kernel_spatial[i] as usize];
        if !dim_matches(kernel_size, w.size) {
            return err(format!(
                "window size {} of spatial dimension {i} differs from the kernel's size {kernel_size} there",
                w.size
            ));
        }
        let in_dim = d.input_spatial[i] as usize;
        let out = window_output_dim(lhs.dims[in_dim], w)
            .map_err(|e| ShapeError(format!("spatial dimension {i}: {e}")))?;
        dims[d.output_spatial[i] as usize] = out;
        dynamic[d.output_spatial[i] as usize] = lhs.is_dynamic_dim(in_dim);
    }
    Ok(array(lhs.elem, dims, dynamic))
}

// ---------------------------------------------------------------------------
// Reduce, slice, concatenate, pad
// ---------------------------------------------------------------------------

/// `reduce(input, init), dimensions=reduced`: the input with the reduced
/// dimensions removed. The element type is the input's.
pub fn infer_reduce_shape(input: &ArrayShape, reduced: &[i64]) -> Result<ArrayShape> {
    check_dim_numbers("dimensions=", reduced, input.rank())?;
    let keep = (0..input.rank()).filter(|&i| !reduced.contains(&(i as i64)));
    let dims = keep.clone().map(|i| input.dims[i]).collect();
    let dynamic = keep.map(|i| input.is_dynamic_dim(i)).collect();
    Ok(array(input.elem, dims, dynamic))
}

/// `slice(operand)`: size `ceil((limit - start) / stride)` per dimension,
/// with `0 <= start <= limit <= size` and `stride >= 1`.
pub fn infer_slice_shape(operand: &ArrayShape, slice: &[SliceDim]) -> Result<ArrayShape> {
    per_dimension(operand, "slice", slice, |i, size, s| {
        let in_range =
            0 <= s.start && s.start <= s.limit && (size == UNBOUNDED_DIM || s.limit <= size);
        if !in_range || s.stride < 1 {
            return err(format!(
                "slice [{}:{}:{}] of dimension {i} is out of bounds for {} (need 0 <= start <= limit <= {size}, stride >= 1)",
                s.start,
                s.limit,
                s.stride,
                fmt_array(operand)
            ));
        }
        let len = s.limit - s.start;
        Ok(len / s.stride + i64::from(len % s.stride != 0))
    })
}

/// `concatenate(a, b, ...), dimensions={d}`: equal ranks, equal sizes except
/// in dimension `d`, where the sizes add up.
pub fn infer_concat_shape(operands: &[&ArrayShape], dim: i64) -> Result<ArrayShape> {
    let Some(first) = operands.first() else {
        return err("concatenate needs at least one operand");
    };
    if dim < 0 || dim as u64 >= first.rank() as u64 {
        return err(format!(
            "concatenate dimension {dim} is out of range for {}",
            fmt_array(first)
        ));
    }
    let d = dim as usize;
    let mut dims = first.dims.clone();
    let mut dynamic: SmallVec<[bool; 6]> =
        (0..first.rank()).map(|i| first.is_dynamic_dim(i)).collect();
    for (k, op) in operands.iter().enumerate().skip(1) {
        if !same_type_ignoring_fp_precision(op.elem, first.elem) {
            return err(format!(
                "operand {k} is {} but operand 0 is {}: element types differ",
                fmt_array(op),
                fmt_array(first)
            ));
        }
        let same_elsewhere = op.rank() == first.rank()
            && (0..first.rank()).all(|i| i == d || dim_matches(op.dims[i], first.dims[i]));
        if !same_elsewhere {
            return err(format!(
                "operand {k} {} does not match operand 0 {} outside dimension {dim}",
                fmt_array(op),
                fmt_array(first)
            ));
        }
        dims[d] = if dims[d] == UNBOUNDED_DIM || op.dims[d] == UNBOUNDED_DIM {
            UNBOUNDED_DIM
        } else {
            match dims[d].checked_add(op.dims[d]) {
                Some(v) => v,
                None => return overflow("concatenated size"),
            }
        };
        dynamic[d] |= op.is_dynamic_dim(d);
    }
    Ok(array(first.elem, dims, dynamic))
}

/// `pad(operand, value)`: `lo + size + (size - 1) * interior + hi` per
/// dimension; `lo`/`hi` may be negative, `interior` may not.
pub fn infer_pad_shape(operand: &ArrayShape, padding: &[PadDim]) -> Result<ArrayShape> {
    per_dimension(operand, "padding", padding, |i, size, p| {
        if p.interior < 0 {
            return err(format!(
                "interior padding {} of dimension {i} is negative",
                p.interior
            ));
        }
        if size == UNBOUNDED_DIM {
            return Ok(UNBOUNDED_DIM);
        }
        let out = (size.max(1) - 1)
            .checked_mul(p.interior)
            .and_then(|x| x.checked_add(size))
            .and_then(|x| x.checked_add(p.lo))
            .and_then(|x| x.checked_add(p.hi));
        match out {
            Some(v) if v >= 0 => Ok(v),
            Some(v) => err(format!(
                "padding {}_{}_{} of dimension {i} (size {size}) gives a negative size {v}",
                p.lo, p.hi, p.interior
            )),
            None => overflow("padded size"),
        }
    })
}

// ---------------------------------------------------------------------------
// Gather
// ---------------------------------------------------------------------------

/// `gather(operand, indices)`: the output has the indices' batch dimensions
/// (all but `index_vector_dim`, in order) and, at the positions `offset_dims`,
/// the slice sizes of the operand dimensions that are neither collapsed nor
/// batching dimensions.
pub fn infer_gather_shape(
    operand: &ArrayShape,
    indices: &ArrayShape,
    g: &GatherDims,
) -> Result<ArrayShape> {
    let rank = operand.rank();
    if g.slice_sizes.len() != rank {
        return err(format!(
            "slice_sizes={} has length {}, but the operand {} has rank {rank}",
            fmt_list(&g.slice_sizes),
            g.slice_sizes.len(),
            fmt_array(operand)
        ));
    }
    for (i, (&s, &d)) in g.slice_sizes.iter().zip(&operand.dims).enumerate() {
        if s < 0 || (d != UNBOUNDED_DIM && s > d) {
            return err(format!(
                "slice_sizes={}: size {s} of dimension {i} does not fit in the operand {}",
                fmt_list(&g.slice_sizes),
                fmt_array(operand)
            ));
        }
    }
    check_dim_numbers("collapsed_slice_dims=", &g.collapsed_slice_dims, rank)?;
    check_dim_numbers("operand_batching_dims=", &g.operand_batching_dims, rank)?;
    check_dim_numbers("start_index_map=", &g.start_index_map, rank)?;
    for &c in g
        .collapsed_slice_dims
        .iter()
        .chain(&g.operand_batching_dims)
    {
        if g.slice_sizes[c as usize] > 1 {
            return err(format!(
                "operand dimension {c} is collapsed or a batching dimension, so its slice size must be at most 1, \
                 but slice_sizes={}",
                fmt_list(&g.slice_sizes)
            ));
        }
    }
    // Indices with `index_vector_dim == rank` have an implicit trailing 1.
    let ivd = g.index_vector_dim;
    if ivd < 0 || ivd as u64 > indices.rank() as u64 {
        return err(format!(
            "index_vector_dim={ivd} is out of range for the indices {}",
            fmt_array(indices)
        ));
    }
    let ivd = ivd as usize;
    let index_vector_len = if ivd == indices.rank() {
        1
    } else {
        indices.dims[ivd]
    };
    if !dim_matches(index_vector_len, g.start_index_map.len() as i64) {
        return err(format!(
            "start_index_map={} has length {}, but the index vectors of {} (dimension {ivd}) have length {index_vector_len}",
            fmt_list(&g.start_index_map),
            g.start_index_map.len(),
            fmt_array(indices)
        ));
    }
    let batch: Vec<usize> = (0..indices.rank()).filter(|&d| d != ivd).collect();
    let offsets: Vec<usize> = (0..rank)
        .filter(|&d| {
            !g.collapsed_slice_dims.contains(&(d as i64))
                && !g.operand_batching_dims.contains(&(d as i64))
        })
        .collect();
    if offsets.len() != g.offset_dims.len() {
        return err(format!(
            "offset_dims={} has length {}, but {} operand dimensions are neither collapsed nor batching",
            fmt_list(&g.offset_dims),
            g.offset_dims.len(),
            offsets.len()
        ));
    }
    let out_rank = batch.len() + offsets.len();
    check_dim_numbers("offset_dims=", &g.offset_dims, out_rank)?;
    if g.offset_dims.windows(2).any(|w| w[0] >= w[1]) {
        return err(format!(
            "offset_dims={} must be in ascending order",
            fmt_list(&g.offset_dims)
        ));
    }
    let mut dims = Dims::new();
    let mut dynamic = SmallVec::new();
    let mut next_batch = batch.iter();
    for o in 0..out_rank as i64 {
        // The k-th offset dimension of the output is the k-th operand
        // dimension that is neither collapsed nor batching.
        if let Some(k) = g.offset_dims.iter().position(|&x| x == o) {
            dims.push(g.slice_sizes[offsets[k]]);
            dynamic.push(false);
        } else if let Some(&b) = next_batch.next() {
            dims.push(indices.dims[b]);
            dynamic.push(indices.is_dynamic_dim(b));
        }
    }
    Ok(array(operand.elem, dims, dynamic))
}

// ---------------------------------------------------------------------------
// Attribute text decoders
// ---------------------------------------------------------------------------

/// `text` without surrounding white space and one optional pair of braces
/// (`{1,0}` -> `1,0`).
pub fn strip_braces(text: &str) -> &str {
    let t = text.trim();
    t.strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .unwrap_or(t)
        .trim()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    // The parser's decoders (braces optional here, for brevity).
    fn braced(t: &str) -> String {
        if t.trim_start().starts_with('{') {
            t.to_string()
        } else {
            format!("{{{t}}}")
        }
    }
    fn test_window(t: &str) -> Result<Vec<WindowDim>> {
        crate::attrs::validate::window(&braced(t))
            .map(Vec::from)
            .map_err(ShapeError)
    }
    fn test_slice(t: &str) -> Result<Vec<SliceDim>> {
        crate::attrs::validate::slice(&braced(t))
            .map(Vec::from)
            .map_err(ShapeError)
    }
    fn test_padding(t: &str) -> Result<Vec<PadDim>> {
        crate::attrs::validate::padding(t)
            .map(Vec::from)
            .map_err(ShapeError)
    }

    fn arr(elem: PrimType, dims: &[i64]) -> ArrayShape {
        ArrayShape {
            elem,
            dims: dims.iter().copied().collect(),
            dynamic: SmallVec::new(),
            layout: None,
        }
    }
    fn f32s(dims: &[i64]) -> ArrayShape {
        arr(PrimType::F32, dims)
    }
    fn dims_of(r: Result<ArrayShape>) -> Vec<i64> {
        r.map(|a| a.dims.to_vec())
            .unwrap_or_else(|e| panic!("unexpected error: {e}"))
    }

    #[test]
    fn dot_output_is_batch_then_lhs_free_then_rhs_free() {
        let d = DotDims {
            lhs_batch: [0].into_iter().collect(),
            rhs_batch: [0].into_iter().collect(),
            lhs_contracting: [2].into_iter().collect(),
            rhs_contracting: [1].into_iter().collect(),
        };
        assert_eq!(
            dims_of(infer_dot_shape(&f32s(&[8, 3, 5]), &f32s(&[8, 5, 7]), &d)),
            [8, 3, 7]
        );
        let plain = DotDims {
            lhs_contracting: [1].into_iter().collect(),
            rhs_contracting: [0].into_iter().collect(),
            ..Default::default()
        };
        assert_eq!(
            dims_of(infer_dot_shape(&f32s(&[2, 4]), &f32s(&[4, 6]), &plain)),
            [2, 6]
        );
        // Outer product: no contracting dimensions.
        assert_eq!(
            dims_of(infer_dot_shape(
                &f32s(&[2]),
                &f32s(&[3]),
                &DotDims::default()
            )),
            [2, 3]
        );
    }

    #[test]
    fn dot_rejects_mismatched_contracting_sizes() {
        let d = DotDims {
            lhs_contracting: [1].into_iter().collect(),
            rhs_contracting: [0].into_iter().collect(),
            ..Default::default()
        };
        let e = infer_dot_shape(&f32s(&[2, 4]), &f32s(&[5, 6]), &d).unwrap_err();
        assert!(e.0.contains("contracting dimensions differ in size"), "{e}");
        let out_of_range = DotDims {
            lhs_contracting: [2].into_iter().collect(),
            ..d.clone()
        };
        assert!(infer_dot_shape(&f32s(&[2, 4]), &f32s(&[4, 6]), &out_of_range).is_err());
    }

    #[test]
    fn conv_output_follows_window_arithmetic() {
        let d = ConvDims::parse("b01f_01io->b01f").unwrap();
        let w = test_window("{size=3x3 stride=2x2 pad=1_1x1_1}").unwrap();
        // (224 + 2 - 3) / 2 + 1 = 112.
        let out = infer_conv_shape(
            &f32s(&[8, 224, 224, 3]),
            &f32s(&[3, 3, 3, 64]),
            &d,
            &w,
            1,
            1,
        );
        assert_eq!(dims_of(out), [8, 112, 112, 64]);
    }

    #[test]
    fn conv_with_permuted_labels_and_feature_groups() {
        let d = ConvDims::parse("bf01_oi01->bf01").unwrap();
        let w = test_window("size=3x3 pad=1_1x1_1").unwrap();
        // Depthwise: 32 input features in 32 groups, kernel input feature 1.
        let out = infer_conv_shape(
            &f32s(&[1, 32, 10, 10]),
            &f32s(&[32, 1, 3, 3]),
            &d,
            &w,
            32,
            1,
        );
        assert_eq!(dims_of(out), [1, 32, 10, 10]);
        let bad = infer_conv_shape(
            &f32s(&[1, 32, 10, 10]),
            &f32s(&[32, 2, 3, 3]),
            &d,
            &w,
            32,
            1,
        );
        assert!(bad.unwrap_err().0.contains("feature_group_count=32"));
    }

    #[test]
    fn conv_batch_group_count_divides_batch() {
        let d = ConvDims::parse("f01b_i01o->01bf").unwrap();
        let w = test_window("size=3x3").unwrap();
        let out = infer_conv_shape(&f32s(&[4, 5, 5, 8]), &f32s(&[4, 3, 3, 8]), &d, &w, 1, 8);
        assert_eq!(dims_of(out), [3, 3, 1, 8]);
    }

    #[test]
    fn conv_lhs_dilation_and_negative_padding() {
        let d = ConvDims::parse("b0f_0io->b0f").unwrap();
        // Dilated base (4-1)*2+1 = 7, padded 7 - 1 + 0 = 6, window 2 -> 5.
        let w = test_window("size=2 pad=-1_0 lhs_dilate=2").unwrap();
        let out = infer_conv_shape(&f32s(&[1, 4, 1]), &f32s(&[2, 1, 1]), &d, &w, 1, 1);
        assert_eq!(dims_of(out), [1, 5, 1]);
    }

    #[test]
    fn gather_output_interleaves_batch_and_offset_dims() {
        // Embedding lookup: operand [100,64], indices [8,5] with an implicit
        // index vector, one row per index: output [8,5,64].
        let g = GatherDims {
            offset_dims: [2].into_iter().collect(),
            collapsed_slice_dims: [0].into_iter().collect(),
            start_index_map: [0].into_iter().collect(),
            index_vector_dim: 2,
            slice_sizes: [1, 64].into_iter().collect(),
            ..Default::default()
        };
        let idx = arr(PrimType::S32, &[8, 5]);
        assert_eq!(
            dims_of(infer_gather_shape(&f32s(&[100, 64]), &idx, &g)),
            [8, 5, 64]
        );
        // The same with the offset dimension first: [64,8,5].
        let first = GatherDims {
            offset_dims: [0].into_iter().collect(),
            ..g.clone()
        };
        assert_eq!(
            dims_of(infer_gather_shape(&f32s(&[100, 64]), &idx, &first)),
            [64, 8, 5]
        );
        let too_big = GatherDims {
            slice_sizes: [1, 65].into_iter().collect(),
            ..g.clone()
        };
        assert!(infer_gather_shape(&f32s(&[100, 64]), &idx, &too_big).is_err());
        let uncollapsed = GatherDims {
            slice_sizes: [2, 64].into_iter().collect(),
            ..g
        };
        assert!(infer_gather_shape(&f32s(&[100, 64]), &idx, &uncollapsed).is_err());
    }

    #[test]
    fn dim_labels_with_unknown_dims_are_incomplete() {
        let d = ConvDims::parse("?b01f_0?1io->b01?f").unwrap();
        assert!(!d.is_complete());
        assert!(ConvDims::parse("b01f_01io").is_err());
        assert!(ConvDims::parse("bb0f_0io->b0f").is_err());
    }

    #[test]
    fn window_fields_in_any_order() {
        let w = test_window("{pad=1_2 size=1 rhs_reversal=1}").unwrap();
        assert_eq!(
            w,
            vec![WindowDim {
                size: 1,
                pad_lo: 1,
                pad_hi: 2,
                reversal: true,
                ..Default::default()
            }]
        );
        assert!(test_window("{size=2x2 stride=1}").is_err());
        assert_eq!(test_window("{}").unwrap(), vec![]);
    }

    #[test]
    fn reduce_window_output() {
        let w = test_window("size=1x3x3x1 stride=1x2x2x1 pad=0_0x0_1x0_1x0_0").unwrap();
        assert_eq!(
            dims_of(infer_reduce_window_shape(&f32s(&[1, 112, 112, 64]), &w)),
            [1, 56, 56, 64]
        );
    }

    #[test]
    fn slice_sizes_round_up() {
        let s = test_slice("{[0:5:2], [1:3]}").unwrap();
        assert_eq!(dims_of(infer_slice_shape(&f32s(&[5, 4]), &s)), [3, 2]);
        let oob = test_slice("{[0:6], [1:3]}").unwrap();
        assert!(infer_slice_shape(&f32s(&[5, 4]), &oob).is_err());
    }

    #[test]
    fn pad_with_interior_and_negative_edges() {
        let p = test_padding("1_2_1x-1_0").unwrap();
        // dim 0: 1 + 3 + 2*1 + 2 = 8; dim 1: -1 + 4 = 3.
        assert_eq!(dims_of(infer_pad_shape(&f32s(&[3, 4]), &p)), [8, 3]);
        assert!(infer_pad_shape(&f32s(&[3]), &test_padding("-4_0").unwrap()).is_err());
        assert!(test_padding("").unwrap().is_empty());
    }

    #[test]
    fn concat_adds_along_one_dimension() {
        let (a, b) = (f32s(&[2, 3]), f32s(&[2, 5]));
        assert_eq!(dims_of(infer_concat_shape(&[&a, &b], 1)), [2, 8]);
        assert!(infer_concat_shape(&[&a, &b], 0).is_err());
        assert!(infer_concat_shape(&[&a, &arr(PrimType::S32, &[2, 5])], 1).is_err());
    }

    #[test]
    fn reduce_removes_dimensions() {
        assert_eq!(dims_of(infer_reduce_shape(&f32s(&[2, 3, 4]), &[0, 2])), [3]);
        assert!(infer_reduce_shape(&f32s(&[2, 3]), &[1, 1]).is_err());
    }

    #[test]
    fn transpose_and_broadcast_and_reshape() {
        assert_eq!(
            dims_of(infer_transpose_shape(&f32s(&[2, 3, 4]), &[2, 0, 1])),
            [4, 2, 3]
        );
        assert!(infer_transpose_shape(&f32s(&[2, 3]), &[0, 0]).is_err());
        assert!(check_broadcast(&f32s(&[3]), &f32s(&[2, 3]), &[1]).is_ok());
        assert!(check_broadcast(&f32s(&[3]), &f32s(&[2, 3]), &[0]).is_err());
        assert!(check_reshape(&f32s(&[2, 6]), &f32s(&[3, 4])).is_ok());
        assert!(check_reshape(&f32s(&[2, 6]), &f32s(&[3, 5])).is_err());
    }

    #[test]
    fn bitcast_convert_changes_minor_dimension_with_width() {
        let narrow = infer_bitcast_convert_shape(&f32s(&[4]), PrimType::U8).unwrap();
        assert_eq!(narrow.dims.to_vec(), [4, 4]);
        let wide = infer_bitcast_convert_shape(&arr(PrimType::U8, &[4, 4]), PrimType::F32).unwrap();
        assert_eq!(wide.dims.to_vec(), [4]);
        assert!(infer_bitcast_convert_shape(&arr(PrimType::U8, &[4, 2]), PrimType::F32).is_err());
    }

    #[test]
    fn unbounded_dims_match_anything() {
        let q = f32s(&[UNBOUNDED_DIM, 4]);
        assert!(dims_match(&q.dims, &[7, 4]));
        assert_eq!(fmt_array(&q), "f32[?,4]");
        let w = test_window("size=2x1").unwrap();
        assert_eq!(dims_of(infer_reduce_window_shape(&q, &w))[0], UNBOUNDED_DIM);
    }

    #[test]
    fn no_overflow_panics() {
        let huge = f32s(&[i64::MAX, 2]);
        assert!(infer_pad_shape(&huge, &test_padding("0_0_2x0_0").unwrap()).is_err());
        let w = WindowDim {
            size: i64::MAX,
            rhs_dilation: 3,
            ..Default::default()
        };
        assert!(window_output_dim(5, &w).is_err());
        let everything = test_slice("{[0:9223372036854775807:9223372036854775807]}").unwrap();
        assert_eq!(
            dims_of(infer_slice_shape(&f32s(&[i64::MAX]), &everything)),
            [1]
        );
        assert!(infer_concat_shape(&[&huge, &huge], 0).is_err());
    }
}
