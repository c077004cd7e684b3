//! Incremental scoring (MODEL.md "Incremental stages"): a configuration
//! scored from a base configuration's node sums plus the terms of the nodes
//! it changes ([`NodeSumScorer`]) gets the score the whole head gives it,
//! within float rounding, for the models that have the node-sum form (the
//! embedded default and the built-in `xla-cpu` model), on every layout graph
//! of `testdata/costmodel/npz`: their own configurations, and random ones
//! (seeded) that change 1, 2, 3 or many nodes of the base.
//!
//! Every test needs the ONNX Runtime shared library and records a skip
//! (`report::skipped`) when it cannot be found.

mod common;

use std::path::Path;

use common::{model_fixture, open_fixture, ort_available};
use costmodel::incremental::NodeSumScorer;
use costmodel::{load_model, ConfigBatch, CostModelError, Task};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const LAYOUT_GRAPHS: [&str; 3] = [
    "layout_xla_default_test_cd708819.npz",
    "layout_xla_random_openai_v0_rnn_optimized.npz",
    "layout_xla_mask_rcnn_unsorted_ids.npz",
];

/// The models of the node-sum form that ship: (name, path for `load_model`).
fn node_sum_models() -> Vec<(&'static str, Option<&'static Path>)> {
    vec![
        ("embedded default", None),
        ("xla-cpu", Some(Path::new("xla-cpu"))),
    ]
}

/// Scores may differ by float rounding only: the whole head sums the nodes
/// in f32 inside one GEMM, the scorer in f64 in another order.
fn assert_close(whole: &[f32], incremental: &[f32], what: &str) {
    assert_eq!(whole.len(), incremental.len(), "{what}: counts");
    for (k, (&a, &b)) in whole.iter().zip(incremental).enumerate() {
        let tol = 1e-4 * a.abs().max(1.0);
        assert!(
            (a - b).abs() <= tol,
            "{what}: configuration {k}: whole head {a}, incremental {b} (tolerance {tol})"
        );
    }
}

/// The rows of `genomes` as the whole head takes them.
fn rows_of(
    genomes: &[Vec<u16>],
    candidates: &[Vec<[f32; 18]>],
    nodes_per_config: usize,
) -> ConfigBatch {
    let mut feat = Vec::new();
    for g in genomes {
        for (j, &c) in g.iter().enumerate() {
            feat.extend_from_slice(&candidates[j][c as usize]);
        }
    }
    ConfigBatch {
        task: Task::Layout,
        num_configs: genomes.len(),
        nodes_per_config,
        feat,
    }
}

#[test]
fn incremental_scores_equal_whole_head_scores_on_the_test_graphs() {
    if !ort_available() {
        return;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(29);
    for (name, path) in node_sum_models() {
        let model = load_model(path, Task::Layout, 1).expect("loads");
        assert!(
            model.node_sum_width().is_some(),
            "{name}: the shipped model has incremental stages"
        );
        let mut randomized = 0;
        for file in LAYOUT_GRAPHS {
            let npz = open_fixture(file);
            let what = format!("{name} on {file}");
            let prepared = model.prepare(npz.graph()).expect("prepares");
            let nc = npz.graph().num_config_nodes();
            let n = npz.num_configs().min(300);
            let configs = npz.configs(0..n).expect("configs");
            let whole = model.score(&prepared, &configs).expect("whole head");
            let (scorer, genomes) =
                NodeSumScorer::from_rows(model.as_ref(), &prepared, n, &configs.feat)
                    .expect("scorer")
                    .expect("the node-sum form");
            assert_eq!(genomes.len(), n);
            let inc = scorer.score(model.as_ref(), &genomes).expect("incremental");
            assert_close(&whole, &inc, &format!("{what}, its configurations"));

            // Random configurations over each node's distinct rows: 1, 2, 3
            // or many nodes changed from the first configuration.
            let mut candidates: Vec<Vec<[f32; 18]>> = vec![Vec::new(); nc];
            for g in &genomes {
                for (j, &c) in g.iter().enumerate() {
                    if c as usize == candidates[j].len() {
                        let first = genomes
                            .iter()
                            .position(|x| x[j] == c)
                            .expect("a genome picks it");
                        let at = (first * nc + j) * 18;
                        let mut row = [0f32; 18];
                        row.copy_from_slice(&configs.feat[at..at + 18]);
                        candidates[j].push(row);
                    }
                }
            }
            let base = genomes[0].clone();
            let free: Vec<usize> = (0..nc).filter(|&j| candidates[j].len() > 1).collect();
            if free.is_empty() {
                continue; // every configuration of the file is one
            }
            randomized += 1;
            let mut random = Vec::new();
            for k in 0..64 {
                let mut g = base.clone();
                let changes = [1, 2, 3, free.len()][k % 4];
                for _ in 0..changes {
                    let j = free[rng.gen_range(0..free.len())];
                    g[j] = rng.gen_range(0..candidates[j].len() as u16);
                }
                random.push(g);
            }
            let whole = model
                .score(&prepared, &rows_of(&random, &candidates, nc))
                .expect("whole head");
            let scorer = NodeSumScorer::new(model.as_ref(), &prepared, &candidates, &base)
                .expect("scorer")
                .expect("the node-sum form");
            let inc = scorer.score(model.as_ref(), &random).expect("incremental");
            assert_close(&whole, &inc, &format!("{what}, random configurations"));
        }
        assert!(
            randomized > 0,
            "{name}: random configurations on some graph"
        );
    }
}

#[test]
fn a_head_without_the_node_sum_form_has_no_incremental_scorer() {
    if !ort_available() {
        return;
    }
    // The early join passes messages between configurable nodes and pools by
    // max: no sum of per-node terms (MODEL.md).
    let path = model_fixture("layout_early_join.hlocm");
    let model = load_model(Some(&path), Task::Layout, 1).expect("loads");
    assert_eq!(model.node_sum_width(), None);
    let npz = open_fixture(LAYOUT_GRAPHS[0]);
    let prepared = model.prepare(npz.graph()).expect("prepares");
    let configs = npz.configs(0..4).expect("configs");
    let r = NodeSumScorer::from_rows(model.as_ref(), &prepared, 4, &configs.feat).expect("ok");
    assert!(r.is_none());
}

#[test]
fn genomes_that_do_not_fit_the_graph_are_input_errors() {
    if !ort_available() {
        return;
    }
    let model = load_model(None, Task::Layout, 1).expect("loads");
    let npz = open_fixture(LAYOUT_GRAPHS[0]);
    let prepared = model.prepare(npz.graph()).expect("prepares");
    let configs = npz.configs(0..8).expect("configs");
    let (scorer, genomes) = NodeSumScorer::from_rows(model.as_ref(), &prepared, 8, &configs.feat)
        .expect("scorer")
        .expect("the node-sum form");
    let input = |r: costmodel::Result<Vec<f32>>| match r {
        Err(CostModelError::Input(m)) => m,
        other => panic!("expected an Input error, got {other:?}"),
    };
    let mut short = genomes[0].clone();
    short.pop();
    assert!(input(scorer.score(model.as_ref(), &[short])).contains("genes"));
    let mut past = genomes[0].clone();
    past[0] = u16::MAX;
    assert!(input(scorer.score(model.as_ref(), &[past])).contains("candidate"));
    let no_rows: Vec<Vec<[f32; 18]>> = vec![Vec::new(); npz.graph().num_config_nodes()];
    let base = vec![0u16; no_rows.len()];
    assert!(matches!(
        NodeSumScorer::new(model.as_ref(), &prepared, &no_rows, &base),
        Err(CostModelError::Input(_))
    ));
}
