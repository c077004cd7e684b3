//! Kernels of a module after fusion, and the tile space of each.
//!
//! A kernel is an instruction the TPU compiler compiles into one program with
//! one tile size: a `fusion`, or a standalone `convolution`, `dot`, `copy` or
//! `reshape`. Kernels live in the computations that run as programs: the entry
//! computation and, transitively, the bodies of `while`, `conditional`, `call`
//! and async wrappers; never inside a fused computation or a reducer.
//!
//! The tile space of a kernel ([`analyze`]) follows the rules in
//! [`super::space`]:
//! - a convolution or dot (standalone, or the hero of a fusion: the one with
//!   the largest output) tiles its output (`output_bounds`) and its kernel
//!   operand, the rhs (`kernel_bounds`), with shared dimensions moving together;
//! - any other fusion tiles its iteration space: the largest of its outputs
//!   and of the operands of the reductions in its fused computation (a
//!   reduction fusion is tiled over what it reduces);
//! - a copy tiles its output; a reshape has no tile choice.
//!
//! Invariant: [`analyze`] never panics on input; anything it cannot tile is an
//! `Err` with a reason, which the pass reports as a skipped kernel.

use hlo::{ArrayShape, AttrValue, CompId, InstId, Layout, Module, Opcode, Shape, Tile};

use super::space::{lcm, ArrayUse, Axis, Extent, TileSpace, Var, MAX_DIM};

/// Fusion kinds a kernel may have (`kind=` of a fusion).
pub const KNOWN_FUSION_KINDS: &[&str] = &["kLoop", "kInput", "kOutput", "kCustom"];

/// Highest rank the TpuGraphs tile features describe.
pub const MAX_RANK: usize = 6;

/// Whether `m` can be featurized for the tile task (`hlo-cost featurize
/// --task tile`): a tile graph is one kernel, as TpuGraphs' tile graphs are;
/// a whole module's graph would carry tile configurations of no kernel in
/// particular. The error says what to do instead.
pub fn check_single_kernel(m: &Module) -> Result<(), String> {
    let kernels = find_kernels(m);
    if kernels.len() > 1 {
        return Err(format!(
            "--task tile featurizes one kernel (a module holding a single fusion, convolution, dot, copy or reshape, as the TpuGraphs tile graphs do), and this module has {} kernels; use --task layout for a whole module, or `hlo-opt --pass=tile` to rank the tiles of every kernel",
            kernels.len()
        ));
    }
    Ok(())
}

/// Every kernel of `m`, in print order of computations and schedule order.
pub fn find_kernels(m: &Module) -> Vec<InstId> {
    let program = program_computations(m);
    let mut out = Vec::new();
    for c in m.computations() {
        if !program.contains(&c) {
            continue;
        }
        for &id in &m.comp(c).order {
            if is_kernel_opcode(m.inst(id).opcode) {
                out.push(id);
            }
        }
    }
    out
}

/// Whether `m` looks like a module before XLA's fusion pass: it has no
/// `fusion` anywhere, and its program computations compute elementwise
/// operations or broadcasts directly (after fusion those live inside
/// fusions). Such a module has no kernels yet: its standalone dots and
/// reshapes become parts of fusions. Returns how many such instructions it
/// found (`None`: the module looks fused, or is a standalone kernel).
pub fn unfused_ops(m: &Module) -> Option<usize> {
    if m.all_instructions()
        .any(|i| m.inst(i).opcode == Opcode::Fusion)
    {
        return None;
    }
    let mut n = 0usize;
    for c in program_computations(m) {
        for &id in &m.comp(c).order {
            let op = m.inst(id).opcode;
            if (op.is_elementwise() && op != Opcode::Copy) || op == Opcode::Broadcast {
                n += 1;
            }
        }
    }
    (n > 0).then_some(n)
}

/// Whether an instruction of a program computation is a kernel.
pub fn is_kernel_opcode(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::Fusion | Opcode::Convolution | Opcode::Dot | Opcode::Copy | Opcode::Reshape
    )
}

/// The entry computation and the computations it runs as programs.
fn program_computations(m: &Module) -> Vec<CompId> {
    let mut seen = vec![m.entry];
    let mut stack = vec![m.entry];
    while let Some(c) = stack.pop() {
        for &id in &m.comp(c).order {
            let inst = m.inst(id);
            let descends = matches!(
                inst.opcode,
                Opcode::While | Opcode::Conditional | Opcode::Call | Opcode::AsyncStart
            );
            if !descends {
                continue;
            }
            for callee in inst.called_computations() {
                if !seen.contains(&callee) {
                    seen.push(callee);
                    stack.push(callee);
                }
            }
        }
    }
    seen
}

/// Physical axes of an array shape (rules 1 and 2 of [`super::space`]):
/// `(logical dim, extent, layout tile unit)`, major to minor.
pub fn physical_axes(a: &ArrayShape) -> Vec<(usize, i64, i64)> {
    let rank = a.rank();
    let m2m: Vec<usize> = match a.minor_to_major() {
        Some(o) if o.len() == rank => o
            .iter()
            .map(|&d| usize::try_from(d).unwrap_or(0).min(rank.saturating_sub(1)))
            .collect(),
        _ => Layout::default_order(rank)
            .iter()
            .map(|&d| d as usize)
            .collect(),
    };
    let tile: Option<&Tile> = a.layout.as_ref().and_then(|l| l.tiles.first());
    let mut unit_of_minor = vec![1i64; rank]; // indexed by position from the minor end
    match tile {
        Some(t) => {
            for (j, &td) in t.0.iter().rev().enumerate() {
                if j < rank {
                    unit_of_minor[j] = if td == Tile::COMBINE_DIM || td <= 0 {
                        1
                    } else {
                        td
                    };
                }
            }
        }
        None if rank >= 2 => {
            unit_of_minor[0] = 128;
            unit_of_minor[1] = 8;
        }
        None if rank == 1 => {
            unit_of_minor[0] = if a.dims[0] > 256 { 1024 } else { 256 };
        }
        None => {}
    }
    m2m.iter()
        .enumerate()
        .rev()
        .map(|(j, &d)| (d, a.dims.get(d).copied().unwrap_or(1), unit_of_minor[j]))
        .collect()
}

fn array_of(m: &Module, id: InstId) -> Result<&ArrayShape, String> {
    let inst = m.inst(id);
    m.shape(inst.shape)
        .as_array()
        .ok_or_else(|| format!("%{} is not an array", inst.name))
}

/// Checks a shape the tile space depends on: static, non-empty, rank at most 6.
fn check_array(m: &Module, id: InstId) -> Result<&ArrayShape, String> {
    let a = array_of(m, id)?;
    check_shape(a, &m.inst(id).name)?;
    Ok(a)
}

fn check_shape(a: &ArrayShape, name: &str) -> Result<(), String> {
    if a.dynamic.iter().any(|&d| d) || a.dims.iter().any(|&d| d < 0) {
        return Err(format!("%{name} has a dynamic shape"));
    }
    if a.dims.contains(&0) {
        return Err(format!("%{name} has a zero-sized shape"));
    }
    if let Some(&d) = a.dims.iter().find(|&&d| d > MAX_DIM) {
        return Err(format!(
            "%{name} has a dimension of {d} elements, beyond the {MAX_DIM} (2^40) the tile pass tiles"
        ));
    }
    if a.rank() > MAX_RANK {
        return Err(format!(
            "%{name} has rank {} (at most {MAX_RANK} can be tiled)",
            a.rank()
        ));
    }
    Ok(())
}

fn elem_bytes(a: &ArrayShape) -> u64 {
    u64::from(a.elem.byte_size().max(1))
}

fn dims_attr(m: &Module, id: InstId, key: &str) -> Result<Vec<usize>, String> {
    let list = m
        .inst(id)
        .int_list_attr(key)
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    list.into_iter()
        .map(|d| usize::try_from(d).map_err(|_| format!("{key}: negative dimension")))
        .collect()
}

/// The fields of a convolution's `dim_labels` and `window` the tile space needs.
struct ConvInfo {
    lhs_batch: usize,
    lhs_feature: usize,
    lhs_spatial: Vec<usize>,
    rhs_input: usize,
    rhs_output: usize,
    rhs_spatial: Vec<usize>,
    out_batch: usize,
    out_feature: usize,
    out_spatial: Vec<usize>,
    /// Per spatial dimension: (window size, stride, window dilation).
    window: Vec<(i64, i64, i64)>,
}

fn parse_conv(m: &Module, id: InstId) -> Result<ConvInfo, String> {
    let inst = m.inst(id);
    let d = inst
        .conv_dims()
        .map_err(|e| e.to_string())?
        .ok_or("convolution without dim_labels")?;
    let labels = d.labels();
    let role = |p: Option<i64>, what: &str| -> Result<usize, String> {
        p.and_then(|p| usize::try_from(p).ok())
            .ok_or_else(|| format!("dim_labels `{labels}` has no {what} dimension"))
    };
    let spatial = |side: &[i64]| -> Result<Vec<usize>, String> {
        side.iter()
            .enumerate()
            .map(|(k, &p)| {
                usize::try_from(p)
                    .map_err(|_| format!("dim_labels `{labels}` lacks spatial dimension {k}"))
            })
            .collect()
    };
    // Window fields default to 1 (and are at least 1) in every spatial dimension.
    let mut window = vec![(1i64, 1i64, 1i64); d.input_spatial.len()];
    let dims = inst
        .window()
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    for (slot, w) in window.iter_mut().zip(&dims) {
        *slot = (w.size.max(1), w.stride.max(1), w.rhs_dilation.max(1));
    }
    Ok(ConvInfo {
        lhs_batch: role(d.input_batch, "input batch")?,
        lhs_feature: role(d.input_feature, "input feature")?,
        lhs_spatial: spatial(&d.input_spatial)?,
        rhs_input: role(d.kernel_input_feature, "kernel input feature")?,
        rhs_output: role(d.kernel_output_feature, "kernel output feature")?,
        rhs_spatial: spatial(&d.kernel_spatial)?,
        out_batch: role(d.output_batch, "output batch")?,
        out_feature: role(d.output_feature, "output feature")?,
        out_spatial: spatial(&d.output_spatial)?,
        window,
    })
}

/// Maps the logical dims of one array to vars (with stride and halo).
type DimMap = Vec<Option<(usize, i64, i64)>>;

fn axes_of(a: &ArrayShape, map: &DimMap) -> Vec<Axis> {
    physical_axes(a)
        .into_iter()
        .map(|(dim, extent, unit)| Axis {
            dim,
            extent,
            unit,
            tiled_by: match map.get(dim).copied().flatten() {
                Some((var, stride, halo)) => Extent::Var { var, stride, halo },
                None => Extent::Full,
            },
        })
        .collect()
}

/// Lowers vars' granules to the lcm of the layout units of the axes that
/// reference them directly (rule 4).
fn settle_granules(vars: &mut [Var], arrays: &[&[Axis]]) {
    for axes in arrays {
        for a in axes.iter() {
            if let Extent::Var {
                var,
                stride: 1,
                halo: 0,
            } = a.tiled_by
            {
                vars[var].granule = lcm(vars[var].granule, a.unit);
            }
        }
    }
}

/// The tile space of the convolution or dot `hero` (output = its own shape).
fn matmul_space(m: &Module, hero: InstId) -> Result<(TileSpace, DimMap), String> {
    let inst = m.inst(hero);
    if inst.operands.len() < 2 {
        return Err(format!("%{} has fewer than two operands", inst.name));
    }
    let (lhs_id, rhs_id) = (inst.operands[0], inst.operands[1]);
    let out = check_array(m, hero)?;
    let lhs = check_array(m, lhs_id)?;
    let rhs = check_array(m, rhs_id)?;
    let mut vars: Vec<Var> = Vec::new();
    let mut new_var = |extent: i64| {
        vars.push(Var { extent, granule: 1 });
        vars.len() - 1
    };
    let mut out_map: DimMap = vec![None; out.rank()];
    let mut lhs_map: DimMap = vec![None; lhs.rank()];
    let mut rhs_map: DimMap = vec![None; rhs.rank()];
    let dim = |a: &ArrayShape, d: usize, what: &str| -> Result<i64, String> {
        a.dims
            .get(d)
            .copied()
            .ok_or_else(|| format!("%{}: {what} dimension {d} out of range", inst.name))
    };
    if inst.opcode == Opcode::Convolution {
        let c = parse_conv(m, hero)?;
        let b = new_var(dim(out, c.out_batch, "output batch")?);
        out_map[c.out_batch] = Some((b, 1, 0));
        *lhs_map
            .get_mut(c.lhs_batch)
            .ok_or("lhs batch out of range")? = Some((b, 1, 0));
        let o = new_var(dim(out, c.out_feature, "output feature")?);
        out_map[c.out_feature] = Some((o, 1, 0));
        *rhs_map
            .get_mut(c.rhs_output)
            .ok_or("kernel output feature out of range")? = Some((o, 1, 0));
        let i = new_var(dim(rhs, c.rhs_input, "kernel input feature")?);
        *rhs_map
            .get_mut(c.rhs_input)
            .ok_or("kernel input feature out of range")? = Some((i, 1, 0));
        *lhs_map
            .get_mut(c.lhs_feature)
            .ok_or("lhs feature out of range")? = Some((i, 1, 0));
        for k in 0..c.out_spatial.len() {
            let (size, stride, dilation) = c.window[k];
            let s = new_var(dim(out, c.out_spatial[k], "output spatial")?);
            out_map[c.out_spatial[k]] = Some((s, 1, 0));
            *lhs_map
                .get_mut(c.lhs_spatial[k])
                .ok_or("lhs spatial out of range")? =
                Some((s, stride, (size - 1).saturating_mul(dilation)));
            let w = new_var(dim(rhs, c.rhs_spatial[k], "kernel spatial")?);
            *rhs_map
                .get_mut(c.rhs_spatial[k])
                .ok_or("kernel spatial out of range")? = Some((w, 1, 0));
        }
    } else {
        let lb = dims_attr(m, hero, "lhs_batch_dims")?;
        let rb = dims_attr(m, hero, "rhs_batch_dims")?;
        let lc = dims_attr(m, hero, "lhs_contracting_dims")?;
        let rc = dims_attr(m, hero, "rhs_contracting_dims")?;
        if lb.len() != rb.len() || lc.len() != rc.len() {
            return Err(format!(
                "%{}: dot dimension numbers do not pair up",
                inst.name
            ));
        }
        let mut next_out = 0usize;
        let set = |map: &mut DimMap, d: usize, v: usize| -> Result<(), String> {
            *map.get_mut(d)
                .ok_or_else(|| format!("dot dimension {d} out of range"))? = Some((v, 1, 0));
            Ok(())
        };
        for (&l, &r) in lb.iter().zip(&rb) {
            let v = new_var(dim(lhs, l, "lhs batch")?);
            set(&mut lhs_map, l, v)?;
            set(&mut rhs_map, r, v)?;
            set(&mut out_map, next_out, v)?;
            next_out += 1;
        }
        for d in 0..lhs.rank() {
            if !lb.contains(&d) && !lc.contains(&d) {
                let v = new_var(lhs.dims[d]);
                set(&mut lhs_map, d, v)?;
                set(&mut out_map, next_out, v)?;
                next_out += 1;
            }
        }
        for d in 0..rhs.rank() {
            if !rb.contains(&d) && !rc.contains(&d) {
                let v = new_var(rhs.dims[d]);
                set(&mut rhs_map, d, v)?;
                set(&mut out_map, next_out, v)?;
                next_out += 1;
            }
        }
        for (&l, &r) in lc.iter().zip(&rc) {
            let v = new_var(dim(lhs, l, "lhs contracting")?);
            set(&mut lhs_map, l, v)?;
            set(&mut rhs_map, r, v)?;
        }
        if next_out != out.rank() {
            return Err(format!(
                "%{}: dot output rank {} does not match its operands",
                inst.name,
                out.rank()
            ));
        }
    }
    let kernel = axes_of(rhs, &rhs_map);
    let output = axes_of(out, &out_map);
    let lhs_axes = axes_of(lhs, &lhs_map);
    settle_granules(&mut vars, &[&kernel, &output, &lhs_axes]);
    let arrays = vec![
        ArrayUse {
            name: m.inst(lhs_id).name.to_string(),
            elem_bytes: elem_bytes(lhs),
            axes: lhs_axes,
            tiled: true,
        },
        ArrayUse {
            name: m.inst(rhs_id).name.to_string(),
            elem_bytes: elem_bytes(rhs),
            axes: kernel.clone(),
            tiled: true,
        },
        ArrayUse {
            name: inst.name.to_string(),
            elem_bytes: elem_bytes(out),
            axes: output.clone(),
            tiled: true,
        },
    ];
    let space = TileSpace {
        vars,
        kernel,
        output,
        arrays,
        reduction: false,
        untiled: false,
    };
    Ok((space, out_map))
}

/// The tile space of an iteration array with one var per dimension.
fn iteration_space(a: &ArrayShape) -> (TileSpace, DimMap) {
    let mut vars = vec![
        Var {
            extent: 1,
            granule: 1
        };
        a.rank()
    ];
    let map: DimMap = (0..a.rank()).map(|d| Some((d, 1, 0))).collect();
    for (d, extent, unit) in physical_axes(a) {
        vars[d] = Var {
            extent,
            granule: unit,
        };
    }
    let output = axes_of(a, &map);
    (
        TileSpace {
            vars,
            kernel: Vec::new(),
            output,
            arrays: Vec::new(),
            reduction: false,
            untiled: false,
        },
        map,
    )
}

/// Adds the memory use of `id` (a fusion parameter or output): tiled like the
/// iteration space when it has the iteration space's dimensions, else counted
/// in proportion.
fn add_array(space: &mut TileSpace, iter_dims: &[i64], map: &DimMap, name: &str, a: &ArrayShape) {
    let same = a.dims.as_slice() == iter_dims;
    let none: DimMap = vec![None; a.rank()];
    space.arrays.push(ArrayUse {
        name: name.to_string(),
        elem_bytes: elem_bytes(a),
        axes: axes_of(a, if same { map } else { &none }),
        tiled: same,
    });
}

/// The arrays of a shape (the elements of a tuple, recursively).
fn arrays_in(m: &Module, shape: &Shape, out: &mut Vec<ArrayShape>) {
    match shape {
        Shape::Array(a) => out.push(a.clone()),
        Shape::Tuple(items) => {
            for &s in items {
                arrays_in(m, m.shape(s), out);
            }
        }
        // A buffer is not a tileable value: buffer shapes are left alone.
        Shape::Buffer(_) | Shape::Token | Shape::Opaque => {}
    }
}

/// The tile space of kernel `id` (see the module docs); `Err(reason)` when it cannot be tiled.
pub fn analyze(m: &Module, id: InstId) -> Result<TileSpace, String> {
    let inst = m.inst(id);
    match inst.opcode {
        Opcode::Reshape => {
            check_array(m, id)?;
            Ok(TileSpace::untiled())
        }
        Opcode::Convolution | Opcode::Dot => Ok(matmul_space(m, id)?.0),
        Opcode::Copy => {
            let out = check_array(m, id)?;
            let (mut space, map) = iteration_space(out);
            add_array(&mut space, &out.dims, &map, &inst.name, out);
            if let Some(&op) = inst.operands.first() {
                let a = check_array(m, op)?;
                add_array(&mut space, &out.dims, &map, &m.inst(op).name, a);
            }
            Ok(space)
        }
        Opcode::Fusion => fusion_space(m, id),
        other => Err(format!("`{other}` is not a kernel")),
    }
}

fn fusion_space(m: &Module, id: InstId) -> Result<TileSpace, String> {
    let inst = m.inst(id);
    let kind = inst.fusion_kind().unwrap_or("");
    if !KNOWN_FUSION_KINDS.contains(&kind) {
        return Err(format!(
            "unknown fusion kind `{kind}` (known: {})",
            KNOWN_FUSION_KINDS.join(", ")
        ));
    }
    let callee = match inst.attr("calls") {
        Some(AttrValue::Comp(c)) => *c,
        Some(AttrValue::Comps(cs)) if cs.len() == 1 => cs[0],
        _ => return Err("fusion without a single called computation".into()),
    };
    let comp = m.comp(callee);
    let mut outputs = Vec::new();
    arrays_in(m, m.inst_shape(id), &mut outputs);
    if outputs.is_empty() {
        return Err("fusion has no array output".into());
    }
    for a in &outputs {
        check_shape(a, &inst.name)?;
    }
    // The hero: the convolution or dot with the largest output.
    let hero = comp
        .order
        .iter()
        .copied()
        .filter(|&i| matches!(m.inst(i).opcode, Opcode::Convolution | Opcode::Dot))
        .max_by_key(|&i| {
            (
                array_of(m, i)
                    .ok()
                    .and_then(ArrayShape::element_count)
                    .unwrap_or(0),
                std::cmp::Reverse(i),
            )
        });
    let mut operand_arrays: Vec<(usize, String, ArrayShape)> = Vec::new();
    for (k, &op) in inst.operands.iter().enumerate() {
        let mut v = Vec::new();
        arrays_in(m, m.inst_shape(op), &mut v);
        for a in v {
            check_shape(&a, &m.inst(op).name)?;
            operand_arrays.push((k, m.inst(op).name.to_string(), a));
        }
    }
    let (mut space, iter_dims, map) = match hero {
        Some(h) => {
            let (space, map) = matmul_space(m, h)?;
            let dims = array_of(m, h)?.dims.to_vec();
            (space, dims, map)
        }
        None => {
            // Iteration space: the largest output, or the largest reduction operand.
            let mut best: Option<(ArrayShape, bool)> = None;
            let mut consider = |a: &ArrayShape, reduction: bool| {
                let n = a.element_count().unwrap_or(0);
                if best
                    .as_ref()
                    .is_none_or(|(b, _)| n > b.element_count().unwrap_or(0))
                {
                    best = Some((a.clone(), reduction));
                }
            };
            for a in &outputs {
                consider(a, false);
            }
            for &i in &comp.order {
                let ri = m.inst(i);
                if ri.opcode == Opcode::Reduce {
                    if let Some(&op) = ri.operands.first() {
                        let mut v = Vec::new();
                        arrays_in(m, m.inst_shape(op), &mut v);
                        for a in &v {
                            check_shape(a, &m.inst(op).name)?;
                            consider(a, true);
                        }
                    }
                }
            }
            let (a, reduction) = best.ok_or("fusion has no array to tile")?;
            let (mut space, map) = iteration_space(&a);
            space.reduction = reduction;
            (space, a.dims.to_vec(), map)
        }
    };
    if hero.is_none() {
        for a in &outputs {
            add_array(&mut space, &iter_dims, &map, &inst.name, a);
        }
    } else {
        // The convolution's own arrays are in already; the fusion's outputs and
        // parameters other than them count too.
        for a in &outputs {
            if a.dims.as_slice() != iter_dims.as_slice() {
                add_array(&mut space, &iter_dims, &map, &inst.name, a);
            }
        }
    }
    // A fusion operand that is the convolution's own lhs or rhs is in already.
    let hero_operands: Vec<InstId> = hero
        .map(|h| m.inst(h).operands.iter().take(2).copied().collect())
        .unwrap_or_default();
    for (k, name, a) in &operand_arrays {
        let param = comp.params.get(*k).copied();
        if param.is_some_and(|p| hero_operands.contains(&p)) {
            continue;
        }
        add_array(&mut space, &iter_dims, &map, name, a);
    }
    Ok(space)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hlo::{Layout, PrimType};
    use smallvec::SmallVec;

    fn shape(elem: PrimType, dims: &[i64], m2m: &[i64], tile: Option<&[i64]>) -> ArrayShape {
        let mut layout = Layout::from_minor_to_major(m2m.iter().copied());
        if let Some(t) = tile {
            layout.tiles.push(Tile(t.iter().copied().collect()));
        }
        ArrayShape {
            elem,
            dims: dims.iter().copied().collect(),
            dynamic: SmallVec::new(),
            layout: Some(layout),
        }
    }

    #[test]
    fn rule1_axes_are_major_to_minor_in_layout_tiles() {
        let a = shape(
            PrimType::F32,
            &[32, 26, 26, 192],
            &[3, 0, 2, 1],
            Some(&[8, 128]),
        );
        let axes = physical_axes(&a);
        assert_eq!(
            axes,
            vec![(1, 26, 1), (2, 26, 1), (0, 32, 8), (3, 192, 128)]
        );
    }

    #[test]
    fn rule2_untiled_layouts_get_the_tpu_8x128_tiling() {
        let a = shape(PrimType::F32, &[256, 768], &[1, 0], None);
        assert_eq!(physical_axes(&a), vec![(0, 256, 8), (1, 768, 128)]);
        let v = shape(PrimType::F32, &[1000], &[0], None);
        assert_eq!(physical_axes(&v), vec![(0, 1000, 1024)]);
        let small = shape(PrimType::F32, &[192], &[0], None);
        assert_eq!(physical_axes(&small), vec![(0, 192, 256)]);
        // a small explicit tile wins
        let t = shape(
            PrimType::Bf16,
            &[224, 224, 3, 32],
            &[3, 2, 1, 0],
            Some(&[4, 128]),
        );
        assert_eq!(
            physical_axes(&t),
            vec![(0, 224, 1), (1, 224, 1), (2, 3, 4), (3, 32, 128)]
        );
    }
}
