//! The stack frame index (`FileNames`, `FunctionNames`, `FileLocations`,
//! `StackFrames`) in the order XLA holds it.
//!
//! XLA does not keep the tables as a proto or a text lists them: it
//! renumbers them by the frames that instructions use, each frame after its
//! parents, each name, location and frame numbered when first met; frames no
//! instruction reaches are dropped. Its text parser walks the instructions
//! in text order; its proto reader walks the computations in the order the
//! proto lists them and each one's instructions by id (found by comparing
//! with XLA's reading of every module of `testdata/jax_gen`: the optimized
//! module of a sharded jax program comes out of XLA's compiler with its
//! tables in another order). The writer writes the module's order
//! ([`in_use_order`]), the reader renumbers a proto's tables as XLA's proto
//! reader does ([`renumber`]).

use std::collections::HashMap;

use super::xla;
use crate::error::{Error, Result};
use crate::ir::{CompId, InstId, Module};

/// The index in XLA's order and the renumbering of the module's frame ids.
pub(crate) struct FrameOrder {
    /// `None` when no instruction uses a frame (XLA writes no index then).
    pub index: Option<xla::StackFrameIndexProto>,
    /// Old frame id -> new frame id, for every frame an instruction reaches.
    pub ids: HashMap<i32, i32>,
}

/// The frames `m`'s instructions use, in the module's order: computations
/// and their instructions as the module lists them (the order XLA's text
/// parser meets them in).
pub(crate) fn in_use_order(m: &Module) -> Result<FrameOrder> {
    let walk: Vec<InstId> = m
        .computations()
        .flat_map(|c| m.comp(c).order.iter().copied())
        .collect();
    in_walk_order(m, &walk)
}

/// The frames the instructions of `walk` use, numbered in that order (see
/// the module docs).
fn in_walk_order(m: &Module, walk: &[InstId]) -> Result<FrameOrder> {
    let mut ids: HashMap<i32, i32> = HashMap::new();
    let Some(old) = &m.stack_frames else {
        return Ok(FrameOrder { index: None, ids });
    };
    let mut new = xla::StackFrameIndexProto::default();
    let mut names: HashMap<String, i32> = HashMap::new();
    let mut funcs: HashMap<String, i32> = HashMap::new();
    let mut locs: HashMap<(i32, i32, i32, i32, i32, i32), i32> = HashMap::new();
    let mut frames: HashMap<(i32, i32), i32> = HashMap::new();
    let bad = |what: &str| Error::Module(format!("stack frame sections: {what}"));
    {
        for &i in walk {
            let inst = m.inst(i);
            let Some(md) = inst
                .metadata()
                .map_err(|e| Error::Module(format!("%{}: {e}", inst.name)))?
            else {
                continue;
            };
            let id = md.stack_frame_id;
            if id == 0 || ids.contains_key(&id) {
                continue;
            }
            // The chain from `id` to its root (or to a frame numbered
            // already), leaf first.
            let mut chain = Vec::new();
            let mut f = id;
            while f != 0 && !ids.contains_key(&f) {
                if chain.len() > old.stack_frames.len() {
                    return Err(bad("the parents of a frame form a cycle"));
                }
                chain.push(f);
                let fr = usize::try_from(f - 1)
                    .ok()
                    .and_then(|k| old.stack_frames.get(k))
                    .ok_or_else(|| bad(&format!("stack frame {f} does not exist")))?;
                f = fr.parent_frame_id;
            }
            for &f in chain.iter().rev() {
                let fr = &old.stack_frames[(f - 1) as usize];
                let loc = usize::try_from(fr.file_location_id - 1)
                    .ok()
                    .and_then(|k| old.file_locations.get(k))
                    .ok_or_else(|| {
                        bad(&format!(
                            "file location {} does not exist",
                            fr.file_location_id
                        ))
                    })?;
                let intern = |list: &Vec<String>,
                              id: i32,
                              map: &mut HashMap<String, i32>,
                              out: &mut Vec<String>|
                 -> Result<i32> {
                    let s = usize::try_from(id - 1)
                        .ok()
                        .and_then(|k| list.get(k))
                        .ok_or_else(|| bad(&format!("name {id} does not exist")))?;
                    let n = map.len() as i32 + 1;
                    Ok(*map.entry(s.clone()).or_insert_with(|| {
                        out.push(s.clone());
                        n
                    }))
                };
                let file = intern(
                    &old.file_names,
                    loc.file_name_id,
                    &mut names,
                    &mut new.file_names,
                )?;
                let func = intern(
                    &old.function_names,
                    loc.function_name_id,
                    &mut funcs,
                    &mut new.function_names,
                )?;
                let key = (
                    file,
                    func,
                    loc.line,
                    loc.end_line,
                    loc.column,
                    loc.end_column,
                );
                let n = locs.len() as i32 + 1;
                let loc_id = *locs.entry(key).or_insert_with(|| {
                    new.file_locations.push(xla::FileLocation {
                        file_name_id: file,
                        function_name_id: func,
                        line: loc.line,
                        end_line: loc.end_line,
                        column: loc.column,
                        end_column: loc.end_column,
                    });
                    n
                });
                let parent = if fr.parent_frame_id == 0 {
                    0
                } else {
                    ids.get(&fr.parent_frame_id).copied().unwrap_or(0)
                };
                let n = frames.len() as i32 + 1;
                let fid = *frames.entry((loc_id, parent)).or_insert_with(|| {
                    new.stack_frames.push(xla::StackFrame {
                        file_location_id: loc_id,
                        parent_frame_id: parent,
                    });
                    n
                });
                ids.insert(f, fid);
            }
        }
    }
    // No instruction uses a frame: XLA writes no index (found by fuzzing:
    // an empty one was read back as none, breaking the write -> read ->
    // write fixed point).
    Ok(FrameOrder {
        index: (!new.stack_frames.is_empty()).then_some(new),
        ids,
    })
}

/// Renumbers the stack frame index of `m`, read from `p`, as XLA numbers it
/// after reading `p`, and its instructions' `stack_frame_id`s with it: the
/// frames in the order instructions use them, walking the computations in
/// the order `p` lists them and each one's instructions by id (XLA's
/// reading of every jax module of the generated corpus `testdata/jax_gen`
/// numbers them so; the module's own order of computations, which XLA
/// sorts by id where callees stay first, is not the one).
pub(crate) fn renumber(m: &mut Module, p: &xla::HloModuleProto) -> Result<()> {
    if m.stack_frames.is_none() {
        return Ok(());
    }
    let by_proto_id: HashMap<i64, CompId> = m
        .computations()
        .filter_map(|c| m.comp_proto_id(c).map(|id| (id, c)))
        .collect();
    let mut walk = Vec::new();
    for c in &p.computations {
        let Some(&cid) = by_proto_id.get(&c.id) else {
            continue;
        };
        let mut insts = m.comp(cid).order.clone();
        insts.sort_by_key(|&i| m.inst_proto_id(i));
        walk.extend(insts);
    }
    let order = in_walk_order(m, &walk)?;
    for i in walk {
        for a in &mut m.inst_mut(i).attrs {
            if let crate::ir::AttrValue::Metadata(md) = &mut a.value {
                if md.stack_frame_id != 0 {
                    // Every used frame is numbered by `in_use_order`.
                    md.stack_frame_id = order.ids.get(&md.stack_frame_id).copied().unwrap_or(0);
                }
            }
        }
    }
    m.stack_frames = order.index.map(Box::new);
    Ok(())
}
