//! The verifier: checks that a parsed (or rewritten) [`Module`] is well formed
//! before anything downstream relies on it.
//!
//! What is checked, in order:
//! 1. module structure: the entry computation is placed and is the only one
//!    marked `ENTRY`; every called computation is placed in the module;
//! 2. per computation: every scheduled instruction indexes the arena, belongs
//!    to the computation and is scheduled once; the root is one of the
//!    computation's instructions; parameters are numbered `0..n` without gaps
//!    or repeats and [`Computation::params`](crate::ir::Computation::params) lists them by number;
//! 3. per instruction: operands and control predecessors live in the same
//!    computation and operands come earlier in the schedule; every array
//!    shape (also inside tuples) has a layout whose `minor_to_major` is a
//!    permutation of its dimensions; then the rule of its opcode family
//!    ([`Verifier::check_instruction`], a table from opcode to check):
//!    operand count and shapes, the output shape, the signatures of called
//!    computations; the asynchronous pairs, each start continued by exactly
//!    one op and each done taking its start (`verify/pairs.rs`);
//! 4. the call graph has no cycles.
//!
//! Shapes are compared the way XLA's layout-insensitive verifier compares
//! them with mixed precision allowed (TPU's setting): element type and
//! dimensions, ignoring layouts (checked separately), dynamic-dimension
//! markers and floating-point precision (`f16` matches `f32`, but not `s32`);
//! an unbounded dimension `?` matches any size. Opcodes without a rule here
//! (collectives other than all-reduce, scatter, rng, most custom-calls, ...)
//! are accepted as long as the structural checks pass.
//!
//! Attribute values are decoded with the accessors of [`crate::attrs`]; a
//! malformed value is reported like any other problem.
//!
//! The first problem found is returned as [`Error::Verify`] naming the
//! computation and instruction, with expected and actual shapes in HLO syntax.
//! The verifier never panics: every id is bounds-checked before it is used.

mod pairs;

use smallvec::SmallVec;

use crate::error::{Error, Result};
use crate::ir::{
    ArrayShape, AttrValue, CompId, InstId, Instruction, Module, PrimType, Shape, ShapeId,
};
use crate::opcode::Opcode;
use crate::shape_infer::{self as si, Dims};

/// [`verify`], with an error placed at `file:line:col` of `text`, the source
/// `m` was parsed from (see [`Error::locate`]).
pub fn verify_in_source(m: &Module, text: &str, filename: &str) -> Result<()> {
    verify(m).map_err(|e| e.locate(text, filename))
}

/// Checks `m`; see the module documentation for what is checked.
pub fn verify(m: &Module) -> Result<()> {
    verify_with(m, Verifier::check_instructions)
}

/// The checks of [`verify`] without its per-opcode shape rules (points 1, 2,
/// the edges and layouts of 3, and 4): structure, the entry layout against
/// the entry's parameters and root, operands defined before use in their
/// own computation, layouts that fit their shapes, an acyclic call graph. What a module read from a proto must meet (XLA reads a proto
/// whose shapes its verifier would reject, as it reads such text).
pub(crate) fn verify_structure(m: &Module) -> Result<()> {
    verify_with(m, Verifier::check_edges_and_layouts)
}

/// The module checks, the structure of every computation, the entry layout,
/// then `per_computation` on each computation, then the call graph.
fn verify_with<'m>(
    m: &'m Module,
    per_computation: fn(&mut Verifier<'m>, CompId) -> Result<()>,
) -> Result<()> {
    let mut v = Verifier::new(m);
    v.check_module()?;
    // Structure of every computation first, so that checking a caller may
    // look at any callee's parameters and root.
    for c in m.computations() {
        v.with_schedule(c, Verifier::check_structure)?;
    }
    v.check_entry_computation_layout()?;
    for c in m.computations() {
        v.with_schedule(c, per_computation)?;
    }
    v.check_call_graph_acyclic()
}

type Check<T = ()> = std::result::Result<T, String>;

struct Verifier<'m> {
    m: &'m Module,
    /// Computations placed in the module, sorted (for binary search).
    placed: Vec<CompId>,
    /// Per arena instruction: 1 + its position in its computation's schedule
    /// while that computation is being checked, else 0.
    position: Vec<u32>,
    /// Shapes whose layouts were already checked.
    layout_checked: Vec<bool>,
}

impl<'m> Verifier<'m> {
    fn new(m: &'m Module) -> Self {
        let mut placed: Vec<CompId> = m.computations().collect();
        placed.sort_unstable();
        Verifier {
            m,
            placed,
            position: vec![0; m.num_insts()],
            layout_checked: vec![false; m.num_shapes()],
        }
    }

    fn is_placed(&self, c: CompId) -> bool {
        self.placed.binary_search(&c).is_ok()
    }

    fn check_module(&self) -> Result<()> {
        let m = self.m;
        if m.num_computations() == 0 {
            return Err(Error::Module("the module has no computations".into()));
        }
        if !self.is_placed(m.entry) || !m.comp(m.entry).is_entry {
            return Err(Error::Module("the module has no ENTRY computation".into()));
        }
        if let Some(c) = m
            .computations()
            .find(|&c| c != m.entry && m.comp(c).is_entry)
        {
            return Err(Error::Module(format!(
                "computations %{} and %{} are both marked ENTRY",
                m.comp(m.entry).name,
                m.comp(c).name
            )));
        }
        Ok(())
    }

    /// `entry_computation_layout={(params...)->result}` describes the entry
    /// computation: one shape per parameter, and array shapes with the
    /// parameter's (root's) element type and dimensions. Layouts may differ
    /// (they are the caller's view).
    fn check_entry_computation_layout(&mut self) -> Result<()> {
        let m = self.m;
        let fail = |msg: String| Error::Module(format!("entry_computation_layout: {msg}"));
        let Some(layout) = m.entry_computation_layout().map_err(|e| fail(e.message))? else {
            return Ok(());
        };
        for &s in layout.params.iter().chain([&layout.result]) {
            self.check_layouts(s).map_err(fail)?;
        }
        let entry = m.entry_computation();
        if layout.params.len() != entry.params.len() {
            return Err(fail(format!(
                "lists {} parameter{}, but the entry computation %{} has {}",
                layout.params.len(),
                if layout.params.len() == 1 { "" } else { "s" },
                entry.name,
                entry.params.len()
            )));
        }
        let pairs = layout
            .params
            .iter()
            .zip(&entry.params)
            .enumerate()
            .map(|(i, (&s, &p))| (format!("parameter {i}"), s, p))
            .chain(std::iter::once((
                "the result".to_string(),
                layout.result,
                entry.root,
            )));
        for (what, s, inst) in pairs {
            let (Shape::Array(l), Shape::Array(a)) = (m.shape(s), self.shape(inst)) else {
                continue;
            };
            if !si::same_type_ignoring_fp_precision(l.elem, a.elem)
                || !si::dims_match(&l.dims, &a.dims)
            {
                return Err(fail(format!(
                    "{what} is {} here, but %{} is {}",
                    crate::print::print_shape(m, s),
                    m.inst(inst).name,
                    si::fmt_array(a)
                )));
            }
        }
        Ok(())
    }

    /// No computation calls itself, directly or through others (depth-first
    /// search with an explicit stack, so deep call chains cannot overflow).
    fn check_call_graph_acyclic(&self) -> Result<()> {
        const NEW: u8 = 0;
        const OPEN: u8 = 1;
        const DONE: u8 = 2;
        let m = self.m;
        let index = |c: CompId| self.placed.binary_search(&c).ok();
        let mut state = vec![NEW; self.placed.len()];
        // Calls made by a computation: (calling instruction, callee).
        let calls = |c: CompId| -> Vec<(InstId, CompId)> {
            let mut v = Vec::new();
            for &i in &m.comp(c).order {
                for callee in m.inst(i).called_computations() {
                    v.push((i, callee));
                }
            }
            v
        };
        for start in m.computations() {
            let Some(si) = index(start) else { continue };
            if state[si] != NEW {
                continue;
            }
            state[si] = OPEN;
            let mut stack = vec![(start, calls(start), 0usize)];
            while let Some((c, edges, next)) = stack.last_mut() {
                let c = *c;
                let Some(&(inst, callee)) = edges.get(*next) else {
                    if let Some(ci) = index(c) {
                        state[ci] = DONE;
                    }
                    stack.pop();
                    continue;
                };
                *next += 1;
                let Some(ci) = index(callee) else { continue };
                match state[ci] {
                    OPEN => {
                        return Err(self.fail(
                            c,
                            &m.inst(inst).name,
                            format!(
                                "calls %{}, which is already on the call chain: computations may not call themselves",
                                m.comp(callee).name
                            ),
                        ))
                    }
                    NEW => {
                        state[ci] = OPEN;
                        stack.push((callee, calls(callee), 0));
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    fn fail(&self, c: CompId, inst: &str, message: String) -> Error {
        // Names are unique within a computation; this runs once, on failure.
        let offset = self
            .m
            .find_instruction_in(c, inst)
            .and_then(|id| self.m.source_offset(id));
        Error::Verify {
            computation: self.m.comp(c).name.to_string(),
            instruction: inst.to_string(),
            message,
            offset,
            at: None,
        }
    }

    /// Records the schedule positions of `c`'s instructions (checking that each
    /// is in the arena, belongs to `c` and is scheduled once), runs `check`,
    /// then clears the positions again.
    fn with_schedule(
        &mut self,
        c: CompId,
        check: fn(&mut Self, CompId) -> Result<()>,
    ) -> Result<()> {
        let m = self.m;
        let comp = m.comp(c);
        let comp_err = |msg: String| Error::Module(format!("computation %{}: {msg}", comp.name));
        // Schedule: ids in range, right parent, each once.
        for (pos, &id) in comp.order.iter().enumerate() {
            if id.index() >= m.num_insts() {
                return Err(comp_err(format!(
                    "schedule entry {pos} refers to a nonexistent instruction"
                )));
            }
            let inst = m.inst(id);
            if inst.parent != c {
                return Err(self.fail(
                    c,
                    &inst.name,
                    format!(
                        "is scheduled in %{} but belongs to computation %{}",
                        comp.name,
                        self.comp_name(inst.parent)
                    ),
                ));
            }
            if self.position[id.index()] != 0 {
                return Err(self.fail(c, &inst.name, "is scheduled twice".into()));
            }
            self.position[id.index()] = pos as u32 + 1;
        }
        let result = check(self, c);
        for &id in &comp.order {
            if let Some(p) = self.position.get_mut(id.index()) {
                *p = 0;
            }
        }
        result
    }

    fn check_structure(&mut self, c: CompId) -> Result<()> {
        let m = self.m;
        let comp = m.comp(c);
        let comp_err = |msg: String| Error::Module(format!("computation %{}: {msg}", comp.name));
        if comp.order.is_empty() {
            return Err(comp_err("has no instructions".into()));
        }
        if comp.root.index() >= m.num_insts() || self.position[comp.root.index()] == 0 {
            return Err(comp_err("its ROOT is not one of its instructions".into()));
        }
        self.check_parameters(c)
    }

    fn check_instructions(&mut self, c: CompId) -> Result<()> {
        let m = self.m;
        let comp = m.comp(c);
        for &id in &comp.order {
            let inst = m.inst(id);
            self.check_edges(c, id)
                .map_err(|msg| self.fail(c, &inst.name, msg))?;
            self.check_layouts(inst.shape)
                .and_then(|()| self.check_constraint_layouts(inst))
                .map_err(|msg| self.fail(c, &inst.name, msg))?;
            self.check_instruction(inst)
                .map_err(|msg| self.fail(c, &inst.name, msg))?;
        }
        self.check_async_users(c)?;
        self.check_acyclic(c)
    }

    /// [`Verifier::check_instructions`] without the per-opcode rules.
    fn check_edges_and_layouts(&mut self, c: CompId) -> Result<()> {
        let m = self.m;
        for &id in &m.comp(c).order {
            let inst = m.inst(id);
            self.check_edges(c, id)
                .map_err(|msg| self.fail(c, &inst.name, msg))?;
            self.check_layouts(inst.shape)
                .and_then(|()| self.check_constraint_layouts(inst))
                .map_err(|msg| self.fail(c, &inst.name, msg))?;
        }
        self.check_acyclic(c)
    }

    /// Operands and control predecessors together form no cycle (a
    /// post-order, XLA's and the proto writer's, needs a DAG; found by the
    /// proto fuzzer: a control predecessor that uses its successor was read,
    /// then written in an order its own reader refused). Operands come
    /// before their users in the order (checked per instruction), so only
    /// a control predecessor placed after its successor can close a cycle:
    /// the search over the graph runs only then. Runs after
    /// [`Verifier::check_edges`] has checked every edge of `c`.
    fn check_acyclic(&self, c: CompId) -> Result<()> {
        let m = self.m;
        let comp = m.comp(c);
        let at = |id: InstId| self.position[id.index()] as usize - 1;
        let backward = comp.order.iter().any(|&id| {
            m.inst(id)
                .control_predecessors()
                .iter()
                .any(|&p| at(p) > at(id))
        });
        if !backward {
            return Ok(());
        }
        // Kahn's algorithm over the computation's instructions.
        let n = comp.order.len();
        let mut preds = vec![0u32; n];
        let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
        for &id in &comp.order {
            let inst = m.inst(id);
            for &p in inst.operands.iter().chain(inst.control_predecessors()) {
                succs[at(p)].push(at(id));
                preds[at(id)] += 1;
            }
        }
        let mut ready: Vec<usize> = (0..n).filter(|&k| preds[k] == 0).collect();
        while let Some(k) = ready.pop() {
            for &s in &succs[k] {
                preds[s] -= 1;
                if preds[s] == 0 {
                    ready.push(s);
                }
            }
        }
        match (0..n).find(|&k| preds[k] > 0) {
            None => Ok(()),
            Some(k) => Err(self.fail(
                c,
                &m.inst(comp.order[k]).name,
                "is on a cycle of operands and control predecessors".into(),
            )),
        }
    }

    /// The layouts of a custom-call's `operand_layout_constraints` shapes.
    fn check_constraint_layouts(&mut self, inst: &Instruction) -> Check {
        if let Ok(Some(shapes)) = inst.operand_layout_constraints() {
            for &s in shapes {
                self.check_layouts(s)
                    .map_err(|e| format!("operand_layout_constraints: {e}"))?;
            }
        }
        Ok(())
    }

    fn comp_name(&self, c: CompId) -> &str {
        if self.is_placed(c) {
            &self.m.comp(c).name
        } else {
            "<missing>"
        }
    }

    fn check_parameters(&self, c: CompId) -> Result<()> {
        let m = self.m;
        let comp = m.comp(c);
        let mut by_number: Vec<Option<InstId>> = Vec::new();
        let params: Vec<InstId> = comp
            .order
            .iter()
            .copied()
            .filter(|&i| m.inst(i).opcode == Opcode::Parameter)
            .collect();
        for &id in &params {
            let inst = m.inst(id);
            let n = inst.parameter_number().ok_or_else(|| {
                self.fail(c, &inst.name, "a parameter without its number".to_string())
            })?;
            if n < 0 || n as u64 >= params.len() as u64 {
                return Err(self.fail(c, &inst.name, format!(
                    "parameter({n}) is out of range: the computation has {} parameters, numbered 0 to {}",
                    params.len(),
                    params.len() as i64 - 1
                )));
            }
            let n = n as usize;
            by_number.resize(params.len(), None);
            if let Some(prev) = by_number[n] {
                return Err(self.fail(
                    c,
                    &inst.name,
                    format!(
                        "parameter({n}) repeats the number of %{}",
                        m.inst(prev).name
                    ),
                ));
            }
            by_number[n] = Some(id);
        }
        let listed_ok = comp.params.len() == params.len()
            && comp
                .params
                .iter()
                .zip(&by_number)
                .all(|(&p, &b)| Some(p) == b);
        if !listed_ok {
            return Err(Error::Module(format!(
                "computation %{}: its parameter list does not match its parameter instructions",
                comp.name
            )));
        }
        Ok(())
    }

    /// Operands, control predecessors and called computations refer to things that exist.
    fn check_edges(&self, c: CompId, id: InstId) -> Check {
        let m = self.m;
        let inst = m.inst(id);
        let my_pos = self.position[id.index()];
        for (k, &op) in inst.operands.iter().enumerate() {
            if op.index() >= m.num_insts() || m.inst(op).parent != c {
                return Err(format!(
                    "operand {k} is not an instruction of computation %{}",
                    m.comp(c).name
                ));
            }
            let pos = self.position[op.index()];
            if pos == 0 {
                return Err(format!(
                    "operand {k} (%{}) is not scheduled in this computation",
                    m.inst(op).name
                ));
            }
            if pos >= my_pos {
                return Err(format!(
                    "operand {k} (%{}) is used before it is defined",
                    m.inst(op).name
                ));
            }
        }
        for &p in inst.control_predecessors() {
            if p.index() >= m.num_insts() || m.inst(p).parent != c || self.position[p.index()] == 0
            {
                return Err(format!(
                    "a control predecessor is not an instruction of computation %{}",
                    m.comp(c).name
                ));
            }
        }
        for callee in inst.called_computations() {
            if !self.is_placed(callee) {
                return Err("calls a computation that is not part of the module".into());
            }
        }
        Ok(())
    }

    // ---- layouts ----

    fn check_layouts(&mut self, id: ShapeId) -> Check {
        if self.layout_checked.get(id.index()).copied().unwrap_or(true) {
            return Ok(());
        }
        self.layout_checked[id.index()] = true;
        match self.m.shape(id) {
            Shape::Array(a) => check_array_layout(a),
            Shape::Tuple(elems) => {
                for &e in elems {
                    self.check_layouts(e)?;
                }
                Ok(())
            }
            Shape::Buffer(inner) => self.check_layouts(*inner),
            Shape::Token | Shape::Opaque => Ok(()),
        }
    }

    // ---- shapes ----

    fn shape(&self, id: InstId) -> &'m Shape {
        self.m.inst_shape(id)
    }

    fn shape_str(&self, id: ShapeId) -> String {
        shape_to_string(self.m, id)
    }

    /// `a` and `b` agree ignoring layouts.
    fn compatible(&self, a: ShapeId, b: ShapeId) -> bool {
        a == b || shapes_compatible(self.m, self.m.shape(a), self.m.shape(b))
    }

    fn array_of(&self, inst: &Instruction, k: usize) -> Check<&'m ArrayShape> {
        let id = inst.operands[k];
        match self.shape(id) {
            Shape::Array(a) => Ok(a),
            _ => Err(format!(
                "operand {k} (%{}) must be an array, but its shape is {}",
                self.m.inst(id).name,
                self.shape_str(self.m.inst(id).shape)
            )),
        }
    }

    fn out_array(&self, inst: &Instruction) -> Check<&'m ArrayShape> {
        match self.m.shape(inst.shape) {
            Shape::Array(a) => Ok(a),
            _ => Err(format!(
                "{} must produce an array, but its shape is {}",
                inst.opcode,
                self.shape_str(inst.shape)
            )),
        }
    }

    fn operand_count(&self, inst: &Instruction, n: usize) -> Check {
        if inst.operands.len() != n {
            return Err(format!(
                "{} takes {n} operand{}, but has {}",
                inst.opcode,
                if n == 1 { "" } else { "s" },
                inst.operands.len()
            ));
        }
        Ok(())
    }

    fn operand_count_at_least(&self, inst: &Instruction, n: usize) -> Check {
        if inst.operands.len() < n {
            return Err(format!(
                "{} takes at least {n} operand{}, but has {}",
                inst.opcode,
                if n == 1 { "" } else { "s" },
                inst.operands.len()
            ));
        }
        Ok(())
    }

    /// The output must equal `expected` (element type and dimensions).
    fn expect_out(&self, inst: &Instruction, expected: &ArrayShape, what: &str) -> Check {
        let out = self.out_array(inst)?;
        if !si::arrays_compatible_ignoring_fp_precision(out, expected) {
            return Err(format!(
                "{what}: expected shape {}, but the instruction's shape is {}",
                si::fmt_array(expected),
                si::fmt_array(out)
            ));
        }
        Ok(())
    }

    /// The output must have `expected`'s dimensions (any element type).
    fn expect_out_dims(&self, inst: &Instruction, expected: &ArrayShape, what: &str) -> Check {
        let out = self.out_array(inst)?;
        if !si::dims_match(&out.dims, &expected.dims) {
            let with_out_type = ArrayShape {
                elem: out.elem,
                ..expected.clone()
            };
            return Err(format!(
                "{what}: expected shape {}, but the instruction's shape is {}",
                si::fmt_array(&with_out_type),
                si::fmt_array(out)
            ));
        }
        Ok(())
    }

    fn same_elem(&self, inst: &Instruction, k: usize) -> Check {
        let out = self.out_array(inst)?;
        let op = self.array_of(inst, k)?;
        if !si::same_type_ignoring_fp_precision(op.elem, out.elem) {
            return Err(format!(
                "operand {k} has element type {} ({}), but the instruction produces {}",
                op.elem,
                si::fmt_array(op),
                si::fmt_array(out)
            ));
        }
        Ok(())
    }

    // ---- attributes ----

    fn int_list(&self, inst: &Instruction, key: &str) -> Check<Option<Dims>> {
        inst.int_list_attr(key).map_err(|e| e.to_string())
    }

    fn int_attr(&self, inst: &Instruction, key: &str) -> Check<Option<i64>> {
        inst.int_attr(key).map_err(|e| e.to_string())
    }

    fn callee(&self, inst: &Instruction, key: &str) -> Check<Option<CompId>> {
        match inst.attr(key) {
            None => Ok(None),
            Some(AttrValue::Comp(c)) => Ok(Some(*c)),
            Some(AttrValue::Comps(cs)) if cs.len() == 1 => Ok(Some(cs[0])),
            Some(_) => Err(format!("{key}= must name one computation")),
        }
    }

    fn required_callee(&self, inst: &Instruction, key: &str) -> Check<CompId> {
        self.callee(inst, key)?
            .ok_or_else(|| format!("{} needs the attribute {key}=", inst.opcode))
    }

    // ---- called computations ----

    /// `callee`'s parameters must match `args` and, when given, its root must
    /// match `result`.
    fn check_signature(
        &self,
        key: &str,
        callee: CompId,
        args: &[ShapeId],
        result: Option<ShapeId>,
    ) -> Check {
        let m = self.m;
        let comp = m.comp(callee);
        if comp.params.len() != args.len() {
            return Err(format!(
                "{key}=%{} takes {} parameter{}, but {} argument{} passed",
                comp.name,
                comp.params.len(),
                if comp.params.len() == 1 { "" } else { "s" },
                args.len(),
                if args.len() == 1 { " is" } else { "s are" }
            ));
        }
        for (i, (&p, &a)) in comp.params.iter().zip(args).enumerate() {
            let ps = m.inst(p).shape;
            if !self.compatible(ps, a) {
                return Err(format!(
                    "{key}=%{}: parameter {i} has shape {}, but the argument passed is {}",
                    comp.name,
                    self.shape_str(ps),
                    self.shape_str(a)
                ));
            }
        }
        if let Some(r) = result {
            let rs = m.inst(comp.root).shape;
            if !self.compatible(rs, r) {
                return Err(format!(
                    "{key}=%{}: its root has shape {}, expected {}",
                    comp.name,
                    self.shape_str(rs),
                    self.shape_str(r)
                ));
            }
        }
        Ok(())
    }

    /// A reducer-like computation (`to_apply` of reduce, reduce-window,
    /// all-reduce, scatter, sort's comparator, map): `n_params` scalar
    /// parameters, and a root of the given scalar types (a tuple when more than
    /// one), or `pred[]` for a comparator.
    fn check_scalar_computation(
        &self,
        key: &str,
        callee: CompId,
        n_params: usize,
    ) -> Check<Vec<PrimType>> {
        let m = self.m;
        let comp = m.comp(callee);
        if comp.params.len() != n_params {
            return Err(format!(
                "{key}=%{} takes {} parameters, but {n_params} are needed",
                comp.name,
                comp.params.len()
            ));
        }
        let mut types = Vec::with_capacity(n_params);
        for (i, &p) in comp.params.iter().enumerate() {
            match m.inst_shape(p) {
                Shape::Array(a) if a.rank() == 0 => types.push(a.elem),
                _ => {
                    return Err(format!(
                        "{key}=%{}: parameter {i} must be a scalar, but is {}",
                        comp.name,
                        self.shape_str(m.inst(p).shape)
                    ))
                }
            }
        }
        Ok(types)
    }

    /// Scalar element types of `callee`'s root: one for an array root, one per
    /// element for a tuple of scalars.
    fn scalar_root_types(&self, key: &str, callee: CompId) -> Check<Vec<PrimType>> {
        let m = self.m;
        let comp = m.comp(callee);
        let root = m.inst(comp.root).shape;
        let not_scalar = || {
            format!(
                "{key}=%{}: its root must be a scalar or a tuple of scalars, but is {}",
                comp.name,
                self.shape_str(root)
            )
        };
        match m.shape(root) {
            Shape::Array(a) if a.rank() == 0 => Ok(vec![a.elem]),
            Shape::Tuple(es) => es
                .iter()
                .map(|&e| match m.shape(e) {
                    Shape::Array(a) if a.rank() == 0 => Ok(a.elem),
                    _ => Err(not_scalar()),
                })
                .collect(),
            _ => Err(not_scalar()),
        }
    }

    /// Reduce and reduce-window: `2n` operands (`n` inputs, `n` init values),
    /// reducer `(acc_0..acc_n, in_0..in_n) -> (acc_0..acc_n)`. Returns the
    /// inputs and the init value types.
    fn check_reduction(&self, inst: &Instruction) -> Check<(Vec<&'m ArrayShape>, Vec<PrimType>)> {
        let k = inst.operands.len();
        if k < 2 || !k.is_multiple_of(2) {
            return Err(format!(
                "{} takes inputs and as many init values (an even number of operands), but has {k}",
                inst.opcode
            ));
        }
        let n = k / 2;
        let mut inputs = Vec::with_capacity(n);
        let mut inits = Vec::with_capacity(n);
        for i in 0..n {
            inputs.push(self.array_of(inst, i)?);
            let init = self.array_of(inst, n + i)?;
            if init.rank() != 0 {
                return Err(format!(
                    "init value {i} (operand {}) must be a scalar, but is {}",
                    n + i,
                    si::fmt_array(init)
                ));
            }
            inits.push(init.elem);
        }
        for (i, a) in inputs.iter().enumerate().skip(1) {
            if !si::dims_match(&a.dims, &inputs[0].dims) {
                return Err(format!(
                    "input {i} is {} but input 0 is {}: inputs must have the same dimensions",
                    si::fmt_array(a),
                    si::fmt_array(inputs[0])
                ));
            }
        }
        let reducer = self.required_callee(inst, "to_apply")?;
        let params = self.check_scalar_computation("to_apply", reducer, 2 * n)?;
        let roots = self.scalar_root_types("to_apply", reducer)?;
        let name = &self.m.comp(reducer).name;
        if roots.len() != n {
            return Err(format!(
                "to_apply=%{name} returns {} values, but the {} has {n} init values",
                roots.len(),
                inst.opcode
            ));
        }
        for i in 0..n {
            if !si::same_type_ignoring_fp_precision(roots[i], inits[i])
                || !si::same_type_ignoring_fp_precision(params[i], inits[i])
            {
                return Err(format!(
                    "to_apply=%{name}: accumulator {i} has type {} (parameter {i}: {}), but init value {i} is {}",
                    roots[i], params[i], inits[i]
                ));
            }
            if !si::same_type_ignoring_fp_precision(params[n + i], inputs[i].elem) {
                return Err(format!(
                    "to_apply=%{name}: parameter {} has type {}, but input {i} has element type {}",
                    n + i,
                    params[n + i],
                    inputs[i].elem
                ));
            }
        }
        Ok((inputs, inits))
    }

    /// The output of a reduction: one array (`n == 1`) or a tuple of `n`
    /// arrays, each with `dims` and the init value's element type.
    fn expect_reduction_out(
        &self,
        inst: &Instruction,
        dims: &ArrayShape,
        inits: &[PrimType],
    ) -> Check {
        let expected: Vec<ArrayShape> = inits
            .iter()
            .map(|&t| ArrayShape {
                elem: t,
                ..dims.clone()
            })
            .collect();
        let m = self.m;
        let ok = match (m.shape(inst.shape), expected.as_slice()) {
            (Shape::Array(a), [e]) => si::arrays_compatible_ignoring_fp_precision(a, e),
            (Shape::Tuple(es), _) if es.len() == expected.len() => es.iter().zip(&expected).all(
                |(&s, e)| matches!(m.shape(s), Shape::Array(a) if si::arrays_compatible_ignoring_fp_precision(a, e)),
            ),
            _ => false,
        };
        if !ok {
            let want = if expected.len() == 1 {
                si::fmt_array(&expected[0])
            } else {
                format!(
                    "({})",
                    expected
                        .iter()
                        .map(si::fmt_array)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            return Err(format!(
                "expected shape {want}, but the instruction's shape is {}",
                self.shape_str(inst.shape)
            ));
        }
        Ok(())
    }

    // ---- per opcode ----

    /// The rule of `inst`'s opcode family (operand count, operand shapes,
    /// output shape, called computations); an opcode without a rule passes.
    fn check_instruction(&self, inst: &Instruction) -> Check {
        use Opcode::*;
        match inst.opcode {
            Parameter | Constant | Iota | ReplicaId | PartitionId => self.check_leaf(inst),
            Abs | Cbrt | Ceil | Clz | Cosine | Erf | Exponential | ExponentialMinusOne | Floor
            | Imag | IsFinite | Log | LogPlusOne | Logistic | Negate | Not | Popcnt | Real
            | ReducePrecision | RoundNearestAfz | RoundNearestEven | Rsqrt | Sign | Sine | Sqrt
            | Tan | Tanh => self.check_unary(inst),
            Convert => {
                self.operand_count(inst, 1)?;
                let op = self.array_of(inst, 0)?;
                self.expect_out_dims(inst, op, "convert keeps the dimensions")
            }
            StochasticConvert => {
                self.operand_count(inst, 2)?;
                let op = self.array_of(inst, 0)?;
                self.expect_out_dims(inst, op, "stochastic-convert keeps the dimensions")
            }
            BitcastConvert => {
                self.operand_count(inst, 1)?;
                let op = self.array_of(inst, 0)?;
                let out = self.out_array(inst)?;
                let expected = si::infer_bitcast_convert_shape(op, out.elem).map_err(|e| e.0)?;
                self.expect_out(inst, &expected, "bitcast-convert")
            }
            Add | Subtract | Multiply | Divide | Remainder | Maximum | Minimum | Power | Atan2
            | And | Or | Xor | ShiftLeft | ShiftRightArithmetic | ShiftRightLogical | Compare
            | Complex => self.check_binary(inst),
            Select => self.check_select(inst),
            Clamp => self.check_clamp(inst),
            Copy | OptBarrier | Domain => {
                self.operand_count(inst, 1)?;
                self.expect_same_as_operand(inst, 0)
            }
            AddDependency => {
                self.operand_count(inst, 2)?;
                self.expect_same_as_operand(inst, 0)
            }
            Bitcast => self.operand_count(inst, 1),
            Broadcast => {
                self.operand_count(inst, 1)?;
                self.same_elem(inst, 0)?;
                let map = self.int_list(inst, "dimensions")?.unwrap_or_default();
                si::check_broadcast(self.array_of(inst, 0)?, self.out_array(inst)?, &map)
                    .map_err(|e| e.0)
            }
            Reshape => {
                self.operand_count(inst, 1)?;
                self.same_elem(inst, 0)?;
                si::check_reshape(self.array_of(inst, 0)?, self.out_array(inst)?).map_err(|e| e.0)
            }
            Transpose => self.check_transpose(inst),
            Reverse => self.check_reverse(inst),
            Dot => self.check_dot(inst),
            Convolution => self.check_convolution(inst),
            Reduce => {
                let (inputs, inits) = self.check_reduction(inst)?;
                let dims = self.int_list(inst, "dimensions")?.unwrap_or_default();
                let out = si::infer_reduce_shape(inputs[0], &dims).map_err(|e| e.0)?;
                self.expect_reduction_out(inst, &out, &inits)
            }
            ReduceWindow => {
                let (inputs, inits) = self.check_reduction(inst)?;
                let window = self.window(inst)?;
                let out = si::infer_reduce_window_shape(inputs[0], &window).map_err(|e| e.0)?;
                self.expect_reduction_out(inst, &out, &inits)
            }
            SelectAndScatter => self.check_select_and_scatter(inst),
            Slice => self.check_slice(inst),
            DynamicSlice => self.check_dynamic_slice(inst),
            Gather => self.check_gather(inst),
            DynamicUpdateSlice => self.check_dynamic_update_slice(inst),
            Concatenate => self.check_concatenate(inst),
            Pad => self.check_pad(inst),
            Tuple => self.check_tuple(inst),
            GetTupleElement => self.check_get_tuple_element(inst),
            Call => self.check_call(inst),
            Fusion => self.check_fusion(inst),
            While => self.check_while(inst),
            Conditional => self.check_conditional(inst),
            Map => self.check_map(inst),
            Sort => self.check_sort(inst),
            AllReduce => {
                self.operand_count_at_least(inst, 1)?;
                let f = self.required_callee(inst, "to_apply")?;
                self.check_scalar_computation("to_apply", f, 2)?;
                self.expect_operands_or_tuple(inst)
            }
            ReduceScatter | AllReduceStart => {
                let f = self.required_callee(inst, "to_apply")?;
                self.check_scalar_computation("to_apply", f, 2).map(drop)
            }
            AsyncStart => self.check_async_start(inst),
            AsyncUpdate | AsyncDone => self.check_async_continuation(inst),
            AllReduceDone
            | AllGatherDone
            | CollectivePermuteDone
            | CopyDone
            | SendDone
            | RecvDone => self.check_done(inst),
            CopyStart => self.check_copy_start(inst),
            DynamicReshape => self.operand_count_at_least(inst, 1),
            Infeed => self.check_infeed(inst),
            CustomCall => self.check_operand_layout_constraints(inst),
            _ => Ok(()),
        }
    }

    /// A leaf: no operands; a constant's literal fits its shape, an iota's
    /// dimension is in range.
    fn check_leaf(&self, inst: &Instruction) -> Check {
        use Opcode::*;
        let m = self.m;
        self.operand_count(inst, 0)?;
        if inst.opcode == Constant {
            let lit = inst.literal().ok_or("a constant without a literal")?;
            crate::attrs::literal::fits(m, inst.shape, lit)?;
        }
        if inst.opcode == Iota {
            let out = self.out_array(inst)?;
            let d = self.int_attr(inst, "iota_dimension")?.unwrap_or(0);
            if d < 0 || d as u64 >= out.rank() as u64 {
                return Err(format!(
                    "iota_dimension={d} is out of range for {}",
                    si::fmt_array(out)
                ));
            }
        }
        Ok(())
    }

    /// A unary elementwise op: one operand, its shape (a predicate for
    /// `is-finite`, the component type for `abs`/`real`/`imag` of complex).
    fn check_unary(&self, inst: &Instruction) -> Check {
        use Opcode::*;
        self.operand_count(inst, 1)?;
        let op = self.array_of(inst, 0)?;
        let elem = match inst.opcode {
            IsFinite => PrimType::Pred,
            Abs | Real | Imag => complex_component(op.elem).unwrap_or(op.elem),
            _ => op.elem,
        };
        self.expect_out(
            inst,
            &ArrayShape { elem, ..op.clone() },
            "elementwise result",
        )
    }

    /// A binary elementwise op: two operands of one type and shape, its shape
    /// (a predicate for `compare`, complex for `complex`).
    fn check_binary(&self, inst: &Instruction) -> Check {
        use Opcode::*;
        self.operand_count(inst, 2)?;
        let (a, b) = (self.array_of(inst, 0)?, self.array_of(inst, 1)?);
        if !si::arrays_compatible_ignoring_fp_precision(a, b) {
            return Err(format!(
                "operands of {} must have the same element type and dimensions, but are {} and {}",
                inst.opcode,
                si::fmt_array(a),
                si::fmt_array(b)
            ));
        }
        let elem = match inst.opcode {
            Compare => PrimType::Pred,
            Complex => match a.elem {
                PrimType::F32 => PrimType::C64,
                PrimType::F64 => PrimType::C128,
                t => return Err(format!("complex takes f32 or f64 operands, not {t}")),
            },
            _ => a.elem,
        };
        self.expect_out(
            inst,
            &ArrayShape { elem, ..a.clone() },
            "elementwise result",
        )
    }

    /// Select: a predicate (scalar or of the output's dimensions) and two
    /// operands of the output's shape.
    fn check_select(&self, inst: &Instruction) -> Check {
        let m = self.m;
        self.operand_count(inst, 3)?;
        let pred = self.array_of(inst, 0)?;
        let (t, f) = (inst.operands[1], inst.operands[2]);
        if pred.elem != PrimType::Pred {
            return Err(format!(
                "the predicate (operand 0) must be pred, but is {}",
                si::fmt_array(pred)
            ));
        }
        for (k, x) in [(1, t), (2, f)] {
            if !self.compatible(m.inst(x).shape, inst.shape) {
                return Err(format!(
                    "operand {k} has shape {}, but select produces {}",
                    self.shape_str(m.inst(x).shape),
                    self.shape_str(inst.shape)
                ));
            }
        }
        let out = self.out_array(inst)?;
        if pred.rank() != 0 && !si::dims_match(&pred.dims, &out.dims) {
            return Err(format!(
                "the predicate {} must be a scalar or have the dimensions of the result {}",
                si::fmt_array(pred),
                si::fmt_array(out)
            ));
        }
        Ok(())
    }

    /// Clamp: bounds of the operand's shape or scalars.
    fn check_clamp(&self, inst: &Instruction) -> Check {
        self.operand_count(inst, 3)?;
        let (lo, x, hi) = (
            self.array_of(inst, 0)?,
            self.array_of(inst, 1)?,
            self.array_of(inst, 2)?,
        );
        for (k, bound) in [(0, lo), (2, hi)] {
            let ok = si::same_type_ignoring_fp_precision(bound.elem, x.elem)
                && (bound.rank() == 0 || si::dims_match(&bound.dims, &x.dims));
            if !ok {
                return Err(format!(
                    "clamp bound (operand {k}) {} must be a scalar or the shape of the operand {}, with the same element type",
                    si::fmt_array(bound),
                    si::fmt_array(x)
                ));
            }
        }
        self.expect_out(inst, x, "clamp result")
    }

    /// Transpose: the output is the operand permuted by `dimensions`.
    fn check_transpose(&self, inst: &Instruction) -> Check {
        self.operand_count(inst, 1)?;
        let perm = self.int_list(inst, "dimensions")?.unwrap_or_default();
        let expected =
            si::infer_transpose_shape(self.array_of(inst, 0)?, &perm).map_err(|e| e.0)?;
        self.expect_out(
            inst,
            &expected,
            &format!("transpose with dimensions={}", si::fmt_list(&perm)),
        )
    }

    /// Reverse: `dimensions` in range, the operand's shape kept.
    fn check_reverse(&self, inst: &Instruction) -> Check {
        self.operand_count(inst, 1)?;
        let op = self.array_of(inst, 0)?;
        let dims = self.int_list(inst, "dimensions")?.unwrap_or_default();
        if let Some(&d) = dims
            .iter()
            .find(|&&d| d < 0 || d as u64 >= op.rank() as u64)
        {
            return Err(format!(
                "dimensions= names dimension {d}, out of range for {}",
                si::fmt_array(op)
            ));
        }
        self.expect_out(inst, op, "reverse result")
    }

    /// Slice: the output as `slice=` cuts the operand.
    fn check_slice(&self, inst: &Instruction) -> Check {
        self.operand_count(inst, 1)?;
        let slice = inst
            .slice()
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{} needs the attribute slice=", inst.opcode))?;
        let expected = si::infer_slice_shape(self.array_of(inst, 0)?, &slice).map_err(|e| e.0)?;
        self.expect_out(inst, &expected, "slice result")
    }

    /// Gather: the output as its dimension numbers and slice sizes infer.
    fn check_gather(&self, inst: &Instruction) -> Check {
        self.operand_count(inst, 2)?;
        let (op, idx) = (self.array_of(inst, 0)?, self.array_of(inst, 1)?);
        let list = |k| self.int_list(inst, k).map(Option::unwrap_or_default);
        let g = si::GatherDims {
            offset_dims: list("offset_dims")?,
            collapsed_slice_dims: list("collapsed_slice_dims")?,
            start_index_map: list("start_index_map")?,
            operand_batching_dims: list("operand_batching_dims")?,
            start_indices_batching_dims: list("start_indices_batching_dims")?,
            index_vector_dim: self
                .int_attr(inst, "index_vector_dim")?
                .unwrap_or(idx.rank() as i64),
            slice_sizes: list("slice_sizes")?,
        };
        let expected = si::infer_gather_shape(op, idx, &g).map_err(|e| e.0)?;
        self.expect_out(inst, &expected, "gather result")
    }

    /// Concatenate: one dimension, the output the operands' concatenation
    /// along it.
    fn check_concatenate(&self, inst: &Instruction) -> Check {
        self.operand_count_at_least(inst, 1)?;
        let ops: Vec<&ArrayShape> = (0..inst.operands.len())
            .map(|k| self.array_of(inst, k))
            .collect::<Check<_>>()?;
        let dims = self.int_list(inst, "dimensions")?.unwrap_or_default();
        let [d] = dims[..] else {
            return Err(format!(
                "concatenate needs one dimension, but dimensions={}",
                si::fmt_list(&dims)
            ));
        };
        let expected = si::infer_concat_shape(&ops, d).map_err(|e| e.0)?;
        self.expect_out(inst, &expected, "concatenate result")
    }

    /// Pad: a scalar padding value, the output as `padding=` pads the operand.
    fn check_pad(&self, inst: &Instruction) -> Check {
        self.operand_count(inst, 2)?;
        let value = self.array_of(inst, 1)?;
        let op = self.array_of(inst, 0)?;
        if value.rank() != 0 || !si::same_type_ignoring_fp_precision(value.elem, op.elem) {
            return Err(format!(
                "the padding value (operand 1) must be a scalar of type {}, but is {}",
                op.elem,
                si::fmt_array(value)
            ));
        }
        let padding = inst
            .padding()
            .map_err(|e| e.to_string())?
            .unwrap_or_default();
        let expected = si::infer_pad_shape(op, &padding).map_err(|e| e.0)?;
        self.expect_out(inst, &expected, "pad result")
    }

    /// Tuple: the output is the tuple of the operands' shapes.
    fn check_tuple(&self, inst: &Instruction) -> Check {
        let m = self.m;
        let Shape::Tuple(elems) = m.shape(inst.shape) else {
            return Err(format!(
                "tuple must produce a tuple, but its shape is {}",
                self.shape_str(inst.shape)
            ));
        };
        if elems.len() != inst.operands.len() {
            return Err(format!(
                "tuple has {} operands, but its shape {} has {} elements",
                inst.operands.len(),
                self.shape_str(inst.shape),
                elems.len()
            ));
        }
        for (k, (&e, &op)) in elems.iter().zip(&inst.operands).enumerate() {
            if !self.compatible(e, m.inst(op).shape) {
                return Err(format!(
                    "element {k} of the tuple's shape is {}, but operand {k} is {}",
                    self.shape_str(e),
                    self.shape_str(m.inst(op).shape)
                ));
            }
        }
        Ok(())
    }

    /// Get-tuple-element: the index in range, the output that element's shape.
    fn check_get_tuple_element(&self, inst: &Instruction) -> Check {
        let m = self.m;
        self.operand_count(inst, 1)?;
        let op = inst.operands[0];
        let Shape::Tuple(elems) = self.shape(op) else {
            return Err(format!(
                "the operand must be a tuple, but is {}",
                self.shape_str(m.inst(op).shape)
            ));
        };
        let index = self
            .int_attr(inst, "index")?
            .ok_or("get-tuple-element needs the attribute index=")?;
        let Some(&e) = usize::try_from(index).ok().and_then(|i| elems.get(i)) else {
            return Err(format!(
                "index={index} is out of range for the operand's shape {}",
                self.shape_str(m.inst(op).shape)
            ));
        };
        if !self.compatible(e, inst.shape) {
            return Err(format!(
                "element {index} of the operand is {}, but the instruction's shape is {}",
                self.shape_str(e),
                self.shape_str(inst.shape)
            ));
        }
        Ok(())
    }

    /// Call: `to_apply` takes the operands and returns the output.
    fn check_call(&self, inst: &Instruction) -> Check {
        let callee = self.required_callee(inst, "to_apply")?;
        self.check_signature(
            "to_apply",
            callee,
            &self.operand_shapes(inst),
            Some(inst.shape),
        )
    }

    /// Fusion: `calls` takes the operands and returns the output.
    fn check_fusion(&self, inst: &Instruction) -> Check {
        let callee = self.required_callee(inst, "calls")?;
        self.check_signature(
            "calls",
            callee,
            &self.operand_shapes(inst),
            Some(inst.shape),
        )
    }

    /// While: the operand's shape kept; the body and condition take the loop
    /// state, the body returns it, the condition a predicate.
    fn check_while(&self, inst: &Instruction) -> Check {
        self.operand_count(inst, 1)?;
        self.expect_same_as_operand(inst, 0)?;
        let body = self.required_callee(inst, "body")?;
        self.check_signature("body", body, &[inst.shape], Some(inst.shape))?;
        let cond = self.required_callee(inst, "condition")?;
        self.check_signature("condition", cond, &[inst.shape], None)?;
        self.expect_pred_root("condition", cond)
    }

    /// Map: operands of the output's dimensions, `to_apply` a scalar
    /// computation returning the output's element type.
    fn check_map(&self, inst: &Instruction) -> Check {
        let m = self.m;
        self.operand_count_at_least(inst, 1)?;
        let out = self.out_array(inst)?;
        for k in 0..inst.operands.len() {
            let op = self.array_of(inst, k)?;
            if !si::dims_match(&op.dims, &out.dims) {
                return Err(format!(
                    "operand {k} {} must have the dimensions of the result {}",
                    si::fmt_array(op),
                    si::fmt_array(out)
                ));
            }
        }
        let f = self.required_callee(inst, "to_apply")?;
        self.check_scalar_computation("to_apply", f, inst.operands.len())?;
        let roots = self.scalar_root_types("to_apply", f)?;
        if roots.len() != 1 || !si::same_type_ignoring_fp_precision(roots[0], out.elem) {
            return Err(format!(
                "to_apply=%{} must return a scalar of type {} for a map producing {}",
                m.comp(f).name,
                out.elem,
                si::fmt_array(out)
            ));
        }
        Ok(())
    }

    /// Infeed: the output is a tuple of the data and a token.
    fn check_infeed(&self, inst: &Instruction) -> Check {
        let m = self.m;
        let ok = matches!(m.shape(inst.shape), Shape::Tuple(es)
            if es.len() == 2 && matches!(m.shape(es[1]), Shape::Token));
        if !ok {
            return Err(format!(
                "infeed must produce a tuple (data, token[]), but its shape is {}",
                self.shape_str(inst.shape)
            ));
        }
        Ok(())
    }

    fn operand_shapes(&self, inst: &Instruction) -> SmallVec<[ShapeId; 4]> {
        inst.operands
            .iter()
            .map(|&o| self.m.inst(o).shape)
            .collect()
    }

    fn expect_same_as_operand(&self, inst: &Instruction, k: usize) -> Check {
        let op = self.m.inst(inst.operands[k]).shape;
        if !self.compatible(op, inst.shape) {
            return Err(format!(
                "{} must have the shape of operand {k}, {}, but its shape is {}",
                inst.opcode,
                self.shape_str(op),
                self.shape_str(inst.shape)
            ));
        }
        Ok(())
    }

    /// One operand: the result has its shape; several: a tuple of their shapes.
    fn expect_operands_or_tuple(&self, inst: &Instruction) -> Check {
        if inst.operands.len() == 1 {
            return self.expect_same_as_operand(inst, 0);
        }
        let ops = self.operand_shapes(inst);
        let ok = matches!(self.m.shape(inst.shape), Shape::Tuple(es)
            if es.len() == ops.len() && es.iter().zip(&ops).all(|(&e, &o)| self.compatible(e, o)));
        if !ok {
            let want: Vec<String> = ops.iter().map(|&o| self.shape_str(o)).collect();
            return Err(format!(
                "expected shape ({}), but the instruction's shape is {}",
                want.join(", "),
                self.shape_str(inst.shape)
            ));
        }
        Ok(())
    }

    fn expect_pred_root(&self, key: &str, callee: CompId) -> Check {
        let comp = self.m.comp(callee);
        let root = self.m.inst(comp.root).shape;
        match self.m.shape(root) {
            Shape::Array(a) if a.rank() == 0 && a.elem == PrimType::Pred => Ok(()),
            _ => Err(format!(
                "{key}=%{} must return pred[], but its root is {}",
                comp.name,
                self.shape_str(root)
            )),
        }
    }

    fn window(&self, inst: &Instruction) -> Check<Vec<si::WindowDim>> {
        Ok(inst
            .window()
            .map_err(|e| e.to_string())?
            .unwrap_or_default())
    }

    fn check_dot(&self, inst: &Instruction) -> Check {
        // Sparse dots carry metadata operands and halve a contracting
        // dimension; only dense dots are checked.
        if inst.attr("sparsity").is_some() {
            return Ok(());
        }
        self.operand_count(inst, 2)?;
        let (lhs, rhs) = (self.array_of(inst, 0)?, self.array_of(inst, 1)?);
        let list = |k| self.int_list(inst, k).map(Option::unwrap_or_default);
        let d = si::DotDims {
            lhs_batch: list("lhs_batch_dims")?,
            rhs_batch: list("rhs_batch_dims")?,
            lhs_contracting: list("lhs_contracting_dims")?,
            rhs_contracting: list("rhs_contracting_dims")?,
        };
        let expected = si::infer_dot_shape(lhs, rhs, &d).map_err(|e| e.0)?;
        self.expect_out_dims(
            inst,
            &expected,
            &format!("dot of {} and {}", si::fmt_array(lhs), si::fmt_array(rhs)),
        )
    }

    fn check_convolution(&self, inst: &Instruction) -> Check {
        self.operand_count(inst, 2)?;
        let (lhs, rhs) = (self.array_of(inst, 0)?, self.array_of(inst, 1)?);
        let d = inst
            .conv_dims()
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{} needs the attribute dim_labels=", inst.opcode))?;
        let window = self.window(inst)?;
        let fgc = self.int_attr(inst, "feature_group_count")?.unwrap_or(1);
        let bgc = self.int_attr(inst, "batch_group_count")?.unwrap_or(1);
        let expected = si::infer_conv_shape(lhs, rhs, &d, &window, fgc, bgc).map_err(|e| e.0)?;
        self.expect_out_dims(
            inst,
            &expected,
            &format!(
                "convolution of {} and {} with dim_labels={}",
                si::fmt_array(lhs),
                si::fmt_array(rhs),
                d.labels()
            ),
        )
    }

    fn check_select_and_scatter(&self, inst: &Instruction) -> Check {
        self.operand_count(inst, 3)?;
        let (op, source, init) = (
            self.array_of(inst, 0)?,
            self.array_of(inst, 1)?,
            self.array_of(inst, 2)?,
        );
        if init.rank() != 0 || !si::same_type_ignoring_fp_precision(init.elem, op.elem) {
            return Err(format!(
                "the init value (operand 2) must be a scalar of type {}, but is {}",
                op.elem,
                si::fmt_array(init)
            ));
        }
        let window = self.window(inst)?;
        let windows = si::infer_reduce_window_shape(op, &window).map_err(|e| e.0)?;
        if !si::dims_match(&windows.dims, &source.dims) {
            return Err(format!(
                "the source (operand 1) is {}, but the window over {} gives {} positions",
                si::fmt_array(source),
                si::fmt_array(op),
                si::fmt_array(&ArrayShape {
                    elem: source.elem,
                    ..windows
                })
            ));
        }
        let select = self.required_callee(inst, "select")?;
        self.check_scalar_computation("select", select, 2)?;
        self.expect_pred_root("select", select)?;
        let scatter = self.required_callee(inst, "scatter")?;
        self.check_scalar_computation("scatter", scatter, 2)?;
        self.expect_out(inst, op, "select-and-scatter result")
    }

    /// Start indices: one scalar per operand dimension (XLA also still
    /// accepts a single rank-1 index vector).
    fn check_start_indices(&self, inst: &Instruction, first: usize, rank: usize) -> Check {
        let n = inst.operands.len() - first;
        if n == 1 && rank != 1 {
            let idx = self.array_of(inst, first)?;
            if idx.rank() == 1 && si::dim_matches(idx.dims[0], rank as i64) {
                return Ok(());
            }
        }
        if n != rank {
            return Err(format!(
                "{} needs {rank} start indices (one per dimension), but has {n}",
                inst.opcode
            ));
        }
        let mut elem = None;
        for k in first..inst.operands.len() {
            let idx = self.array_of(inst, k)?;
            let int = !idx.elem.is_float() && !idx.elem.is_complex() && idx.elem != PrimType::Pred;
            if idx.rank() != 0 || !int {
                return Err(format!(
                    "start index (operand {k}) must be an integer scalar, but is {}",
                    si::fmt_array(idx)
                ));
            }
            if *elem.get_or_insert(idx.elem) != idx.elem {
                return Err(format!(
                    "start indices must all have one type, but operand {k} is {}",
                    si::fmt_array(idx)
                ));
            }
        }
        Ok(())
    }

    fn check_dynamic_slice(&self, inst: &Instruction) -> Check {
        self.operand_count_at_least(inst, 2)?;
        let op = self.array_of(inst, 0)?;
        self.check_start_indices(inst, 1, op.rank())?;
        let sizes = self
            .int_list(inst, "dynamic_slice_sizes")?
            .ok_or("dynamic-slice needs dynamic_slice_sizes=")?;
        if sizes.len() != op.rank() {
            return Err(format!(
                "dynamic_slice_sizes={} has length {}, but the operand {} has rank {}",
                si::fmt_list(&sizes),
                sizes.len(),
                si::fmt_array(op),
                op.rank()
            ));
        }
        for (i, (&s, &d)) in sizes.iter().zip(&op.dims).enumerate() {
            if s < 0 || (d != crate::ir::UNBOUNDED_DIM && s > d) {
                return Err(format!(
                    "dynamic_slice_sizes={}: size {s} of dimension {i} does not fit in the operand {}",
                    si::fmt_list(&sizes),
                    si::fmt_array(op)
                ));
            }
        }
        let expected = ArrayShape {
            elem: op.elem,
            dims: sizes,
            dynamic: SmallVec::new(),
            layout: None,
        };
        self.expect_out(inst, &expected, "dynamic-slice result")
    }

    fn check_dynamic_update_slice(&self, inst: &Instruction) -> Check {
        self.operand_count_at_least(inst, 3)?;
        let (op, update) = (self.array_of(inst, 0)?, self.array_of(inst, 1)?);
        self.check_start_indices(inst, 2, op.rank())?;
        let fits = update.rank() == op.rank()
            && si::same_type_ignoring_fp_precision(update.elem, op.elem)
            && update.dims.iter().zip(&op.dims).all(|(&u, &d)| {
                u == crate::ir::UNBOUNDED_DIM || d == crate::ir::UNBOUNDED_DIM || u <= d
            });
        if !fits {
            return Err(format!(
                "the update (operand 1) {} must have the rank and element type of the operand {} and fit inside it",
                si::fmt_array(update),
                si::fmt_array(op)
            ));
        }
        self.expect_out(inst, op, "dynamic-update-slice result")
    }

    fn check_conditional(&self, inst: &Instruction) -> Check {
        self.operand_count_at_least(inst, 1)?;
        let selector = self.array_of(inst, 0)?;
        let branches: SmallVec<[CompId; 2]> = match inst.attr("branch_computations") {
            Some(AttrValue::Comps(cs)) => cs.clone(),
            Some(AttrValue::Comp(c)) => SmallVec::from_elem(*c, 1),
            Some(_) => return Err("branch_computations= must name computations".into()),
            None => {
                let t = self.required_callee(inst, "true_computation")?;
                let f = self.required_callee(inst, "false_computation")?;
                SmallVec::from_slice(&[t, f])
            }
        };
        let selector_ok = selector.rank() == 0
            && match selector.elem {
                PrimType::Pred => branches.len() == 2,
                PrimType::S32 => !branches.is_empty(),
                _ => false,
            };
        if !selector_ok {
            return Err(format!(
                "the branch selector (operand 0) must be pred[] with 2 branches or s32[], but is {} with {} branches",
                si::fmt_array(selector),
                branches.len()
            ));
        }
        if inst.operands.len() != branches.len() + 1 {
            return Err(format!(
                "conditional with {} branches takes {} operands (the selector and one per branch), but has {}",
                branches.len(),
                branches.len() + 1,
                inst.operands.len()
            ));
        }
        for (i, &b) in branches.iter().enumerate() {
            let arg = self.m.inst(inst.operands[i + 1]).shape;
            self.check_signature(&format!("branch {i}"), b, &[arg], Some(inst.shape))?;
        }
        Ok(())
    }

    fn check_sort(&self, inst: &Instruction) -> Check {
        self.operand_count_at_least(inst, 1)?;
        let n = inst.operands.len();
        let first = self.array_of(inst, 0)?;
        let mut types = Vec::with_capacity(n);
        for k in 0..n {
            let op = self.array_of(inst, k)?;
            if !si::dims_match(&op.dims, &first.dims) {
                return Err(format!(
                    "sort operands must have the same dimensions, but operand {k} is {} and operand 0 is {}",
                    si::fmt_array(op),
                    si::fmt_array(first)
                ));
            }
            types.push(op.elem);
        }
        let dims = self.int_list(inst, "dimensions")?.unwrap_or_default();
        if let [d] = dims[..] {
            if d < 0 || d as u64 >= first.rank() as u64 {
                return Err(format!(
                    "sort dimension {d} is out of range for {}",
                    si::fmt_array(first)
                ));
            }
        }
        self.expect_operands_or_tuple(inst)?;
        let cmp = self.required_callee(inst, "to_apply")?;
        let params = self.check_scalar_computation("to_apply", cmp, 2 * n)?;
        for (k, &t) in types.iter().enumerate() {
            let fits = |p: PrimType| si::same_type_ignoring_fp_precision(p, t);
            if !fits(params[2 * k]) || !fits(params[2 * k + 1]) {
                return Err(format!(
                    "to_apply=%{}: parameters {} and {} must have operand {k}'s element type {t}",
                    self.m.comp(cmp).name,
                    2 * k,
                    2 * k + 1
                ));
            }
        }
        self.expect_pred_root("to_apply", cmp)
    }

    /// `async-update` and `async-done` continue an async op: operand 0 is its
    /// `async-start` or an `async-update`, and an update with no further
    /// operands keeps that shape. (Newer XLA's progressive form, where updates
    /// pass more arguments, changes the async shape along the chain, so the
    /// result of `async-done` is not compared.)
    fn check_async_continuation(&self, inst: &Instruction) -> Check {
        self.operand_count_at_least(inst, 1)?;
        let m = self.m;
        let op = m.inst(inst.operands[0]);
        if !matches!(op.opcode, Opcode::AsyncStart | Opcode::AsyncUpdate) {
            return Err(format!(
                "operand 0 (%{}) must be an async-start or async-update, but is a {}",
                op.name, op.opcode
            ));
        }
        if inst.opcode == Opcode::AsyncUpdate
            && inst.operands.len() == 1
            && !self.compatible(op.shape, inst.shape)
        {
            return Err(format!(
                "async-update must have the shape of its operand %{}, {}, but its shape is {}",
                op.name,
                self.shape_str(op.shape),
                self.shape_str(inst.shape)
            ));
        }
        if inst.opcode == Opcode::AsyncDone {
            self.check_async_done_shape(inst)?;
        }
        Ok(())
    }

    /// `operand_layout_constraints={shape, ...}` of a custom-call: one shape
    /// per operand, each with that operand's element type and dimensions.
    fn check_operand_layout_constraints(&self, inst: &Instruction) -> Check {
        let Some(shapes) = inst
            .operand_layout_constraints()
            .map_err(|e| e.to_string())?
        else {
            return Ok(());
        };
        if shapes.len() != inst.operands.len() {
            return Err(format!(
                "operand_layout_constraints lists {} shapes, but the custom-call has {} operands",
                shapes.len(),
                inst.operands.len()
            ));
        }
        for (k, &s) in shapes.iter().enumerate() {
            let (Shape::Array(c), Shape::Array(op)) =
                (self.m.shape(s), self.shape(inst.operands[k]))
            else {
                continue;
            };
            if c.elem != op.elem || !si::dims_match(&c.dims, &op.dims) {
                return Err(format!(
                    "operand layout constraint {} for operand {k} does not match the operand's shape {}",
                    crate::print::print_shape(self.m, s),
                    si::fmt_array(op)
                ));
            }
        }
        Ok(())
    }

    /// `async-start(args), calls=f` has shape `((args...), f's result, state...)`
    /// when it passes all of `f`'s arguments.
    fn check_async_start(&self, inst: &Instruction) -> Check {
        let Some(callee) = self.callee(inst, "calls")? else {
            return Ok(());
        };
        let args = self.operand_shapes(inst);
        let m = self.m;
        let params = &m.comp(callee).params;
        if args.len() < params.len() {
            // Newer XLA's progressive form: `*-update` instructions pass the
            // remaining arguments later, and the shape follows that protocol.
            for (i, (&p, &a)) in params.iter().zip(&args).enumerate() {
                if !self.compatible(m.inst(p).shape, a) {
                    return Err(format!(
                        "calls=%{}: parameter {i} has shape {}, but the argument passed is {}",
                        m.comp(callee).name,
                        self.shape_str(m.inst(p).shape),
                        self.shape_str(a)
                    ));
                }
            }
            return Ok(());
        }
        self.check_signature("calls", callee, &args, None)?;
        let ok = match m.shape(inst.shape) {
            Shape::Tuple(es) if es.len() >= 2 => {
                let root = m.inst(m.comp(callee).root).shape;
                let args_ok = matches!(m.shape(es[0]), Shape::Tuple(a)
                    if a.len() == args.len() && a.iter().zip(&args).all(|(&x, &y)| self.compatible(x, y)));
                args_ok && self.compatible(es[1], root)
            }
            _ => false,
        };
        if !ok {
            let want: Vec<String> = args.iter().map(|&a| self.shape_str(a)).collect();
            return Err(format!(
                "async-start's shape must be (({}), {}, ...), but is {}",
                want.join(", "),
                self.shape_str(m.inst(m.comp(callee).root).shape),
                self.shape_str(inst.shape)
            ));
        }
        Ok(())
    }
}

fn complex_component(t: PrimType) -> Option<PrimType> {
    match t {
        PrimType::C64 => Some(PrimType::F32),
        PrimType::C128 => Some(PrimType::F64),
        _ => None,
    }
}

/// Layout rule: `minor_to_major` lists each dimension exactly once (an array
/// without a layout, or with an empty one on a scalar, passes).
fn check_array_layout(a: &ArrayShape) -> Check {
    let Some(layout) = &a.layout else {
        return Ok(());
    };
    let m2m = &layout.minor_to_major;
    let rank = a.rank();
    let mut seen = vec![false; rank];
    let is_perm = m2m.len() == rank
        && m2m.iter().all(
            |&d| match usize::try_from(d).ok().and_then(|d| seen.get_mut(d)) {
                Some(s) if !*s => {
                    *s = true;
                    true
                }
                _ => false,
            },
        );
    if !is_perm {
        return Err(format!(
            "layout {} of {} is not a permutation of its {rank} dimension{}",
            si::fmt_list(m2m),
            si::fmt_array(a),
            if rank == 1 { "" } else { "s" }
        ));
    }
    if !layout.dim_levels.is_empty() && layout.dim_levels.len() != rank {
        return Err(format!(
            "layout of {} has {} dimension level types, expected {rank}",
            si::fmt_array(a),
            layout.dim_levels.len()
        ));
    }
    Ok(())
}

/// Shapes agree ignoring layouts and floating-point precision (see
/// [`si::arrays_compatible_ignoring_fp_precision`]).
fn shapes_compatible(m: &Module, a: &Shape, b: &Shape) -> bool {
    match (a, b) {
        (Shape::Array(x), Shape::Array(y)) => si::arrays_compatible_ignoring_fp_precision(x, y),
        (Shape::Tuple(xs), Shape::Tuple(ys)) => {
            xs.len() == ys.len()
                && xs
                    .iter()
                    .zip(ys)
                    .all(|(&x, &y)| x == y || shapes_compatible(m, m.shape(x), m.shape(y)))
        }
        (Shape::Buffer(x), Shape::Buffer(y)) => {
            x == y || shapes_compatible(m, m.shape(*x), m.shape(*y))
        }
        (Shape::Token, Shape::Token) | (Shape::Opaque, Shape::Opaque) => true,
        _ => false,
    }
}

/// A shape in HLO syntax without layouts: `(f32[2], s32[])`.
fn shape_to_string(m: &Module, id: ShapeId) -> String {
    match m.shape(id) {
        Shape::Array(a) => si::fmt_array(a),
        Shape::Tuple(es) => {
            let parts: Vec<String> = es.iter().map(|&e| shape_to_string(m, e)).collect();
            format!("({})", parts.join(", "))
        }
        Shape::Buffer(inner) => format!("b({})", shape_to_string(m, *inner)),
        Shape::Token => "token[]".into(),
        Shape::Opaque => "opaque[]".into(),
    }
}

#[cfg(test)]
mod tests {
    //! Structural rules the parser already enforces on text, checked here on
    //! IR built directly (as a rewriting pass would build it).
    use super::*;
    use crate::ir::{Computation, Layout};

    fn f32_shape(m: &mut Module, dims: &[i64], layout: Option<Layout>) -> ShapeId {
        m.intern_shape(Shape::Array(ArrayShape {
            elem: PrimType::F32,
            dims: dims.iter().copied().collect(),
            dynamic: SmallVec::new(),
            layout,
        }))
    }

    fn inst(
        name: &str,
        opcode: Opcode,
        shape: ShapeId,
        operands: &[InstId],
        parent: CompId,
    ) -> Instruction {
        Instruction {
            name: name.into(),
            opcode,
            shape,
            operands: operands.iter().copied().collect(),
            payload: (opcode == Opcode::Parameter).then_some(crate::Payload::Parameter(0)),
            attrs: Vec::new(),
            parent,
        }
    }

    /// `ENTRY main { p = f32[2,3]{1,0} parameter(0); ROOT n = negate(p) }`.
    fn small_module() -> (Module, CompId, InstId, InstId) {
        let mut m = Module::new("m");
        let s = f32_shape(&mut m, &[2, 3], Some(Layout::default_for_rank(2)));
        let c = m.add_computation(Computation {
            name: "main".into(),
            order: Vec::new(),
            params: Vec::new(),
            root: InstId::from_index(0),
            is_entry: true,
            attrs: Vec::new(),
        });
        let p = m.append_inst(inst("p", Opcode::Parameter, s, &[], c));
        let n = m.append_inst(inst("n", Opcode::Negate, s, &[p], c));
        m.comp_mut(c).params = vec![p];
        m.comp_mut(c).root = n;
        (m, c, p, n)
    }

    fn message(r: Result<()>) -> String {
        match r {
            Ok(()) => panic!("the verifier accepted a broken module"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn the_small_module_is_valid() {
        let (m, ..) = small_module();
        assert!(verify(&m).is_ok());
    }

    #[test]
    fn layout_must_have_one_entry_per_dimension() {
        let (mut m, _, _, n) = small_module();
        let bad = f32_shape(&mut m, &[2, 3], Some(Layout::from_minor_to_major([0])));
        m.inst_mut(n).shape = bad;
        let msg = message(verify(&m));
        assert!(
            msg.contains("instruction %n: layout {0} of f32[2,3] is not a permutation"),
            "{msg}"
        );
    }

    #[test]
    fn a_constant_literal_has_its_constant_shape() {
        use crate::attrs::literal::{ArrayLiteral, Literal};
        let (mut m, c, _, n) = small_module();
        let s = m.inst(n).shape;
        let k = m.append_inst(inst("k", Opcode::Constant, s, &[], c));
        let msg = message(verify(&m));
        assert!(msg.contains("a constant without a literal"), "{msg}");
        // Six f32 values fit f32[2,3]; two s32 values do not.
        let fits =
            ArrayLiteral::new(PrimType::F32, &[2, 3], vec![0; 24], false).expect("six f32 values");
        m.inst_mut(k).payload = Some(crate::Payload::Literal(Box::new(Literal::Array(fits))));
        assert!(verify(&m).is_ok());
        let other =
            ArrayLiteral::new(PrimType::S32, &[2], vec![0; 8], false).expect("two s32 values");
        m.inst_mut(k).payload = Some(crate::Payload::Literal(Box::new(Literal::Array(other))));
        let msg = message(verify(&m));
        assert!(msg.contains("not of the constant's shape"), "{msg}");
    }

    #[test]
    fn parameter_numbers_must_be_dense() {
        let (mut m, _, p, _) = small_module();
        m.inst_mut(p).payload = Some(crate::Payload::Parameter(1));
        let msg = message(verify(&m));
        assert!(msg.contains("parameter(1) is out of range"), "{msg}");
    }

    #[test]
    fn root_must_be_scheduled_in_its_computation() {
        let (mut m, c, _, n) = small_module();
        m.comp_mut(c).order.retain(|&i| i != n);
        let msg = message(verify(&m));
        assert!(
            msg.contains("its ROOT is not one of its instructions"),
            "{msg}"
        );
    }

    #[test]
    fn operands_must_be_defined_before_use() {
        let (mut m, c, ..) = small_module();
        m.comp_mut(c).order.reverse();
        let msg = message(verify(&m));
        assert!(
            msg.contains("instruction %n: operand 0 (%p) is used before it is defined"),
            "{msg}"
        );
    }

    #[test]
    fn control_predecessors_close_no_cycle() {
        let text = "HloModule m\n\nENTRY e {\n  p = f32[2]{0} parameter(0)\n  a = f32[2]{0} negate(p), control-predecessors={b}\n  b = f32[2]{0} negate(a)\n  ROOT c = f32[2]{0} add(a, b)\n}\n";
        let msg = match crate::parse_module(text) {
            Err(e) => e.to_string(),
            Ok(m) => message(verify(&m)),
        };
        assert!(
            msg.contains("is on a cycle of operands and control predecessors"),
            "{msg}"
        );
        // A control predecessor written after its successor, without a
        // cycle, is fine.
        let ok = "HloModule m\n\nENTRY e {\n  p = f32[2]{0} parameter(0)\n  a = f32[2]{0} negate(p), control-predecessors={b}\n  b = f32[2]{0} negate(p)\n  ROOT c = f32[2]{0} add(a, b)\n}\n";
        let m = crate::parse_module(ok).expect("parses");
        assert!(verify(&m).is_ok());
    }

    #[test]
    fn an_instruction_is_scheduled_once() {
        let (mut m, c, _, n) = small_module();
        m.comp_mut(c).order.push(n);
        let msg = message(verify(&m));
        assert!(msg.contains("instruction %n: is scheduled twice"), "{msg}");
    }

    #[test]
    fn operands_live_in_the_same_computation() {
        let (mut m, _, _, n) = small_module();
        let s = m.inst(n).shape;
        let other = m.add_computation(Computation {
            name: "other".into(),
            order: Vec::new(),
            params: Vec::new(),
            root: InstId::from_index(0),
            is_entry: false,
            attrs: Vec::new(),
        });
        let q = m.append_inst(inst("q", Opcode::Parameter, s, &[], other));
        m.comp_mut(other).params = vec![q];
        m.comp_mut(other).root = q;
        m.inst_mut(n).operands[0] = q;
        let msg = message(verify(&m));
        assert!(
            msg.contains("instruction %n: operand 0 is not an instruction of computation %main"),
            "{msg}"
        );
    }

    #[test]
    fn called_computations_must_be_in_the_module() {
        let (mut m, _, _, n) = small_module();
        let ghost = m.reserve_computation("ghost");
        m.inst_mut(n).set_attr("to_apply", AttrValue::Comp(ghost));
        let msg = message(verify(&m));
        assert!(
            msg.contains("calls a computation that is not part of the module"),
            "{msg}"
        );
    }

    #[test]
    fn a_module_has_one_entry() {
        let (mut m, ..) = small_module();
        let s = f32_shape(&mut m, &[], None);
        let c2 = m.add_computation(Computation {
            name: "second".into(),
            order: Vec::new(),
            params: Vec::new(),
            root: InstId::from_index(0),
            is_entry: true,
            attrs: Vec::new(),
        });
        let x = m.append_inst(inst("x", Opcode::Parameter, s, &[], c2));
        m.comp_mut(c2).params = vec![x];
        m.comp_mut(c2).root = x;
        let msg = message(verify(&m));
        assert!(msg.contains("both marked ENTRY"), "{msg}");
    }
}
