//! XLA's compact tuple-element operands: `%t#1` is element 1 of the
//! tuple-shaped instruction `%t`, `%t#1#0` element 0 of that, optionally typed
//! (`f32[10] %t#0`). Like XLA, the parser desugars each into real
//! `get-tuple-element` instructions; nothing of the shorthand survives in the
//! IR, and the printer writes the explicit instructions.
//!
//! Rules (as XLA's own parser desugars them, see
//! `testdata/compact_gte/` and the `hlo_parser_test` pairs of the corpus):
//! - one get-tuple-element per distinct (tuple, index) per computation,
//!   shared by every use; a chain `%t#1#0` is a get-tuple-element of the
//!   get-tuple-element for `%t#1`;
//! - its shape is the tuple element's shape; a written operand shape must be
//!   compatible with it (equal ignoring layouts);
//! - it is named `<tuple>_<i>` (for a chain, built on the parent's name:
//!   `t_1_0`), made unique against every name of the computation by
//!   appending `.1`, `.2`, ...;
//! - it is scheduled just before its first user (a parent before its
//!   children), so the order stays a valid post-order.
//!
//! Invariants: the tuple `%t` may be defined later in the computation (like
//! any operand); those references go through the parser's pending list and
//! are resolved by [`Lowerer::resolve_compact`] after the body. Names and
//! schedule positions are assigned once the whole body is known
//! ([`Lowerer::finish_compact_gtes`]), so a generated name never shadows a
//! name written later in the text. Every created instruction has a source
//! offset (the operand's) for errors found after lowering.

use smallvec::SmallVec;

use super::{shapes_compatible, FxMap, Lowerer};
use crate::error::Result;
use crate::ir::*;
use crate::opcode::Opcode;

/// Per-computation state of the desugaring (saved and restored around the
/// body of a computation written in place).
#[derive(Default)]
pub(super) struct CompactGtes {
    /// (tuple instruction, element index) -> its get-tuple-element.
    by_key: FxMap<(InstId, u32), InstId>,
    /// Created instructions in creation order: a parent always before the
    /// get-tuple-elements built on it.
    created: Vec<Created>,
}

struct Created {
    id: InstId,
    /// Index in `created` of the get-tuple-element this one reads, if any.
    parent: Option<usize>,
    index: u32,
}

/// `base#i#j`: the base name and each index with the byte offset of its `#`.
type Path = SmallVec<[(u32, usize); 2]>;

impl<'a> Lowerer<'a> {
    /// Byte offset of a slice of the module text.
    fn text_offset(&self, s: &str) -> usize {
        (s.as_ptr() as usize)
            .wrapping_sub(self.text.as_ptr() as usize)
            .min(self.text.len())
    }

    /// Splits `base#i#j` (without `%`; a slice of the module text) into the
    /// base name and the index path.
    fn compact_path(&self, text: &'a str) -> Result<(&'a str, Path)> {
        let mut parts = text.split('#');
        let base = parts.next().unwrap_or("");
        let mut path = Path::new();
        for part in parts {
            let off = self.text_offset(part).saturating_sub(1);
            let index = part.parse::<u32>().map_err(|_| {
                self.err(
                    off,
                    format!("expected a tuple index (a small non-negative integer) after `#`, found `{part}`"),
                )
            })?;
            path.push((index, off));
        }
        Ok((base, path))
    }

    /// Lowers the operand `%base#i#j...` (`text` without `%`, `offset` where
    /// the reference starts, `typed` the written shape and its offset). When
    /// `base` is already defined, returns the get-tuple-element it denotes;
    /// otherwise `None`: the caller queues `text` as a pending reference and
    /// [`Lowerer::resolve_compact`] finishes it after the body.
    pub(super) fn compact_operand(
        &mut self,
        text: &'a str,
        offset: usize,
        typed: Option<(ShapeId, usize)>,
    ) -> Result<Option<InstId>> {
        let (base, path) = self.compact_path(text)?;
        match self.names.get(base) {
            Some(&b) => self.compact_walk(b, text, &path, offset, typed).map(Some),
            None => Ok(None),
        }
    }

    /// Resolves a queued `base#i#j...` reference once the whole body is
    /// lowered (its base was defined after the use).
    pub(super) fn resolve_compact(
        &mut self,
        text: &'a str,
        offset: usize,
        typed: Option<(ShapeId, usize)>,
    ) -> Result<InstId> {
        let (base, path) = self.compact_path(text)?;
        let Some(&b) = self.names.get(base) else {
            return Err(self.err(offset, format!("use of undefined instruction %{base}")));
        };
        self.compact_walk(b, text, &path, offset, typed)
    }

    /// Follows `path` from `base`, creating the get-tuple-elements not made
    /// yet, and checks the written shape against the element's.
    fn compact_walk(
        &mut self,
        base: InstId,
        text: &str,
        path: &Path,
        offset: usize,
        typed: Option<(ShapeId, usize)>,
    ) -> Result<InstId> {
        let mut cur = base;
        let mut parent: Option<usize> = None;
        for &(index, hash_off) in path {
            if let Some(&g) = self.gte.by_key.get(&(cur, index)) {
                parent = self.gte.created.iter().position(|c| c.id == g);
                cur = g;
                continue;
            }
            // `%t#1` so far, for messages (the instruction may be unnamed yet).
            let upto = text
                .get(..hash_off.saturating_sub(self.text_offset(text)))
                .unwrap_or(text);
            let tuple_shape = self.m.inst(cur).shape;
            let elem = match self.m.shape(tuple_shape) {
                Shape::Tuple(elems) => match elems.get(index as usize) {
                    Some(&e) => e,
                    None => {
                        return Err(self.err(
                            hash_off,
                            format!(
                                "tuple index {index} is out of range: %{upto} has shape {} with {} element(s)",
                                crate::print::print_shape(&self.m, tuple_shape),
                                elems.len()
                            ),
                        ))
                    }
                },
                _ => {
                    return Err(self.err(
                        hash_off,
                        format!(
                            "`#{index}` selects a tuple element, but %{upto} has shape {}, which is not a tuple",
                            crate::print::print_shape(&self.m, tuple_shape)
                        ),
                    ))
                }
            };
            let parent_comp = self.m.inst(cur).parent;
            let id = self.m.add_inst(Instruction {
                // Named in `finish_compact_gtes`, once every name is known.
                name: "".into(),
                opcode: Opcode::GetTupleElement,
                shape: elem,
                operands: SmallVec::from_slice(&[cur]),
                payload: None,
                attrs: vec![Attr {
                    key: "index".into(),
                    value: AttrValue::Int(index as i64),
                }],
                parent: parent_comp,
            });
            self.note_inst_offset(id, offset);
            self.gte.by_key.insert((cur, index), id);
            self.gte.created.push(Created { id, parent, index });
            parent = Some(self.gte.created.len() - 1);
            cur = id;
        }
        if let Some((written, soff)) = typed {
            let actual = self.m.inst(cur).shape;
            if !shapes_compatible(&self.m, written, actual) {
                return Err(self.err(
                    soff,
                    format!(
                        "operand %{text} is written with shape {} but the tuple element has shape {}",
                        crate::print::print_shape(&self.m, written),
                        crate::print::print_shape(&self.m, actual)
                    ),
                ));
            }
        }
        Ok(cur)
    }

    /// Names the get-tuple-elements created for computation `cid` and
    /// schedules each just before its first user. Call after every
    /// reference of the body is resolved.
    pub(super) fn finish_compact_gtes(&mut self, cid: CompId) {
        if self.gte.created.is_empty() {
            return;
        }
        let created = std::mem::take(&mut self.gte.created);
        // Names, in creation order (a parent is named before its children).
        for c in &created {
            let base = match c.parent {
                Some(p) => self.m.inst(created[p].id).name.to_string(),
                None => {
                    let tuple = self.m.inst(c.id).operands[0];
                    self.m.inst(tuple).name.to_string()
                }
            };
            let stem = format!("{base}_{}", c.index);
            let mut name = stem.clone();
            let mut k = 0usize;
            while self.names.contains_key(name.as_str()) {
                k += 1;
                name = format!("{stem}.{k}");
            }
            let name: &'a str = self.scratch.alloc_str(&name);
            self.names.insert(name, c.id);
            self.m.inst_mut(c.id).name = name.into();
        }
        // Schedule: the position of the first user in the current order; a
        // parent goes no later than its children.
        let which: FxMap<InstId, usize> =
            created.iter().enumerate().map(|(i, c)| (c.id, i)).collect();
        let order = std::mem::take(&mut self.m.comp_mut(cid).order);
        let mut anchor = vec![usize::MAX; created.len()];
        for (pos, &u) in order.iter().enumerate() {
            for op in &self.m.inst(u).operands {
                if let Some(&g) = which.get(op) {
                    anchor[g] = anchor[g].min(pos);
                }
            }
        }
        for g in (0..created.len()).rev() {
            if let Some(p) = created[g].parent {
                anchor[p] = anchor[p].min(anchor[g]);
            }
        }
        let mut placed: Vec<usize> = (0..created.len()).collect();
        placed.sort_by_key(|&g| (anchor[g], g));
        let mut next = placed.into_iter().peekable();
        let mut new_order = Vec::with_capacity(order.len() + created.len());
        for (pos, u) in order.into_iter().enumerate() {
            while let Some(g) = next.next_if(|&g| anchor[g] <= pos) {
                new_order.push(created[g].id);
            }
            new_order.push(u);
        }
        // Unused (cannot happen: each is created for a use) go last.
        new_order.extend(next.map(|g| created[g].id));
        self.m.comp_mut(cid).order = new_order;
    }
}
