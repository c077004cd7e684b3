//! Extracts one kernel into a standalone module, the form of the TpuGraphs tile
//! data (`tile_kernels/kernel_NN.hlo`): the computations the kernel calls
//! (fused computations, nested fusions, reducers) in the source's print order,
//! then an entry computation named after the kernel with one `parameter.i` per
//! distinct operand and the kernel itself as its root.
//!
//! Invariants of the result: every id is valid in the new module (shapes are
//! re-interned, computations and instructions renumbered); control
//! predecessors are dropped (they name instructions outside the kernel); the
//! original module is not modified.

use hlo::{Attr, AttrValue, CompId, InstId, Instruction, Module, Opcode, Shape, ShapeId};

/// Copies a shape of `src` into `dst` (tuples and physical shapes recursively).
fn copy_shape(src: &Module, dst: &mut Module, id: ShapeId) -> ShapeId {
    let shape = match src.shape(id) {
        Shape::Array(a) => {
            let mut a = a.clone();
            if let Some(layout) = a.layout.as_mut() {
                if let Some(p) = layout.physical_shape {
                    layout.physical_shape = Some(copy_shape(src, dst, p));
                }
            }
            Shape::Array(a)
        }
        Shape::Tuple(items) => {
            Shape::Tuple(items.iter().map(|&s| copy_shape(src, dst, s)).collect())
        }
        Shape::Buffer(held) => Shape::Buffer(copy_shape(src, dst, *held)),
        other => other.clone(),
    };
    dst.intern_shape(shape)
}

/// Every computation `root` calls, transitively, in `m`'s print order.
fn callees(m: &Module, first: &[CompId]) -> Vec<CompId> {
    let mut seen: Vec<CompId> = Vec::new();
    let mut stack: Vec<CompId> = first.to_vec();
    while let Some(c) = stack.pop() {
        if seen.contains(&c) {
            continue;
        }
        seen.push(c);
        for &i in &m.comp(c).order {
            stack.extend(m.inst(i).called_computations());
        }
    }
    m.computations().filter(|c| seen.contains(c)).collect()
}

fn remap_attrs(attrs: &[Attr], comps: &[Option<CompId>]) -> Vec<Attr> {
    let mut out = Vec::with_capacity(attrs.len());
    for a in attrs {
        let value = match &a.value {
            AttrValue::Comp(c) => match comps.get(c.index()).copied().flatten() {
                Some(n) => AttrValue::Comp(n),
                None => continue,
            },
            AttrValue::Comps(cs) => AttrValue::Comps(
                cs.iter()
                    .filter_map(|c| comps.get(c.index()).copied().flatten())
                    .collect(),
            ),
            // Control predecessors name instructions outside the kernel's schedule.
            AttrValue::Insts(_) => continue,
            // Values that name nothing of the module.
            v => v.clone(),
        };
        out.push(Attr {
            key: a.key.clone(),
            value,
        });
    }
    out
}

/// The standalone module of kernel `kernel` of `m`.
pub fn extract_kernel(m: &Module, kernel: InstId) -> Module {
    let k = m.inst(kernel);
    let mut dst = Module::new(k.name.clone());
    let called: Vec<CompId> = k.called_computations().collect();
    let comps = callees(m, &called);
    let arena = m
        .computations()
        .map(|c| c.index() + 1)
        .chain(called.iter().map(|c| c.index() + 1))
        .max()
        .unwrap_or(0);
    let mut comp_map: Vec<Option<CompId>> = vec![None; arena];
    for &c in &comps {
        let id = dst.reserve_computation(m.comp(c).name.clone());
        if let Some(slot) = comp_map.get_mut(c.index()) {
            *slot = Some(id);
        }
    }
    let mut inst_map: Vec<Option<InstId>> = vec![None; m.num_insts()];
    for &c in &comps {
        let Some(new_c) = comp_map[c.index()] else {
            continue;
        };
        let comp = m.comp(c);
        for &i in &comp.order {
            let src = m.inst(i);
            let inst = Instruction {
                name: src.name.clone(),
                opcode: src.opcode,
                shape: copy_shape(m, &mut dst, src.shape),
                operands: Default::default(),
                payload: src.payload.clone(),
                attrs: remap_attrs(&src.attrs, &comp_map),
                parent: new_c,
            };
            inst_map[i.index()] = Some(dst.append_inst(inst));
        }
        for &i in &comp.order {
            if let Some(n) = inst_map[i.index()] {
                let operands = m
                    .inst(i)
                    .operands
                    .iter()
                    .filter_map(|o| inst_map[o.index()])
                    .collect();
                dst.inst_mut(n).operands = operands;
            }
        }
        let params: Vec<InstId> = comp
            .params
            .iter()
            .filter_map(|p| inst_map[p.index()])
            .collect();
        let root = inst_map[comp.root.index()];
        let attrs = remap_attrs(&comp.attrs, &comp_map);
        let nc = dst.comp_mut(new_c);
        nc.params = params;
        if let Some(r) = root {
            nc.root = r;
        }
        nc.attrs = attrs;
        dst.place_computation(new_c);
    }
    // The entry: one parameter per distinct operand, the kernel as root.
    let entry = dst.reserve_computation(k.name.clone());
    dst.comp_mut(entry).is_entry = true;
    let mut distinct: Vec<InstId> = Vec::new();
    for &o in &k.operands {
        if !distinct.contains(&o) {
            distinct.push(o);
        }
    }
    let mut params = Vec::with_capacity(distinct.len());
    for (n, &o) in distinct.iter().enumerate() {
        let shape = copy_shape(m, &mut dst, m.inst(o).shape);
        params.push(dst.append_inst(Instruction {
            name: format!("parameter.{n}").into(),
            opcode: Opcode::Parameter,
            shape,
            operands: Default::default(),
            payload: Some(hlo::Payload::Parameter(n as i64)),
            attrs: Vec::new(),
            parent: entry,
        }));
    }
    let operands = k
        .operands
        .iter()
        .filter_map(|o| distinct.iter().position(|d| d == o).map(|p| params[p]))
        .collect();
    let shape = copy_shape(m, &mut dst, k.shape);
    let attrs = remap_attrs(&k.attrs, &comp_map);
    let root = dst.append_inst(Instruction {
        name: k.name.clone(),
        opcode: k.opcode,
        shape,
        operands,
        payload: k.payload.clone(),
        attrs,
        parent: entry,
    });
    let e = dst.comp_mut(entry);
    e.params = params;
    e.root = root;
    dst.place_computation(entry);
    dst
}
