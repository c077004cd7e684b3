//! CHLO ops that XLA's conversion expands into several HLO instructions
//! (the ones it keeps whole, `erf` and `top_k`, are rules of `ops`).
//! Each writes the instructions XLA's expansion writes, so the module
//! reads as XLA's own conversion of it; an element type the expansion here
//! does not cover is an error (the caller then reads jax's HLO instead).

use super::lower::{bind_groups, Comp, Emitter, Val};
use super::syntax::{Op, Ty};
use crate::Result;

/// Coefficients of the two polynomials of `erf_inv` (Giles, "Approximating
/// the erfinv function", single precision), highest degree first: for
/// w < 5 in w - 2.5, else in sqrt(w) - 3, where w = -log(1 - x²).
const ERF_INV_F32: [(&str, &str); 9] = [
    ("2.81022636e-08", "-0.000200214257"),
    ("3.43273939e-07", "0.000100950558"),
    ("-3.5233877e-06", "0.00134934322"),
    ("-4.39150654e-06", "-0.00367342844"),
    ("0.00021858087", "0.00573950773"),
    ("-0.00125372503", "-0.0076224613"),
    ("-0.00417768164", "0.00943887047"),
    ("0.246640727", "1.00167406"),
    ("1.50140941", "2.83297682"),
];

impl<'a> Emitter<'a> {
    /// `chlo.erf_inv` (`jax.random.normal` draws through it) in f32, and
    /// bf16 and f16 through f32: the polynomial in Horner form, its
    /// coefficients selected per element by the branch, times x; ±1 give
    /// ±inf.
    pub fn erf_inv(&mut self, c: &mut Comp<'a>, op: &Op<'a>, args: &[Val<'a>]) -> Result<()> {
        let x = args
            .first()
            .ok_or_else(|| self.err(op.at, "erf_inv needs an operand"))?;
        let Ty::Tensor(dims, elem) = &x.ty else {
            return Err(self.err(op.at, "erf_inv of a non-tensor"));
        };
        let narrow = match *elem {
            "f32" => false,
            "bf16" | "f16" => true,
            e => return Err(self.err(op.at, format!("erf_inv of {e} is not expanded here"))),
        };
        let f = Ty::Tensor(dims.clone(), "f32");
        let pred = Ty::Tensor(dims.clone(), "i1");
        let x = if narrow {
            self.push(c, &f, "convert", &[x], "", true)?
        } else {
            x.clone()
        };
        let ops = |e: &mut Self, c: &mut Comp<'a>, opcode: &str, vs: &[&Val<'a>]| {
            e.push(c, &f, opcode, vs, "", true)
        };
        let abs = ops(self, c, "abs", &[&x])?;
        let one = self.splat_constant(c, &f, "1")?;
        let is_one = self.push(c, &pred, "compare", &[&abs, &one], "direction=EQ", true)?;
        let inf = self.splat_constant(c, &f, "inf")?;
        let at_one = ops(self, c, "multiply", &[&x, &inf])?;
        let minus_x = ops(self, c, "negate", &[&x])?;
        let product = ops(self, c, "multiply", &[&x, &minus_x])?;
        let log = ops(self, c, "log-plus-one", &[&product])?;
        let w = ops(self, c, "negate", &[&log])?;
        let five = self.splat_constant(c, &f, "5")?;
        let central = self.push(c, &pred, "compare", &[&w, &five], "direction=LT", true)?;
        let pick = |e: &mut Self, c: &mut Comp<'a>, (lo, hi): (&str, &str)| -> Result<Val<'a>> {
            let a = e.splat_constant(c, &f, lo)?;
            let b = e.splat_constant(c, &f, hi)?;
            e.push(c, &f, "select", &[&central, &a, &b], "", true)
        };
        let two_and_a_half = self.splat_constant(c, &f, "2.5")?;
        let near = ops(self, c, "subtract", &[&w, &two_and_a_half])?;
        let root = ops(self, c, "sqrt", &[&w])?;
        let three = self.splat_constant(c, &f, "3")?;
        let far = ops(self, c, "subtract", &[&root, &three])?;
        let t = self.push(c, &f, "select", &[&central, &near, &far], "", true)?;
        let mut p = pick(self, c, ERF_INV_F32[0])?;
        for &pair in &ERF_INV_F32[1..] {
            let k = pick(self, c, pair)?;
            let scaled = ops(self, c, "multiply", &[&p, &t])?;
            p = ops(self, c, "add", &[&k, &scaled])?;
        }
        let y = ops(self, c, "multiply", &[&p, &x])?;
        let mut out = self.push(c, &f, "select", &[&is_one, &at_one, &y], "", true)?;
        if narrow {
            let back = op
                .outputs
                .first()
                .cloned()
                .unwrap_or_else(|| args[0].ty.clone());
            out = self.push(c, &back, "convert", &[&out], "", true)?;
        }
        bind_groups(c, op, vec![out]);
        Ok(())
    }
}
