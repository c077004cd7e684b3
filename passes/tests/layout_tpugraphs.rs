//! The layout pass against real TPU data: unet_3d.4x4.bf16 from TpuGraphs
//! (`testdata/tpugraphs/`: the module as XLA printed it, the published npz
//! with 1,965 measured configurations, the autotuner's run log).
//!
//! - coverage: every configuration in the npz and in the run log is a point
//!   of the pass's candidate space;
//! - quality: every measured configuration scored through the pass's own
//!   scoring path (genomes -> feature rows -> model), ranking metrics
//!   against the measured TPU runtimes.

mod common;
#[path = "../../tests/support/report.rs"]
mod report;

use common::root;
use costmodel::features::featurize;
use costmodel::npz::NpzGraphFile;
use costmodel::Task;
use passes::layout::candidates::{self, NodeConfig, NodeSpace};
use passes::layout::dims::M2M;
use passes::layout::search::Fitness;
use passes::layout::ModelFitness;

const STEM: &str = "testdata/tpugraphs/layout_xla_default_valid_unet_3d.4x4.bf16";

struct Unet {
    module: hlo::Module,
    npz: NpzGraphFile,
}

fn load() -> Option<Unet> {
    let hlo_path = root().join(format!("{STEM}.hlo"));
    let npz_path = root().join(format!("{STEM}.npz"));
    if !hlo_path.exists() || !npz_path.exists() {
        report::skipped(&format!("{STEM}.{{hlo,npz}} not found"));
        return None;
    }
    let text = std::fs::read_to_string(&hlo_path).expect("reads");
    let module = hlo::parse_module(&text).expect("parses");
    let npz = NpzGraphFile::open(&npz_path).expect("npz opens");
    Some(Unet { module, npz })
}

/// Genome of each npz config (None where a node's row is not a candidate).
fn genomes(spaces: &[NodeSpace], feat: &[f32], num_configs: usize) -> Vec<Vec<Option<u16>>> {
    let n = spaces.len();
    (0..num_configs)
        .map(|c| {
            (0..n)
                .map(|j| {
                    let row = &feat[(c * n + j) * 18..(c * n + j + 1) * 18];
                    spaces[j].find(&NodeConfig::from_row(row)).map(|k| k as u16)
                })
                .collect::<Vec<Option<u16>>>()
        })
        .collect()
}

#[test]
fn every_published_and_logged_config_is_in_the_candidate_space() {
    let Some(u) = load() else { return };
    let f = featurize(&u.module, Task::Layout).expect("featurizes");
    assert_eq!(
        f.graph.node_config_ids,
        u.npz.graph().node_config_ids,
        "configurable nodes = the dataset's"
    );
    let spaces = candidates::spaces(&u.module, &f.config_nodes);
    let counts: Vec<usize> = spaces.iter().map(|s| s.candidates.len()).collect();
    let mut hist = std::collections::BTreeMap::new();
    for &c in &counts {
        *hist.entry(c).or_insert(0) += 1;
    }
    println!("candidates per node (count: nodes): {hist:?}");

    let all = u.npz.all_configs().expect("configs");
    let gs = genomes(&spaces, &all.feat, all.num_configs);
    let mut missing = Vec::new();
    for (c, g) in gs.iter().enumerate() {
        for (j, x) in g.iter().enumerate() {
            if x.is_none() {
                missing.push((c, j));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "npz configs outside the space (config, node): {:?}",
        &missing[..missing.len().min(10)]
    );
    println!(
        "npz: all {} configs x {} nodes covered",
        all.num_configs,
        spaces.len()
    );

    let runs_path = root().join(format!("{STEM}.runs.json"));
    let runs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(runs_path).expect("runs.json"))
            .expect("json");
    let runs = runs["runs"].as_array().expect("runs");
    let prefix = |v: &serde_json::Value| -> Option<M2M> {
        let d: M2M = v.as_array()?.iter().filter_map(|x| x.as_i64()).collect();
        if d.is_empty() {
            None
        } else {
            Some(d)
        }
    };
    let mut checked = 0;
    for (r, run) in runs.iter().enumerate() {
        let layout = run["layout"].as_array().expect("layout");
        assert_eq!(layout.len(), spaces.len());
        for (j, node) in layout.iter().enumerate() {
            let t = node.as_array().expect("tensors");
            let c = NodeConfig {
                output: t.first().and_then(prefix),
                input: t.get(1).and_then(prefix),
                kernel: t.get(2).and_then(prefix),
            };
            assert!(
                spaces[j].find(&c).is_some(),
                "run {r}, node {j}: {c:?} not a candidate of {:?}",
                spaces[j].candidates
            );
            checked += 1;
        }
    }
    println!(
        "runs.json: {} runs x {} nodes covered ({checked} node configs)",
        runs.len(),
        spaces.len()
    );
}

/// Scores the measured configs with `model` through the pass's scoring path
/// and returns (top-1 slowdown, top-10 slowdown, Kendall tau).
fn quality(u: &Unet, model: &dyn costmodel::CostModel) -> (f64, f64, f64) {
    let f = featurize(&u.module, Task::Layout).expect("featurizes");
    let spaces = candidates::spaces(&u.module, &f.config_nodes);
    let all = u.npz.all_configs().expect("configs");
    let gs: Vec<Vec<u16>> = genomes(&spaces, &all.feat, all.num_configs)
        .into_iter()
        .map(|g| g.into_iter().map(|x| x.expect("covered")).collect())
        .collect();
    let mut fit = ModelFitness::new(model, &f, &spaces).expect("prepares");
    let mut pred = Vec::new();
    for chunk in gs.chunks(256) {
        pred.extend(fit.score(chunk).expect("scores").into_iter().map(f64::from));
    }
    let runtime: Vec<f64> = u.npz.runtimes().iter().map(|&r| r as f64).collect();
    let top1 = costmodel::metrics::top_k_slowdown(&pred, &runtime, 1).expect("top-1");
    let top10 = costmodel::metrics::top_k_slowdown(&pred, &runtime, 10).expect("top-10");
    let tau = costmodel::metrics::kendall_tau(&pred, &runtime).unwrap_or(0.0);
    (top1, top10, tau)
}

#[test]
fn quality_of_the_reference_model_on_measured_unet_configs() {
    let Some(u) = load() else { return };
    let model = costmodel::reference::ReferenceModel::new(Task::Layout);
    let (top1, top10, tau) = quality(&u, &model);
    println!("reference model on unet_3d.4x4.bf16 (1965 measured configs): top-1 slowdown {top1:.4}, top-10 slowdown {top10:.4}, Kendall tau {tau:.4}");
    assert!(top1.is_finite() && top10 <= top1 && (-1.0..=1.0).contains(&tau));
}

#[test]
fn quality_of_the_embedded_model_on_measured_unet_configs() {
    if std::env::var_os("ORT_DYLIB_PATH").is_none() {
        report::skipped("ORT_DYLIB_PATH is not set (ONNX Runtime)");
        return;
    }
    report::ran();
    let Some(u) = load() else { return };
    let model =
        costmodel::onnx::load_model(None, Task::Layout, 0).expect("embedded layout model loads");
    let (top1, top10, tau) = quality(&u, model.as_ref());
    println!("embedded model on unet_3d.4x4.bf16 (1965 measured configs): top-1 slowdown {top1:.4}, top-10 slowdown {top10:.4}, Kendall tau {tau:.4}");
    assert!(top1.is_finite() && top10 <= top1 && (-1.0..=1.0).contains(&tau));
}
