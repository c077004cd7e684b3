//! XLA's async shorthand (`custom-call-start(...)`, `add-start`,
//! `fusion-start`, `call-start`, ... with their `-update` / `-done`) and the
//! async-start / async-update / async-done chain XLA builds for it.
//!
//! XLA's parser turns `%s = ... add-start(%a, %b), <attrs>` into an
//! async-start calling a computation of its own, `async_wrapped`, that holds
//! one parameter per operand of the start (`async_param`, `async_param.1`,
//! ...) and the wrapped op as its root (named by its opcode, with the
//! start's result element 1 as its shape and the start's attributes); the
//! computation comes right before the one holding the start, and runs on the
//! start's `async_execution_thread` (as do the computations it calls,
//! transitively). The attributes XLA's parser sets on any async op and also
//! on the op it wraps ([`SHARED`]: metadata, origin, backend config,
//! frontend attributes, statistics) are on both; a later async-update or
//! async-done of the chain overwrites them on the wrapped op. The start
//! keeps only [`START_ONLY`] (sharding, control predecessors, thread) beside
//! those; every other attribute is the wrapped op's.
//!
//! The IR holds the shorthand as written (the async-start with
//! [`ASYNC_WRAPPED_OPCODE`] first and the wrapped op's attributes), which
//! is also how XLA prints such a chain: the text, the printer, the passes
//! and the featurizer see one instruction per async op, and no computation
//! the text does not name. [`expand`] is the one place that builds XLA's
//! wrapped computation, for the proto writer, on a copy of the module; the
//! IR stays the single truth. Expansion is deterministic (names, order and
//! the writer's fresh ids depend only on the module).
//!
//! Names: the wrapped computation and its instructions get XLA's plain
//! names (`async_wrapped`, `async_param`, the opcode) and are made unique
//! by the writer's name uniquer in print order, as XLA's module makes them
//! unique in computation order: the wrapped computation comes first, so a
//! later instruction of the module named like the wrapped op is the one
//! renamed (`custom-call` -> `custom-call.1`), exactly as XLA renames it
//! when it parses the text.

use crate::error::{Error, Result};
use crate::ir::*;
use crate::opcode::Opcode;
use crate::parse::FxSet as HashSet;

/// Attributes XLA's parser sets on an async op and on the op it wraps.
pub(crate) const SHARED: &[&str] = &[
    "metadata",
    "origin",
    "backend_config",
    "frontend_attributes",
    "statistics",
];

/// Attributes of a shorthand async-start that are the start's alone.
pub(crate) const START_ONLY: &[&str] =
    &["sharding", "control-predecessors", "async_execution_thread"];

/// Whether `inst` is written in the shorthand (`add-start`, `add-done`, ...).
pub(crate) fn is_shorthand(inst: &Instruction) -> bool {
    inst.attrs
        .first()
        .is_some_and(|a| &*a.key == ASYNC_WRAPPED_OPCODE)
}

fn err(inst: &Instruction, msg: impl std::fmt::Display) -> Error {
    Error::Module(format!("cannot write %{} to a proto: {msg}", inst.name))
}

/// `m` with every shorthand async chain expanded into XLA's form (see the
/// module doc); `None` when `m` has no shorthand. Fails on a shorthand XLA
/// cannot build: an unknown wrapped opcode, an async-start whose shape is
/// not `((operands...), outputs, state...)`, an async-update binding
/// further operands (newer XLA's late binding, which the proto of jaxlib's
/// XLA cannot carry).
pub(crate) fn expand(m: &Module) -> Result<Option<Module>> {
    if !m.all_instructions().any(|i| is_shorthand(m.inst(i))) {
        return Ok(None);
    }
    let mut out = m.clone();
    // The wrapped op of each expanded async-start, by arena index.
    let mut wrapped: Vec<Option<InstId>> = vec![None; m.num_insts()];
    let order: Vec<InstId> = m.all_instructions().collect();
    for &id in &order {
        let inst = m.inst(id);
        match inst.opcode {
            Opcode::AsyncStart if is_shorthand(inst) => {
                let root = expand_start(&mut out, id)?;
                wrapped[id.index()] = Some(root);
            }
            Opcode::AsyncUpdate | Opcode::AsyncDone => {
                if is_shorthand(inst) {
                    if inst.operands.len() != 1 {
                        return Err(err(
                            inst,
                            format!(
                                "{} binds {} operands; XLA's async-update takes just the async op",
                                inst.opcode,
                                inst.operands.len()
                            ),
                        ));
                    }
                    out.inst_mut(id).attrs.remove(0);
                }
                // XLA's parser sets the shared attributes of every op of the
                // chain on the wrapped op too, the last one's winning.
                let Some(&(mut start)) = inst.operands.first() else {
                    continue;
                };
                while m.inst(start).opcode == Opcode::AsyncUpdate {
                    match m.inst(start).operands.first() {
                        Some(&p) => start = p,
                        None => break,
                    }
                }
                if let Some(root) = wrapped.get(start.index()).copied().flatten() {
                    for a in &inst.attrs {
                        if SHARED.contains(&&*a.key) {
                            out.inst_mut(root).set_attr(&a.key, a.value.clone());
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(Some(out))
}

/// Expands shorthand async-start `id` of `out`: adds its wrapped
/// computation and turns the start into `async-start(...), calls=`.
/// Returns the wrapped op.
fn expand_start(out: &mut Module, id: InstId) -> Result<InstId> {
    let start = out.inst(id).clone();
    let Some(AttrValue::Raw(w)) = start.attrs.first().map(|a| &a.value) else {
        return Err(err(&start, "the wrapped opcode is not recorded"));
    };
    let op = Opcode::from_name(w)
        .ok_or_else(|| err(&start, format!("`{w}` is not an opcode XLA can wrap")))?;
    let result = match out.shape(start.shape) {
        Shape::Tuple(es) if es.len() >= 2 => es[1],
        _ => {
            return Err(err(
                &start,
                "an async-start must have a shape ((operands...), outputs, state...)",
            ))
        }
    };
    let thread = start.string_attr("async_execution_thread");
    let comp = out.reserve_computation("async_wrapped");
    let mut params = Vec::with_capacity(start.operands.len());
    for (k, &o) in start.operands.iter().enumerate() {
        let p = out.append_inst(Instruction {
            name: "async_param".into(),
            opcode: Opcode::Parameter,
            shape: out.inst(o).shape,
            operands: Default::default(),
            payload: Some(Payload::Parameter(k as i64)),
            attrs: Vec::new(),
            parent: comp,
        });
        params.push(p);
    }
    let mut start_attrs = Vec::new();
    let mut op_attrs = Vec::new();
    for a in &start.attrs[1..] {
        let key = &*a.key;
        if SHARED.contains(&key) {
            op_attrs.push(a.clone());
            start_attrs.push(a.clone());
        } else if START_ONLY.contains(&key) {
            start_attrs.push(a.clone());
        } else {
            op_attrs.push(a.clone());
        }
    }
    let root = out.append_inst(Instruction {
        name: op.name().into(),
        opcode: op,
        shape: result,
        operands: params.iter().copied().collect(),
        payload: None,
        attrs: op_attrs,
        parent: comp,
    });
    {
        let c = out.comp_mut(comp);
        c.params = params;
        c.root = root;
    }
    out.place_computation(comp);
    out.move_computation_before(comp, start.parent);
    if let Some(t) = thread.filter(|t| t != "main") {
        set_thread(out, comp, &t);
    }
    start_attrs.push(Attr {
        key: "calls".into(),
        value: AttrValue::Comp(comp),
    });
    out.inst_mut(id).attrs = start_attrs;
    Ok(root)
}

/// Runs `c` and every computation it calls, transitively, on `thread`
/// (XLA sets the async thread on the whole wrapped call graph).
fn set_thread(m: &mut Module, c: CompId, thread: &str) {
    let mut todo = vec![c];
    let mut seen: HashSet<CompId> = HashSet::default();
    while let Some(c) = todo.pop() {
        if !seen.insert(c) {
            continue;
        }
        let value = AttrValue::Str(thread.as_bytes().into());
        let comp = m.comp_mut(c);
        match comp
            .attrs
            .iter_mut()
            .find(|a| &*a.key == "execution_thread")
        {
            Some(a) => a.value = value,
            None => comp.attrs.push(Attr {
                key: "execution_thread".into(),
                value,
            }),
        }
        for &i in &m.comp(c).order {
            todo.extend(m.inst(i).called_computations());
        }
    }
}

/// The reverse of [`expand`], for the proto reader: every async chain whose
/// wrapped computation is one XLA's parser builds for the shorthand becomes
/// the shorthand, so that a module read from XLA's proto of a text is the
/// module read from that text (and prints as XLA prints it). A chain is
/// folded only when [`expand`] gives it back: the computation and its
/// instructions have the names XLA's parser gives them (`async_wrapped`,
/// `async_param`, the opcode; a computation of another name, made by a
/// compiler pass, keeps its form and names), it is called by
/// this async-start alone and holds just its parameters and a root taking
/// them in order (the start's operands, with their shapes; the root has the
/// start's result element 1 as its shape) whose opcode has a shorthand; the
/// computation runs on the start's thread; the start holds nothing but
/// [`SHARED`], [`START_ONLY`] and `calls=`; the root's [`SHARED`] attributes
/// are those the chain sets last; the async-update / async-done of the
/// chain call nothing. Other chains keep their `calls=` form (XLA reads
/// both the same).
pub(crate) fn fold(m: &mut Module) {
    let starts: Vec<InstId> = m
        .all_instructions()
        .filter(|&i| m.inst(i).opcode == Opcode::AsyncStart && !is_shorthand(m.inst(i)))
        .collect();
    if starts.is_empty() {
        return;
    }
    // How often each computation is called, and the async-updates /
    // async-dones continuing each async op.
    let mut calls: crate::parse::FxMap<CompId, usize> = Default::default();
    let mut next: Next = Default::default();
    for i in m.all_instructions() {
        let inst = m.inst(i);
        for c in inst.called_computations() {
            *calls.entry(c).or_default() += 1;
        }
        if matches!(inst.opcode, Opcode::AsyncUpdate | Opcode::AsyncDone) {
            if let Some(&prev) = inst.operands.first() {
                next.entry(prev).or_default().push(i);
            }
        }
    }
    let mut removed = Vec::new();
    for s in starts {
        let Some(AttrValue::Comp(c)) = m.inst(s).attr("calls") else {
            continue;
        };
        let c = *c;
        if calls.get(&c) != Some(&1) {
            continue;
        }
        let Some(chain) = chain_of(m, &next, s) else {
            continue;
        };
        let Some(attrs) = folded_attrs(m, s, c, &chain) else {
            continue;
        };
        let root_op = m.inst(m.comp(c).root).opcode.name();
        m.inst_mut(s).attrs = attrs;
        for &i in &chain {
            m.inst_mut(i).attrs.insert(
                0,
                Attr {
                    key: ASYNC_WRAPPED_OPCODE.into(),
                    value: AttrValue::Raw(root_op.into()),
                },
            );
        }
        removed.push(c);
    }
    for c in removed {
        m.remove_computation(c);
    }
}

/// The async-updates and async-dones continuing each async op.
type Next = crate::parse::FxMap<InstId, smallvec::SmallVec<[InstId; 1]>>;

/// The async-updates and async-done continuing async-start `s`, in chain
/// order; `None` unless they form one chain (each continued at most once)
/// whose members take one operand and call nothing.
fn chain_of(m: &Module, next: &Next, s: InstId) -> Option<Vec<InstId>> {
    let mut chain = Vec::new();
    let mut last = s;
    loop {
        let n = match next.get(&last).map(|v| &v[..]) {
            None | Some([]) => return Some(chain),
            Some(&[n]) => n,
            Some(_) => return None,
        };
        let inst = m.inst(n);
        if inst.operands.len() != 1 || inst.called_computations().next().is_some() {
            return None;
        }
        chain.push(n);
        if inst.opcode == Opcode::AsyncDone {
            return Some(chain);
        }
        last = n;
    }
}

/// The shorthand attributes of async-start `s` calling `c` (see [`fold`]):
/// the wrapped opcode, the root's attributes, the start's own; `None` when
/// [`expand`] would not give the chain back.
fn folded_attrs(m: &Module, s: InstId, c: CompId, chain: &[InstId]) -> Option<Vec<Attr>> {
    let start = m.inst(s);
    let comp = m.comp(c);
    let root = m.inst(comp.root);
    if !root.opcode.has_async_shorthand() || comp.order.len() != comp.params.len() + 1 {
        return None;
    }
    // Only what XLA's parser names so: a computation a compiler pass made
    // (`%offloaded { ... custom-call(...) }`) keeps its own names.
    let parser_made = named(&comp.name, "async_wrapped")
        && named(&root.name, root.opcode.name())
        && comp
            .params
            .iter()
            .all(|&p| named(&m.inst(p).name, "async_param"));
    if !parser_made {
        return None;
    }
    let in_order = root.operands.len() == start.operands.len()
        && comp.params.len() == start.operands.len()
        && root
            .operands
            .iter()
            .zip(&comp.params)
            .zip(&start.operands)
            .all(|((&o, &p), &a)| o == p && m.inst(p).shape == m.inst(a).shape);
    let result_ok =
        matches!(m.shape(start.shape), Shape::Tuple(es) if es.len() >= 2 && es[1] == root.shape);
    if !in_order || !result_ok || !root.attrs.iter().all(|a| !START_ONLY.contains(&&*a.key)) {
        return None;
    }
    let thread = start.string_attr("async_execution_thread");
    let comp_thread = match comp.attrs.iter().find(|a| &*a.key == "execution_thread") {
        Some(Attr {
            value: AttrValue::Str(t),
            ..
        }) => Some(String::from_utf8_lossy(t).into_owned()),
        Some(_) => return None,
        None => None,
    };
    let main = |t: Option<String>| t.filter(|t| t != "main");
    if main(thread) != main(comp_thread) {
        return None;
    }
    let own_ok = start.attrs.iter().all(|a| {
        let k = &*a.key;
        k == "calls" || SHARED.contains(&k) || START_ONLY.contains(&k)
    });
    if !own_ok {
        return None;
    }
    // The root's shared attributes must be the ones the chain sets last.
    for &k in SHARED {
        let last = std::iter::once(s)
            .chain(chain.iter().copied())
            .rev()
            .find_map(|i| m.inst(i).attr(k));
        if root.attr(k) != last {
            return None;
        }
    }
    let mut attrs = vec![Attr {
        key: ASYNC_WRAPPED_OPCODE.into(),
        value: AttrValue::Raw(root.opcode.name().into()),
    }];
    attrs.extend(
        root.attrs
            .iter()
            .filter(|a| !SHARED.contains(&&*a.key))
            .cloned(),
    );
    attrs.extend(start.attrs.iter().filter(|a| &*a.key != "calls").cloned());
    Some(attrs)
}

/// Whether `name` is `base` as XLA's name uniquer leaves it: `base` or
/// `base.N`.
fn named(name: &str, base: &str) -> bool {
    match name.strip_prefix(base) {
        Some("") => true,
        Some(rest) => rest
            .strip_prefix('.')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
        None => false,
    }
}
