//! Process-wide reuse of loaded models and of the encoder's output.
//!
//! Owns: the bounded caches behind [`crate::onnx::OnnxModel`] (issue 29,
//! "Start-up and reuse"): a second pass run, C ABI call or Python call in
//! one process reuses the ONNX Runtime sessions of a model it loaded
//! before, and the encoder's output of a graph it prepared before.
//! - [`ModelKey`]: a model's identity: the SHA-256 of its file's bytes (the
//!   bytes of a built-in for a built-in name), the task it was loaded for
//!   and its intra-op thread count. The same key means the same sessions
//!   from the same bytes with the same options.
//! - [`GraphKey`]: a graph's identity for one process: a SipHash of every
//!   array of the graph under keys drawn at random once per process (so no
//!   input can be built to collide with another), plus its sizes.
//! - [`BoundedCache`]: most recently used last; at most `max_entries`
//!   entries and `max_bytes` bytes of values; the least recently used
//!   entry goes first.
//!
//! Invariants:
//! - A cached value is what a fresh computation with the same key gives
//!   (the same sessions, the same ONNX Runtime, the same inputs), so reuse
//!   changes no score and no output byte (`costmodel/tests/reuse.rs`).
//! - A model's sessions serve one user at a time: a model is handed out
//!   only while no one else holds it ([`checkout_model`]); two threads that
//!   load the same model at once get two sets of sessions, as before.
//! - Memory is bounded: at most [`MAX_CACHED_MODELS`] models (each its
//!   sessions and ONNX Runtime's arenas, the few MB of weights and what the
//!   largest call left in the arena) and [`MAX_CACHED_PREPARED`] prepared
//!   graphs of at most [`MAX_PREPARED_BYTES`] in all. An evicted model in
//!   use stays alive until its user drops it.
//! - A failed load or computation is never cached.

use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use sha2::{Digest, Sha256};

use crate::graph::{GraphView, Task};

/// Most models (sessions) kept for reuse.
pub const MAX_CACHED_MODELS: usize = 4;
/// Most prepared graphs (encoder outputs) kept for reuse.
pub const MAX_CACHED_PREPARED: usize = 16;
/// Most bytes of prepared graphs kept (a larger one is not kept at all).
pub const MAX_PREPARED_BYTES: usize = 64 << 20;
/// Most incremental scorers (a graph's node terms under each candidate,
/// [`crate::incremental::NodeSumScorer`]) kept for reuse.
pub const MAX_CACHED_SCORERS: usize = 4;
/// Most bytes of node terms kept (a larger scorer is not kept at all).
pub const MAX_SCORER_BYTES: usize = 256 << 20;

/// A model's identity (module doc).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ModelKey {
    digest: [u8; 32],
    task: Task,
    threads: usize,
}

impl ModelKey {
    /// The key of the model file `bytes` loaded for `task` with `threads`
    /// intra-op threads (the count the sessions get, not 0).
    pub fn new(bytes: &[u8], task: Task, threads: usize) -> Self {
        ModelKey {
            digest: Sha256::digest(bytes).into(),
            task,
            threads,
        }
    }
}

/// A graph's identity within this process (module doc).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct GraphKey {
    hash: u64,
    nodes: usize,
    edges: usize,
    config_nodes: usize,
}

/// The process's SipHash keys, drawn once.
fn hash_state() -> &'static std::hash::RandomState {
    static STATE: OnceLock<std::hash::RandomState> = OnceLock::new();
    STATE.get_or_init(std::hash::RandomState::new)
}

impl GraphKey {
    /// The key of `graph` (every array: features, opcodes, edges,
    /// configurable ids, each with its length).
    pub fn of<'a>(graph: impl Into<GraphView<'a>>) -> Self {
        let graph = graph.into();
        let mut h = Fingerprint::default();
        h.f32s(graph.node_feat)
            .bytes(graph.node_opcode)
            .i64s(graph.edge_index.as_flattened())
            .i64s(graph.node_config_ids);
        GraphKey {
            hash: h.finish(),
            nodes: graph.num_nodes(),
            edges: graph.edge_index.len(),
            config_nodes: graph.num_config_nodes(),
        }
    }
}

/// A bounded map, most recently used last (module doc).
pub struct BoundedCache<K, V> {
    entries: Vec<(K, Arc<V>, usize)>,
    max_entries: usize,
    max_bytes: usize,
}

impl<K: PartialEq, V> BoundedCache<K, V> {
    pub const fn new(max_entries: usize, max_bytes: usize) -> Self {
        BoundedCache {
            entries: Vec::new(),
            max_entries,
            max_bytes,
        }
    }

    /// The value of `key` for which `usable` holds (the most recent such),
    /// marked most recently used.
    pub fn get(&mut self, key: &K, usable: impl Fn(&Arc<V>) -> bool) -> Option<Arc<V>> {
        let at = self
            .entries
            .iter()
            .rposition(|(k, v, _)| k == key && usable(v))?;
        let entry = self.entries.remove(at);
        let value = Arc::clone(&entry.1);
        self.entries.push(entry);
        Some(value)
    }

    /// Keeps `value` (of `bytes` bytes) under `key`, dropping the least
    /// recently used entries beyond the bounds; a value larger than the
    /// byte bound is not kept.
    pub fn insert(&mut self, key: K, value: Arc<V>, bytes: usize) {
        if bytes > self.max_bytes || self.max_entries == 0 {
            return;
        }
        self.entries.push((key, value, bytes));
        while self.entries.len() > self.max_entries || self.bytes() > self.max_bytes {
            self.entries.remove(0);
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes of the values kept.
    pub fn bytes(&self) -> usize {
        self.entries.iter().map(|e| e.2).sum()
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

/// Locks a cache; a panic of another thread while it held the lock leaves
/// the list whole (each change is one push or remove), so it is used as is.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The cache of loaded models; `M` is [`crate::onnx`]'s loaded state.
pub(crate) struct ModelCache<M>(Mutex<BoundedCache<ModelKey, M>>);

impl<M> ModelCache<M> {
    pub(crate) const fn new() -> Self {
        ModelCache(Mutex::new(BoundedCache::new(MAX_CACHED_MODELS, usize::MAX)))
    }

    /// A cached model of `key` that no one else holds now.
    pub(crate) fn checkout(&self, key: &ModelKey) -> Option<Arc<M>> {
        // Only this cache hands out references, under its lock: a count of
        // one is the cache's own, and no other thread can raise it meanwhile.
        lock(&self.0).get(key, |v| Arc::strong_count(v) == 1)
    }

    pub(crate) fn insert(&self, key: ModelKey, model: Arc<M>) {
        lock(&self.0).insert(key, model, 0);
    }

    pub(crate) fn len(&self) -> usize {
        lock(&self.0).len()
    }

    pub(crate) fn clear(&self) {
        lock(&self.0).clear();
    }
}

/// A [`BoundedCache`] behind a lock, for a `static`.
pub struct SharedCache<K, V>(Mutex<BoundedCache<K, V>>);

impl<K: PartialEq, V> SharedCache<K, V> {
    pub const fn new(max_entries: usize, max_bytes: usize) -> Self {
        SharedCache(Mutex::new(BoundedCache::new(max_entries, max_bytes)))
    }

    pub fn get(&self, key: &K) -> Option<Arc<V>> {
        lock(&self.0).get(key, |_| true)
    }

    pub fn insert(&self, key: K, value: Arc<V>, bytes: usize) {
        lock(&self.0).insert(key, value, bytes);
    }

    /// Entries and bytes kept.
    pub fn len_bytes(&self) -> (usize, usize) {
        let c = lock(&self.0);
        (c.len(), c.bytes())
    }

    pub fn clear(&self) {
        lock(&self.0).clear();
    }
}

/// A 64-bit SipHash under the process's random keys (see [`GraphKey`]),
/// of arrays fed in order, each with its length.
pub struct Fingerprint(std::hash::DefaultHasher);

impl Default for Fingerprint {
    fn default() -> Self {
        Fingerprint(hash_state().build_hasher())
    }
}

impl Fingerprint {
    pub fn f32s(&mut self, values: &[f32]) -> &mut Self {
        self.0.write_usize(values.len());
        let mut buf = [0u8; 256];
        for chunk in values.chunks(buf.len() / 4) {
            for (b, x) in buf.chunks_exact_mut(4).zip(chunk) {
                b.copy_from_slice(&x.to_bits().to_le_bytes());
            }
            self.0.write(&buf[..chunk.len() * 4]);
        }
        self
    }

    pub fn i64s(&mut self, values: &[i64]) -> &mut Self {
        self.0.write_usize(values.len());
        let mut buf = [0u8; 256];
        for chunk in values.chunks(buf.len() / 8) {
            for (b, x) in buf.chunks_exact_mut(8).zip(chunk) {
                b.copy_from_slice(&x.to_le_bytes());
            }
            self.0.write(&buf[..chunk.len() * 8]);
        }
        self
    }

    pub fn bytes(&mut self, values: &[u8]) -> &mut Self {
        self.0.write_usize(values.len());
        self.0.write(values);
        self
    }

    pub fn usize(&mut self, value: usize) -> &mut Self {
        self.0.write_usize(value);
        self
    }

    pub fn finish(&self) -> u64 {
        self.0.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Graph;

    #[test]
    fn the_cache_keeps_its_bounds_and_drops_the_least_recently_used() {
        let mut c: BoundedCache<u32, u32> = BoundedCache::new(3, 100);
        for k in 0..3 {
            c.insert(k, Arc::new(k), 10);
        }
        assert!(c.get(&0, |_| true).is_some()); // 0 is now the most recent
        c.insert(3, Arc::new(3), 10);
        assert_eq!(c.len(), 3);
        assert!(
            c.get(&1, |_| true).is_none(),
            "1 was the least recently used"
        );
        assert!(c.get(&0, |_| true).is_some());
        c.insert(4, Arc::new(4), 95);
        assert_eq!(
            (c.len(), c.bytes()),
            (1, 95),
            "the byte bound drops the rest"
        );
        c.insert(5, Arc::new(5), 101);
        assert!(
            c.get(&5, |_| true).is_none(),
            "larger than the bound: not kept"
        );
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn graphs_differing_in_any_array_get_other_keys() {
        let g = Graph {
            node_feat: vec![0.5; 2 * crate::graph::NODE_FEAT_DIM],
            node_opcode: vec![1, 2],
            edge_index: vec![[1, 0]],
            node_config_ids: vec![0],
            ..Graph::default()
        };
        let k = GraphKey::of(&g);
        assert_eq!(k, GraphKey::of(&g.clone()));
        let mut feat = g.clone();
        feat.node_feat[200] = 0.25;
        let mut op = g.clone();
        op.node_opcode[1] = 3;
        let mut edge = g.clone();
        edge.edge_index[0] = [0, 1];
        let mut ids = g.clone();
        ids.node_config_ids[0] = 1;
        for other in [feat, op, edge, ids] {
            assert_ne!(k, GraphKey::of(&other));
        }
    }
}
