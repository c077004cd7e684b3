//! The ONNX model loader and runtime against the model contract (MODEL.md):
//! the embedded defaults load and score, models not matching the contract are
//! refused with `CostModelError::Model`, bad inputs give
//! `CostModelError::Input`, never a panic.
//!
//! Every test needs the ONNX Runtime shared library and prints
//! "skipped: ..." and returns when it cannot be found.

mod common;

use common::{layout_with_json, model_fixture, model_with_json, open_fixture, ort_available};
use common::{rezip, unzip};
use costmodel::npz::NpzGraphFile;
use costmodel::onnx::{OnnxModel, DEFAULT_LAYOUT_MODEL, DEFAULT_TILE_MODEL};
use costmodel::{load_model, ConfigBatch, CostModel, CostModelError, Graph, GraphView, Task};

/// A small early-join layout model (MODEL.md "Early join"; its `model.json`
/// names the command that trained it).
fn early_join_model() -> std::path::PathBuf {
    model_fixture("layout_early_join.hlocm")
}

fn layout_file() -> NpzGraphFile {
    open_fixture("layout_xla_default_test_cd708819.npz")
}

fn tile_file() -> NpzGraphFile {
    open_fixture("tile_xla_test_0a8a2b24.npz")
}

fn model_error(r: costmodel::Result<OnnxModel>) -> String {
    match r {
        Err(CostModelError::Model { message, .. }) => message,
        Err(e) => panic!("expected a Model error, got {e}"),
        Ok(_) => panic!("expected a Model error, the model loaded"),
    }
}

fn input_error<T: std::fmt::Debug>(r: costmodel::Result<T>) -> String {
    match r {
        Err(CostModelError::Input(m)) => m,
        other => panic!("expected an Input error, got {other:?}"),
    }
}

#[test]
fn embedded_defaults_load_and_describe_themselves() {
    if !ort_available() {
        return;
    }
    let layout = OnnxModel::load(None, Task::Layout, 1).expect("layout default");
    assert_eq!(layout.task(), Task::Layout);
    assert_eq!(layout.info().feature_version, 1);
    assert_eq!(layout.info().stages, ["encoder.onnx", "head.onnx"]);
    assert!(layout.info().khop.is_some());
    assert!(layout.info().json["trained_on"]
        .as_array()
        .is_some_and(|a| !a.is_empty()));
    let tile = OnnxModel::load(None, Task::Tile, 1).expect("tile default");
    assert_eq!(tile.info().stages, ["model.onnx"]);
    assert_eq!(tile.info().khop, None);
}

#[test]
fn layout_scores_are_finite_deterministic_and_batch_sized() {
    if !ort_available() {
        return;
    }
    let model = load_model(None, Task::Layout, 1).expect("layout default");
    let f = layout_file();
    let prepared = model.prepare(f.graph()).expect("prepare");
    assert_eq!(prepared.state_shape[0], f.graph().num_config_nodes());
    let batch = f.configs(0..64).expect("configs");
    let a = model.score(&prepared, &batch).expect("score");
    let b = model.score(&prepared, &batch).expect("score again");
    assert_eq!(a.len(), 64);
    assert!(a.iter().all(|s| s.is_finite()));
    assert_eq!(a, b, "same batch, same scores");
    assert!(
        a.iter().any(|&s| s != a[0]),
        "the model distinguishes configurations"
    );
    let empty = ConfigBatch {
        num_configs: 0,
        feat: Vec::new(),
        ..batch
    };
    assert_eq!(
        model.score(&prepared, &empty).expect("empty batch"),
        Vec::<f32>::new()
    );
}

#[test]
fn tile_scores_from_hlocm_and_plain_onnx_agree() {
    if !ort_available() {
        return;
    }
    let f = tile_file();
    let batch = f.configs(0..100).expect("configs");
    let hlocm = load_model(None, Task::Tile, 1).expect("tile default");
    let s1 = hlocm
        .score(&hlocm.prepare(f.graph()).expect("prepare"), &batch)
        .expect("score");
    // The plain single-stage form: model.onnx of the archive carries task and
    // feature_version in its metadata_props.
    let onnx = unzip(DEFAULT_TILE_MODEL)
        .into_iter()
        .find(|(n, _)| n == "model.onnx")
        .expect("model.onnx")
        .1;
    let plain = OnnxModel::from_bytes(&onnx, "model.onnx", Task::Tile, 1).expect("plain onnx");
    let s2 = plain
        .score(&plain.prepare(f.graph()).expect("prepare"), &batch)
        .expect("score");
    assert_eq!(s1, s2);
    assert_eq!(s1.len(), 100);
}

#[test]
fn a_model_for_the_other_task_is_refused() {
    if !ort_available() {
        return;
    }
    let m = model_error(OnnxModel::from_bytes(
        DEFAULT_TILE_MODEL,
        "tile.hlocm",
        Task::Layout,
        1,
    ));
    assert!(
        m.contains("tile model") && m.contains("layout model is needed"),
        "{m}"
    );
    let m = model_error(OnnxModel::from_bytes(
        DEFAULT_LAYOUT_MODEL,
        "layout.hlocm",
        Task::Tile,
        1,
    ));
    assert!(m.contains("layout model"), "{m}");
}

#[test]
fn a_model_for_another_feature_version_is_refused() {
    if !ort_available() {
        return;
    }
    let bytes = layout_with_json(|j| j["feature_version"] = 2.into());
    let m = model_error(OnnxModel::from_bytes(&bytes, "v2.hlocm", Task::Layout, 1));
    assert!(m.contains("feature_version 2"), "{m}");
}

#[test]
fn a_model_json_of_another_format_or_with_wrong_stages_is_refused() {
    if !ort_available() {
        return;
    }
    let bytes = layout_with_json(|j| j["format"] = "something-else".into());
    let m = model_error(OnnxModel::from_bytes(&bytes, "x.hlocm", Task::Layout, 1));
    assert!(m.contains("format"), "{m}");
    let bytes = layout_with_json(|j| j["stages"] = serde_json::json!(["model.onnx"]));
    let m = model_error(OnnxModel::from_bytes(&bytes, "x.hlocm", Task::Layout, 1));
    assert!(m.contains("stages"), "{m}");
}

#[test]
fn a_stage_with_the_wrong_inputs_is_refused() {
    if !ort_available() {
        return;
    }
    // Swap the stages: encoder.onnx now holds the head graph.
    let entries: Vec<(String, Vec<u8>)> = unzip(DEFAULT_LAYOUT_MODEL);
    let head = entries
        .iter()
        .find(|(n, _)| n == "head.onnx")
        .expect("head")
        .1
        .clone();
    let swapped: Vec<(String, Vec<u8>)> = entries
        .into_iter()
        .map(|(n, d)| {
            if n == "encoder.onnx" {
                (n, head.clone())
            } else {
                (n, d)
            }
        })
        .collect();
    let m = model_error(OnnxModel::from_bytes(
        &rezip(&swapped),
        "swapped.hlocm",
        Task::Layout,
        1,
    ));
    assert!(m.contains("encoder.onnx") && m.contains("node_feat"), "{m}");
    // A plain .onnx that is only the head (metadata says layout) lacks the graph inputs.
    let m = model_error(OnnxModel::from_bytes(&head, "head.onnx", Task::Layout, 1));
    assert!(m.contains("node_feat") || m.contains("inputs"), "{m}");
}

#[test]
fn missing_and_corrupt_model_files_are_refused() {
    if !ort_available() {
        return;
    }
    let m = model_error(OnnxModel::load(
        Some("/nonexistent/model.hlocm".as_ref()),
        Task::Layout,
        1,
    ));
    assert!(m.contains("cannot read"), "{m}");
    let m = model_error(OnnxModel::from_bytes(
        b"not a model at all",
        "junk.onnx",
        Task::Layout,
        1,
    ));
    assert!(!m.is_empty());
    let truncated = &DEFAULT_LAYOUT_MODEL[..DEFAULT_LAYOUT_MODEL.len() / 2];
    let m = model_error(OnnxModel::from_bytes(
        truncated,
        "cut.hlocm",
        Task::Layout,
        1,
    ));
    assert!(!m.is_empty());
}

#[test]
fn bad_graphs_are_input_errors() {
    if !ort_available() {
        return;
    }
    let model = load_model(None, Task::Layout, 1).expect("layout default");
    let m = input_error(model.prepare(&Graph::default()));
    assert!(m.contains("empty"), "{m}");
    let mut g = layout_file().into_graph();
    let mut no_config = g.clone();
    no_config.node_config_ids.clear();
    let m = input_error(model.prepare(&no_config));
    assert!(m.contains("no configurable nodes"), "{m}");
    let mut bad_edge = g.clone();
    bad_edge.edge_index.push([0, 1_000_000]);
    input_error(model.prepare(&bad_edge));
    g.node_feat[7] = f32::NAN;
    let m = input_error(model.prepare(&g));
    assert!(m.contains("NaN"), "{m}");
}

#[test]
fn bad_config_batches_are_input_errors() {
    if !ort_available() {
        return;
    }
    let model = load_model(None, Task::Layout, 1).expect("layout default");
    let f = layout_file();
    let prepared = model.prepare(f.graph()).expect("prepare");
    let mut batch = f.configs(0..4).expect("configs");
    batch.feat[3] = f32::INFINITY;
    let m = input_error(model.score(&prepared, &batch));
    assert!(m.contains("NaN or infinity"), "{m}");
    let mut short = f.configs(0..4).expect("configs");
    short.feat.pop();
    input_error(model.score(&prepared, &short));
    let tile_batch = tile_file().configs(0..4).expect("tile configs");
    let m = input_error(model.score(&prepared, &tile_batch));
    assert!(m.contains("tile config batch"), "{m}");
}

/// The graph of `f` with its configurable nodes sorted, and `configs` with
/// their per-node rows moved to follow.
fn sorted_ids(graph: &Graph, configs: &ConfigBatch) -> (Graph, ConfigBatch) {
    let nc = graph.num_config_nodes();
    let mut order: Vec<usize> = (0..nc).collect();
    order.sort_by_key(|&i| graph.node_config_ids[i]);
    let mut g = graph.clone();
    g.node_config_ids = order.iter().map(|&i| graph.node_config_ids[i]).collect();
    let dim = costmodel::graph::LAYOUT_CONFIG_DIM;
    let mut feat = Vec::with_capacity(configs.feat.len());
    for c in 0..configs.num_configs {
        for &i in &order {
            let at = (c * nc + i) * dim;
            feat.extend_from_slice(&configs.feat[at..at + dim]);
        }
    }
    (
        g,
        ConfigBatch {
            feat,
            ..configs.clone()
        },
    )
}

#[test]
fn unsorted_configurable_ids_score_like_the_same_graph_sorted() {
    // The published mask_rcnn slice: ids in file order, not increasing.
    let f = open_fixture("layout_xla_mask_rcnn_unsorted_ids.npz");
    let configs = f.all_configs().expect("configs");
    let (g_sorted, c_sorted) = sorted_ids(f.graph(), &configs);
    assert_ne!(g_sorted.node_config_ids, f.graph().node_config_ids);
    let mut models: Vec<Box<dyn CostModel>> = vec![Box::new(
        costmodel::reference::ReferenceModel::new(Task::Layout),
    )];
    if ort_available() {
        models.push(load_model(None, Task::Layout, 1).expect("layout default"));
        models.push(load_model(Some(&early_join_model()), Task::Layout, 1).expect("early join"));
    }
    for model in &models {
        let a = model
            .score(&model.prepare(f.graph()).expect("prepare"), &configs)
            .expect("score");
        let b = model
            .score(&model.prepare(&g_sorted).expect("prepare"), &c_sorted)
            .expect("score sorted");
        assert!(a.iter().any(|&s| s != a[0]), "configurations differ");
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-5 * x.abs().max(1.0), "{a:?} vs {b:?}");
        }
    }
}

#[test]
fn a_graph_read_in_place_prepares_and_scores_as_the_same_graph_owned() {
    if !ort_available() {
        return;
    }
    // `prepare_view` reads a graph's arrays where their owner keeps them (the
    // Python package's numpy arrays), uncopied: the same prepared state and
    // scores as `prepare` of a Graph, for the default model (k-hop pruned),
    // an early-join one (meta-graph) and the reference model (the trait's
    // default, which copies); bad arrays are the same input errors.
    let f = layout_file();
    let g = f.graph();
    // The arrays in buffers of their own, none of them a Graph's.
    let feat = g.node_feat.clone();
    let opcode = g.node_opcode.clone();
    let edges = g.edge_index.clone();
    let ids = g.node_config_ids.clone();
    let splits = g.node_splits.clone();
    let view = GraphView {
        node_feat: &feat,
        node_opcode: &opcode,
        edge_index: &edges,
        node_config_ids: &ids,
        node_splits: &splits,
    };
    let batch = f.configs(0..16).expect("configs");
    let models: [Box<dyn CostModel>; 3] = [
        load_model(None, Task::Layout, 1).expect("layout default"),
        load_model(Some(&early_join_model()), Task::Layout, 1).expect("early join"),
        Box::new(costmodel::reference::ReferenceModel::new(Task::Layout)),
    ];
    for model in &models {
        let owned = model.prepare(g).expect("prepare");
        let borrowed = model.prepare_view(view).expect("prepare_view");
        assert!(owned.graph == borrowed.graph, "the prepared graphs differ");
        assert_eq!(owned.state_shape, borrowed.state_shape);
        assert_eq!(owned.state, borrowed.state);
        assert_eq!(owned.meta_edges, borrowed.meta_edges);
        assert_eq!(
            model.score(&owned, &batch).expect("score"),
            model.score(&borrowed, &batch).expect("score")
        );
        let short = GraphView {
            node_feat: &feat[..feat.len() - 1],
            ..view
        };
        let mut cut = g.clone();
        cut.node_feat.pop();
        assert_eq!(
            input_error(model.prepare_view(short)),
            input_error(model.prepare(&cut))
        );
    }
}

#[test]
fn a_layout_score_does_not_depend_on_the_rest_of_its_batch() {
    if !ort_available() {
        return;
    }
    // Configuration 40 scored with 0..64, alone, and with 40..104 (another
    // position, other neighbours) gets the same score: a score is a function
    // of the graph and the configuration only. The default and an early-join
    // model (its [NC, C, H] message passing runs per configuration).
    for model in [
        load_model(None, Task::Layout, 1).expect("layout default"),
        load_model(Some(&early_join_model()), Task::Layout, 1).expect("early join"),
    ] {
        one_score_in_three_batches(model.as_ref());
    }
}

fn one_score_in_three_batches(model: &dyn CostModel) {
    let f = layout_file();
    let prepared = model.prepare(f.graph()).expect("prepare");
    let a = model
        .score(&prepared, &f.configs(0..64).expect("configs"))
        .expect("score");
    let alone = model
        .score(&prepared, &f.configs(40..41).expect("config"))
        .expect("score");
    let b = model
        .score(&prepared, &f.configs(40..104).expect("configs"))
        .expect("score");
    for (i, x) in a[40..].iter().enumerate() {
        for y in [b[i]]
            .iter()
            .chain(if i == 0 { alone.iter() } else { [].iter() })
        {
            // Float rounding only: ONNX Runtime's GEMMs and reductions sum in
            // an order that depends on the batch size (~2e-6 seen; the scores'
            // spread within a graph is ~1). The cross-configuration attention
            // this guards against moved scores by 0.1-0.5 of that spread.
            assert!(
                (x - y).abs() <= 1e-5 * x.abs().max(1.0),
                "config {}: {x} in one batch, {y} in another",
                40 + i
            );
        }
    }
}

#[test]
fn an_early_join_head_needs_meta_hops_within_khop_plus_one() {
    if !ort_available() {
        return;
    }
    let bytes = std::fs::read(early_join_model()).expect("early-join model");
    let m = OnnxModel::from_bytes(&bytes, "ej", Task::Layout, 1).expect("loads");
    assert_eq!(m.info().meta_hops, Some(3));
    let prepared = m.prepare(layout_file().graph()).expect("prepare");
    assert_eq!(prepared.meta_edges.len(), 38, "the test graph's meta-graph");
    let no_hops = model_with_json(&bytes, |j| {
        j.as_object_mut().expect("object").remove("meta_hops");
    });
    let msg = model_error(OnnxModel::from_bytes(&no_hops, "x", Task::Layout, 1));
    assert!(
        msg.contains("config_edge_index") && msg.contains("meta_hops"),
        "{msg}"
    );
    let too_deep = model_with_json(&bytes, |j| j["meta_hops"] = serde_json::json!(5));
    let msg = model_error(OnnxModel::from_bytes(&too_deep, "x", Task::Layout, 1));
    assert!(msg.contains("exceeds `khop` + 1"), "{msg}");
    // A two-input head (the default) with meta_hops named: the head lacks the input.
    let default_hops = layout_with_json(|j| j["meta_hops"] = serde_json::json!(3));
    let msg = model_error(OnnxModel::from_bytes(&default_hops, "x", Task::Layout, 1));
    assert!(msg.contains("config_edge_index"), "{msg}");
}

#[test]
fn incremental_stages_other_than_the_contracts_are_refused() {
    if !ort_available() {
        return;
    }
    // MODEL.md "Incremental stages": exactly head_terms.onnx, head_pool.onnx.
    let bytes = layout_with_json(|j| {
        j["incremental_stages"] = serde_json::json!(["head.onnx", "head_pool.onnx"]);
    });
    let m = model_error(OnnxModel::from_bytes(&bytes, "x.hlocm", Task::Layout, 1));
    assert!(m.contains("incremental_stages"), "{m}");
    // An early-join head has no node-sum form.
    let ej = std::fs::read(early_join_model()).expect("reads");
    let bytes = model_with_json(&ej, |j| {
        j["incremental_stages"] = serde_json::json!(["head_terms.onnx", "head_pool.onnx"]);
    });
    let m = model_error(OnnxModel::from_bytes(&bytes, "ej.hlocm", Task::Layout, 1));
    assert!(m.contains("early-join"), "{m}");
    // Named but missing from the archive.
    let entries: Vec<(String, Vec<u8>)> = unzip(DEFAULT_LAYOUT_MODEL)
        .into_iter()
        .filter(|(n, _)| n != "head_pool.onnx")
        .collect();
    let m = model_error(OnnxModel::from_bytes(
        &rezip(&entries),
        "cut.hlocm",
        Task::Layout,
        1,
    ));
    assert!(m.contains("head_pool.onnx"), "{m}");
    // Absent: the model loads and scores whole.
    let bytes = layout_with_json(|j| {
        j.as_object_mut()
            .expect("object")
            .remove("incremental_stages");
    });
    let m = OnnxModel::from_bytes(&bytes, "whole.hlocm", Task::Layout, 1).expect("loads");
    assert_eq!(m.node_sum_width(), None);
    assert_eq!(
        OnnxModel::load(None, Task::Layout, 1)
            .expect("loads")
            .node_sum_width(),
        Some(44)
    );
}
