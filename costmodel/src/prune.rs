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
//! Training (`costmodel/training/data.py`) prunes with this function too,
//! through the Python package (`hlo_opt.prune_khop`).
//!
//! Also the configurable nodes' meta-graph of the early-join layout head
//! ([`meta_edges`], training's too: `hlo_opt.meta_edges`): every path it follows lies
//! within `hops - 1` hops of a configurable node, so the pruned graph gives
//! the same meta-graph as the full one when `hops <= k + 1`.

use crate::graph::{Graph, GraphView, NODE_FEAT_DIM};

/// The subgraph of `graph` induced by the nodes within `k` undirected hops of
/// its configurable nodes, renumbered densely. `graph` (a [`Graph`] or a
/// [`GraphView`]) must be valid (edge endpoints and configurable ids in
/// range); `node_splits` is dropped.
pub fn prune_khop<'a>(graph: impl Into<GraphView<'a>>, k: usize) -> Graph {
    let graph = graph.into();
    let n = graph.num_nodes();
    let mut keep = vec![false; n];
    let mut frontier = vec![false; n];
    for &id in graph.node_config_ids {
        keep[id as usize] = true;
        frontier[id as usize] = true;
    }
    for _ in 0..k {
        let mut next = vec![false; n];
        let mut grew = false;
        for &[consumer, producer] in graph.edge_index {
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
        return GraphView {
            node_splits: &[],
            ..graph
        }
        .to_graph();
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

/// The meta-graph of the configurable nodes: `[consumer, producer]` rows over
/// positions in `graph.node_config_ids`, one for each pair where the producer
/// reaches the consumer by a directed path (producer -> consumer edges) of at
/// most `hops` edges whose inner nodes are not configurable. Each pair once,
/// sorted, no self-loops. `graph` (a [`Graph`] or a [`GraphView`]) must be
/// valid.
pub fn meta_edges<'a>(graph: impl Into<GraphView<'a>>, hops: usize) -> Vec<[i64; 2]> {
    let graph = graph.into();
    let n = graph.num_nodes();
    let mut pos = vec![usize::MAX; n];
    for (i, &id) in graph.node_config_ids.iter().enumerate() {
        pos[id as usize] = i;
    }
    // Consumers of each producer, each once (CSR by producer).
    let mut pairs: Vec<(usize, usize)> = graph
        .edge_index
        .iter()
        .map(|&[c, p]| (p as usize, c as usize))
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    let mut start = vec![0usize; n + 1];
    for &(p, _) in &pairs {
        start[p + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut found = Vec::new();
    let mut seen = vec![usize::MAX; n]; // the source that last reached a node
    let mut frontier = Vec::new();
    let mut next = Vec::new();
    for (src, &id) in graph.node_config_ids.iter().enumerate() {
        frontier.clear();
        frontier.push(id as usize);
        seen[id as usize] = src;
        for _ in 0..hops {
            next.clear();
            for &node in &frontier {
                for &(_, consumer) in &pairs[start[node]..start[node + 1]] {
                    if pos[consumer] != usize::MAX {
                        if pos[consumer] != src {
                            found.push([pos[consumer] as i64, src as i64]);
                        }
                    } else if seen[consumer] != src {
                        // paths go on through non-configurable nodes only
                        seen[consumer] = src;
                        next.push(consumer);
                    }
                }
            }
            if next.is_empty() {
                break;
            }
            std::mem::swap(&mut frontier, &mut next);
        }
    }
    found.sort_unstable();
    found.dedup();
    found
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

    /// Configurable nodes 0, 3 and 5 of 0 -> 1 -> 2 -> 3 -> 4 -> 5, 0 -> 5 and
    /// 6 -> 0 (producer -> consumer), node 6 configurable too.
    fn meta() -> Graph {
        let n = 7;
        Graph {
            node_feat: vec![0.0; n * NODE_FEAT_DIM],
            node_opcode: vec![0; n],
            // [consumer, producer], a duplicate edge included
            edge_index: vec![
                [1, 0],
                [2, 1],
                [3, 2],
                [4, 3],
                [5, 4],
                [5, 0],
                [5, 0],
                [0, 6],
            ],
            node_config_ids: vec![5, 0, 3, 6],
            node_splits: Vec::new(),
        }
    }

    #[test]
    fn meta_edges_join_configurable_nodes_through_unconfigurable_paths() {
        // positions: 5 -> 0, 0 -> 1, 3 -> 2, 6 -> 3
        // 0 reaches 3 in 3 edges (0->1->2->3) and 5 directly; 3 reaches 5 in
        // 2; 6 reaches 0 in 1 (and stops there: 0 is configurable).
        assert_eq!(meta_edges(&meta(), 3), vec![[0, 1], [0, 2], [1, 3], [2, 1]]);
        // at most 2 edges: 0 -> 3 (3 edges) is gone
        assert_eq!(meta_edges(&meta(), 2), vec![[0, 1], [0, 2], [1, 3]]);
        assert!(meta_edges(&meta(), 0).is_empty());
    }

    #[test]
    fn meta_edges_of_the_pruned_graph_are_those_of_the_full_graph() {
        let g = meta();
        for k in 2..4 {
            assert_eq!(
                meta_edges(&prune_khop(&g, k), 3),
                meta_edges(&g, 3),
                "k = {k}"
            );
        }
    }

    #[test]
    fn large_k_keeps_the_connected_component() {
        let g = prune_khop(&chain(), 10);
        assert_eq!(g.node_opcode, vec![0, 1, 2, 3, 4]);
        assert_eq!(g.edge_index.len(), 4);
        assert_eq!(g.node_config_ids, vec![2]);
    }
}
