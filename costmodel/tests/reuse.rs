//! Reuse within one process (issue 29, "Start-up and reuse";
//! `costmodel::reuse`): a model loaded again from the same bytes reuses the
//! first load's ONNX Runtime sessions, the encoder's output of a graph
//! prepared before and the incremental scorer's node terms, and each of
//! these gives the bytes a fresh computation gives. A graph or a batch of
//! configurations that differs gets its own result, never another's. The
//! caches stay within their bounds however many models and graphs pass.
//!
//! Each test uses its own variant of the default layout model (its
//! `model.json` tagged), so that the tests, which run side by side, do not
//! share cache entries. Every test needs the ONNX Runtime shared library and
//! records a skip (`report::skipped`) when it cannot be found.

mod common;

use common::{layout_with_json, open_fixture, ort_available};
use costmodel::incremental::{score_batch, NodeSumScorer};
use costmodel::onnx::OnnxModel;
use costmodel::reuse::{MAX_CACHED_MODELS, MAX_CACHED_PREPARED, MAX_CACHED_SCORERS};
use costmodel::{CostModel, Task};

/// The default layout model with `"reuse_test": tag` in its model.json:
/// other bytes, the same network.
fn variant(tag: &str) -> Vec<u8> {
    layout_with_json(|j| j["reuse_test"] = tag.into())
}

const LAYOUT_GRAPHS: [&str; 2] = [
    "layout_xla_default_test_cd708819.npz",
    "layout_xla_random_openai_v0_rnn_optimized.npz",
];

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Per graph: the encoder's output, the whole head's scores and the
/// incremental scores of its first 200 configurations, as bits.
fn results(model: &OnnxModel) -> Vec<[Vec<u32>; 3]> {
    LAYOUT_GRAPHS
        .iter()
        .map(|name| {
            let f = open_fixture(name);
            let prepared = model.prepare(f.graph()).expect("prepares");
            let configs = f.configs(0..f.num_configs().min(200)).expect("configs");
            let whole = model.score(&prepared, &configs).expect("whole head");
            let inc = score_batch(model, &prepared, &configs).expect("incremental");
            [bits(&prepared.state), bits(&whole), bits(&inc)]
        })
        .collect()
}

#[test]
fn a_reused_model_and_its_cached_results_give_the_bytes_of_a_fresh_load() {
    if !ort_available() {
        return;
    }
    let bytes = variant("identity");
    let load = || OnnxModel::from_bytes(&bytes, "identity.hlocm", Task::Layout, 1).expect("loads");
    let fresh = load();
    assert!(
        !fresh.reused(),
        "the first load of these bytes builds sessions"
    );
    let want = results(&fresh);
    drop(fresh);

    // Loaded again: the first load's sessions, and its encoder outputs and
    // node terms from the caches.
    let again = load();
    assert!(again.reused(), "a second load reuses the first's sessions");
    assert!(
        results(&again) == want,
        "cached results differ from fresh ones"
    );

    // The reused sessions compute the same bytes again.
    costmodel::onnx::clear_results();
    assert!(
        results(&again) == want,
        "reused sessions compute other bytes"
    );

    // While `again` is held, another load gets sessions of its own.
    let other = load();
    assert!(!other.reused(), "a model in use is not handed out twice");
    costmodel::onnx::clear_results();
    assert!(results(&other) == want, "a second set of sessions differs");
}

#[test]
fn a_graph_or_a_batch_that_differs_gets_its_own_result() {
    if !ort_available() {
        return;
    }
    let model = OnnxModel::from_bytes(&variant("differs"), "differs.hlocm", Task::Layout, 1)
        .expect("loads");
    let f = open_fixture(LAYOUT_GRAPHS[0]);
    let g = f.graph().clone();
    let base = model.prepare(&g).expect("prepares");
    // One feature of one configurable node changed: its embedding changes.
    let mut changed = g.clone();
    let node = changed.node_config_ids[0] as usize;
    changed.node_feat[node * costmodel::graph::NODE_FEAT_DIM] += 1.0;
    let other = model.prepare(&changed).expect("prepares");
    assert!(
        bits(&other.state) != bits(&base.state),
        "a changed graph got the encoder output of the graph before it"
    );
    costmodel::onnx::clear_results();
    let recomputed = model.prepare(&changed).expect("prepares");
    assert!(bits(&recomputed.state) == bits(&other.state));

    // Two batches of one graph, the second the first in reverse order (so
    // each node's candidates come in another order): each scored
    // incrementally gets the whole head's scores (within rounding), not
    // the first batch's scorer.
    let n = f.num_configs().min(200);
    let forward = f.configs(0..n).expect("configs");
    let row = forward.feat.len() / n;
    let mut backward = forward.clone();
    backward.feat = forward.feat.chunks(row).rev().flatten().copied().collect();
    for (what, configs) in [("forward", &forward), ("backward", &backward)] {
        let whole = model.score(&base, configs).expect("whole");
        let inc = score_batch(&model, &base, configs).expect("incremental");
        assert_eq!(whole.len(), inc.len());
        for (k, (a, b)) in whole.iter().zip(&inc).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 * a.abs().max(1.0),
                "{what}: configuration {k}: whole {a}, incremental {b}"
            );
        }
    }
}

#[test]
fn the_caches_stay_within_their_bounds() {
    if !ort_available() {
        return;
    }
    let f = open_fixture(LAYOUT_GRAPHS[0]);
    let configs = f.configs(0..f.num_configs().min(50)).expect("configs");
    for k in 0..MAX_CACHED_MODELS + 2 {
        let model = OnnxModel::from_bytes(
            &variant(&format!("bounds {k}")),
            "bounds.hlocm",
            Task::Layout,
            1,
        )
        .expect("loads");
        let (models, _, _) = costmodel::onnx::cache_sizes();
        assert!(models <= MAX_CACHED_MODELS, "{models} models cached");
        if k > 0 {
            continue;
        }
        // One model, more graphs than the caches keep.
        for i in 0..MAX_CACHED_PREPARED.max(MAX_CACHED_SCORERS) + 2 {
            let mut g = f.graph().clone();
            g.node_feat[0] += i as f32;
            let prepared = model.prepare(&g).expect("prepares");
            NodeSumScorer::from_rows(&model, &prepared, configs.num_configs, &configs.feat)
                .expect("scorer");
            let (_, graphs, bytes) = costmodel::onnx::cache_sizes();
            assert!(
                graphs <= MAX_CACHED_PREPARED,
                "{graphs} prepared graphs cached"
            );
            assert!(bytes <= costmodel::reuse::MAX_PREPARED_BYTES);
            let (scorers, bytes) = costmodel::incremental::cache_size();
            assert!(scorers <= MAX_CACHED_SCORERS, "{scorers} scorers cached");
            assert!(bytes <= costmodel::reuse::MAX_SCORER_BYTES);
        }
    }
}
