//! k-hop pruning of a layout graph to its configurable nodes' neighbourhoods.
//!
//! The layout encoder (MODEL.md) is `k` message-passing layers with no
//! graph-level pooling, so a configurable node's embedding depends only on the
//! nodes within `k` undirected hops. Keeping exactly those nodes and the edges
//! among them leaves the encoder output unchanged and makes it much cheaper on
//! big graphs (the 21,918-node NLP graph keeps 9,455 nodes at k = 3).
//!
//! Invariants: kept nodes stay in their original order; edges keep their
//! original order (duplicates included); configurable nodes keep their order.
//! The algorithm is the same as `costmodel/training/data.py::prune_khop`.

use crate::graph::{Graph, NODE_FEAT_DIM};

/// The subgraph of `graph` induced by the nodes within `k` undirected hops of
/// its configurable nodes, renumbered densely. `graph` must be valid (edge
/// endpoints and configurable ids in range); `node_splits` is dropped.
pub fn prune_khop(graph: &Graph, k: usize) -> Graph {
    let n = graph.num_nodes();
    let mut keep = vec![false; n];
    let mut frontier = vec![false; n];
    for &id in &graph.node_config_ids {
        keep[id as usize] = true;
        frontier[id as usize] = true;
    }
    for _ in 0..k {
        let mut next = vec![false; n];
        let mut grew = false;
        for &[consumer, producer] in &graph.edge_index {
            let (c, p) = (consumer as usize, producer as usize);
            if frontier[c] && !keep[p] {
                next[p] = true;
                grew = true;
            }
            if frontier[p] && !keep[c] {
                next[c] = true;
                grew = true;
            }
        }
        if !grew {
            break;
        }
        for (kept, &new) in keep.iter_mut().zip(&next) {
            *kept |= new;
        }
        frontier = next;
    }
    let mut remap = vec![u32::MAX; n];
    let mut kept = 0usize;
    for (i, &k) in keep.iter().enumerate() {
        if k {
            remap[i] = kept as u32;
            kept += 1;
        }
    }
    if kept == n {
        let mut g = graph.clone();
        g.node_splits.clear();
        return g;
    }
    let mut node_feat = Vec::with_capacity(kept * NODE_FEAT_DIM);
    let mut node_opcode = Vec::with_capacity(kept);
    for (i, &k) in keep.iter().enumerate() {
        if k {
            node_feat
                .extend_from_slice(&graph.node_feat[i * NODE_FEAT_DIM..(i + 1) * NODE_FEAT_DIM]);
            node_opcode.push(graph.node_opcode[i]);
        }
    }
    let edge_index = graph
        .edge_index
        .iter()
        .filter(|[c, p]| keep[*c as usize] && keep[*p as usize])
        .map(|&[c, p]| [i64::from(remap[c as usize]), i64::from(remap[p as usize])])
        .collect();
    let node_config_ids = graph
        .node_config_ids
        .iter()
        .map(|&id| i64::from(remap[id as usize]))
        .collect();
    Graph {
        node_feat,
        node_opcode,
        edge_index,
        node_config_ids,
        node_splits: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain 0 <- 1 <- 2 <- 3 <- 4 (edges [consumer, producer]) plus an
    /// isolated node 5; node 2 configurable.
    fn chain() -> Graph {
        let n = 6;
        Graph {
            node_feat: (0..n * NODE_FEAT_DIM)
                .map(|i| (i / NODE_FEAT_DIM) as f32)
                .collect(),
            node_opcode: (0..n as u8).collect(),
            edge_index: vec![[0, 1], [1, 2], [2, 3], [3, 4]],
            node_config_ids: vec![2],
            node_splits: vec![0, n as i64],
        }
    }

    #[test]
    fn keeps_nodes_within_k_hops_in_both_directions() {
        let g = prune_khop(&chain(), 1);
        assert_eq!(g.node_opcode, vec![1, 2, 3]);
        assert_eq!(g.edge_index, vec![[0, 1], [1, 2]]);
        assert_eq!(g.node_config_ids, vec![1]);
        assert_eq!(g.node_feat[0], 1.0);
        assert_eq!(g.node_feat[2 * NODE_FEAT_DIM], 3.0);
    }

    #[test]
    fn k_zero_keeps_only_configurable_nodes() {
        let g = prune_khop(&chain(), 0);
        assert_eq!(g.node_opcode, vec![2]);
        assert!(g.edge_index.is_empty());
        assert_eq!(g.node_config_ids, vec![0]);
    }

    #[test]
    fn large_k_keeps_the_connected_component() {
        let g = prune_khop(&chain(), 10);
        assert_eq!(g.node_opcode, vec![0, 1, 2, 3, 4]);
        assert_eq!(g.edge_index.len(), 4);
        assert_eq!(g.node_config_ids, vec![2]);
    }
}
