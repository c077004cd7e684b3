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
        let n = m.num_computations();
        for (k, c) in m.computations().enumerate() {
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
        match inst.attrs.first() {
            Some(Attr {
                key,
                value: AttrValue::Raw(w),
            }) if &**key == ASYNC_WRAPPED_OPCODE => {
                self.out.push_str(w);
                self.out.push_str(match inst.opcode {
                    Opcode::AsyncStart => "-start",
                    Opcode::AsyncUpdate => "-update",
                    _ => "-done",
                });
            }
            _ => self.out.push_str(inst.opcode.name()),
        }
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
