//! Pure dimension arithmetic on layouts (minor-to-major orders): completing
//! a minor-to-major prefix, mapping a layout through a transpose, reduce or
//! broadcast, and the layouts that make a reshape a bitcast.
//!
//! Invariants: every function here takes and returns *permutations* of
//! `0..rank` (complete layouts) unless its name says "prefix"; nothing here
//! touches a module.

use smallvec::SmallVec;

/// A minor-to-major order.
pub type M2M = hlo::ir::layout::MinorToMajor;

pub use hlo::ir::layout::is_permutation;

/// Completes a minor-to-major prefix to a full layout: the prefix first (most
/// minor), then the remaining dimensions in descending order (the default
/// order for the major part). `None` when the prefix repeats a dimension or
/// names one out of range.
pub fn complete_prefix(prefix: &[i64], rank: usize) -> Option<M2M> {
    let mut seen = vec![false; rank];
    let mut out = M2M::new();
    for &d in prefix {
        if d < 0 || d as usize >= rank || seen[d as usize] {
            return None;
        }
        seen[d as usize] = true;
        out.push(d);
    }
    for d in (0..rank).rev() {
        if !seen[d] {
            out.push(d as i64);
        }
    }
    Some(out)
}

/// Layout of `transpose(x), dimensions=perm` that makes the transpose a
/// bitcast of `x` laid out as `operand`: output dimension `i` is operand
/// dimension `perm[i]`.
pub fn transpose_output(operand: &[i64], perm: &[i64]) -> Option<M2M> {
    let mut inverse = vec![-1i64; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        let slot = inverse.get_mut(usize::try_from(p).ok()?)?;
        *slot = i as i64;
    }
    operand
        .iter()
        .map(|&d| {
            inverse
                .get(usize::try_from(d).ok()?)
                .copied()
                .filter(|&x| x >= 0)
        })
        .collect()
}

/// Layout of the operand of `transpose(x), dimensions=perm` that makes the
/// transpose a bitcast when its output is laid out as `output`.
pub fn transpose_operand(output: &[i64], perm: &[i64]) -> Option<M2M> {
    output
        .iter()
        .map(|&d| perm.get(usize::try_from(d).ok()?).copied())
        .collect()
}

/// The operand layout with the `removed` dimensions dropped and the rest
/// renumbered (the layout a reduce keeps from its operand).
pub fn remove_dims(operand: &[i64], removed: &[i64]) -> M2M {
    operand
        .iter()
        .filter(|d| !removed.contains(d))
        .map(|&d| d - removed.iter().filter(|&&r| r < d).count() as i64)
        .collect()
}

/// The layout of the operand of `broadcast(x), dimensions=dims` (operand
/// dimension `j` is output dimension `dims[j]`) that keeps the output's
/// relative order of those dimensions.
pub fn broadcast_operand(output: &[i64], dims: &[i64]) -> M2M {
    output
        .iter()
        .filter_map(|&d| dims.iter().position(|&x| x == d).map(|j| j as i64))
        .collect()
}

/// The layout of `to_dims` that makes `reshape(from)` a bitcast when `from`
/// (dimensions `from_dims`) is laid out as `from_m2m`; `None` when no layout
/// does. Size-1 dimensions of the result are placed most major, in
/// descending order.
///
/// Rule: ignoring size-1 dimensions, both shapes split into groups of
/// consecutive dimensions with equal element counts. A layout makes the
/// reshape a bitcast iff, in each shape, the dimensions of each group are
/// physically adjacent and in logical (major-to-minor) order, and the groups
/// appear in the same physical order in both shapes.
pub fn reshape_bitcast_layout(from_dims: &[i64], from_m2m: &[i64], to_dims: &[i64]) -> Option<M2M> {
    if from_dims.iter().chain(to_dims).any(|&d| d <= 0)
        || !is_permutation(from_m2m, from_dims.len())
    {
        return None;
    }
    let groups = reshape_groups(from_dims, to_dims)?;
    // Group sequence of `from` in minor-to-major order, checking adjacency and order.
    let mut group_of_from = vec![usize::MAX; from_dims.len()];
    for (g, (fr, _)) in groups.iter().enumerate() {
        for &d in fr {
            group_of_from[d] = g;
        }
    }
    let significant: Vec<i64> = from_m2m
        .iter()
        .copied()
        .filter(|&d| from_dims[d as usize] != 1)
        .collect();
    let mut order: Vec<usize> = Vec::new();
    let mut pos = 0;
    while pos < significant.len() {
        let g = group_of_from[significant[pos] as usize];
        let (fr, _) = &groups[g];
        // Minor-to-major within the group: the group's dims in descending order.
        for &expect in fr.iter().rev() {
            if significant.get(pos).copied() != Some(expect as i64) {
                return None;
            }
            pos += 1;
        }
        order.push(g);
    }
    let mut out = M2M::new();
    for g in order {
        for &d in groups[g].1.iter().rev() {
            out.push(d as i64);
        }
    }
    for d in (0..to_dims.len()).rev() {
        if to_dims[d] == 1 {
            out.push(d as i64);
        }
    }
    debug_assert!(is_permutation(&out, to_dims.len()));
    Some(out)
}

/// Groups of (from dims, to dims), size-1 dimensions left out, each group the
/// minimal run of consecutive dimensions with equal products; `None` when
/// none exist or a product leaves the i128 range (dimensions near `i64::MAX`).
fn reshape_groups(from_dims: &[i64], to_dims: &[i64]) -> Option<Vec<(Vec<usize>, Vec<usize>)>> {
    let f: Vec<usize> = (0..from_dims.len())
        .filter(|&d| from_dims[d] != 1)
        .collect();
    let t: Vec<usize> = (0..to_dims.len()).filter(|&d| to_dims[d] != 1).collect();
    let mut groups = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < f.len() || j < t.len() {
        let (mut pf, mut pt) = (1i128, 1i128);
        let (mut gf, mut gt) = (Vec::new(), Vec::new());
        if i < f.len() {
            pf = pf.checked_mul(from_dims[f[i]] as i128)?;
            gf.push(f[i]);
            i += 1;
        }
        if j < t.len() {
            pt = pt.checked_mul(to_dims[t[j]] as i128)?;
            gt.push(t[j]);
            j += 1;
        }
        while pf != pt {
            if pf < pt {
                let &d = f.get(i)?;
                pf = pf.checked_mul(from_dims[d] as i128)?;
                gf.push(d);
                i += 1;
            } else {
                let &d = t.get(j)?;
                pt = pt.checked_mul(to_dims[d] as i128)?;
                gt.push(d);
                j += 1;
            }
        }
        if gf.is_empty() || gt.is_empty() {
            return None;
        }
        groups.push((gf, gt));
    }
    Some(groups)
}

/// Every permutation of `0..rank`, in lexicographic order.
pub fn permutations(rank: usize) -> Vec<M2M> {
    let mut out = Vec::new();
    let mut cur: M2M = M2M::new();
    let mut used = vec![false; rank];
    fn rec(rank: usize, cur: &mut M2M, used: &mut [bool], out: &mut Vec<M2M>) {
        if cur.len() == rank {
            out.push(cur.clone());
            return;
        }
        for d in 0..rank {
            if !used[d] {
                used[d] = true;
                cur.push(d as i64);
                rec(rank, cur, used, out);
                cur.pop();
                used[d] = false;
            }
        }
    }
    rec(rank, &mut cur, &mut used, &mut out);
    out
}

/// Ordered pairs of distinct elements of `dims` (in the order of `dims`).
pub fn ordered_pairs(dims: &[i64]) -> Vec<M2M> {
    let mut out = Vec::new();
    for &a in dims {
        for &b in dims {
            if a != b {
                out.push(SmallVec::from_slice(&[a, b]));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(x: &[i64]) -> M2M {
        SmallVec::from_slice(x)
    }

    #[test]
    fn prefix_completion_appends_remaining_dims_descending() {
        assert_eq!(complete_prefix(&[4, 0], 5), Some(v(&[4, 0, 3, 2, 1])));
        assert_eq!(complete_prefix(&[], 3), Some(v(&[2, 1, 0])));
        assert_eq!(complete_prefix(&[1, 1], 3), None);
        assert_eq!(complete_prefix(&[3], 3), None);
    }

    #[test]
    fn transpose_layout_maps_dims_both_ways() {
        // transpose [a,b,c] -> [c,a,b]: perm = {2,0,1}
        let out = transpose_output(&[2, 1, 0], &[2, 0, 1]).expect("valid");
        assert_eq!(out, v(&[0, 2, 1]));
        assert_eq!(
            transpose_operand(&out, &[2, 0, 1]).expect("valid"),
            v(&[2, 1, 0])
        );
    }

    #[test]
    fn reduce_drops_and_renumbers() {
        assert_eq!(remove_dims(&[3, 1, 2, 0], &[1]), v(&[2, 1, 0]));
        assert_eq!(remove_dims(&[0, 1, 2], &[0, 2]), v(&[0]));
    }

    #[test]
    fn broadcast_operand_keeps_relative_order() {
        assert_eq!(broadcast_operand(&[0, 2, 1], &[1, 2]), v(&[1, 0]));
    }

    #[test]
    fn reshape_bitcast_moves_unit_dims_major() {
        // u32[1,96,96,96] -> u32[96,96,96], as in TpuGraphs unet_3d.
        assert_eq!(
            reshape_bitcast_layout(&[96, 96, 96], &[0, 1, 2], &[1, 96, 96, 96]),
            Some(v(&[1, 2, 3, 0]))
        );
        assert_eq!(
            reshape_bitcast_layout(&[96, 96, 96], &[2, 0, 1], &[1, 96, 96, 96]),
            Some(v(&[3, 1, 2, 0]))
        );
        assert_eq!(
            reshape_bitcast_layout(&[1, 96, 96, 96], &[3, 2, 1, 0], &[96, 96, 96]),
            Some(v(&[2, 1, 0]))
        );
    }

    #[test]
    fn reshape_bitcast_requires_groups_in_order() {
        // [6] -> [2,3]: only the row-major layout of [2,3] is a bitcast.
        assert_eq!(
            reshape_bitcast_layout(&[6], &[0], &[2, 3]),
            Some(v(&[1, 0]))
        );
        // [2,3] laid out column-major cannot be reshaped to [6] as a bitcast.
        assert_eq!(reshape_bitcast_layout(&[2, 3], &[0, 1], &[6]), None);
        // [2,3,4] {1,2,0} -> [2,12]: dims 1,2 merge but are out of order.
        assert_eq!(
            reshape_bitcast_layout(&[2, 3, 4], &[1, 2, 0], &[2, 12]),
            None
        );
        // [2,3,4] {2,1,0}... with dim 0 minor: {0,2,1} -> [2,12] {0,1}.
        assert_eq!(
            reshape_bitcast_layout(&[2, 3, 4], &[0, 2, 1], &[2, 12]),
            Some(v(&[0, 1]))
        );
        // Scalar from [1]: anything goes.
        assert_eq!(reshape_bitcast_layout(&[1], &[0], &[]), Some(v(&[])));
        assert_eq!(reshape_bitcast_layout(&[], &[], &[1, 1]), Some(v(&[1, 0])));
    }

    #[test]
    fn permutations_and_pairs_count() {
        assert_eq!(permutations(3).len(), 6);
        assert_eq!(permutations(0), vec![v(&[])]);
        assert_eq!(ordered_pairs(&[0, 4]), vec![v(&[0, 4]), v(&[4, 0])]);
    }
}
