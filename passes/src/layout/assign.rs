//! Layout propagation and copy insertion: given the layouts chosen for the
//! configurable nodes, give every other instruction a layout and insert a
//! `copy` exactly where a consumer needs a layout its producer does not have.
//!
//! Order of work (as in XLA's layout assignment: mandatory constraints, then
//! preferences, then copies):
//! 1. constraints: the entry parameters and the entry root keep their
//!    layouts (checked against `entry_computation_layout` when present);
//!    custom-call `operand_layout_constraints` are operand requirements;
//!    `bitcast` operands keep their layout (a bitcast's meaning depends on it);
//! 2. forward propagation in dependency order: configured nodes take their
//!    chosen output layout; elementwise-like ops follow an operand; transpose,
//!    reduce and reshape map dimensions (a bitcast where possible); tuples and
//!    get-tuple-element pass layouts through; a called computation's
//!    parameters take the layouts of its (first) call site's operands, a while
//!    body's root must give back its parameter layout, every branch of a
//!    conditional the first branch's root layout;
//! 3. backward adoption: an instruction that can produce any layout for free
//!    (elementwise, broadcast, constant, transpose, ...) takes the layout
//!    most of its consumers require, when that removes copies;
//! 4. copy insertion: for every (consumer, operand) whose requirement differs
//!    from the operand's layout, one `copy` (shared by the consumers of the
//!    same computation that need the same layout); tuple-shaped mismatches
//!    copy element-wise through get-tuple-element / tuple.
//!
//! Invariants after [`assign`]: every array shape of every scheduled
//! instruction has a layout; every requirement holds; the entry parameters'
//! and root's layouts are unchanged; the result is deterministic (no hash map
//! iteration reaches the module).

use std::collections::HashMap;

use hlo::{Attr, AttrValue, CompId, InstId, Instruction, Module, Opcode, Shape, ShapeId};
use indexmap::IndexMap;
use smallvec::SmallVec;

use super::attrs;
use super::dims::{self, M2M};
use super::shapes;
use crate::PassError;

/// What the search decided for one configurable node: its output layout and
/// the layouts it requires of some operands. `None` / absent = no choice
/// (the compiler default: the layout propagation gives it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decision {
    pub output: Option<M2M>,
    /// (operand index, required layout).
    pub operands: SmallVec<[(usize, M2M); 2]>,
}

/// A `copy` added by [`assign`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyRecord {
    pub copy: InstId,
    /// The value copied.
    pub producer: InstId,
    /// The first consumer that needed it (the new root for a root fix-up).
    pub consumer: InstId,
}

/// What [`assign`] did.
#[derive(Clone, Debug, Default)]
pub struct Assignment {
    pub copies: Vec<CopyRecord>,
    /// Scheduled instructions whose shape (layout) changed.
    pub relayouted: usize,
}

/// The error for layouts that contradict the module's own constraints.
fn conflict(message: String) -> PassError {
    PassError::Failed {
        pass: "layout",
        message,
    }
}

/// Assigns layouts to every instruction of `m` given the decisions for the
/// configurable nodes, inserting copies. See the module docs.
pub fn assign(
    m: &mut Module,
    decisions: &IndexMap<InstId, Decision>,
) -> Result<Assignment, PassError> {
    let n = m.num_insts();
    let original: Vec<ShapeId> = (0..n)
        .map(|i| m.inst(InstId::from_index(i)).shape)
        .collect();
    let mut a = Assigner {
        m,
        dec: decisions,
        shape: vec![None; n],
        fixed: vec![false; n],
        pin: vec![None; n],
        original,
        comp_state: Vec::new(),
        copies: Vec::new(),
    };
    a.comp_state = vec![0; a.m.computations().map(|c| c.index() + 1).max().unwrap_or(0)];
    a.constrain_entry()?;
    let entry = a.m.entry;
    a.process_comp(entry)?;
    let comps: Vec<CompId> = a.m.computations().collect();
    for &c in &comps {
        a.process_comp(c)?;
    }
    for &c in &comps {
        a.adopt_backward(c);
    }
    for &c in &comps {
        a.insert_copies(c)?;
    }
    // Write the shapes back.
    let mut relayouted = 0;
    let all: Vec<InstId> = a.m.all_instructions().collect();
    for i in all {
        let Some(s) = a.get(i) else { continue };
        if i.index() < a.original.len() && a.original[i.index()] != s {
            relayouted += 1;
        }
        a.m.inst_mut(i).shape = s;
    }
    Ok(Assignment {
        copies: a.copies,
        relayouted,
    })
}

struct Assigner<'a> {
    m: &'a mut Module,
    dec: &'a IndexMap<InstId, Decision>,
    /// Assigned shape per instruction (arena index).
    shape: Vec<Option<ShapeId>>,
    /// The shape may not change (constraint or decision).
    fixed: Vec<bool>,
    /// Required shape of a computation root (entry root, while body root,
    /// conditional branch roots).
    pin: Vec<Option<ShapeId>>,
    /// Shapes before the pass.
    original: Vec<ShapeId>,
    /// 0 = not visited, 1 = in progress, 2 = done; by computation index.
    comp_state: Vec<u8>,
    copies: Vec<CopyRecord>,
}

/// Whether an instruction may produce any layout, so that a pinned root
/// takes the pinned one (structural ones get a copy at the end instead).
fn takes_any_layout(op: Opcode) -> bool {
    !matches!(
        op,
        Opcode::GetTupleElement
            | Opcode::Parameter
            | Opcode::While
            | Opcode::Call
            | Opcode::Conditional
            | Opcode::Fusion
            | Opcode::CustomCall
            | Opcode::Bitcast
            | Opcode::AsyncStart
            | Opcode::AsyncDone
    )
}

/// Ops whose operands of the output's rank must have the output's layout
/// (XLA: instructions that cannot change layout).
fn preserves_layout(op: Opcode) -> bool {
    use Opcode::*;
    (op.is_elementwise() && op != Copy)
        || matches!(
            op,
            Concatenate
                | Slice
                | Pad
                | Reverse
                | DynamicSlice
                | DynamicUpdateSlice
                | ReduceWindow
                | SelectAndScatter
                | Sort
                | Map
                | Scatter
                | AllReduce
                | ReduceScatter
                | AllGather
                | AllToAll
                | CollectivePermute
                | OptBarrier
                | Domain
                | AddDependency
        )
}

/// Consumers that read an operand in any layout and whose own layout does not
/// embed the operand's (so a producer may change layout under them).
fn agnostic_consumer(op: Opcode) -> bool {
    use Opcode::*;
    matches!(
        op,
        Transpose
            | Reshape
            | Broadcast
            | Reduce
            | Dot
            | Convolution
            | Gather
            | Copy
            | GetDimensionSize
            | Fft
            | TriangularSolve
            | Cholesky
            | BatchNormInference
            | BatchNormTraining
            | BatchNormGrad
    )
}

/// Producers that can write any layout at no extra cost beyond a copy's.
fn adoptable_producer(op: Opcode) -> bool {
    use Opcode::*;
    (op.is_elementwise() && !matches!(op, BitcastConvert))
        || matches!(
            op,
            Broadcast
                | Constant
                | Iota
                | Transpose
                | Reshape
                | Slice
                | Pad
                | Concatenate
                | Reverse
                | DynamicSlice
                | DynamicUpdateSlice
                | Reduce
                | ReduceWindow
                | Map
                | Rng
                | AllReduce
        )
}

impl Assigner<'_> {
    fn get(&self, i: InstId) -> Option<ShapeId> {
        self.shape.get(i.index()).copied().flatten()
    }
    fn set(&mut self, i: InstId, s: ShapeId) {
        let k = i.index();
        if self.shape.len() <= k {
            self.shape.resize(k + 1, None);
            self.fixed.resize(k + 1, false);
            self.pin.resize(k + 1, None);
        }
        self.shape[k] = Some(s);
    }
    fn is_fixed(&self, i: InstId) -> bool {
        self.fixed.get(i.index()).copied().unwrap_or(false)
    }
    fn fix(&mut self, i: InstId, s: ShapeId) {
        self.set(i, s);
        self.fixed[i.index()] = true;
    }
    /// Assigned shape, or the current one with default layouts (for values
    /// not visited yet, which only malformed input produces).
    fn shape_of(&mut self, i: InstId) -> ShapeId {
        match self.get(i) {
            Some(s) => s,
            None => {
                let s = self.m.inst(i).shape;
                self.m.fill_default_layouts(s)
            }
        }
    }

    /// Entry parameters and root: keep their layouts; check them against
    /// `entry_computation_layout`.
    fn constrain_entry(&mut self) -> Result<(), PassError> {
        let entry = self.m.entry;
        let ecl = self
            .m
            .entry_computation_layout()
            .map_err(|e| conflict(e.to_string()))?
            .map(|l| (l.params.to_vec(), l.result));
        if let Some((eparams, eresult)) = &ecl {
            // The header is not checked by the verifier: a layout there that
            // is not a permutation would reach the module's shapes.
            if let Some(bad) = eparams
                .iter()
                .chain([eresult])
                .find_map(|&t| shapes::bad_layout(self.m, t))
            {
                return Err(conflict(format!(
                    "entry_computation_layout has the layout {bad}, not a permutation of its array's dimensions"
                )));
            }
        }
        let params = self.m.comp(entry).params.clone();
        if let Some((eparams, _)) = &ecl {
            if eparams.len() != params.len() {
                return Err(conflict(format!(
                    "entry_computation_layout has {} parameters but the entry computation has {}",
                    eparams.len(),
                    params.len()
                )));
            }
        }
        for (k, &p) in params.iter().enumerate() {
            let mut s = self.m.inst(p).shape;
            if let Some((eparams, _)) = &ecl {
                if !self.m.layouts_agree(s, eparams[k]) {
                    return Err(conflict(format!(
                        "parameter %{} has shape {} but entry_computation_layout requires parameter {k} to be {}",
                        self.m.inst(p).name,
                        self.m.show_shape(s),
                        self.m.show_shape(eparams[k])
                    )));
                }
                s = self.m.with_layouts_of(s, eparams[k]);
            }
            let s = self.m.fill_default_layouts(s);
            self.fix(p, s);
        }
        let root = self.m.comp(entry).root;
        let mut r = self.m.inst(root).shape;
        if let Some((_, eresult)) = &ecl {
            if !self.m.layouts_agree(r, *eresult) {
                return Err(conflict(format!(
                    "root %{} has shape {} but entry_computation_layout requires the result to be {}",
                    self.m.inst(root).name,
                    self.m.show_shape(r),
                    self.m.show_shape(*eresult)
                )));
            }
            r = self.m.with_layouts_of(r, *eresult);
        }
        let r = self.m.fill_default_layouts(r);
        self.pin[root.index()] = Some(r);
        if let Some(d) = self.dec.get(&root) {
            if let Some(out) = &d.output {
                if self.m.minor_to_major(r).as_deref() != Some(out.as_slice()) {
                    return Err(conflict(format!(
                        "the layout chosen for %{} contradicts the entry root's layout {}",
                        self.m.inst(root).name,
                        self.m.show_shape(r)
                    )));
                }
            }
        }
        Ok(())
    }

    fn process_comp(&mut self, c: CompId) -> Result<(), PassError> {
        match self.comp_state.get(c.index()).copied().unwrap_or(2) {
            2 => return Ok(()),
            1 => {
                return Err(conflict(format!(
                    "computation %{} calls itself (recursive call graph)",
                    self.m.comp(c).name
                )))
            }
            _ => {}
        }
        self.comp_state[c.index()] = 1;
        for i in topo_order(self.m, c) {
            if self.get(i).is_none() {
                self.forward(i)?;
            }
        }
        self.comp_state[c.index()] = 2;
        Ok(())
    }

    /// Enters a computation called with operand shapes `params` (first call
    /// site wins); `root_pin` is the shape its root must have.
    fn enter_callee(
        &mut self,
        c: CompId,
        params: &[ShapeId],
        root_pin: Option<ShapeId>,
    ) -> Result<(), PassError> {
        if self.comp_state.get(c.index()).copied().unwrap_or(2) != 0 {
            return self.process_comp(c);
        }
        let ps = self.m.comp(c).params.clone();
        for (k, &p) in ps.iter().enumerate() {
            let own = self.m.inst(p).shape;
            let s = match params.get(k) {
                Some(&s) if same_dims(self.m, own, s) => s,
                _ => self.m.fill_default_layouts(own),
            };
            self.fix(p, s);
        }
        if let Some(pin) = root_pin {
            let root = self.m.comp(c).root;
            self.pin[root.index()] = Some(pin);
        }
        self.process_comp(c)
    }

    fn forward(&mut self, i: InstId) -> Result<(), PassError> {
        let inst = self.m.inst(i).clone();
        let cur = self.m.fill_default_layouts(inst.shape);
        let pin = self.pin.get(i.index()).copied().flatten();
        if let Some(out) = self.dec.get(&i).and_then(|d| d.output.clone()) {
            let s = self.m.with_minor_to_major(cur, &out);
            self.fix(i, s);
            return Ok(());
        }
        if let (Opcode::Tuple, Some(p)) = (inst.opcode, pin) {
            self.fix(i, p);
            return Ok(());
        }
        let op0 = inst.operands.first().copied();
        let out = match inst.opcode {
            Opcode::Parameter => cur,
            Opcode::GetTupleElement => {
                let t = op0.map(|o| self.shape_of(o));
                match (t, attrs::tuple_index(&inst)) {
                    (Some(t), Some(k)) => shapes::tuple_elem(self.m, t, k).unwrap_or(cur),
                    _ => cur,
                }
            }
            Opcode::Tuple => {
                let elems: SmallVec<[ShapeId; 4]> =
                    inst.operands.iter().map(|&o| self.shape_of(o)).collect();
                self.m.intern_shape(Shape::Tuple(elems))
            }
            Opcode::While => self.forward_while(&inst, cur)?,
            Opcode::Call | Opcode::Fusion | Opcode::AsyncStart => self.forward_call(&inst, cur)?,
            Opcode::Conditional => self.forward_conditional(&inst, cur)?,
            Opcode::Transpose | Opcode::Reduce | Opcode::Reshape | Opcode::Copy => {
                self.forward_from_operand(&inst, cur)?
            }
            Opcode::Broadcast => self.m.with_default_layout(cur),
            op if preserves_layout(op) => {
                self.process_called(&inst)?;
                let rank = shapes::rank(self.m, cur).or_else(|| first_array_rank(self.m, cur));
                match self.representative(&inst, rank) {
                    Some(l) => self.relayout_all(cur, &l),
                    None => cur,
                }
            }
            _ => {
                self.process_called(&inst)?;
                cur
            }
        };
        match pin {
            // A root that must have a given layout: ops that may produce any
            // layout take it; structural ones get a copy at the end.
            Some(p) if takes_any_layout(inst.opcode) && same_dims(self.m, p, out) => self.fix(i, p),
            _ => self.set(i, out),
        }
        Ok(())
    }

    /// A while loop: its body and condition take the operand's layout; its
    /// result is the body parameter's.
    fn forward_while(&mut self, inst: &Instruction, cur: ShapeId) -> Result<ShapeId, PassError> {
        let body = comp_attr(inst, "body");
        let cond = comp_attr(inst, "condition");
        let s0 = match inst.operands.first() {
            Some(&o) => self.shape_of(o),
            None => cur,
        };
        if let Some(b) = body {
            self.enter_callee(b, &[s0], Some(s0))?;
        }
        if let Some(c) = cond {
            self.enter_callee(c, &[s0], None)?;
        }
        Ok(
            match body.and_then(|b| self.m.comp(b).params.first().copied()) {
                Some(p) => self.shape_of(p),
                None => s0,
            },
        )
    }

    /// A call or fusion: the callee takes the operands' layouts; the result
    /// is its root's when the dimensions agree.
    fn forward_call(&mut self, inst: &Instruction, cur: ShapeId) -> Result<ShapeId, PassError> {
        let key = if inst.opcode == Opcode::Fusion {
            "calls"
        } else {
            "to_apply"
        };
        match comp_attr(inst, key).or_else(|| comp_attr(inst, "calls")) {
            Some(callee) if inst.opcode != Opcode::AsyncStart => {
                let ops: Vec<ShapeId> = inst.operands.iter().map(|&o| self.shape_of(o)).collect();
                self.enter_callee(callee, &ops, None)?;
                let root = self.m.comp(callee).root;
                let r = self.shape_of(root);
                Ok(if same_dims(self.m, r, cur) { r } else { cur })
            }
            _ => {
                self.process_called(inst)?;
                Ok(cur)
            }
        }
    }

    /// A conditional: each branch takes its operand's layout and returns the
    /// first branch's root layout.
    fn forward_conditional(
        &mut self,
        inst: &Instruction,
        cur: ShapeId,
    ) -> Result<ShapeId, PassError> {
        let branches = branch_comps(inst);
        let mut first_root: Option<ShapeId> = None;
        for (k, &b) in branches.iter().enumerate() {
            let arg = match inst.operands.get(k + 1) {
                Some(&o) => vec![self.shape_of(o)],
                None => vec![],
            };
            self.enter_callee(b, &arg, first_root)?;
            if k == 0 {
                let root = self.m.comp(b).root;
                first_root = Some(self.shape_of(root));
            }
        }
        Ok(match first_root {
            Some(r) if same_dims(self.m, r, cur) => r,
            _ => cur,
        })
    }

    /// Transpose, reduce, reshape and copy: the output layout follows from
    /// the first operand's.
    fn forward_from_operand(
        &mut self,
        inst: &Instruction,
        cur: ShapeId,
    ) -> Result<ShapeId, PassError> {
        let os = inst.operands.first().map(|&o| self.shape_of(o));
        let om = os.and_then(|s| self.m.minor_to_major(s));
        Ok(match inst.opcode {
            Opcode::Transpose => match (om, attrs::ints(inst, "dimensions")) {
                (Some(om), Some(perm)) => match dims::transpose_output(&om, &perm) {
                    Some(l) => self.m.with_minor_to_major(cur, &l),
                    None => cur,
                },
                _ => cur,
            },
            Opcode::Reduce => {
                let rd = attrs::ints(inst, "dimensions").unwrap_or_default();
                self.process_called(inst)?;
                match om {
                    Some(om) => {
                        let l = dims::remove_dims(&om, &rd);
                        self.relayout_all(cur, &l)
                    }
                    None => cur,
                }
            }
            Opcode::Reshape => match os {
                Some(os) => {
                    let fd = shapes::dims(self.m, os);
                    let td = shapes::dims(self.m, cur);
                    match om.and_then(|om| dims::reshape_bitcast_layout(&fd, &om, &td)) {
                        Some(l) => self.m.with_minor_to_major(cur, &l),
                        None => self.m.with_default_layout(cur),
                    }
                }
                None => cur,
            },
            _ => match om {
                Some(l) => self.m.with_minor_to_major(cur, &l),
                None => cur,
            },
        })
    }

    /// Processes the computations an instruction calls that take no layout
    /// from it (reduce's `to_apply` and friends: scalar computations).
    fn process_called(&mut self, inst: &Instruction) -> Result<(), PassError> {
        let called: Vec<CompId> = inst.called_computations().collect();
        for c in called {
            self.process_comp(c)?;
        }
        Ok(())
    }

    /// The layout an elementwise-like op follows: the first operand of the
    /// output's rank that is not a broadcast/constant/iota, else the first
    /// operand of that rank.
    fn representative(&mut self, inst: &Instruction, rank: Option<usize>) -> Option<M2M> {
        let rank = rank?;
        let mut fallback = None;
        for &o in &inst.operands {
            let s = self.shape_of(o);
            if shapes::rank(self.m, s) != Some(rank) {
                continue;
            }
            let l = self.m.minor_to_major(s);
            if matches!(
                self.m.inst(o).opcode,
                Opcode::Broadcast | Opcode::Constant | Opcode::Iota
            ) {
                if fallback.is_none() {
                    fallback = l;
                }
                continue;
            }
            if l.is_some() {
                return l;
            }
        }
        fallback
    }

    /// `s` (an array or a tuple of arrays of equal rank) with every array
    /// laid out as `l`.
    fn relayout_all(&mut self, s: ShapeId, l: &[i64]) -> ShapeId {
        match self.m.shape(s).clone() {
            Shape::Array(_) => self.m.with_minor_to_major(s, l),
            Shape::Tuple(e) => {
                let elems: SmallVec<[ShapeId; 4]> = e
                    .iter()
                    .map(|&x| self.m.with_minor_to_major(x, l))
                    .collect();
                self.m.intern_shape(Shape::Tuple(elems))
            }
            _ => s,
        }
    }

    /// The shape `user` requires of its operand `k`, if it requires one.
    fn requirement(&mut self, user: InstId, k: usize) -> Option<ShapeId> {
        let inst = self.m.inst(user);
        let op = *inst.operands.get(k)?;
        let opcode = inst.opcode;
        if let Some(d) = self.dec.get(&user) {
            if let Some((_, l)) = d.operands.iter().find(|(j, _)| *j == k) {
                let l = l.clone();
                let s = self.shape_of(op);
                return Some(self.m.with_minor_to_major(s, &l));
            }
        }
        match opcode {
            Opcode::Tuple if self.is_fixed(user) => {
                let s = self.get(user)?;
                shapes::tuple_elem(self.m, s, k)
            }
            Opcode::While => {
                let body = comp_attr(self.m.inst(user), "body")?;
                let p = *self.m.comp(body).params.first()?;
                self.get(p)
            }
            Opcode::Call | Opcode::Fusion => {
                let key = if opcode == Opcode::Fusion {
                    "calls"
                } else {
                    "to_apply"
                };
                let callee = comp_attr(self.m.inst(user), key)?;
                let p = *self.m.comp(callee).params.get(k)?;
                self.get(p)
            }
            Opcode::Conditional if k > 0 => {
                let b = *branch_comps(self.m.inst(user)).get(k - 1)?;
                let p = *self.m.comp(b).params.first()?;
                self.get(p)
            }
            Opcode::CustomCall => {
                let t = *self
                    .m
                    .inst(user)
                    .operand_layout_constraints()
                    .ok()??
                    .get(k)?;
                let s = self.shape_of(op);
                Some(self.m.with_layouts_of(s, t))
            }
            Opcode::Bitcast => {
                let s = *self.original.get(op.index())?;
                Some(self.m.fill_default_layouts(s))
            }
            op_code if preserves_layout(op_code) => {
                let out = self.get(user)?;
                let os = self.shape_of(op);
                let orank = shapes::rank(self.m, os)?;
                let l = match self.m.shape(out) {
                    Shape::Array(_) => self.m.minor_to_major(out),
                    Shape::Tuple(e) => {
                        let e = if op_code == Opcode::Sort {
                            e.first()
                        } else {
                            e.get(k)
                        };
                        e.and_then(|&x| self.m.minor_to_major(x))
                    }
                    _ => None,
                }?;
                if l.len() != orank || orank == 0 {
                    return None;
                }
                Some(self.m.with_minor_to_major(os, &l))
            }
            _ => None,
        }
    }

    /// Step 3: producers that can write any layout take the one most of their
    /// consumers require.
    fn adopt_backward(&mut self, c: CompId) {
        let order = topo_order(self.m, c);
        let users = self.m.users(c);
        let root = self.m.comp(c).root;
        for &p in order.iter().rev() {
            if self.is_fixed(p) || p == root || !adoptable_producer(self.m.inst(p).opcode) {
                continue;
            }
            if self.dec.contains_key(&p) {
                continue;
            }
            let Some(cur) = self.get(p) else { continue };
            if shapes::rank(self.m, cur).is_none() {
                continue;
            }
            let mut votes: Vec<(ShapeId, usize)> = Vec::new();
            let mut blocked = false;
            let us: Vec<InstId> = users.get(p.index()).map(|u| u.to_vec()).unwrap_or_default();
            for u in us {
                let ops = self.m.inst(u).operands.clone();
                for (k, &o) in ops.iter().enumerate() {
                    if o != p {
                        continue;
                    }
                    match self.requirement(u, k) {
                        Some(r) => match votes.iter_mut().find(|(s, _)| *s == r) {
                            Some(v) => v.1 += 1,
                            None => votes.push((r, 1)),
                        },
                        None => {
                            if !agnostic_consumer(self.m.inst(u).opcode) {
                                blocked = true;
                            }
                        }
                    }
                }
            }
            if blocked || votes.is_empty() {
                continue;
            }
            let current = votes.iter().find(|(s, _)| *s == cur).map_or(0, |v| v.1);
            let mut best = votes[0];
            for &v in &votes[1..] {
                if v.1 > best.1 {
                    best = v;
                }
            }
            if best.1 > current {
                self.set(p, best.0);
            }
        }
    }

    /// Step 4: copies where a requirement does not hold.
    fn insert_copies(&mut self, c: CompId) -> Result<(), PassError> {
        let order = self.m.comp(c).order.clone();
        let mut cache: HashMap<(InstId, ShapeId), InstId> = HashMap::new();
        for u in order {
            let n = self.m.inst(u).operands.len();
            for k in 0..n {
                let Some(req) = self.requirement(u, k) else {
                    continue;
                };
                let op = self.m.inst(u).operands[k];
                let have = self.shape_of(op);
                if have == req {
                    continue;
                }
                if !same_dims(self.m, have, req) {
                    return Err(conflict(format!(
                        "%{} requires operand {k} (%{}) to be {} but it is {}",
                        self.m.inst(u).name,
                        self.m.inst(op).name,
                        self.m.show_shape(req),
                        self.m.show_shape(have)
                    )));
                }
                let new = self.coerce(c, op, req, Some(u), u, &mut cache);
                self.m.inst_mut(u).operands[k] = new;
            }
        }
        let root = self.m.comp(c).root;
        if let Some(p) = self.pin.get(root.index()).copied().flatten() {
            let have = self.shape_of(root);
            if have != p {
                if !same_dims(self.m, have, p) {
                    return Err(conflict(format!(
                        "root %{} of %{} must be {} but is {}",
                        self.m.inst(root).name,
                        self.m.comp(c).name,
                        self.m.show_shape(p),
                        self.m.show_shape(have)
                    )));
                }
                let new = self.coerce(c, root, p, None, root, &mut cache);
                self.m.comp_mut(c).root = new;
            }
        }
        Ok(())
    }

    /// A value equal to `v` with shape `req`: `v` itself, a copy, or (for
    /// tuples) a tuple of element-wise coerced get-tuple-elements. New
    /// instructions go before `before` (or at the end of the computation).
    fn coerce(
        &mut self,
        c: CompId,
        v: InstId,
        req: ShapeId,
        before: Option<InstId>,
        consumer: InstId,
        cache: &mut HashMap<(InstId, ShapeId), InstId>,
    ) -> InstId {
        let have = self.shape_of(v);
        if have == req {
            return v;
        }
        if let Some(&x) = cache.get(&(v, req)) {
            return x;
        }
        let new = match self.m.shape(req).clone() {
            Shape::Tuple(elems) => {
                let mut parts = SmallVec::<[InstId; 3]>::new();
                for (k, &e) in elems.iter().enumerate() {
                    let es = shapes::tuple_elem(self.m, have, k).unwrap_or(e);
                    let name = self.m.unique_inst_name("get-tuple-element");
                    let g = self.add(
                        c,
                        before,
                        Instruction {
                            name: name.into(),
                            opcode: Opcode::GetTupleElement,
                            shape: es,
                            operands: SmallVec::from_slice(&[v]),
                            payload: None,
                            attrs: vec![Attr {
                                key: "index".into(),
                                value: AttrValue::Int(k as i64),
                            }],
                            parent: c,
                        },
                    );
                    parts.push(self.coerce(c, g, e, before, consumer, cache));
                }
                let name = self.m.unique_inst_name("tuple");
                self.add(
                    c,
                    before,
                    Instruction {
                        name: name.into(),
                        opcode: Opcode::Tuple,
                        shape: req,
                        operands: parts,
                        payload: None,
                        attrs: Vec::new(),
                        parent: c,
                    },
                )
            }
            _ => {
                let name = self.m.unique_inst_name("copy");
                let id = self.add(
                    c,
                    before,
                    Instruction {
                        name: name.into(),
                        opcode: Opcode::Copy,
                        shape: req,
                        operands: SmallVec::from_slice(&[v]),
                        payload: None,
                        attrs: Vec::new(),
                        parent: c,
                    },
                );
                self.copies.push(CopyRecord {
                    copy: id,
                    producer: v,
                    consumer,
                });
                id
            }
        };
        cache.insert((v, req), new);
        new
    }

    fn add(&mut self, c: CompId, before: Option<InstId>, inst: Instruction) -> InstId {
        let s = inst.shape;
        let id = match before {
            Some(b) => self.m.insert_inst_before(b, inst),
            None => {
                debug_assert_eq!(inst.parent, c);
                self.m.append_inst(inst)
            }
        };
        self.fix(id, s);
        id
    }
}

fn comp_attr(inst: &Instruction, key: &str) -> Option<CompId> {
    match inst.attr(key)? {
        AttrValue::Comp(c) => Some(*c),
        AttrValue::Comps(cs) if cs.len() == 1 => Some(cs[0]),
        _ => None,
    }
}

fn branch_comps(inst: &Instruction) -> Vec<CompId> {
    match inst.attr("branch_computations") {
        Some(AttrValue::Comps(cs)) => cs.to_vec(),
        Some(AttrValue::Comp(c)) => vec![*c],
        _ => [
            comp_attr(inst, "true_computation"),
            comp_attr(inst, "false_computation"),
        ]
        .into_iter()
        .flatten()
        .collect(),
    }
}

fn first_array_rank(m: &Module, s: ShapeId) -> Option<usize> {
    match m.shape(s) {
        Shape::Tuple(e) => e.first().and_then(|&x| shapes::rank(m, x)),
        _ => None,
    }
}

/// Same structure and dimensions (layouts ignored).
fn same_dims(m: &Module, a: ShapeId, b: ShapeId) -> bool {
    match (m.shape(a), m.shape(b)) {
        (Shape::Array(x), Shape::Array(y)) => x.dims == y.dims && x.elem == y.elem,
        (Shape::Tuple(x), Shape::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(&p, &q)| same_dims(m, p, q))
        }
        (Shape::Token, Shape::Token) | (Shape::Opaque, Shape::Opaque) => true,
        _ => false,
    }
}

/// The instructions of `c` in an order where operands come before users
/// (depth-first post-order, starting from the schedule order, so a schedule
/// that is already topological is returned unchanged).
pub fn topo_order(m: &Module, c: CompId) -> Vec<InstId> {
    let comp = m.comp(c);
    let mut state: HashMap<InstId, u8> = HashMap::with_capacity(comp.order.len());
    for &i in &comp.order {
        state.insert(i, 0);
    }
    let mut out = Vec::with_capacity(comp.order.len());
    let mut stack: Vec<(InstId, usize)> = Vec::new();
    for &start in &comp.order {
        if state.get(&start) != Some(&0) {
            continue;
        }
        stack.push((start, 0));
        state.insert(start, 1);
        while let Some(&mut (i, ref mut k)) = stack.last_mut() {
            let ops = &m.inst(i).operands;
            if *k < ops.len() {
                let o = ops[*k];
                *k += 1;
                if state.get(&o) == Some(&0) {
                    state.insert(o, 1);
                    stack.push((o, 0));
                }
            } else {
                state.insert(i, 2);
                out.push(i);
                stack.pop();
            }
        }
    }
    out
}
