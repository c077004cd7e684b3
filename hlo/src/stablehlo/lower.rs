//! Lowering the syntax tree to HLO text the way XLA's MLIR-to-HLO
//! conversion does: `func.func` to computations (`main` the entry),
//! regions to computations, multi-result ops to a tuple plus
//! `get-tuple-element`s, `stablehlo.while` operands tupled (loop-invariant
//! ones carried as implicit captures), `broadcast_in_dim` as XlaBuilder's
//! broadcast sequence. Op-by-op rules live in `ops`.

use std::fmt::Write as _;
use std::rc::Rc;

use crate::ir::hash::FxMap as HashMap;

use super::attr;
use super::syntax::{Block, Op, Ty, Use};
use crate::{Error, Result};

/// An instruction name, shared by the line that defines it and its uses.
pub type Name = Rc<str>;

/// A value of the HLO being written: its instruction name and type.
#[derive(Clone, Debug)]
pub struct Val<'a> {
    pub name: Name,
    pub ty: Ty<'a>,
}

/// One instruction line: `name = body`, and whether a dead one may go
/// (MLIR ops do; the parameters and tuple accesses XLA's exporter adds stay).
pub struct Line {
    pub name: Name,
    pub body: String,
    pub operands: Vec<Name>,
    pub removable: bool,
}

/// A computation being written.
#[derive(Default)]
pub struct Comp<'a> {
    pub lines: Vec<Line>,
    env: HashMap<&'a str, Vec<Val<'a>>>,
    /// CSE: body text -> name, for side-effect-free ops.
    seen: HashMap<String, Name>,
    /// Values that are MLIR splat constants: name -> the scalar literal.
    pub splat: HashMap<Name, String>,
    /// Values that are transposes: name -> (operand, permutation), for
    /// MLIR's fold of a transpose of a transpose.
    pub transposes: HashMap<Name, (Val<'a>, Vec<i64>)>,
    /// MLIR constants, uniqued per region as MLIR's folder does:
    /// (shape, literal) -> value.
    pub consts: HashMap<(String, String), Val<'a>>,
}

impl<'a> Comp<'a> {
    pub fn bind(&mut self, name: &'a str, vals: Vec<Val<'a>>) {
        self.env.insert(name, vals);
    }
}

pub struct Emitter<'a> {
    pub src: &'a str,
    pub funcs: HashMap<&'a str, &'a Op<'a>>,
    /// Shardy mesh symbol -> its `#sdy.mesh<...>` text.
    pub meshes: HashMap<&'a str, &'a str>,
    /// func symbol -> computation name, once written.
    done: HashMap<String, String>,
    /// Finished computations, callees first.
    pub out: Vec<String>,
    next: usize,
}

impl<'a> Emitter<'a> {
    pub fn new(src: &'a str, funcs: HashMap<&'a str, &'a Op<'a>>) -> Self {
        Emitter {
            src,
            funcs,
            meshes: HashMap::default(),
            done: HashMap::default(),
            out: Vec::new(),
            next: 0,
        }
    }

    pub fn err(&self, at: usize, message: impl Into<String>) -> Error {
        let before = &self.src[..at.min(self.src.len())];
        let line = before.matches('\n').count() + 1;
        let start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = before[start..].chars().count() + 1;
        let end = self.src[start..]
            .find('\n')
            .map_or(self.src.len(), |i| start + i);
        Error::Parse {
            pos: crate::error::Pos {
                file: "<stablehlo>".into(),
                line,
                col,
            },
            message: message.into(),
            snippet: self.src[start..end].to_string(),
        }
    }

    pub fn fresh(&mut self, base: &str) -> String {
        self.next += 1;
        format!("{base}.{}", self.next)
    }

    /// A fresh instruction name for `opcode` (its letters and digits).
    fn fresh_inst(&mut self, opcode: &str) -> Name {
        let base: String = opcode.chars().filter(char::is_ascii_alphanumeric).collect();
        self.fresh(&base).into()
    }

    /// Writes the HLO shape of `ty`; an error for a type HLO lacks.
    fn write_shape_of(&self, out: &mut String, ty: &Ty<'a>) -> Result<()> {
        if write_shape(out, ty) {
            Ok(())
        } else {
            Err(self.err(0, format!("unsupported type {ty:?}")))
        }
    }

    /// Looks up the value `u` in computation `c`.
    pub fn get(&self, c: &Comp<'a>, u: &Use<'a>, at: usize) -> Result<Val<'a>> {
        c.env
            .get(&u.name)
            .and_then(|v| v.get(u.index))
            .cloned()
            .ok_or_else(|| {
                self.err(
                    at,
                    format!("use of undefined value %{}#{}", u.name, u.index),
                )
            })
    }

    /// Appends instruction `opcode(operands), attrs` of type `ty`;
    /// side-effect-free ones (`cse`) seen before are reused.
    pub fn push(
        &mut self,
        c: &mut Comp<'a>,
        ty: &Ty<'a>,
        opcode: &str,
        operands: &[&Val<'a>],
        attrs: &str,
        cse: bool,
    ) -> Result<Val<'a>> {
        let names: Vec<Name> = operands.iter().map(|v| v.name.clone()).collect();
        let mut text = String::with_capacity(64 + attrs.len());
        self.write_shape_of(&mut text, ty)?;
        text.push(' ');
        text.push_str(opcode);
        text.push('(');
        attr::write_joined(&mut text, &names, ", ");
        text.push(')');
        if !attrs.is_empty() {
            text.push_str(", ");
            text.push_str(attrs);
        }
        if cse {
            if let Some(name) = c.seen.get(&text) {
                return Ok(Val {
                    name: name.clone(),
                    ty: ty.clone(),
                });
            }
        }
        let name = self.fresh_inst(opcode);
        if cse {
            c.seen.insert(text.clone(), name.clone());
        }
        let removable = !matches!(opcode, "get-tuple-element" | "parameter");
        c.lines.push(Line {
            name: name.clone(),
            body: text,
            operands: names,
            removable,
        });
        Ok(Val {
            name,
            ty: ty.clone(),
        })
    }

    fn param(&mut self, c: &mut Comp<'a>, ty: &Ty<'a>, i: usize) -> Result<Val<'a>> {
        let mut body = String::with_capacity(48);
        self.write_shape_of(&mut body, ty)?;
        let _ = write!(body, " parameter({i})");
        let name = self.fresh_inst("Arg");
        c.lines.push(Line {
            name: name.clone(),
            body,
            operands: Vec::new(),
            removable: false,
        });
        Ok(Val {
            name,
            ty: ty.clone(),
        })
    }

    /// Binds the results of `op`: one value, or the elements of tuple `v`
    /// through `get-tuple-element`s (XLA's exporter writes one per result).
    pub fn bind_results(
        &mut self,
        c: &mut Comp<'a>,
        op: &Op<'a>,
        v: Val<'a>,
        multi: bool,
    ) -> Result<()> {
        let vals = if multi { self.unpack(c, &v)? } else { vec![v] };
        bind_groups(c, op, vals);
        Ok(())
    }

    pub fn unpack(&mut self, c: &mut Comp<'a>, v: &Val<'a>) -> Result<Vec<Val<'a>>> {
        let Ty::Tuple(elems) = &v.ty else {
            return Ok(vec![v.clone()]);
        };
        let mut vals = Vec::new();
        for (i, t) in elems.clone().iter().enumerate() {
            vals.push(self.push(
                c,
                t,
                "get-tuple-element",
                &[v],
                &format!("index={i}"),
                false,
            )?);
        }
        Ok(vals)
    }

    /// Writes computation `name` from `block`: its arguments become
    /// parameters (one tuple parameter when `tuple_param` and there are
    /// several), its terminator the root (a tuple if it returns several).
    pub fn computation(
        &mut self,
        name: &str,
        block: &Block<'a>,
        tuple_param: bool,
        entry: bool,
    ) -> Result<String> {
        let mut c = Comp::default();
        let tys: Vec<Ty<'a>> = block.args.iter().map(|(_, t)| t.clone()).collect();
        if tuple_param && tys.len() > 1 {
            let p = self.param(&mut c, &Ty::Tuple(tys), 0)?;
            let vals = self.unpack(&mut c, &p)?;
            for ((n, _), v) in block.args.iter().zip(vals) {
                c.bind(n, vec![v]);
            }
        } else {
            for (i, (n, t)) in block.args.iter().enumerate() {
                let v = self.param(&mut c, t, i)?;
                c.bind(n, vec![v]);
            }
        }
        self.body(c, name, block, entry)
    }

    /// Writes the ops of `block` into `c`, its terminator the root, and
    /// renders the computation.
    fn body(
        &mut self,
        mut c: Comp<'a>,
        name: &str,
        block: &Block<'a>,
        entry: bool,
    ) -> Result<String> {
        let (last, body) = block
            .ops
            .split_last()
            .ok_or_else(|| self.err(0, "empty block"))?;
        for op in body {
            self.op(&mut c, op)?;
        }
        let rets = last
            .operands
            .iter()
            .map(|u| self.get(&c, u, last.at))
            .collect::<Result<Vec<_>>>()?;
        let root = self.root(&mut c, rets, last.at)?;
        let comp_name = self.fresh(name);
        self.out.push(render(&comp_name, c, &root, entry));
        Ok(comp_name)
    }

    /// A branch of a `conditional` from `block` (no arguments): one
    /// parameter of type `param`, which holds the `captured` values (itself
    /// when there is one, else a tuple of them).
    pub fn branch(
        &mut self,
        block: &Block<'a>,
        captured: &[(Use<'a>, Val<'a>)],
        param: &Ty<'a>,
    ) -> Result<String> {
        let mut c = Comp::default();
        let p = self.param(&mut c, param, 0)?;
        let vals = if captured.len() == 1 {
            vec![p]
        } else {
            self.unpack(&mut c, &p)?
        };
        for ((u, _), v) in captured.iter().zip(vals) {
            // The other results of a multi-result op stay unbound: the
            // branch does not read them.
            let group = c.env.entry(u.name).or_default();
            if group.len() <= u.index {
                group.resize(u.index + 1, v.clone());
            }
            group[u.index] = v;
        }
        self.body(c, "region", block, false)
    }

    fn root(&mut self, c: &mut Comp<'a>, rets: Vec<Val<'a>>, at: usize) -> Result<Name> {
        if rets.len() == 1 && c.lines.iter().any(|l| l.name == rets[0].name) {
            return Ok(rets[0].name.clone());
        }
        let ty = Ty::Tuple(rets.iter().map(|v| v.ty.clone()).collect());
        let _ = at;
        let refs: Vec<&Val<'a>> = rets.iter().collect();
        Ok(self.push(c, &ty, "tuple", &refs, "", false)?.name)
    }

    /// The computation of function `sym` (written on first use).
    pub fn function(&mut self, sym: &str, at: usize) -> Result<String> {
        if let Some(n) = self.done.get(sym) {
            return Ok(n.clone());
        }
        let f = *self
            .funcs
            .get(sym)
            .ok_or_else(|| self.err(at, format!("call of unknown function @{sym}")))?;
        let block = f
            .regions
            .first()
            .and_then(|r| r.first())
            .ok_or_else(|| self.err(f.at, "function without a body"))?;
        let name = self.computation(sym, block, false, sym == "main")?;
        self.done.insert(sym.to_string(), name.clone());
        Ok(name)
    }

    pub fn region(&mut self, op: &Op<'a>, i: usize, tuple_param: bool) -> Result<String> {
        let (block, _) = self.region_block(op, i)?;
        self.computation("region", block, tuple_param, false)
    }

    /// The block of `op`'s region `i`, and its terminator.
    pub fn region_block<'o>(
        &self,
        op: &'o Op<'a>,
        i: usize,
    ) -> Result<(&'o Block<'a>, &'o Op<'a>)> {
        let block = op
            .regions
            .get(i)
            .and_then(|r| r.first())
            .ok_or_else(|| self.err(op.at, format!("{} needs region {i}", op.name)))?;
        let ret = block
            .ops
            .last()
            .ok_or_else(|| self.err(op.at, format!("{}: region {i} is empty", op.name)))?;
        Ok((block, ret))
    }

    pub fn attr_ints(&self, op: &Op<'a>, key: &str) -> Result<Vec<i64>> {
        let s = op
            .attr(key)
            .ok_or_else(|| self.err(op.at, format!("{} needs `{key}`", op.name)))?;
        attr::ints(s)
            .ok_or_else(|| self.err(op.at, format!("`{key}` is not a list of integers: {s}")))
    }
}

/// Binds `vals` to the result names of `op` in order.
pub fn bind_groups<'a>(c: &mut Comp<'a>, op: &Op<'a>, vals: Vec<Val<'a>>) {
    let mut it = vals.into_iter();
    for (name, n) in &op.results {
        let group: Vec<Val<'a>> = it.by_ref().take(*n).collect();
        c.bind(name, group);
    }
}

/// Writes the HLO shape of an MLIR type; `false` for a type HLO lacks
/// (`out` then holds part of it).
pub fn write_shape(out: &mut String, t: &Ty<'_>) -> bool {
    match t {
        Ty::Tensor(dims, elem) => {
            let Some(e) = prim(elem) else {
                return false;
            };
            out.push_str(e);
            out.push('[');
            attr::write_joined(out, dims, ",");
            out.push(']');
        }
        Ty::Tuple(ts) => {
            out.push('(');
            for (i, t) in ts.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                if !write_shape(out, t) {
                    return false;
                }
            }
            out.push(')');
        }
        Ty::Token => out.push_str("token[]"),
        Ty::Other(_) => return false,
    }
    true
}

pub fn prim(elem: &str) -> Option<&'static str> {
    Some(match elem {
        "i1" => "pred",
        "i8" => "s8",
        "i16" => "s16",
        "i32" => "s32",
        "i64" => "s64",
        "ui8" => "u8",
        "ui16" => "u16",
        "ui32" => "u32",
        "ui64" => "u64",
        "f16" => "f16",
        "bf16" => "bf16",
        "f32" => "f32",
        "f64" => "f64",
        "complex<f32>" => "c64",
        "complex<f64>" => "c128",
        _ => return None,
    })
}

/// The lines in XLA's printing order: a depth-first post-order from each
/// instruction without users (operands first, in order), in creation order.
fn post_order(lines: &[Line]) -> Vec<&Line> {
    let index: HashMap<&str, usize> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| (&*l.name, i))
        .collect();
    let used: crate::ir::hash::FxSet<&str> = lines
        .iter()
        .flat_map(|l| l.operands.iter().map(|o| &**o))
        .collect();
    let mut seen = vec![false; lines.len()];
    let mut out = Vec::with_capacity(lines.len());
    for (i, l) in lines.iter().enumerate() {
        if used.contains(&*l.name) {
            continue;
        }
        // Iterative DFS: (line, next operand to visit).
        let mut stack = vec![(i, 0usize)];
        while let Some((j, k)) = stack.pop() {
            if k == 0 && std::mem::replace(&mut seen[j], true) {
                continue;
            }
            match lines[j].operands.get(k).and_then(|o| index.get(&**o)) {
                Some(&o) => {
                    stack.push((j, k + 1));
                    if !seen[o] {
                        stack.push((o, 0));
                    }
                }
                None if k < lines[j].operands.len() => stack.push((j, k + 1)),
                None => out.push(&lines[j]),
            }
        }
    }
    out
}

/// Drops dead MLIR ops (repeatedly), then prints the computation.
fn render(name: &str, mut c: Comp<'_>, root: &str, entry: bool) -> String {
    loop {
        let used: crate::ir::hash::FxSet<&str> = c
            .lines
            .iter()
            .flat_map(|l| l.operands.iter().map(|o| &**o))
            .chain([root])
            .collect();
        let keep: Vec<bool> = c
            .lines
            .iter()
            .map(|l| !l.removable || used.contains(&*l.name))
            .collect();
        if keep.iter().all(|&k| k) {
            break;
        }
        let mut keep = keep.into_iter();
        c.lines.retain(|_| keep.next().unwrap_or(true));
    }
    let size: usize = c
        .lines
        .iter()
        .map(|l| l.name.len() + l.body.len() + 10)
        .sum();
    let mut s = String::with_capacity(size + name.len() + 16);
    if entry {
        s.push_str("ENTRY ");
    }
    s.push_str(name);
    s.push_str(" {\n");
    for l in post_order(&c.lines) {
        s.push_str(if &*l.name == root { "  ROOT " } else { "  " });
        s.push_str(&l.name);
        s.push_str(" = ");
        s.push_str(&l.body);
        s.push('\n');
    }
    s.push_str("}\n");
    s
}
