//! The dots of a program, as the per-op oneDNN choice sees them: each
//! distinct dot *signature* (operand type, operand shapes, batch and
//! contracting dimensions), whether oneDNN's matmul takes its form, and
//! its feature row for the dot model.
//!
//! The signature is written exactly as `python/hlo_opt/onednn.py` writes it
//! from the StableHLO module (`bf16[8,256]x[256,512] b[]x[] c[1]x[0]`): a
//! decision made here on the HLO text applies there, op by op. The
//! eligibility rule is the same on both sides (a test compares them on the
//! corpus): f32 or bf16, result of the operands' type, one contracting
//! dimension each, the left one its last; no batch dimensions and a rank-2
//! right operand, or leading batch dimensions on two operands of rank
//! `b+2`; the right operand contracting one of its two matrix dimensions.

use hlo::{ArrayShape, InstId, Module, Opcode, PrimType, Shape};

/// The names of a dot row's columns ([`Dot::features`]), in order.
pub const DOT_FEATURE_NAMES: [&str; 10] = [
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
];

/// Number of dot features.
pub const NUM_DOT_FEATURES: usize = DOT_FEATURE_NAMES.len();

/// One distinct dot of a program.
#[derive(Clone, Debug, PartialEq)]
pub struct Dot {
    pub signature: String,
    /// Whether oneDNN's matmul takes this form (the module doc's rule).
    pub eligible: bool,
    /// How many dots of the program have this signature.
    pub count: usize,
    /// log2(1 + x) of batch, M, N, K, flops and bytes moved; flops per byte;
    /// then bf16, transpose_b and a left operand flattened to rank 2 as 0/1.
    pub features: [f64; NUM_DOT_FEATURES],
}

fn lg(x: f64) -> f64 {
    (1.0 + x.max(0.0)).log2()
}

fn array(m: &Module, id: InstId) -> Option<&ArrayShape> {
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

/// The dot of instruction `id`, or `None` where it is not an array dot.
fn dot_of(m: &Module, id: InstId) -> Option<Dot> {
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
    let flag = |b: bool| if b { 1.0 } else { 0.0 };
    Some(Dot {
        signature,
        eligible,
        count: 1,
        features: [
            lg(batch),
            lg(mm),
            lg(n),
            lg(k),
            lg(flops),
            lg(bytes),
            flops / bytes.max(1.0),
            flag(lhs.elem == PrimType::Bf16),
            flag(transpose_b),
            flag(nb == 0 && ra > 2),
        ],
    })
}

/// The program's distinct dots, in the order of their first occurrence.
pub fn dots(m: &Module) -> Vec<Dot> {
    let mut out: Vec<Dot> = Vec::new();
    for id in m.all_instructions() {
        if m.inst(id).opcode != Opcode::Dot {
            continue;
        }
        let Some(d) = dot_of(m, id) else { continue };
        match out.iter_mut().find(|o| o.signature == d.signature) {
            Some(o) => o.count += 1,
            None => out.push(d),
        }
    }
    out
}
