//! IR -> HLO text, in the form XLA's `HloModule::ToString()` prints:
//! `%`-prefixed names, computation signatures with layout-free shapes,
//! operands without shapes, attributes in source order (typed ones in XLA's
//! spelling, raw ones verbatim), `ROOT` on the root, `ENTRY` on the entry computation.
//!
//! Output is deterministic: it depends only on the IR (print order of
//! computations, schedule order of instructions, attribute order).

use std::fmt::Write as _;

use crate::ir::*;
use crate::opcode::Opcode;

/// Prints a whole module.
pub fn print_module(m: &Module) -> String {
    let mut p = Printer::new(m);
    p.module();
    p.out
}

/// Prints a module with `indent` before its header, computation and
/// instruction lines (a recovery module inside `origin_recovery_table=`).
fn print_module_indented(m: &Module, indent: &str) -> String {
    let mut p = Printer::new(m);
    p.indent = indent.to_string();
    p.module();
    p.out
}

/// The order [`print_module`] prints `m`'s computations in.
///
/// A module read from a proto (every computation has a proto id,
/// [`Module::comp_proto_id`]) is printed as XLA's `HloModule::ToString`
/// prints the module it reads from that proto: in XLA's depth-first
/// call-graph post-order. XLA holds the computations, and each one's
/// instructions, in the order of their proto ids (`CreateFromProto` sorts
/// both; an instruction without a proto id, one a pass added, leaves its
/// computation's own order). Walking the computations so, each one no
/// instruction calls starts a walk of its instructions: an instruction's
/// callees (a `while`'s body before its condition, as XLA holds them) go on
/// a stack last to first, each the first time this walk meets it; the top
/// of the stack walks its own instructions the same way and is listed when
/// it has none left; the root is listed after its walk; a computation an
/// earlier walk listed is not listed again. XLA's text parser numbers the
/// stack frame tables in the order the text uses them, so only this order
/// makes XLA read our text of such a module as it reads its own
/// (`hlo/tests/jax_gen.rs`, the reader direction: the optimized modules
/// with debug info, whose proto ids put callers before callees).
///
/// Any other module is printed in its own order: for text, the text's
/// order, which XLA's parser keeps too (XLA's own printing reorders it, and
/// its reading of that renumbers the frame tables differently from its
/// reading of the original text).
///
/// Every computation is listed once; any the walks miss (only a call
/// cycle, which the verifier rejects, leaves one) follow in the module's
/// order.
pub fn computation_print_order(m: &Module) -> Vec<CompId> {
    use std::collections::{HashMap, HashSet};
    let mut base: Vec<CompId> = m.computations().collect();
    if !base.iter().all(|&c| m.comp_proto_id(c).is_some()) {
        return base;
    }
    // A stable sort: equal ids (never in a proto XLA reads) keep their order.
    base.sort_by_key(|&c| m.comp_proto_id(c));
    let mut insts_cache: HashMap<CompId, Vec<InstId>> = HashMap::new();
    let mut insts = |c: CompId| -> Vec<InstId> {
        insts_cache
            .entry(c)
            .or_insert_with(|| {
                let mut v = m.comp(c).order.clone();
                if v.iter().all(|&i| m.inst_proto_id(i).is_some()) {
                    v.sort_by_key(|&i| m.inst_proto_id(i));
                }
                v
            })
            .clone()
    };
    let callees = |i: InstId| -> Vec<CompId> {
        let inst = m.inst(i);
        let mut v: Vec<CompId> = inst.called_computations().collect();
        if inst.opcode == Opcode::While {
            // XLA holds a while's body before its condition.
            let body = inst.attr("body");
            let cond = inst.attr("condition");
            if let (Some(AttrValue::Comp(b)), Some(AttrValue::Comp(c))) = (body, cond) {
                v = vec![*b, *c];
            }
        }
        v
    };
    let called: HashSet<CompId> = base
        .iter()
        .flat_map(|&c| {
            m.comp(c)
                .order
                .iter()
                .flat_map(|&i| m.inst(i).called_computations())
        })
        .collect();
    let mut listed: HashSet<CompId> = HashSet::with_capacity(base.len());
    let mut out: Vec<CompId> = Vec::with_capacity(base.len());
    for &root in &base {
        if called.contains(&root) {
            continue;
        }
        // This root's walk: (computation, next instruction) on a stack.
        let mut seen: HashSet<CompId> = HashSet::new();
        let mut stack: Vec<(CompId, Vec<InstId>, usize)> = Vec::new();
        let mut push = |stack: &mut Vec<(CompId, Vec<InstId>, usize)>,
                        cs: Vec<CompId>,
                        insts: &mut dyn FnMut(CompId) -> Vec<InstId>| {
            for &c in cs.iter().rev() {
                if seen.insert(c) {
                    stack.push((c, insts(c), 0));
                }
            }
        };
        for i in insts(root) {
            push(&mut stack, callees(i), &mut insts);
            while let Some(top) = stack.last_mut() {
                if top.2 == top.1.len() {
                    let c = top.0;
                    stack.pop();
                    if listed.insert(c) {
                        out.push(c);
                    }
                } else {
                    let next = top.1[top.2];
                    top.2 += 1;
                    push(&mut stack, callees(next), &mut insts);
                }
            }
        }
        if listed.insert(root) {
            out.push(root);
        }
    }
    for c in m.computations() {
        if listed.insert(c) {
            out.push(c);
        }
    }
    out
}

/// Prints one computation (signature and body).
pub fn print_computation(m: &Module, c: CompId) -> String {
    let mut p = Printer::new(m);
    p.computation(c);
    p.out
}

/// Prints one instruction as it appears inside its computation (without
/// indentation or newline).
pub fn print_instruction(m: &Module, i: InstId) -> String {
    let mut p = Printer::new(m);
    let is_root = m.comp(m.inst(i).parent).root == i;
    p.instruction(i, is_root);
    let s = p.out;
    s.trim().to_string()
}

/// Prints a shape with its layouts, e.g. `(f32[2,3]{1,0}, s32[])`.
pub fn print_shape(m: &Module, s: ShapeId) -> String {
    let mut out = String::new();
    write_shape(m, s, true, &mut out);
    out
}

/// Prints a shape without layouts (XLA's `ShapeUtil::HumanString`), e.g. `f32[2,3]`.
pub fn print_shape_no_layout(m: &Module, s: ShapeId) -> String {
    let mut out = String::new();
    write_shape(m, s, false, &mut out);
    out
}

/// Prints a layout `{1,0:T(8,128)}`. A physical shape `P(...)` needs the
/// module to print; use [`print_layout_in`] for layouts that have one.
pub fn print_layout(l: &Layout) -> String {
    let mut out = String::new();
    write_layout(None, l, &mut out);
    out
}

/// Prints a layout, including a physical shape `P(...)`.
pub fn print_layout_in(m: &Module, l: &Layout) -> String {
    let mut out = String::new();
    write_layout(Some(m), l, &mut out);
    out
}

fn push_int(out: &mut String, v: i64) {
    let _ = write!(out, "{v}");
}

fn write_dims(a: &ArrayShape, out: &mut String) {
    out.push_str(a.elem.name());
    out.push('[');
    for (i, &d) in a.dims.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if a.is_dynamic_dim(i) {
            if d == UNBOUNDED_DIM {
                out.push('?');
                continue;
            }
            out.push_str("<=");
        }
        push_int(out, d);
    }
    out.push(']');
}

/// A literal with its shapes, as XLA prints a custom call's `literal=`:
/// `s32[2]{0} {1, 2}`, a tuple `( s32[2]{0} {1, 2}, f32[] 3 )`.
fn write_shaped_literal(
    m: &Module,
    s: ShapeId,
    lit: &crate::attrs::literal::Literal,
    out: &mut String,
) {
    use crate::attrs::literal::Literal;
    match (m.shape(s), lit) {
        (Shape::Tuple(elems), Literal::Tuple(_) | Literal::Elided) => {
            out.push('(');
            for (k, &e) in elems.iter().enumerate() {
                out.push_str(if k > 0 { ", " } else { " " });
                let v = match lit {
                    Literal::Tuple(values) => values.get(k).unwrap_or(&Literal::Elided),
                    _ => &Literal::Elided,
                };
                write_shaped_literal(m, e, v, out);
            }
            out.push_str(if elems.is_empty() { ")" } else { " )" });
        }
        _ => {
            write_shape(m, s, true, out);
            out.push(' ');
            lit.write_text(out);
        }
    }
}

fn write_shape(m: &Module, s: ShapeId, with_layout: bool, out: &mut String) {
    match m.shape(s) {
        Shape::Array(a) => {
            write_dims(a, out);
            if with_layout {
                if let Some(l) = &a.layout {
                    write_layout(Some(m), l, out);
                }
            }
        }
        Shape::Tuple(elems) => {
            out.push('(');
            for (i, &e) in elems.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_shape(m, e, with_layout, out);
            }
            out.push(')');
        }
        Shape::Buffer(inner) => {
            out.push_str("b(");
            write_shape(m, *inner, with_layout, out);
            out.push(')');
        }
        Shape::Token => out.push_str("token[]"),
        Shape::Opaque => out.push_str("opaque[]"),
    }
}

fn write_layout(m: Option<&Module>, l: &Layout, out: &mut String) {
    out.push('{');
    for (i, &d) in l.minor_to_major.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_int(out, d);
    }
    let has_extra = !l.dim_levels.is_empty()
        || !l.tiles.is_empty()
        || l.tail_padding_alignment_in_elements != 1
        || l.index_primitive_type.is_some()
        || l.pointer_primitive_type.is_some()
        || l.element_size_in_bits != 0
        || l.memory_space != 0
        || !l.split_configs.is_empty()
        || (l.physical_shape.is_some() && m.is_some())
        || l.dynamic_shape_metadata_prefix_bytes != 0;
    if has_extra {
        out.push(':');
        if !l.dim_levels.is_empty() {
            out.push_str("D(");
            for (i, d) in l.dim_levels.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push(match d.kind {
                    DimLevelType::Dense => 'D',
                    DimLevelType::Compressed => 'C',
                    DimLevelType::Singleton => 'S',
                    DimLevelType::LooseCompressed => 'H',
                });
                if !d.unique {
                    out.push('+');
                }
                if !d.ordered {
                    out.push('~');
                }
            }
            out.push(')');
        }
        if !l.tiles.is_empty() {
            out.push('T');
            for t in &l.tiles {
                out.push('(');
                for (i, &d) in t.0.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    if d == Tile::COMBINE_DIM {
                        out.push('*');
                    } else {
                        push_int(out, d);
                    }
                }
                out.push(')');
            }
        }
        if l.tail_padding_alignment_in_elements != 1 {
            let _ = write!(out, "L({})", l.tail_padding_alignment_in_elements);
        }
        if let Some(t) = l.index_primitive_type {
            let _ = write!(out, "#({t})");
        }
        if let Some(t) = l.pointer_primitive_type {
            let _ = write!(out, "*({t})");
        }
        if l.element_size_in_bits != 0 {
            let _ = write!(out, "E({})", l.element_size_in_bits);
        }
        if l.memory_space != 0 {
            let _ = write!(out, "S({})", l.memory_space);
        }
        for sc in &l.split_configs {
            let _ = write!(out, "SC({}:", sc.dimension);
            for (i, &x) in sc.split_indices.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_int(out, x);
            }
            out.push(')');
        }
        if let (Some(ps), Some(m)) = (l.physical_shape, m) {
            out.push_str("P(");
            write_shape(m, ps, true, out);
            out.push(')');
        }
        if l.dynamic_shape_metadata_prefix_bytes != 0 {
            let _ = write!(out, "M({})", l.dynamic_shape_metadata_prefix_bytes);
        }
    }
    out.push('}');
}

struct Printer<'m> {
    m: &'m Module,
    out: String,
    /// Printed text of each shape (with layout), filled on first use.
    shape_text: Vec<Option<Box<str>>>,
    /// Put before each line of the header, the computations and their
    /// instructions (empty but for a recovery module, see
    /// [`Printer::recovery_table`]).
    indent: String,
}

impl<'m> Printer<'m> {
    fn new(m: &'m Module) -> Self {
        Printer {
            m,
            out: String::with_capacity(m.num_insts() * 96 + 256),
            shape_text: vec![None; m.num_shapes()],
            indent: String::new(),
        }
    }

    fn shape(&mut self, s: ShapeId) {
        let i = s.index();
        if let Some(Some(t)) = self.shape_text.get(i) {
            self.out.push_str(t);
            return;
        }
        let t = print_shape(self.m, s);
        self.out.push_str(&t);
        if let Some(slot) = self.shape_text.get_mut(i) {
            *slot = Some(t.into_boxed_str());
        }
    }

    fn module(&mut self) {
        let m = self.m;
        self.out.push_str(&self.indent);
        self.out.push_str("HloModule ");
        self.out.push_str(&m.name);
        for a in &m.attrs {
            if matches!(&a.value, AttrValue::RecoveryTable(t) if t.entries.is_empty()) {
                // XLA prints no empty table.
                continue;
            }
            self.out.push_str(", ");
            self.attr(a);
        }
        self.out.push_str("\n\n");
        if let Some(sf) = &m.stack_frames {
            let at = self.out.len();
            crate::attrs::xla::write_stack_frame_index(sf, &mut self.out);
            if self.out.len() > at {
                self.out.push_str("\n\n");
            }
        }
        let order = computation_print_order(m);
        let n = order.len();
        for (k, c) in order.into_iter().enumerate() {
            self.computation(c);
            if k + 1 < n {
                self.out.push('\n');
            }
        }
    }

    fn computation(&mut self, cid: CompId) {
        let m = self.m;
        let c = m.comp(cid);
        self.out.push_str(&self.indent);
        if c.is_entry {
            self.out.push_str("ENTRY ");
        }
        self.out.push('%');
        self.out.push_str(&c.name);
        self.out.push_str(" (");
        for (i, &p) in c.params.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            let pi = m.inst(p);
            self.out.push_str(&pi.name);
            self.out.push_str(": ");
            write_shape(m, pi.shape, false, &mut self.out);
        }
        self.out.push_str(") -> ");
        write_shape(m, m.inst(c.root).shape, false, &mut self.out);
        self.out.push_str(" {\n");
        for &i in &c.order {
            self.out.push_str(&self.indent);
            self.out.push_str("  ");
            self.instruction(i, i == c.root);
            self.out.push('\n');
        }
        self.out.push_str(&self.indent);
        self.out.push('}');
        for a in &c.attrs {
            self.out.push_str(", ");
            self.attr(a);
        }
        self.out.push('\n');
    }

    /// `origin_recovery_table={...}` as XLA prints it: one entry a line,
    /// indented a level deeper than the header; a recovery module in double
    /// quotes on the lines after its entry, printed two levels deeper, then
    /// a line break after the closing brace. Unlike XLA, `"` and `\` in the
    /// module's text are escaped, so that the string reads back (XLA prints
    /// them as they are, and cannot read its own text back when the module
    /// holds a string).
    fn recovery_table(&mut self, t: &crate::attrs::xla::RecoveryTable) {
        let tab = format!("{}  ", self.indent);
        self.out.push_str("{\n");
        for e in &t.entries {
            self.out.push_str(&tab);
            self.out.push('{');
            crate::attrs::xla::write_original_array(&e.old, &mut self.out);
            self.out.push_str("} : {");
            crate::attrs::xla::write_original_array(&e.new, &mut self.out);
            self.out.push('}');
            if let Some(m) = &e.module {
                self.out.push_str(",\n");
                self.out.push_str(&tab);
                self.out.push_str("\"\n");
                let text = print_module_indented(m, &format!("{tab}  "));
                for ch in text.chars() {
                    if matches!(ch, '"' | '\\') {
                        self.out.push('\\');
                    }
                    self.out.push(ch);
                }
                // XLA's text of a module ends in a blank line.
                self.out.push_str("\n\n");
                self.out.push_str(&tab);
                self.out.push('"');
            }
            self.out.push('\n');
        }
        self.out.push_str("}\n");
    }

    fn instruction(&mut self, id: InstId, is_root: bool) {
        let m = self.m;
        let inst = m.inst(id);
        if is_root {
            self.out.push_str("ROOT ");
        }
        self.out.push('%');
        self.out.push_str(&inst.name);
        self.out.push_str(" = ");
        self.shape(inst.shape);
        self.out.push(' ');
        write_opcode(inst, &mut self.out);
        self.out.push('(');
        if let Some(p) = &inst.payload {
            match p {
                Payload::Parameter(n) => {
                    let _ = write!(self.out, "{n}");
                }
                Payload::Literal(l) => l.write_text(&mut self.out),
            }
        } else {
            for (k, &op) in inst.operands.iter().enumerate() {
                if k > 0 {
                    self.out.push_str(", ");
                }
                self.out.push('%');
                self.out.push_str(&m.inst(op).name);
            }
        }
        self.out.push(')');
        for a in &inst.attrs {
            if &*a.key == ASYNC_WRAPPED_OPCODE {
                continue;
            }
            self.out.push_str(", ");
            self.attr(a);
        }
    }

    fn attr(&mut self, a: &Attr) {
        let m = self.m;
        self.out.push_str(&a.key);
        self.out.push('=');
        match &a.value {
            AttrValue::Raw(s) => self.out.push_str(s),
            AttrValue::Comp(c) => {
                self.out.push('%');
                self.out.push_str(&m.comp(*c).name);
            }
            AttrValue::Comps(cs) => {
                self.out.push('{');
                for (k, c) in cs.iter().enumerate() {
                    if k > 0 {
                        self.out.push_str(", ");
                    }
                    self.out.push('%');
                    self.out.push_str(&m.comp(*c).name);
                }
                self.out.push('}');
            }
            AttrValue::Insts(is) => {
                self.out.push('{');
                for (k, i) in is.iter().enumerate() {
                    if k > 0 {
                        self.out.push_str(", ");
                    }
                    self.out.push('%');
                    self.out.push_str(&m.inst(*i).name);
                }
                self.out.push('}');
            }
            AttrValue::Int(v) => push_int(&mut self.out, *v),
            AttrValue::Bool(b) => self.out.push_str(if *b { "true" } else { "false" }),
            AttrValue::Ints(v) => write_int_list(v, &mut self.out),
            AttrValue::Window(w) => write_window(w, &mut self.out),
            AttrValue::Padding(p) => write_padding(p, &mut self.out),
            AttrValue::Slice(s) => write_slice(s, &mut self.out),
            AttrValue::Enum(s) => self.out.push_str(s),
            AttrValue::Precisions(p) => {
                self.out.push('{');
                for (k, &x) in p.iter().enumerate() {
                    if k > 0 {
                        self.out.push(',');
                    }
                    self.out.push_str(
                        crate::attrs::validate::PRECISIONS
                            .get(x as usize)
                            .unwrap_or(&"default"),
                    );
                }
                self.out.push('}');
            }
            AttrValue::Metadata(md) => crate::attrs::xla::write_metadata(md, &mut self.out),
            AttrValue::Sharding(sh) => crate::attrs::xla::write_sharding(sh, &mut self.out),
            AttrValue::ReplicaGroups(g) => {
                crate::attrs::xla::write_replica_groups(g, &mut self.out)
            }
            AttrValue::FrontendAttributes(f) => {
                crate::attrs::xla::write_frontend_attributes(f, &mut self.out)
            }
            AttrValue::ConvDims(d) => self.out.push_str(&d.labels()),
            AttrValue::Domain(d) => crate::attrs::xla::write_domain(d, &mut self.out),
            AttrValue::Str(b) => crate::attrs::xla::write_quoted(b, &mut self.out),
            AttrValue::Statistics(s) => crate::attrs::xla::write_statistics(s, &mut self.out),
            AttrValue::Sparsity(s) => crate::attrs::xla::write_sparsity_config(s, &mut self.out),
            AttrValue::OriginalValue(v) => {
                crate::attrs::xla::write_original_value(v, &mut self.out)
            }
            AttrValue::ResultAccuracy(r) => {
                crate::attrs::xla::write_result_accuracy(r, &mut self.out)
            }
            AttrValue::Aliasing(v) => {
                crate::attrs::xla::write_output_operand_aliasing(v, &mut self.out)
            }
            AttrValue::Float(x) => crate::attrs::xla::write_f32_attr(*x, &mut self.out),
            AttrValue::Bools(v) => {
                self.out.push('{');
                for (k, b) in v.iter().enumerate() {
                    if k > 0 {
                        self.out.push(',');
                    }
                    self.out.push_str(if *b { "true" } else { "false" });
                }
                self.out.push('}');
            }
            AttrValue::IntLists(v) => {
                self.out.push('{');
                for (k, l) in v.iter().enumerate() {
                    if k > 0 {
                        self.out.push(',');
                    }
                    write_int_list(l, &mut self.out);
                }
                self.out.push('}');
            }
            AttrValue::Shape(s) => write_shape(m, *s, true, &mut self.out),
            AttrValue::Literal(s, l) => write_shaped_literal(m, *s, l, &mut self.out),
            AttrValue::Shapes(v) => {
                self.out.push('{');
                for (k, &s) in v.iter().enumerate() {
                    if k > 0 {
                        self.out.push_str(", ");
                    }
                    write_shape(m, s, true, &mut self.out);
                }
                self.out.push('}');
            }
            AttrValue::ProgramLayout(l) => write_program_layout(m, l, &mut self.out),
            AttrValue::InputOutputAlias(a) => {
                crate::attrs::xla::write_input_output_alias(a, &mut self.out)
            }
            AttrValue::BufferDonor(b) => crate::attrs::xla::write_buffer_donor(b, &mut self.out),
            AttrValue::RecoveryTable(t) => self.recovery_table(t),
            AttrValue::Pairs(ps) => {
                self.out.push('{');
                for (k, [a, b]) in ps.iter().enumerate() {
                    if k > 0 {
                        self.out.push(',');
                    }
                    self.out.push('{');
                    push_int(&mut self.out, *a);
                    self.out.push(',');
                    push_int(&mut self.out, *b);
                    self.out.push('}');
                }
                self.out.push('}');
            }
        }
    }
}

/// `{(f32[2]{0}, ..., /*index=5*/f32[]...)->f32[2]{0}}` as XLA prints an
/// entry computation layout: a comment before every fifth parameter.
fn write_program_layout(m: &Module, l: &ProgramLayout, out: &mut String) {
    out.push_str("{(");
    for (k, &s) in l.params.iter().enumerate() {
        if k > 0 {
            out.push_str(", ");
            if k % 5 == 0 {
                let _ = write!(out, "/*index={k}*/");
            }
        }
        write_shape(m, s, true, out);
    }
    out.push_str(")->");
    write_shape(m, l.result, true, out);
    out.push('}');
}

/// `{1,0}`.
fn write_int_list(v: &[i64], out: &mut String) {
    out.push('{');
    for (k, &x) in v.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        push_int(out, x);
    }
    out.push('}');
}

/// `{size=3x3 stride=2x2 pad=0_1x0_1 lhs_dilate=.. rhs_dilate=.. rhs_reversal=..}`
/// as XLA's `window_util::ToString` writes it: `size` always, every other
/// field only where some dimension differs from its default.
fn write_window(w: &[WindowDim], out: &mut String) {
    out.push('{');
    let field = |out: &mut String, name: &str, f: &dyn Fn(&WindowDim, &mut String)| {
        if !out.ends_with('{') {
            out.push(' ');
        }
        out.push_str(name);
        out.push('=');
        for (k, d) in w.iter().enumerate() {
            if k > 0 {
                out.push('x');
            }
            f(d, out);
        }
    };
    if !w.is_empty() {
        field(out, "size", &|d, o| push_int(o, d.size));
    }
    if w.iter().any(|d| d.stride != 1) {
        field(out, "stride", &|d, o| push_int(o, d.stride));
    }
    if w.iter().any(|d| d.pad_lo != 0 || d.pad_hi != 0) {
        field(out, "pad", &|d, o| {
            push_int(o, d.pad_lo);
            o.push('_');
            push_int(o, d.pad_hi);
        });
    }
    if w.iter().any(|d| d.lhs_dilation != 1) {
        field(out, "lhs_dilate", &|d, o| push_int(o, d.lhs_dilation));
    }
    if w.iter().any(|d| d.rhs_dilation != 1) {
        field(out, "rhs_dilate", &|d, o| push_int(o, d.rhs_dilation));
    }
    if w.iter().any(|d| d.reversal) {
        field(out, "rhs_reversal", &|d, o| {
            o.push(if d.reversal { '1' } else { '0' })
        });
    }
    out.push('}');
}

/// `0_1x2_2_1` as XLA's `PaddingConfigToString` writes it: `lo_hi` per
/// dimension, `lo_hi_interior` on every dimension when any has interior padding.
fn write_padding(p: &[PadDim], out: &mut String) {
    let interior = p.iter().any(|d| d.interior != 0);
    for (k, d) in p.iter().enumerate() {
        if k > 0 {
            out.push('x');
        }
        push_int(out, d.lo);
        out.push('_');
        push_int(out, d.hi);
        if interior {
            out.push('_');
            push_int(out, d.interior);
        }
    }
}

/// `{[0:2], [1:5:2]}` (a stride of 1 is not written).
fn write_slice(s: &[SliceDim], out: &mut String) {
    out.push('{');
    for (k, d) in s.iter().enumerate() {
        if k > 0 {
            out.push_str(", ");
        }
        out.push('[');
        push_int(out, d.start);
        out.push(':');
        push_int(out, d.limit);
        if d.stride != 1 {
            out.push(':');
            push_int(out, d.stride);
        }
        out.push(']');
    }
    out.push('}');
}

// ---------------------------------------------------------------------------
// Canonical printing (XLA's `HloPrintOptions::Canonical()` family)

/// How instructions that call computations print them in canonical text
/// (XLA's `HloPrintOptions::PrintSubcomputationMode`, the two modes the
/// canonical forms use).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subcomputations {
    /// Nothing: no `calls=`, `to_apply=`, `condition=`, ... attribute.
    Off,
    /// The callee's canonical body after `key=\n`, indented one level
    /// deeper, with its own `tmp_` numbering.
    FullBodies,
}

/// Options of canonical printing. Every canonical form prints instruction
/// names as `tmp_0`, `tmp_1`, ... in print order, operands as
/// `shape{layout} tmp_k`, no computation name or signature, no `%`, no
/// `metadata=`, `backend_config=` or `control-predecessors=`, and
/// instructions in XLA's post order ([`canonical_post_order`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CanonicalOptions {
    pub subcomputations: Subcomputations,
    /// Constants print only when essential: `0` when all elements are zero,
    /// `1` when all are one, integer arrays of at most 500,000 elements in
    /// full, anything else `{...}`. Off: arrays of at most 10 elements in
    /// full, larger ones `{...}`.
    pub only_essential_constants: bool,
    /// `infeed_config=` and `outfeed_config=` are printed.
    pub print_infeed_outfeed_config: bool,
    /// Iota replica groups (`[2,4]<=[8]`) are written out as lists.
    pub full_replica_group_list: bool,
    /// The printed computation's instructions in its own order (its
    /// schedule), as `HloModule::ToString` prints a computation of a
    /// scheduled module (`is_scheduled=true`); callee bodies stay in post
    /// order. Off: post order ([`canonical_post_order`]), as
    /// `HloComputation::ToString` prints (the autotuning key).
    pub schedule_order: bool,
}

impl CanonicalOptions {
    /// `HloPrintOptions::Fingerprint()`: full callee bodies, essential
    /// constants only, no infeed/outfeed config.
    pub fn fingerprint() -> Self {
        CanonicalOptions {
            subcomputations: Subcomputations::FullBodies,
            only_essential_constants: true,
            print_infeed_outfeed_config: false,
            full_replica_group_list: true,
            schedule_order: false,
        }
    }

    /// The options XLA:GPU's autotuning cache key prints a fusion's called
    /// computation with (`AutotuneCacheKey::HloInstructionToCanonicalString`
    /// in `xla/service/gpu/autotuning/autotune_cache_key.cc`): `Canonical()`
    /// with callees off, no infeed/outfeed config, essential constants only,
    /// operand shapes, no ids, canonicalized computations.
    pub fn autotune_key() -> Self {
        CanonicalOptions {
            subcomputations: Subcomputations::Off,
            only_essential_constants: true,
            print_infeed_outfeed_config: false,
            full_replica_group_list: false,
            schedule_order: false,
        }
    }
}

/// The instructions of computation `c` in the order XLA's
/// `HloComputation::MakeInstructionPostOrder` gives: for every instruction
/// without users, in `c`'s instruction order, a depth-first post order
/// from it, where an instruction's operands are visited first to last and
/// its control predecessors before its operands.
pub fn canonical_post_order(m: &Module, c: CompId) -> Vec<InstId> {
    let comp = m.comp(c);
    let users = m.users(c);
    // 0: not seen, 1: on the stack, 2: printed.
    let mut state: std::collections::HashMap<InstId, u8> =
        std::collections::HashMap::with_capacity(comp.order.len());
    let mut order = Vec::with_capacity(comp.order.len());
    let mut stack: Vec<InstId> = Vec::new();
    for &start in &comp.order {
        if !users[start.index()].is_empty() || state.contains_key(&start) {
            continue;
        }
        stack.push(start);
        while let Some(&cur) = stack.last() {
            match state.get(&cur).copied() {
                Some(s) => {
                    stack.pop();
                    if s == 1 {
                        state.insert(cur, 2);
                        order.push(cur);
                    }
                }
                None => {
                    state.insert(cur, 1);
                    let inst = m.inst(cur);
                    stack.extend(inst.operands.iter().rev().copied());
                    for a in &inst.attrs {
                        if &*a.key == "control-predecessors" {
                            if let AttrValue::Insts(preds) = &a.value {
                                stack.extend(preds.iter().copied());
                            }
                        }
                    }
                }
            }
        }
    }
    order
}

/// Computation `c` in canonical text, as XLA's
/// `HloComputation::ToString(options)` prints it with a canonical
/// [`CanonicalOptions`]: `{`, one line per instruction, `}`, no trailing
/// newline. With [`CanonicalOptions::autotune_key`] and a fusion's called
/// computation this is the `hlo` of XLA:GPU's autotuning cache key.
pub fn print_computation_canonical(m: &Module, c: CompId, opts: &CanonicalOptions) -> String {
    let mut p = Printer::new(m);
    p.canonical_computation(c, opts, 0, opts.schedule_order);
    p.out
}

/// Instruction `i` alone in canonical text, as XLA's
/// `HloInstruction::ToString(options)` prints it: no name, operands as
/// shapes only, callee bodies (with [`Subcomputations::FullBodies`]) after
/// `calls=` and a newline. `frontend_attributes=` is left out, and
/// `backend_config` is written last as given (XLA prints the instruction's
/// own with `print_backend_config`; the caller passes the text it wants,
/// e.g. sorted JSON). With [`CanonicalOptions::fingerprint`] this is the
/// text XLA:GPU's autotuner fingerprints (`GetHloFingerprint` in
/// `xla/backends/autotuner/autotune_fingerprint.cc`).
pub fn print_instruction_canonical(
    m: &Module,
    i: InstId,
    opts: &CanonicalOptions,
    backend_config: Option<&str>,
) -> String {
    let mut p = Printer::new(m);
    let mut names = std::collections::HashMap::new();
    p.canonical_instruction(i, opts, 0, &mut names, true);
    if let Some(b) = backend_config {
        p.out.push_str(", backend_config=");
        p.out.push_str(b);
    }
    p.out
}

/// Whether every element of `a` prints as one of `texts`.
fn all_elements_print_as(a: &crate::attrs::literal::ArrayLiteral, texts: &[&str]) -> bool {
    let w = a.elem().byte_size() as usize;
    if w == 0 {
        return false;
    }
    let mut s = String::new();
    for k in 0..a.len() {
        let Ok(one) =
            crate::attrs::literal::ArrayLiteral::new(a.elem(), &[], a.element(k).to_vec(), false)
        else {
            return false;
        };
        s.clear();
        one.write_text(&mut s);
        if !texts.contains(&s.as_str()) {
            return false;
        }
    }
    true
}

/// An array literal as XLA's `PrintWithoutShapeOneline` writes it: a
/// scalar alone, a vector `{1, 2}`, higher ranks with a space inside every
/// brace (`{ { 1, 2 }, { 3, 4 } }`) but a row of one element (`{ {1}, {2} }`).
fn write_literal_oneline(a: &crate::attrs::literal::ArrayLiteral, out: &mut String) {
    let dims = a.dims();
    if dims.len() < 2 || a.is_single() {
        a.write_text(out);
        return;
    }
    let mut text = String::new();
    let mut k = 0usize;
    fn nest(
        a: &crate::attrs::literal::ArrayLiteral,
        dims: &[i64],
        d: usize,
        k: &mut usize,
        text: &mut String,
        out: &mut String,
    ) {
        // XLA writes a row of one element without inner spaces: `{ {7} }`.
        let tight = d + 1 == dims.len() && dims[d] == 1;
        out.push_str(if tight { "{" } else { "{ " });
        for j in 0..dims[d] {
            if j > 0 {
                out.push_str(", ");
            }
            if d + 1 < dims.len() {
                nest(a, dims, d + 1, k, text, out);
            } else {
                text.clear();
                if let Ok(one) = crate::attrs::literal::ArrayLiteral::new(
                    a.elem(),
                    &[],
                    a.element(*k).to_vec(),
                    false,
                ) {
                    one.write_text(text);
                }
                out.push_str(text);
                *k += 1;
            }
        }
        out.push_str(if tight { "}" } else { " }" });
    }
    nest(a, dims, 0, &mut k, &mut text, out);
}

fn is_integral(t: PrimType) -> bool {
    use PrimType::*;
    matches!(
        t,
        S2 | S4 | S8 | S16 | S32 | S64 | U2 | U4 | U8 | U16 | U32 | U64
    )
}

/// A shape as XLA's canonical text prints it: with its layout, an array
/// without one given the default (`{rank-1,...,0}`, as XLA's parser
/// assigns), a scalar without braces, `/*index=N*/` before every fifth
/// element of a tuple.
fn write_shape_canonical(m: &Module, s: ShapeId, out: &mut String) {
    match m.shape(s) {
        Shape::Array(a) => {
            write_dims(a, out);
            match &a.layout {
                Some(l) => write_layout(Some(m), l, out),
                None if !a.dims.is_empty() => {
                    out.push('{');
                    for d in (0..a.dims.len()).rev() {
                        push_int(out, d as i64);
                        if d > 0 {
                            out.push(',');
                        }
                    }
                    out.push('}');
                }
                None => {}
            }
        }
        Shape::Tuple(elems) => {
            out.push('(');
            for (i, &e) in elems.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                    if i % 5 == 0 {
                        let _ = write!(out, "/*index={i}*/");
                    }
                }
                write_shape_canonical(m, e, out);
            }
            out.push(')');
        }
        Shape::Buffer(inner) => {
            out.push_str("b(");
            write_shape_canonical(m, *inner, out);
            out.push(')');
        }
        Shape::Token | Shape::Opaque => write_shape(m, s, true, out),
    }
}

/// The groups of an iota replica group list, written out (XLA's
/// `print_full_replica_group_list`): `iota(prod(reshape))` reshaped,
/// transposed by `perm`, read row-major into `dims[0]` groups.
fn expand_iota(l: &crate::attrs::xla::IotaList) -> Option<Vec<Vec<i64>>> {
    let rank = l.reshape.len();
    let perm: Vec<usize> = if l.perm.is_empty() {
        (0..rank).collect()
    } else {
        l.perm
            .iter()
            .map(|&p| usize::try_from(p).ok())
            .collect::<Option<_>>()?
    };
    if perm.len() != rank || perm.iter().any(|&p| p >= rank) {
        return None;
    }
    let total: i64 = l.reshape.iter().product();
    if l.dims.len() != 2 || l.dims[0] * l.dims[1] != total || total > 1 << 24 {
        return None;
    }
    let tdims: Vec<i64> = perm.iter().map(|&p| l.reshape[p]).collect();
    // Row-major strides of the untransposed shape.
    let mut stride = vec![1i64; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        stride[d] = stride[d + 1] * l.reshape[d + 1];
    }
    let mut flat = Vec::with_capacity(total as usize);
    let mut idx = vec![0i64; rank];
    for _ in 0..total {
        flat.push(
            idx.iter()
                .enumerate()
                .map(|(i, &j)| j * stride[perm[i]])
                .sum(),
        );
        for d in (0..rank).rev() {
            idx[d] += 1;
            if idx[d] < tdims[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Some(
        flat.chunks(l.dims[1].max(1) as usize)
            .map(<[i64]>::to_vec)
            .collect(),
    )
}

impl Printer<'_> {
    fn canonical_computation(
        &mut self,
        c: CompId,
        opts: &CanonicalOptions,
        indent: usize,
        schedule_order: bool,
    ) {
        let tab = "  ".repeat(indent);
        self.out.push_str(&tab);
        self.out.push_str("{\n");
        let mut names: std::collections::HashMap<InstId, usize> = std::collections::HashMap::new();
        let root = self.m.comp(c).root;
        let order = if schedule_order {
            self.m.comp(c).order.clone()
        } else {
            canonical_post_order(self.m, c)
        };
        for i in order {
            self.out.push_str(&tab);
            self.out.push_str("  ");
            if i == root {
                self.out.push_str("ROOT ");
            }
            self.canonical_instruction(i, opts, indent + 1, &mut names, false);
            self.out.push('\n');
        }
        self.out.push_str(&tab);
        self.out.push('}');
    }

    fn canonical_name(&mut self, i: InstId, names: &mut std::collections::HashMap<InstId, usize>) {
        let next = names.len();
        let k = *names.entry(i).or_insert(next);
        let _ = write!(self.out, "tmp_{k}");
    }

    fn canonical_constant(
        &mut self,
        s: ShapeId,
        lit: &crate::attrs::literal::Literal,
        opts: &CanonicalOptions,
    ) {
        use crate::attrs::literal::Literal;
        let array = match lit {
            Literal::Array(a) => Some(a),
            _ => None,
        };
        if opts.only_essential_constants {
            let Some(a) = array else {
                self.out.push_str("{...}");
                return;
            };
            if all_elements_print_as(
                a,
                &[
                    "0", "-0", "false", "(0, 0)", "(-0, 0)", "(0, -0)", "(-0, -0)",
                ],
            ) {
                self.out.push('0');
            } else if all_elements_print_as(a, &["1", "true", "(1, 0)", "(1, -0)"]) {
                self.out.push('1');
            } else if is_integral(a.elem()) && a.len() <= 500_000 {
                write_literal_oneline(a, &mut self.out);
            } else {
                self.out.push_str("{...}");
            }
            return;
        }
        let small =
            matches!(self.m.shape(s), Shape::Array(sa) if sa.dims.iter().product::<i64>() <= 10);
        match array {
            Some(a) if small => write_literal_oneline(a, &mut self.out),
            _ => self.out.push_str("{...}"),
        }
    }

    fn canonical_instruction(
        &mut self,
        id: InstId,
        opts: &CanonicalOptions,
        indent: usize,
        names: &mut std::collections::HashMap<InstId, usize>,
        top_level: bool,
    ) {
        let m = self.m;
        let inst = m.inst(id);
        // XLA prints no name for the instruction itself, nor for its
        // operands, when `HloInstruction::ToString` is called on it alone.
        if !top_level {
            self.canonical_name(id, names);
            self.out.push_str(" = ");
        }
        write_shape_canonical(m, inst.shape, &mut self.out);
        self.out.push(' ');
        write_opcode(inst, &mut self.out);
        self.out.push('(');
        match &inst.payload {
            Some(Payload::Parameter(n)) => {
                let _ = write!(self.out, "{n}");
            }
            Some(Payload::Literal(l)) => self.canonical_constant(inst.shape, l, opts),
            None => {
                for (k, &op) in inst.operands.iter().enumerate() {
                    if k > 0 {
                        self.out.push_str(", ");
                    }
                    write_shape_canonical(m, m.inst(op).shape, &mut self.out);
                    if !top_level {
                        self.out.push(' ');
                        self.canonical_name(op, names);
                    }
                }
            }
        }
        self.out.push(')');
        for a in &inst.attrs {
            match &*a.key {
                ASYNC_WRAPPED_OPCODE
                | "metadata"
                | "backend_config"
                | "control-predecessors"
                | "parameter_replication" => continue,
                "infeed_config" | "outfeed_config" if !opts.print_infeed_outfeed_config => continue,
                "frontend_attributes" if top_level => continue,
                _ => {}
            }
            match (&a.value, opts.subcomputations) {
                (AttrValue::Comp(_) | AttrValue::Comps(_), Subcomputations::Off) => {}
                (AttrValue::Comp(c), Subcomputations::FullBodies) => {
                    self.out.push_str(", ");
                    // XLA names a single callee by opcode in full-body mode.
                    let key = match (&*a.key, inst.opcode) {
                        ("calls" | "to_apply", op) => {
                            if matches!(
                                op,
                                Opcode::Call
                                    | Opcode::Map
                                    | Opcode::ReduceWindow
                                    | Opcode::Reduce
                                    | Opcode::AllReduce
                                    | Opcode::AllReduceStart
                                    | Opcode::Scatter
                                    | Opcode::Sort
                            ) {
                                "to_apply"
                            } else {
                                "calls"
                            }
                        }
                        (k, _) => k,
                    };
                    self.out.push_str(key);
                    self.out.push_str("=\n");
                    self.canonical_computation(*c, opts, indent, false);
                }
                (AttrValue::Comps(cs), Subcomputations::FullBodies) => {
                    self.out.push_str(", ");
                    self.out.push_str(&a.key);
                    if matches!(&*a.key, "branch_computations" | "called_computations") {
                        self.out.push_str("={\n");
                        for (k, c) in cs.iter().enumerate() {
                            if k > 0 {
                                self.out.push_str(",\n");
                            }
                            self.canonical_computation(*c, opts, indent, false);
                        }
                        self.out.push_str("\n}");
                    } else {
                        self.out.push_str("=\n");
                        for (k, c) in cs.iter().enumerate() {
                            if k > 0 {
                                self.out.push_str(", ");
                            }
                            self.canonical_computation(*c, opts, indent, false);
                        }
                    }
                }
                (AttrValue::Slice(sl), _) if sl.iter().any(|d| d.stride != 1) => {
                    // Every stride is written when one is not 1.
                    self.out.push_str(", ");
                    self.out.push_str(&a.key);
                    self.out.push_str("={");
                    for (k, d) in sl.iter().enumerate() {
                        if k > 0 {
                            self.out.push_str(", ");
                        }
                        let _ = write!(self.out, "[{}:{}:{}]", d.start, d.limit, d.stride);
                    }
                    self.out.push('}');
                }
                (AttrValue::ReplicaGroups(g), _)
                    if opts.full_replica_group_list
                        && matches!(**g, crate::attrs::xla::ReplicaGroups::Iota(_)) =>
                {
                    let crate::attrs::xla::ReplicaGroups::Iota(l) = &**g else {
                        return;
                    };
                    self.out.push_str(", ");
                    self.out.push_str(&a.key);
                    self.out.push('=');
                    match expand_iota(l) {
                        Some(g) => crate::attrs::xla::write_replica_groups(
                            &crate::attrs::xla::ReplicaGroups::List(g),
                            &mut self.out,
                        ),
                        None => crate::attrs::xla::write_replica_groups(
                            &crate::attrs::xla::ReplicaGroups::Iota(l.clone()),
                            &mut self.out,
                        ),
                    }
                }
                _ => {
                    self.out.push_str(", ");
                    self.attr(a);
                }
            }
        }
    }
}

/// An instruction's opcode as printed: XLA's async shorthand
/// (`all-reduce-start`, ...) for an async op that wraps one, else its name.
fn write_opcode(inst: &Instruction, out: &mut String) {
    match inst.attrs.first() {
        Some(Attr {
            key,
            value: AttrValue::Raw(w),
        }) if &**key == ASYNC_WRAPPED_OPCODE => {
            out.push_str(w);
            out.push_str(match inst.opcode {
                Opcode::AsyncStart => "-start",
                Opcode::AsyncUpdate => "-update",
                _ => "-done",
            });
        }
        _ => out.push_str(inst.opcode.name()),
    }
}

/// Modules have no structural equality; two recovery modules are equal when
/// they print the same text.
impl PartialEq for crate::ir::values::RecoveryEntry {
    fn eq(&self, o: &Self) -> bool {
        self.old == o.old
            && self.new == o.new
            && match (&self.module, &o.module) {
                (None, None) => true,
                (Some(a), Some(b)) => print_module(a) == print_module(b),
                _ => false,
            }
    }
}
