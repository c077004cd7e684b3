//! The tile pass as a whole: the decision recorded per kernel, `--top-k`,
//! model-guided autotuning with a measurement callback, determinism, and the
//! registry entry.

use std::path::Path;
use std::sync::{Arc, Mutex};

use costmodel::reference::ReferenceModel;
use costmodel::Task;
use passes::tile::{backend, kernel, select_kernel, SelectOptions, TilePass};
use passes::{Pass, PassContext, PassOptions};

fn sample(name: &str) -> hlo::Module {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/tile")
        .join(name);
    let text = std::fs::read_to_string(&p).expect("sample exists");
    hlo::parse_module(&text).expect("sample parses")
}

fn run(m: &mut hlo::Module, options: PassOptions) -> String {
    let mut cx = PassContext::new(options);
    let mut pass = TilePass::with_model(Box::new(ReferenceModel::new(Task::Tile)));
    pass.run(m, &mut cx).expect("runs");
    cx.explain
}

fn decision(m: &hlo::Module, id: hlo::InstId) -> serde_json::Map<String, serde_json::Value> {
    let raw = m.inst(id).raw_attr("backend_config");
    let obj = backend::parse_backend_config(raw).expect("JSON");
    obj.get(backend::KEY)
        .and_then(|v| v.as_object())
        .cloned()
        .expect("a decision")
}

#[test]
fn the_recorded_tile_is_the_best_ranked_candidate() {
    let mut m = sample("kernels/kernel_02.hlo");
    let k = kernel::find_kernels(&m)[0];
    let sel = select_kernel(
        &m,
        k,
        &ReferenceModel::new(Task::Tile),
        &SelectOptions::default(),
    )
    .expect("selects");
    // ranked best first, deterministically
    assert!(sel.ranked.windows(2).all(|w| w[0].1 <= w[1].1));
    let explain = run(&mut m, PassOptions::default());
    let d = decision(&m, k);
    let best = &sel.ranked[0].0;
    assert_eq!(d["output_bounds"], serde_json::json!(best.output_bounds));
    assert_eq!(d["kernel_bounds"], serde_json::json!(best.kernel_bounds));
    assert_eq!(d["candidates"], serde_json::json!(sel.ranked.len()));
    assert!(d.get("top_k").is_none(), "top_k is recorded only for K > 1");
    assert!(
        explain.contains("tile %fusion.261:")
            && explain.contains("default kernel=[4,1] output=[16,32]"),
        "{explain}"
    );
}

#[test]
fn top_k_records_the_k_best_in_order() {
    let mut m = sample("kernels/kernel_00.hlo");
    let k = kernel::find_kernels(&m)[0];
    run(
        &mut m,
        PassOptions {
            top_k: 4,
            ..PassOptions::default()
        },
    );
    let d = decision(&m, k);
    let list = d["top_k"].as_array().expect("a list");
    assert_eq!(list.len(), 4);
    assert_eq!(list[0]["output_bounds"], d["output_bounds"]);
    let scores: Vec<f64> = list
        .iter()
        .filter_map(|e| e["predicted"].as_f64())
        .collect();
    assert!(scores.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn measurement_picks_the_fastest_of_the_top_k() {
    let mut m = sample("kernels/kernel_00.hlo");
    let k = kernel::find_kernels(&m)[0];
    let seen: Arc<Mutex<Vec<Vec<i64>>>> = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    // A fake device: runtime = 1000 - the product of the output bounds (bigger tiles are faster).
    let measure = move |text: &str| -> Option<f64> {
        let km = hlo::parse_module(text).ok()?;
        let root = km.entry_computation().root;
        let c = backend::read_decision(km.inst(root).raw_attr("backend_config"))?;
        log.lock().ok()?.push(c.output_bounds.clone());
        Some(1000.0 - c.output_bounds.iter().product::<i64>() as f64)
    };
    run(
        &mut m,
        PassOptions {
            top_k: 5,
            measure: Some(Box::new(measure)),
            ..PassOptions::default()
        },
    );
    let measured = seen.lock().expect("lock").clone();
    assert_eq!(
        measured.len(),
        5,
        "the top 5 candidate modules were measured"
    );
    let fastest = measured
        .iter()
        .max_by_key(|b| b.iter().product::<i64>())
        .cloned()
        .expect("some");
    let d = decision(&m, k);
    assert_eq!(d["output_bounds"], serde_json::json!(fastest));
    assert!(d["measured"].as_f64().is_some());
}

#[test]
fn failed_measurements_keep_the_model_choice() {
    let mut a = sample("kernels/kernel_06.hlo");
    let mut b = a.clone();
    run(&mut a, PassOptions::default());
    run(
        &mut b,
        PassOptions {
            top_k: 3,
            measure: Some(Box::new(|_: &str| None)),
            ..PassOptions::default()
        },
    );
    let k = kernel::find_kernels(&a)[0];
    assert_eq!(
        decision(&a, k)["output_bounds"],
        decision(&b, k)["output_bounds"]
    );
    assert!(decision(&b, k).get("measured").is_none());
}

#[test]
fn the_pass_is_deterministic_and_idempotent() {
    let mut a = sample("modules/mlp.post.hlo");
    let mut b = sample("modules/mlp.post.hlo");
    run(&mut a, PassOptions::default());
    run(&mut b, PassOptions::default());
    let once = hlo::print_module(&a);
    assert_eq!(once, hlo::print_module(&b));
    run(&mut a, PassOptions::default());
    assert_eq!(
        once,
        hlo::print_module(&a),
        "a second run replaces the decision with the same one"
    );
}

#[test]
fn the_pass_changes_only_backend_configs() {
    let before = sample("modules/resnet50_conv3x3.post.hlo");
    let mut after = before.clone();
    run(&mut after, PassOptions::default());
    let ids: Vec<_> = before.all_instructions().collect();
    assert_eq!(ids, after.all_instructions().collect::<Vec<_>>());
    for id in ids {
        let (x, y) = (before.inst(id), after.inst(id));
        assert_eq!(
            (&x.name, x.opcode, x.shape, &x.operands),
            (&y.name, y.opcode, y.shape, &y.operands)
        );
        let strip = |i: &hlo::Instruction| {
            i.attrs
                .iter()
                .filter(|a| &*a.key != "backend_config")
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(strip(x), strip(y));
    }
}

#[test]
fn a_strided_convolution_tiles_its_output_and_its_kernel() {
    let m = sample("modules/resnet50_conv3x3.post.hlo");
    let k = kernel::find_kernels(&m)[0];
    let space = kernel::analyze(&m, k).expect("tileable");
    // kernel f32[3,3,512,512]{3,2,1,0}: [3, 3, 512/8, 512/128]; output f32[2,7,7,512]: [2, 7, 7/8 -> 1, 4]
    let full = space.config(&space.vars.iter().map(|v| v.granules()).collect::<Vec<_>>());
    assert_eq!(full.kernel_bounds, vec![3, 3, 64, 4]);
    assert_eq!(full.output_bounds, vec![2, 7, 1, 4]);
    // the output feature (512, minor in both) moves together in both lists
    for c in space.enumerate(passes::tile::DEFAULT_MEMORY_BUDGET, 0) {
        let t = space.config(&c);
        assert_eq!(t.kernel_bounds[3], t.output_bounds[3]);
    }
}

#[test]
fn the_registry_knows_the_tile_pass() {
    let pass = passes::create_pass("tile").expect("registered");
    assert_eq!(pass.name(), "tile");
    assert!(passes::list_passes().iter().any(|(n, _)| *n == "tile"));
}

/// A TpuGraphs tile kernel is already a standalone module: extracting its
/// kernel gives the same graph the dataset featurizes.
#[test]
fn extracting_a_tile_kernel_reproduces_its_graph() {
    for name in [
        "kernel_00",
        "kernel_02",
        "kernel_04",
        "kernel_06",
        "kernel_08",
        "kernel_10",
        "kernel_12",
        "kernel_14",
    ] {
        let m = sample(&format!("kernels/{name}.hlo"));
        let k = kernel::find_kernels(&m)[0];
        let km = passes::tile::extract::extract_kernel(&m, k);
        let a = costmodel::features::featurize(&m, Task::Tile).expect("featurizes");
        let b = costmodel::features::featurize(&km, Task::Tile).expect("featurizes");
        assert_eq!(a.graph, b.graph, "{name}");
        hlo::parse_module(&hlo::print_module(&km)).expect("the extracted kernel parses");
    }
}

/// A module before fusion has no kernels: its standalone dots and reshapes
/// become parts of fusions later. The pass says so, visibly (a note the
/// command line prints without `--explain`), and changes nothing.
#[test]
fn a_module_before_fusion_has_no_kernels() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/layout/transformer_bert.hlo");
    let text = std::fs::read_to_string(&p).expect("sample exists");
    let mut m = hlo::parse_module(&text).expect("parses");
    let before = hlo::print_module(&m);
    let mut cx = PassContext::new(PassOptions::default());
    let mut pass = TilePass::with_model(Box::new(ReferenceModel::new(Task::Tile)));
    let changed = pass.run(&mut m, &mut cx).expect("runs");
    assert!(!changed);
    assert_eq!(hlo::print_module(&m), before);
    assert!(
        cx.explain
            .starts_with("tile: found no kernels: the module has not been through XLA's fusion pass (no fusion, and 185 elementwise operations"),
        "{}",
        cx.explain
    );
    assert_eq!(cx.notes.len(), 1, "{:?}", cx.notes);
}

/// The report ends with one summary line: kernels, tiled, off the default,
/// skipped, and which way the scores go.
#[test]
fn the_report_ends_with_a_summary_line() {
    let mut m = sample("modules/mlp.post.hlo");
    let n = kernel::find_kernels(&m).len();
    let explain = run(&mut m, PassOptions::default());
    let last = explain.lines().last().expect("a report");
    assert!(
        n > 1
            && last.starts_with(&format!("tile: {n} kernels: {n} tiled ("))
            && last.ends_with("0 skipped; scores are model scores, lower is predicted faster"),
        "{explain}"
    );
}

/// A dimension near `i64::MAX` (XLA parses it) is skipped with a reason, not
/// a panic (testdata/regress/huge_dim.hlo, the module that once indexed out
/// of bounds in the tile space).
#[test]
fn a_dimension_near_i64_max_is_skipped_not_a_panic() {
    let mut m = sample("../regress/huge_dim.hlo");
    let explain = run(&mut m, PassOptions::default());
    assert!(
        explain.contains("warning: tile: skipped kernel %fusion: %fusion has a dimension of 9223372036854775807 elements"),
        "{explain}"
    );
}
