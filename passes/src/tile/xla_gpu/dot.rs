//! The dot of a GEMM fusion, read once ([`DotProblem::of_fusion`]) for
//! every chooser: the size heuristic and the kNN model key on its five GEMM
//! columns ([`DotProblem::gemm_columns`]), XLA's search space and the ranker
//! on all of it ([`super::search_space::dot_problem`]), and `hlo-cost
//! gpu-tiles` writes the columns as `gemm_shape`.

use hlo::{InstId, Module, Opcode, Shape};

/// A GEMM fusion's dot (the first `dot` or `scaled-dot` of its called
/// computation): batch (the product of the lhs batch dimensions), M (lhs
/// non-contracting), N (rhs non-contracting), K (contracting), the element
/// widths of each operand and of the result, whether an expensive
/// elementwise op (exp, tanh, rsqrt, ...) feeds either operand inside the
/// fusion, and whether it is a scaled dot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DotProblem {
    pub batch: i64,
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub lhs_bits: i64,
    pub rhs_bits: i64,
    pub result_bits: i64,
    pub lhs_expensive: bool,
    pub rhs_expensive: bool,
    pub scaled: bool,
}

/// Ops that make recomputing an operand tile costly (XLA's list).
fn is_expensive(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::Atan2
            | Opcode::Cosine
            | Opcode::Exponential
            | Opcode::ExponentialMinusOne
            | Opcode::Log
            | Opcode::LogPlusOne
            | Opcode::Logistic
            | Opcode::Power
            | Opcode::Rsqrt
            | Opcode::Sine
            | Opcode::Sqrt
            | Opcode::Tan
            | Opcode::Tanh
    )
}

/// Whether an expensive op is `start` or one of its operands, transitively.
fn reaches_expensive(m: &Module, start: InstId) -> bool {
    let mut seen = std::collections::BTreeSet::new();
    let mut stack = vec![start];
    while let Some(i) = stack.pop() {
        if !seen.insert(i) {
            continue;
        }
        if is_expensive(m.inst(i).opcode) {
            return true;
        }
        stack.extend(m.inst(i).operands.iter().copied());
    }
    false
}

impl DotProblem {
    /// The dot of fusion `id`; `Err` when the fusion calls no computation,
    /// holds no dot, or the dot's operands, dimensions or sizes cannot be
    /// read.
    pub fn of_fusion(m: &Module, id: InstId) -> Result<DotProblem, String> {
        let callee = m
            .inst(id)
            .called_computations()
            .next()
            .ok_or("the fusion calls no computation")?;
        let dot = m
            .comp(callee)
            .order
            .iter()
            .copied()
            .find(|&i| matches!(m.inst(i).opcode, Opcode::Dot | Opcode::ScaledDot))
            .ok_or("its computation holds no dot")?;
        let d = m.inst(dot);
        let dims = |k: &str| -> Result<Vec<usize>, String> {
            d.int_list_attr(k)
                .map_err(|e| e.to_string())?
                .unwrap_or_default()
                .into_iter()
                .map(|x| usize::try_from(x).map_err(|_| format!("{k}: negative dimension")))
                .collect()
        };
        let operand = |k: usize| -> Result<&hlo::ArrayShape, String> {
            let op = *d
                .operands
                .get(k)
                .ok_or("a dot with fewer than two operands")?;
            match m.shape(m.inst(op).shape) {
                Shape::Array(a) => Ok(a),
                _ => Err("a dot operand that is not an array".into()),
            }
        };
        let (lhs, rhs) = (operand(0)?, operand(1)?);
        let (lb, lc, rb, rc) = (
            dims("lhs_batch_dims")?,
            dims("lhs_contracting_dims")?,
            dims("rhs_batch_dims")?,
            dims("rhs_contracting_dims")?,
        );
        let prod = |a: &hlo::ArrayShape, pick: &dyn Fn(usize) -> bool| -> Result<i64, String> {
            let mut p = 1i64;
            for (i, &x) in a.dims.iter().enumerate() {
                if pick(i) {
                    p = p.checked_mul(x).ok_or("dot sizes overflow")?;
                }
            }
            Ok(p)
        };
        for &i in lb.iter().chain(&lc) {
            if i >= lhs.dims.len() {
                return Err("a dot dimension beyond the lhs rank".into());
            }
        }
        for &i in rb.iter().chain(&rc) {
            if i >= rhs.dims.len() {
                return Err("a dot dimension beyond the rhs rank".into());
            }
        }
        let result_bits = match m.shape(d.shape) {
            Shape::Array(a) => i64::from(a.elem.bit_width()),
            _ => return Err(format!("`{}` is not an array", d.name)),
        };
        Ok(DotProblem {
            batch: prod(lhs, &|i| lb.contains(&i))?,
            m: prod(lhs, &|i| !lb.contains(&i) && !lc.contains(&i))?,
            n: prod(rhs, &|i| !rb.contains(&i) && !rc.contains(&i))?,
            k: prod(lhs, &|i| lc.contains(&i))?,
            lhs_bits: i64::from(lhs.elem.bit_width()),
            rhs_bits: i64::from(rhs.elem.bit_width()),
            result_bits,
            lhs_expensive: reaches_expensive(m, d.operands[0]),
            rhs_expensive: reaches_expensive(m, d.operands[1]),
            scaled: d.opcode == Opcode::ScaledDot,
        })
    }

    /// The wider operand's element width in bits.
    pub fn widest_operand_bits(&self) -> i64 {
        self.lhs_bits.max(self.rhs_bits)
    }

    /// The five GEMM columns the size heuristic and the kNN model key on,
    /// as the model's records and the GPU tile files hold them: batch, M,
    /// N, K, the widest operand's bits.
    pub fn gemm_columns(&self) -> [i64; 5] {
        [
            self.batch,
            self.m,
            self.n,
            self.k,
            self.widest_operand_bits(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fusion(text: &str) -> (Module, InstId) {
        let m = hlo::parse_module(text).expect("test module");
        let id = m
            .computations()
            .flat_map(|c| m.comp(c).order.clone())
            .find(|&i| m.inst(i).opcode == Opcode::Fusion)
            .expect("a fusion");
        (m, id)
    }

    /// A batched dot of an s8 lhs and a bf16 rhs fed by exp: the widths
    /// apart, the rhs expensive; a scaled dot is read and marked.
    #[test]
    fn reads_sizes_widths_and_expensive_operands() {
        let (m, id) = fusion(
            "HloModule t

%f (p0: s8[4,100,64], p1: bf16[4,64,300]) -> f32[4,100,300] {
  %p0 = s8[4,100,64]{2,1,0} parameter(0)
  %p1 = bf16[4,64,300]{2,1,0} parameter(1)
  %e = bf16[4,64,300]{2,1,0} exponential(%p1)
  ROOT %d = f32[4,100,300]{2,1,0} dot(%p0, %e), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}

ENTRY %main (a: s8[4,100,64], b: bf16[4,64,300]) -> f32[4,100,300] {
  %a = s8[4,100,64]{2,1,0} parameter(0)
  %b = bf16[4,64,300]{2,1,0} parameter(1)
  ROOT %r = f32[4,100,300]{2,1,0} fusion(%a, %b), kind=kCustom, calls=%f
}
",
        );
        let p = DotProblem::of_fusion(&m, id).expect("dot");
        assert_eq!(
            p,
            DotProblem {
                batch: 4,
                m: 100,
                n: 300,
                k: 64,
                lhs_bits: 8,
                rhs_bits: 16,
                result_bits: 32,
                lhs_expensive: false,
                rhs_expensive: true,
                scaled: false,
            }
        );
        assert_eq!(p.gemm_columns(), [4, 100, 300, 64, 16]);

        let (m, id) = fusion(
            "HloModule t

%f (p0: f8e4m3fn[128,256], p1: f8e4m3fn[256,64], s0: f8e8m0fnu[128,8], s1: f8e8m0fnu[8,64]) -> bf16[128,64] {
  %p0 = f8e4m3fn[128,256]{1,0} parameter(0)
  %p1 = f8e4m3fn[256,64]{1,0} parameter(1)
  %s0 = f8e8m0fnu[128,8]{1,0} parameter(2)
  %s1 = f8e8m0fnu[8,64]{1,0} parameter(3)
  ROOT %d = bf16[128,64]{1,0} scaled-dot(%p0, %p1, %s0, %s1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY %main (a: f8e4m3fn[128,256], b: f8e4m3fn[256,64], c: f8e8m0fnu[128,8], e: f8e8m0fnu[8,64]) -> bf16[128,64] {
  %a = f8e4m3fn[128,256]{1,0} parameter(0)
  %b = f8e4m3fn[256,64]{1,0} parameter(1)
  %c = f8e8m0fnu[128,8]{1,0} parameter(2)
  %e = f8e8m0fnu[8,64]{1,0} parameter(3)
  ROOT %r = bf16[128,64]{1,0} fusion(%a, %b, %c, %e), kind=kCustom, calls=%f
}
",
        );
        let p = DotProblem::of_fusion(&m, id).expect("scaled dot");
        assert!(p.scaled);
        assert_eq!(p.gemm_columns(), [1, 128, 64, 256, 8]);
        // XLA's search space (the ranker's) is not modelled for scaled dots.
        let e = super::super::search_space::dot_problem(&m, id).expect_err("scaled dot");
        assert!(e.contains("scaled dot"), "{e}");
    }

    #[test]
    fn a_fusion_without_a_dot_is_an_error() {
        let (m, id) = fusion(
            "HloModule t

%f (p0: f32[8]) -> f32[8] {
  %p0 = f32[8]{0} parameter(0)
  ROOT %n = f32[8]{0} negate(%p0)
}

ENTRY %main (a: f32[8]) -> f32[8] {
  %a = f32[8]{0} parameter(0)
  ROOT %r = f32[8]{0} fusion(%a), kind=kLoop, calls=%f
}
",
        );
        assert_eq!(
            DotProblem::of_fusion(&m, id),
            Err("its computation holds no dot".to_string())
        );
    }
}
