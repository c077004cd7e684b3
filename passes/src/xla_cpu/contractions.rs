//! The contractions of a program (dots and convolutions), as the per-op
//! oneDNN choice sees them: each distinct *signature*, whether oneDNN takes
//! its form, and its feature row for the op model.
//!
//! The signature is written exactly as `python/hlo_opt/onednn.py` writes it
//! from the StableHLO module, so a decision made here on the HLO text
//! applies there, op by op:
//! - a dot: `bf16[8,256]x[256,512] b[]x[] c[1]x[0]` (operand type, operand
//!   shapes, batch and contracting dimensions);
//! - a convolution: `conv f32[8,56,56,64]x[3,3,64,64] b01f_01io->b01f
//!   s[1,1] p[1_1,1_1] ld[1,1] rd[1,1] g1` (operand type and shapes,
//!   dimension labels, strides, paddings, lhs and rhs dilations, feature
//!   groups; ` bg{n}` and ` rev` are added for batch groups and reversal).
//!
//! The eligibility rule is the same on both sides (a test compares them on
//! the corpus). Both kinds need f32 or bf16 operands with a result of
//! their type. For a dot: one contracting dimension each, the left one its
//! last; no batch dimensions and a rank-2 right operand, or leading batch
//! dimensions on two operands of rank `b+2`; the right operand contracting
//! one of its two matrix dimensions. For a convolution: one feature group
//! and one batch group, no lhs dilation, no reversal, no negative padding.

use hlo::{ArrayShape, InstId, Module, Opcode, PrimType, Shape};

/// The names of a row's columns ([`Contraction::features`]), in order. A
/// convolution enters as the GEMM it implies: batch = feature groups, M =
/// output pixels, N = output features per group, K = window size times
/// input features per group.
pub const OP_FEATURE_NAMES: [&str; 14] = [
    "batch",
    "m",
    "n",
    "k",
    "flops",
    "bytes",
    "intensity",
    "bf16",
    "transpose_b",
    "flattened_lhs",
    "convolution",
    "window",
    "strided",
    "dilated",
];

/// Number of op features.
pub const NUM_OP_FEATURES: usize = OP_FEATURE_NAMES.len();

/// One distinct dot or convolution of a program.
#[derive(Clone, Debug, PartialEq)]
pub struct Contraction {
    pub signature: String,
    /// Whether oneDNN takes this form (the module doc's rule).
    pub eligible: bool,
    /// How many ops of the program have this signature.
    pub count: usize,
    /// log2(1 + x) of batch, M, N, K, flops and bytes moved; flops per byte;
    /// then bf16, transpose_b and a left operand flattened to rank 2 as 0/1;
    /// then a convolution as 0/1, log2(1 + its window size), and whether it
    /// is strided or dilated as 0/1.
    pub features: [f64; NUM_OP_FEATURES],
}

/// `log2(1 + x)`: how sizes enter a model row.
pub(super) fn lg(x: f64) -> f64 {
    (1.0 + x.max(0.0)).log2()
}

/// The array shape of instruction `id` (`None` for tuples and tokens).
pub(super) fn array(m: &Module, id: InstId) -> Option<&ArrayShape> {
    match m.inst_shape(id) {
        Shape::Array(a) => Some(a),
        _ => None,
    }
}

fn join(v: &[i64]) -> String {
    v.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

fn product(a: &ArrayShape, pick: impl Fn(usize) -> bool) -> f64 {
    (0..a.dims.len())
        .filter(|&i| pick(i))
        .map(|i| a.dims[i].max(0) as f64)
        .product()
}

/// An op's row: its GEMM sizes (batch, M, N, K), flops, bytes moved and
/// element type, then the dot-only and convolution-only columns.
struct Row {
    batch: f64,
    m: f64,
    n: f64,
    k: f64,
    flops: f64,
    bytes: f64,
    bf16: bool,
    /// transpose_b, flattened_lhs (0 for a convolution).
    dot: [bool; 2],
    /// convolution, window, strided, dilated (0 for a dot).
    conv: [f64; 4],
}

fn flag(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

impl Row {
    fn features(&self) -> [f64; NUM_OP_FEATURES] {
        [
            lg(self.batch),
            lg(self.m),
            lg(self.n),
            lg(self.k),
            lg(self.flops),
            lg(self.bytes),
            self.flops / self.bytes.max(1.0),
            flag(self.bf16),
            flag(self.dot[0]),
            flag(self.dot[1]),
            self.conv[0],
            self.conv[1],
            self.conv[2],
            self.conv[3],
        ]
    }
}

/// The dot of instruction `id`, or `None` where it is not an array dot.
fn dot_of(m: &Module, id: InstId) -> Option<Contraction> {
    let inst = m.inst(id);
    let dims = inst.dot_dims().ok().flatten().unwrap_or_default();
    let (lhs, rhs) = (
        array(m, *inst.operands.first()?)?,
        array(m, *inst.operands.get(1)?)?,
    );
    let out = array(m, id)?;
    let signature = format!(
        "{}[{}]x[{}] b[{}]x[{}] c[{}]x[{}]",
        lhs.elem,
        join(&lhs.dims),
        join(&rhs.dims),
        join(&dims.lhs_batch),
        join(&dims.rhs_batch),
        join(&dims.lhs_contracting),
        join(&dims.rhs_contracting)
    );
    let (ra, rb, nb) = (lhs.dims.len(), rhs.dims.len(), dims.lhs_batch.len());
    let leading: Vec<i64> = (0..nb as i64).collect();
    let rc = dims.rhs_contracting.first().copied().unwrap_or(-1);
    let transpose_b = rb >= 1 && rc == rb as i64 - 1;
    let eligible = lhs.elem == rhs.elem
        && lhs.elem == out.elem
        && matches!(lhs.elem, PrimType::F32 | PrimType::Bf16)
        && dims.lhs_contracting.len() == 1
        && dims.rhs_contracting.len() == 1
        && dims.lhs_batch.as_slice() == leading.as_slice()
        && dims.rhs_batch.as_slice() == leading.as_slice()
        && ra >= 2
        && dims.lhs_contracting[0] == ra as i64 - 1
        && if nb == 0 {
            rb == 2
        } else {
            ra == nb + 2 && rb == nb + 2
        }
        && (rc == rb as i64 - 2 || transpose_b);
    let in_lhs = |i: usize| dims.lhs_batch.contains(&(i as i64));
    let batch = product(lhs, in_lhs);
    let k = product(lhs, |i| dims.lhs_contracting.contains(&(i as i64)));
    let mm = product(lhs, |i| {
        !in_lhs(i) && !dims.lhs_contracting.contains(&(i as i64))
    });
    let n = product(rhs, |i| {
        !dims.rhs_batch.contains(&(i as i64)) && !dims.rhs_contracting.contains(&(i as i64))
    });
    let flops = 2.0 * batch * mm * n * k;
    let bytes = f64::from(lhs.elem.byte_size()) * batch * (mm * k + k * n + mm * n);
    let row = Row {
        batch,
        m: mm,
        n,
        k,
        flops,
        bytes,
        bf16: lhs.elem == PrimType::Bf16,
        dot: [transpose_b, nb == 0 && ra > 2],
        conv: [0.0; 4],
    };
    Some(Contraction {
        signature,
        eligible,
        count: 1,
        features: row.features(),
    })
}

fn labels(rank: usize, roles: &[(Option<i64>, char)], spatial: &[i64]) -> String {
    let mut out = vec!['?'; rank];
    for &(d, c) in roles {
        if let Some(slot) = d.and_then(|d| out.get_mut(d as usize)) {
            *slot = c;
        }
    }
    for (i, &d) in spatial.iter().enumerate() {
        if let Some(slot) = out.get_mut(d as usize) {
            *slot = char::from_digit(i as u32, 10).unwrap_or('?');
        }
    }
    out.into_iter().collect()
}

/// A convolution's sizes, as the GEMM it implies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct ConvGemm {
    /// Output pixels: the batch times the output's spatial sizes.
    pub pixels: f64,
    /// Window size: the product of the kernel's spatial sizes.
    pub window: f64,
    pub in_per_group: f64,
    pub out_features: f64,
    pub groups: f64,
}

impl ConvGemm {
    /// The GEMM of convolution `id`, or `None` where it has no dimension
    /// labels or is not an array convolution.
    pub fn of(m: &Module, id: InstId) -> Option<ConvGemm> {
        let c = m.inst(id);
        let dn = c.conv_dims().ok().flatten()?;
        let out = array(m, id)?;
        let kernel = array(m, *c.operands.get(1)?)?;
        let at = |a: &ArrayShape, d: Option<i64>| {
            d.and_then(|d| a.dims.get(d as usize))
                .map_or(1.0, |&x| x.max(0) as f64)
        };
        Some(ConvGemm {
            pixels: at(out, dn.output_batch)
                * dn.output_spatial
                    .iter()
                    .map(|&d| at(out, Some(d)))
                    .product::<f64>(),
            window: dn
                .kernel_spatial
                .iter()
                .map(|&d| at(kernel, Some(d)))
                .product(),
            in_per_group: at(kernel, dn.kernel_input_feature),
            out_features: at(out, dn.output_feature),
            groups: c.feature_group_count().unwrap_or(1).max(1) as f64,
        })
    }

    /// Two flops per multiply-add.
    pub fn flops(&self) -> f64 {
        2.0 * self.pixels * self.out_features * self.in_per_group * self.window
    }
}

/// A convolution's signature (the module doc's form).
fn conv_signature(
    lhs: &ArrayShape,
    rhs: &ArrayShape,
    out: &ArrayShape,
    dn: &hlo::dims::ConvDims,
    window: &[hlo::WindowDim],
    groups: i64,
    batch_groups: i64,
) -> String {
    let dims_of =
        |f: fn(&hlo::WindowDim) -> String| window.iter().map(f).collect::<Vec<_>>().join(",");
    let mut signature = format!(
        "conv {}[{}]x[{}] {}_{}->{} s[{}] p[{}] ld[{}] rd[{}] g{groups}",
        lhs.elem,
        join(&lhs.dims),
        join(&rhs.dims),
        labels(
            lhs.dims.len(),
            &[(dn.input_batch, 'b'), (dn.input_feature, 'f')],
            &dn.input_spatial
        ),
        labels(
            rhs.dims.len(),
            &[
                (dn.kernel_input_feature, 'i'),
                (dn.kernel_output_feature, 'o')
            ],
            &dn.kernel_spatial
        ),
        labels(
            out.dims.len(),
            &[(dn.output_batch, 'b'), (dn.output_feature, 'f')],
            &dn.output_spatial
        ),
        dims_of(|w| w.stride.to_string()),
        dims_of(|w| format!("{}_{}", w.pad_lo, w.pad_hi)),
        dims_of(|w| w.lhs_dilation.to_string()),
        dims_of(|w| w.rhs_dilation.to_string()),
    );
    if batch_groups != 1 {
        signature += &format!(" bg{batch_groups}");
    }
    if window.iter().any(|w| w.reversal) {
        signature += " rev";
    }
    signature
}

/// The convolution of instruction `id`, or `None` where it is not an array
/// convolution with dimension labels and a window.
fn conv_of(m: &Module, id: InstId) -> Option<Contraction> {
    let inst = m.inst(id);
    let dn = inst.conv_dims().ok().flatten()?;
    let window = inst.window().ok().flatten().unwrap_or_default();
    let (lhs, rhs) = (
        array(m, *inst.operands.first()?)?,
        array(m, *inst.operands.get(1)?)?,
    );
    let out = array(m, id)?;
    let groups = inst.feature_group_count().ok()?;
    let batch_groups = inst.batch_group_count().ok()?;
    let reversed = window.iter().any(|w| w.reversal);
    let signature = conv_signature(lhs, rhs, out, &dn, &window, groups, batch_groups);
    let eligible = lhs.elem == rhs.elem
        && lhs.elem == out.elem
        && matches!(lhs.elem, PrimType::F32 | PrimType::Bf16)
        && !dn.has_unknown
        && groups == 1
        && batch_groups == 1
        && !reversed
        && window.len() == dn.input_spatial.len()
        && window
            .iter()
            .all(|w| w.lhs_dilation == 1 && w.pad_lo >= 0 && w.pad_hi >= 0 && w.stride >= 1);
    let gemm = ConvGemm::of(m, id)?;
    let (pixels, win, g) = (gemm.pixels, gemm.window, gemm.groups);
    let (n, k) = (gemm.out_features / g, win * gemm.in_per_group);
    let flops = gemm.flops();
    let elems = |a: &ArrayShape| a.dims.iter().map(|&d| d.max(0) as f64).product::<f64>();
    let bytes = f64::from(lhs.elem.byte_size()) * (elems(lhs) + elems(rhs) + elems(out));
    let row = Row {
        batch: g,
        m: pixels,
        n,
        k,
        flops,
        bytes,
        bf16: lhs.elem == PrimType::Bf16,
        dot: [false, false],
        conv: [
            1.0,
            lg(win),
            flag(window.iter().any(|w| w.stride > 1)),
            flag(window.iter().any(|w| w.rhs_dilation > 1)),
        ],
    };
    Some(Contraction {
        signature,
        eligible,
        count: 1,
        features: row.features(),
    })
}

/// The program's distinct dots and convolutions, in the order of their
/// first occurrence.
pub fn contractions(m: &Module) -> Vec<Contraction> {
    let mut out: Vec<Contraction> = Vec::new();
    for id in m.all_instructions() {
        let found = match m.inst(id).opcode {
            Opcode::Dot => dot_of(m, id),
            Opcode::Convolution => conv_of(m, id),
            _ => continue,
        };
        let Some(d) = found else { continue };
        match out.iter_mut().find(|o| o.signature == d.signature) {
            Some(o) => o.count += 1,
            None => out.push(d),
        }
    }
    out
}
