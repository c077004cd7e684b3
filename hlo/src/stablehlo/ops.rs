//! One rule per StableHLO op: which HLO instructions XLA's conversion
//! writes for it. Ops that map one to one with the same operands are a
//! table ([`simple`]); the rest decode their attributes here.

use super::attr;
use super::lower::{bind_groups, Comp, Emitter, Val};
use super::syntax::{Dims, Op, Ty};
use crate::Result;

/// StableHLO ops that are one HLO instruction with the same operands and no
/// attributes: MLIR name (without `stablehlo.`) -> HLO opcode.
fn simple(name: &str) -> Option<&'static str> {
    Some(match name {
        "add" => "add",
        "subtract" => "subtract",
        "multiply" => "multiply",
        "divide" => "divide",
        "remainder" => "remainder",
        "maximum" => "maximum",
        "minimum" => "minimum",
        "power" => "power",
        "atan2" => "atan2",
        "and" => "and",
        "or" => "or",
        "xor" => "xor",
        "not" => "not",
        "shift_left" => "shift-left",
        "shift_right_logical" => "shift-right-logical",
        "shift_right_arithmetic" => "shift-right-arithmetic",
        "abs" => "abs",
        "negate" => "negate",
        "sign" => "sign",
        "exponential" => "exponential",
        "exponential_minus_one" => "exponential-minus-one",
        "log" => "log",
        "log_plus_one" => "log-plus-one",
        "logistic" => "logistic",
        "tanh" => "tanh",
        "rsqrt" => "rsqrt",
        "sqrt" => "sqrt",
        "cbrt" => "cbrt",
        "sine" => "sine",
        "cosine" => "cosine",
        "tan" => "tan",
        "floor" => "floor",
        "ceil" => "ceil",
        "round_nearest_afz" => "round-nearest-afz",
        "round_nearest_even" => "round-nearest-even",
        "is_finite" => "is-finite",
        "popcnt" => "popcnt",
        "count_leading_zeros" => "count-leading-zeros",
        "select" => "select",
        "clamp" => "clamp",
        "convert" => "convert",
        "bitcast_convert" => "bitcast-convert",
        "reshape" => "reshape",
        "dynamic_update_slice" => "dynamic-update-slice",
        "real" => "real",
        "imag" => "imag",
        "complex" => "complex",
        _ => return None,
    })
}

impl<'a> Emitter<'a> {
    /// Writes the HLO of one op of computation `c`.
    pub fn op(&mut self, c: &mut Comp<'a>, op: &Op<'a>) -> Result<()> {
        let args = op
            .operands
            .iter()
            .map(|u| self.get(c, u, op.at))
            .collect::<Result<Vec<_>>>()?;
        let short = op.name.strip_prefix("stablehlo.").unwrap_or(op.name);
        if let Some(opcode) = simple(short) {
            let out = self.out_ty(op)?;
            let v = match fold(short, c, &args, &out) {
                Some(Folded::Operand(i)) => args[i].clone(),
                Some(Folded::Splat(s)) => self.splat_constant(c, &out, &s)?,
                None => return self.one(c, op, &args, opcode, String::new()),
            };
            bind_groups(c, op, vec![v]);
            return Ok(());
        }
        match op.name {
            "func.call" => self.call(c, op, &args),
            "chlo.square" => {
                let x = args
                    .first()
                    .ok_or_else(|| self.err(op.at, "square needs an operand"))?;
                self.one(c, op, &[x.clone(), x.clone()], "multiply", String::new())
            }
            "stablehlo.constant" => self.constant(c, op),
            "stablehlo.broadcast_in_dim" => self.broadcast_in_dim(c, op, &args),
            "stablehlo.while" => self.while_loop(c, op, &args),
            "stablehlo.optimization_barrier" => self.opt_barrier(c, op, &args),
            "stablehlo.case" | "stablehlo.if" => self.conditional(c, op, &args),
            "chlo.erf" => self.one(c, op, &args, "erf", String::new()),
            "chlo.erf_inv" => self.erf_inv(c, op, &args),
            "chlo.top_k" => {
                let k = self.int(op, "k")?;
                self.multi(c, op, &args, "topk", format!("k={k}, largest=true"), false)
            }
            // Shardy's constraint is XLA's `Sharding` custom call (its
            // sharding is not modelled: one device).
            "sdy.sharding_constraint" => self.multi(
                c,
                op,
                &args,
                "custom-call",
                "custom_call_target=\"Sharding\"".to_string(),
                false,
            ),
            "sdy.manual_computation" => self.manual_computation(c, op, &args),
            _ => self.with_attrs(c, op, &args, short),
        }
    }

    /// Shardy's `manual_computation` (`shard_map`) as XLA's exporter writes
    /// it: the operands to their local shapes (the
    /// `xla.sdy.GlobalToLocalShape` custom call), a `call` of the body, and
    /// back (`xla.sdy.LocalToGlobalShape`); several values travel as a tuple
    /// read back through `get-tuple-element`s.
    fn manual_computation(
        &mut self,
        c: &mut Comp<'a>,
        op: &Op<'a>,
        args: &[Val<'a>],
    ) -> Result<()> {
        let (block, ret) = self.region_block(op, 0)?;
        let one_or_tuple = |tys: Vec<Ty<'a>>| match <[Ty<'a>; 1]>::try_from(tys) {
            Ok([t]) => t,
            Err(tys) => Ty::Tuple(tys),
        };
        let local_in = one_or_tuple(block.args.iter().map(|(_, t)| t.clone()).collect());
        let local_out = one_or_tuple(ret.inputs.clone());
        let body = self.computation("xla.sdy.manual_computation_body", block, false, false)?;
        // One instruction over `vals` (never merged with another: the
        // custom calls have side effects).
        let step = |em: &mut Self,
                    c: &mut Comp<'a>,
                    ty: &Ty<'a>,
                    opcode: &str,
                    vals: &[Val<'a>],
                    attrs: &str| {
            let refs: Vec<&Val<'a>> = vals.iter().collect();
            em.push(c, ty, opcode, &refs, attrs, false)
        };
        let shape = |target: &str| {
            format!("custom_call_target=\"xla.sdy.{target}\", custom_call_has_side_effect=true")
        };
        let to_local = step(
            self,
            c,
            &local_in,
            "custom-call",
            args,
            &shape("GlobalToLocalShape"),
        )?;
        let locals = self.unpack(c, &to_local)?;
        let called = step(
            self,
            c,
            &local_out,
            "call",
            &locals,
            &format!("to_apply={body}"),
        )?;
        let outs = self.unpack(c, &called)?;
        let global = self.out_ty(op)?;
        let v = step(
            self,
            c,
            &global,
            "custom-call",
            &outs,
            &shape("LocalToGlobalShape"),
        )?;
        self.bind_results(c, op, v, op.outputs.len() > 1)
    }

    fn out_ty(&self, op: &Op<'a>) -> Result<Ty<'a>> {
        match op.outputs.as_slice() {
            [t] => Ok(t.clone()),
            ts => Ok(Ty::Tuple(ts.to_vec())),
        }
    }

    /// One instruction for a single-result op (no CSE for side effects).
    pub fn one(
        &mut self,
        c: &mut Comp<'a>,
        op: &Op<'a>,
        args: &[Val<'a>],
        opcode: &str,
        attrs: String,
    ) -> Result<()> {
        let ty = self.out_ty(op)?;
        if opcode == "convert" || opcode == "reshape" {
            if let Some(x) = args.first().filter(|x| x.ty == ty) {
                bind_groups(c, op, vec![x.clone()]);
                return Ok(());
            }
        }
        let refs: Vec<&Val<'a>> = args.iter().collect();
        let v = self.push(c, &ty, opcode, &refs, &attrs, false)?;
        bind_groups(c, op, vec![v]);
        Ok(())
    }

    /// An op with one or more results: several results are a tuple plus
    /// `get-tuple-element`s.
    pub(super) fn multi(
        &mut self,
        c: &mut Comp<'a>,
        op: &Op<'a>,
        args: &[Val<'a>],
        opcode: &str,
        attrs: String,
        cse: bool,
    ) -> Result<()> {
        let ty = self.out_ty(op)?;
        let refs: Vec<&Val<'a>> = args.iter().collect();
        let v = self.push(c, &ty, opcode, &refs, &attrs, cse)?;
        self.bind_results(c, op, v, op.outputs.len() > 1)
    }

    /// `opt-barrier` takes one operand: XLA's exporter tuples several and
    /// reads each result back through a `get-tuple-element`.
    fn opt_barrier(&mut self, c: &mut Comp<'a>, op: &Op<'a>, args: &[Val<'a>]) -> Result<()> {
        if args.len() == 1 {
            return self.multi(c, op, args, "opt-barrier", String::new(), false);
        }
        let ty = Ty::Tuple(args.iter().map(|a| a.ty.clone()).collect());
        let refs: Vec<&Val<'a>> = args.iter().collect();
        let t = self.push(c, &ty, "tuple", &refs, "", false)?;
        let v = self.push(c, &ty, "opt-barrier", &[&t], "", false)?;
        self.bind_results(c, op, v, true)
    }

    fn call(&mut self, c: &mut Comp<'a>, op: &Op<'a>, args: &[Val<'a>]) -> Result<()> {
        let callee = op
            .attr("callee")
            .map(|s| s.trim_start_matches('@'))
            .ok_or_else(|| self.err(op.at, "func.call needs `callee`"))?;
        let comp = self.function(callee, op.at)?;
        self.multi(c, op, args, "call", format!("to_apply={comp}"), false)
    }

    /// A constant. MLIR's folder uniques constants per region; XLA's
    /// exporter writes a splat of rank > 0 as a scalar constant and a
    /// broadcast.
    fn constant(&mut self, c: &mut Comp<'a>, op: &Op<'a>) -> Result<()> {
        let ty = self.out_ty(op)?;
        let Ty::Tensor(dims, elem) = &ty else {
            return Err(self.err(op.at, "constant of a non-tensor type"));
        };
        let n: i64 = dims.iter().product();
        let value = op
            .attr("value")
            .ok_or_else(|| self.err(op.at, "constant needs `value`"))?;
        if value.starts_with("dense_resource<") {
            // Elements MLIR did not print (`large_elements_limit`, as the
            // XLA:CPU decision prints jax's module: only shapes count
            // there): XLA's elided literal. Never shared with another
            // constant, whose elements may differ.
            let v = self.fresh_constant(c, &ty, "{...}")?;
            bind_groups(c, op, vec![v]);
            return Ok(());
        }
        let elems = attr::dense_elements(value, elem, n.max(0) as usize)
            .ok_or_else(|| self.err(op.at, format!("cannot read constant {value}")))?;
        let v = match elems.first() {
            Some(first) if elems.iter().all(|e| e == first) => {
                self.splat_constant(c, &ty, first)?
            }
            _ => {
                let mut text = String::with_capacity(8 * elems.len() + 2 * dims.len());
                nest(&mut text, &elems, dims);
                self.literal(c, &ty, text)?
            }
        };
        bind_groups(c, op, vec![v]);
        Ok(())
    }

    /// The constant of type `ty` whose elements are all `scalar`.
    pub(super) fn splat_constant(
        &mut self,
        c: &mut Comp<'a>,
        ty: &Ty<'a>,
        scalar: &str,
    ) -> Result<Val<'a>> {
        let Ty::Tensor(dims, elem) = ty else {
            return Err(self.err(0, "constant of a non-tensor type"));
        };
        let key = (format!("{ty:?}"), scalar.to_string());
        if let Some(v) = c.consts.get(&key) {
            return Ok(v.clone());
        }
        let v = if dims.is_empty() {
            self.literal(c, ty, scalar.to_string())?
        } else {
            // The exporter's own scalar, not shared with an MLIR one.
            let s = self.fresh_constant(c, &Ty::Tensor(Dims::new(), elem), scalar)?;
            self.push(c, ty, "broadcast", &[&s], "dimensions={}", false)?
        };
        c.splat.insert(v.name.clone(), scalar.to_string());
        c.consts.insert(key, v.clone());
        Ok(v)
    }

    fn literal(&mut self, c: &mut Comp<'a>, ty: &Ty<'a>, literal: String) -> Result<Val<'a>> {
        let key = (format!("{ty:?}"), literal.clone());
        if let Some(v) = c.consts.get(&key) {
            return Ok(v.clone());
        }
        let v = self.fresh_constant(c, ty, &literal)?;
        c.consts.insert(key, v.clone());
        Ok(v)
    }

    /// A new `constant(literal)` of type `ty`, shared with no other.
    pub(super) fn fresh_constant(
        &mut self,
        c: &mut Comp<'a>,
        ty: &Ty<'a>,
        literal: &str,
    ) -> Result<Val<'a>> {
        let v = self.push(c, ty, "constant", &[], "", false)?;
        if let Some(l) = c.lines.last_mut() {
            l.body = l
                .body
                .replacen("constant()", &format!("constant({literal})"), 1);
        }
        Ok(v)
    }

    /// XLA writes `broadcast_in_dim` as a reshape when it only adds
    /// dimensions of size 1 in order, else as XlaBuilder's BroadcastInDim: a
    /// broadcast to the operand's sizes in place, then (when a dimension of
    /// size 1 grows) a reshape dropping those dimensions and a broadcast.
    fn broadcast_in_dim(&mut self, c: &mut Comp<'a>, op: &Op<'a>, args: &[Val<'a>]) -> Result<()> {
        let dims = self.attr_ints(op, "broadcast_dimensions")?;
        let out = self.out_ty(op)?;
        let (Some(x), Ty::Tensor(out_dims, elem)) = (args.first(), &out) else {
            return Err(self.err(op.at, "broadcast_in_dim needs a tensor operand and result"));
        };
        let Ty::Tensor(in_dims, _) = &x.ty else {
            return Err(self.err(op.at, "broadcast_in_dim of a non-tensor"));
        };
        if let Some(scalar) = c.splat.get(&x.name).cloned() {
            let v = self.splat_constant(c, &out, &scalar)?;
            bind_groups(c, op, vec![v]);
            return Ok(());
        }
        let in_order = dims.windows(2).all(|w| w[0] < w[1]);
        let count = |d: &[i64]| d.iter().product::<i64>();
        if in_order && in_dims == out_dims {
            bind_groups(c, op, vec![x.clone()]);
            return Ok(());
        }
        if in_order && count(in_dims) == count(out_dims) {
            return self.one(c, op, args, "reshape", String::new());
        }
        let mut mid = out_dims.clone();
        for (i, &d) in dims.iter().enumerate() {
            let (Some(slot), Some(&size)) = (mid.get_mut(d as usize), in_dims.get(i)) else {
                return Err(self.err(op.at, "broadcast_dimensions out of range"));
            };
            *slot = size;
        }
        let mid_ty = Ty::Tensor(mid.clone(), elem);
        let attrs = format!("dimensions={{{}}}", attr::join(&dims));
        let b = self.push(c, &mid_ty, "broadcast", &[x], &attrs, false)?;
        if &mid == out_dims {
            bind_groups(c, op, vec![b]);
            return Ok(());
        }
        let keep: Vec<i64> = (0..mid.len() as i64)
            .filter(|&i| mid[i as usize] == out_dims[i as usize])
            .collect();
        let kept: Dims = keep.iter().map(|&i| mid[i as usize]).collect();
        let r = self.push(c, &Ty::Tensor(kept, elem), "reshape", &[&b], "", false)?;
        let attrs = format!("dimensions={{{}}}", attr::join(&keep));
        let v = self.push(c, &out, "broadcast", &[&r], &attrs, false)?;
        bind_groups(c, op, vec![v]);
        Ok(())
    }
}

/// Writes a literal's elements nested by `dims` (`{{1, 2}, {3, 4}}`; a
/// scalar bare).
fn nest(out: &mut String, elems: &[attr::Elem], dims: &[i64]) {
    let Some((&d, rest)) = dims.split_first() else {
        out.push_str(elems.first().map_or("", |e| e));
        return;
    };
    let inner = rest.iter().product::<i64>().max(0) as usize;
    out.push('{');
    for i in 0..d.max(0) as usize {
        if i > 0 {
            out.push_str(", ");
        }
        let a = i * inner;
        nest(out, elems.get(a..a + inner).unwrap_or(&[]), rest);
    }
    out.push('}');
}

/// What MLIR's folder makes of a simple op: its operand (`x * 1`, `x + 0`,
/// `x - 0`, `x / 1`) or a splat constant (arithmetic on splats, a convert
/// of a splat), as a scalar literal.
enum Folded {
    Operand(usize),
    Splat(String),
}

fn fold<'a>(short: &str, c: &Comp<'a>, args: &[Val<'a>], out: &Ty<'a>) -> Option<Folded> {
    let splat = |i: usize| -> Option<f64> {
        let v = args.get(i)?;
        let s = c.splat.get(&v.name)?;
        match s.as_str() {
            "true" => Some(1.0),
            "false" => Some(0.0),
            t => t.parse().ok(),
        }
    };
    let same = |i: usize| args.get(i).is_some_and(|a| &a.ty == out);
    let (a, b) = (splat(0), splat(1));
    match (short, a, b) {
        ("multiply", Some(x), _) if x == 1.0 && same(1) => return Some(Folded::Operand(1)),
        ("multiply", _, Some(y)) if y == 1.0 && same(0) => return Some(Folded::Operand(0)),
        ("add", Some(x), _) if x == 0.0 && same(1) => return Some(Folded::Operand(1)),
        ("add" | "subtract", _, Some(y)) if y == 0.0 && same(0) => return Some(Folded::Operand(0)),
        ("divide", _, Some(y)) if y == 1.0 && same(0) => return Some(Folded::Operand(0)),
        _ => {}
    }
    let Ty::Tensor(_, elem) = out else {
        return None;
    };
    let float = elem.starts_with('f') || *elem == "bf16";
    let value = match (short, a, b) {
        ("convert", Some(x), _) if args.len() == 1 => x,
        ("negate", Some(x), _) if args.len() == 1 => -x,
        ("add", Some(x), Some(y)) => x + y,
        ("subtract", Some(x), Some(y)) => x - y,
        ("multiply", Some(x), Some(y)) => x * y,
        ("divide", Some(x), Some(y)) if float || y != 0.0 => x / y,
        ("maximum", Some(x), Some(y)) => x.max(y),
        ("minimum", Some(x), Some(y)) => x.min(y),
        _ => return None,
    };
    Some(Folded::Splat(match *elem {
        "i1" => (value != 0.0).to_string(),
        e if !float && e.starts_with('i') || e.starts_with("ui") => {
            format!("{}", value.trunc() as i64)
        }
        "f32" => attr::float_text(f64::from(value as f32)),
        _ => attr::float_text(value),
    }))
}
