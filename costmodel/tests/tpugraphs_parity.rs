//! Parity with the published TpuGraphs data: featurizing the HLO text of a
//! dataset module gives exactly the arrays of its published npz.
//!
//! Inputs (copied from `shared/data/tpugraphs`, see its README):
//! - `testdata/tpugraphs/layout_xla_default_valid_unet_3d.4x4.bf16.{hlo,runs.json,npz}`:
//!   a module printed by XLA, its autotuner runs and the published npz;
//! - `testdata/tpugraphs/layout_xla_brax_es.{hlo,runs.json}`: a module and its
//!   published `config_index_to_node`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use costmodel::features::{featurize, layout_config_row};
use costmodel::graph::{LAYOUT_CONFIG_DIM, NODE_FEAT_DIM};
use costmodel::npz::NpzGraphFile;
use costmodel::Task;

fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/tpugraphs")
        .join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(testdata(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn json(name: &str) -> serde_json::Value {
    serde_json::from_str(&read(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn module(name: &str) -> hlo::Module {
    hlo::parse_module_named(&read(name), name).unwrap_or_else(|e| panic!("{name}: {e}"))
}

const UNET: &str = "layout_xla_default_valid_unet_3d.4x4.bf16";

#[test]
fn unet_3d_graph_arrays_equal_the_published_npz() {
    let ours = featurize(&module(&format!("{UNET}.hlo")), Task::Layout)
        .expect("featurize")
        .graph;
    let npz = NpzGraphFile::open(testdata(&format!("{UNET}.npz"))).expect("open npz");
    let theirs = npz.graph();

    assert_eq!(ours.num_nodes(), 3163);
    assert_eq!(ours.node_opcode, theirs.node_opcode, "node_opcode");
    assert_eq!(ours.edge_index, theirs.edge_index, "edge_index");
    assert_eq!(ours.node_splits, theirs.node_splits, "node_splits");
    assert_eq!(
        ours.node_config_ids, theirs.node_config_ids,
        "node_config_ids"
    );

    // node_feat, entry by entry; on failure, name the features that differ.
    let mut diffs: BTreeMap<usize, (usize, String)> = BTreeMap::new();
    for (k, (a, b)) in ours.node_feat.iter().zip(&theirs.node_feat).enumerate() {
        if a.to_bits() != b.to_bits() {
            let (node, feat) = (k / NODE_FEAT_DIM, k % NODE_FEAT_DIM);
            let e = diffs
                .entry(feat)
                .or_insert((0, format!("first at node {node}: ours {a}, published {b}")));
            e.0 += 1;
        }
    }
    assert_eq!(ours.node_feat.len(), theirs.node_feat.len());
    assert!(
        diffs.is_empty(),
        "node_feat differs (feature index -> count, first): {diffs:#?}"
    );
}

/// A run's layout as the runs.json stores it: per configurable node, the
/// minor-to-major prefixes of its output, input and kernel tensors.
fn layout_rows(run: &serde_json::Value) -> Vec<f32> {
    let nodes = run["layout"].as_array().expect("layout is a list");
    let mut rows = Vec::with_capacity(nodes.len() * LAYOUT_CONFIG_DIM);
    for node in nodes {
        let tensors: Vec<Vec<i64>> = node
            .as_array()
            .expect("node is a list")
            .iter()
            .map(|t| {
                t.as_array()
                    .expect("tensor")
                    .iter()
                    .map(|d| d.as_i64().expect("dim"))
                    .collect()
            })
            .collect();
        let slot = |k: usize| tensors.get(k).map(Vec::as_slice);
        rows.extend(layout_config_row(slot(0), slot(1), slot(2)));
    }
    rows
}

#[test]
fn unet_3d_every_successful_run_equals_its_published_config_row() {
    let runs = json(&format!("{UNET}.runs.json"));
    let npz = NpzGraphFile::open(testdata(&format!("{UNET}.npz"))).expect("open npz");
    let configs = npz.all_configs().expect("configs");
    let per_config = configs.nodes_per_config * LAYOUT_CONFIG_DIM;
    let runtimes = npz.runtimes();

    let mut matched = 0;
    let mut successful = 0;
    for run in runs["runs"].as_array().expect("runs") {
        if run["error"].as_bool() != Some(false) {
            continue;
        }
        successful += 1;
        let time = run["compute_time_ns"].as_i64().expect("compute_time_ns");
        let ours = layout_rows(run);
        assert_eq!(ours.len(), per_config, "one row per configurable node");
        let found = (0..runtimes.len())
            .filter(|&c| runtimes[c] == time)
            .any(|c| configs.feat[c * per_config..(c + 1) * per_config] == ours[..]);
        assert!(
            found,
            "run with runtime {time}: no published config with that runtime has our rows"
        );
        matched += 1;
    }
    assert_eq!(successful, 112);
    assert_eq!(matched, 112);
}

#[test]
fn brax_es_configurable_nodes_are_the_published_81() {
    let runs = json("layout_xla_brax_es.runs.json");
    let published: Vec<i64> = runs["config_index_to_node"]
        .as_array()
        .expect("ids")
        .iter()
        .map(|v| v.as_i64().expect("id"))
        .collect();
    let f = featurize(&module("layout_xla_brax_es.hlo"), Task::Layout).expect("featurize");
    assert_eq!(published.len(), 81);
    assert_eq!(f.graph.node_config_ids, published);
    assert_eq!(f.config_nodes.len(), 81);
}
