//! The `hlo-cost` command line, end to end.
//!
//! Specification:
//! - `eval --model reference` scores every configuration of every file in the
//!   file's order, reports metrics only for files with runtimes, and its JSON
//!   agrees with the library (`ReferenceModel`, `metrics`); the table is a
//!   snapshot; the batch size does not change anything;
//! - errors (missing or corrupt file, wrong task, bad model) are rendered on
//!   stderr with exit status 1 while the other files are still evaluated;
//!   never a panic; invalid HLO given to `featurize` is rendered as `hlo-opt`
//!   renders it (`file:line:col: error: ...`, source line, caret);
//! - `featurize` writes npz files that read back like the published ones (the
//!   unet_3d module with its runs: the published graph structure and, for each
//!   run, the published configuration row with the same runtime), from
//!   HLO text + `.runs.json` and from the raw `ModuleTuningData` record; a
//!   tile `TuningData` gives what its kernels' `.runs.json` give; bad records
//!   are clear errors;
//! - with `ORT_DYLIB_PATH`, `eval` runs the embedded default ONNX models and
//!   the built-in `xla-cpu` layout model.

#[path = "support/report.rs"]
mod report;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use costmodel::metrics::RankingMetrics;
use costmodel::npz::NpzGraphFile;
use costmodel::reference::ReferenceModel;
use costmodel::{CostModel, Task};
use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn npz(name: &str) -> PathBuf {
    repo().join("testdata/costmodel/npz").join(name)
}

const LAYOUT: &str = "layout_xla_random_openai_v0_rnn_optimized.npz";
const LAYOUT_TEST: &str = "layout_xla_default_test_cd708819.npz";
const TILE: &str = "tile_xla_valid_inception_v3.npz";
const TILE_TEST: &str = "tile_xla_test_0a8a2b24.npz";

fn tmp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli_hlo_cost");
    std::fs::create_dir_all(&dir).expect("tmp dir");
    dir.join(name)
}

fn hlo_cost(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_hlo-cost"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "hlo-cost panicked: {stderr}");
    out
}

/// `$HLO_OPT_PYTHON`, or `None` after recording the check as skipped
/// with `why`.
fn hlo_opt_python(why: &str) -> Option<String> {
    let py = std::env::var("HLO_OPT_PYTHON")
        .ok()
        .filter(|p| !p.is_empty());
    if py.is_none() {
        report::skipped(why);
    }
    py
}

/// `out`, after checking that the command succeeded (stderr otherwise).
fn succeeded(out: Output) -> Output {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `hlo-cost featurize --task TASK HLO [--runs RUNS] -o OUT`.
fn featurize(task: &str, hlo: &Path, runs: Option<&Path>, out: &Path) -> Output {
    let (hlo, out) = (hlo.display().to_string(), out.display().to_string());
    let runs = runs.map(|r| r.display().to_string());
    let mut args = vec!["featurize", "--task", task, &hlo, "-o", &out];
    if let Some(runs) = &runs {
        args.extend(["--runs", runs.as_str()]);
    }
    hlo_cost(&args)
}

/// The TpuGraphs sample `testdata/tpugraphs/<name>`.
fn tpugraphs(name: &str) -> PathBuf {
    repo().join("testdata/tpugraphs").join(name)
}

const UNET: &str = "layout_xla_default_valid_unet_3d.4x4.bf16";

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `hlo-cost eval --json --predictions OPTIONS... FILE` (must succeed): the
/// file's predictions.
fn eval_predictions(options: &[&str], file: &str) -> Value {
    let mut args = vec!["eval", "--json", "--predictions"];
    args.extend_from_slice(options);
    args.push(file);
    json(&succeeded(hlo_cost(&args)))["files"][0]["predictions"].clone()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(o)))
}

fn rel(name: &str) -> String {
    format!("testdata/costmodel/npz/{name}")
}

#[test]
fn eval_json_agrees_with_the_library() {
    let files = [LAYOUT, LAYOUT_TEST, TILE, TILE_TEST];
    let mut args = vec!["eval", "--model", "reference", "--json", "--predictions"];
    let paths: Vec<String> = files.iter().map(|f| rel(f)).collect();
    args.extend(paths.iter().map(String::as_str));
    let out = succeeded(hlo_cost(&args));
    let doc = json(&out);
    assert_eq!(doc["model"], "reference (hand-written heuristic)");
    assert_eq!(doc["errors"], 0);
    let reported = doc["files"].as_array().expect("files");
    assert_eq!(reported.len(), files.len());
    for (name, r) in files.iter().zip(reported) {
        let f = NpzGraphFile::open(npz(name)).expect("open");
        assert_eq!(r["task"], f.task().name(), "{name}");
        assert_eq!(r["num_nodes"], f.graph().num_nodes());
        assert_eq!(r["num_configs"], f.num_configs());
        // Predictions: the reference model's scores in the file's config order.
        let model = ReferenceModel::new(f.task());
        let prepared = model.prepare(f.graph()).expect("prepare");
        let want = model
            .score(&prepared, &f.all_configs().expect("configs"))
            .expect("score");
        let got: Vec<f32> = r["predictions"]
            .as_array()
            .expect("predictions")
            .iter()
            .map(|v| v.as_f64().expect("f") as f32)
            .collect();
        assert_eq!(got, want, "{name}");
        // Metrics only where the file has runtimes, equal to the library's.
        assert_eq!(r["has_runtimes"], f.has_runtimes());
        if f.has_runtimes() {
            let pred: Vec<f64> = want.iter().map(|&p| f64::from(p)).collect();
            let m = RankingMetrics::compute(&pred, &f.normalized_runtimes());
            let want = serde_json::to_value(&m).expect("json");
            let want = want.as_object().expect("object");
            let got = r["metrics"].as_object().expect("metrics object");
            assert_eq!(
                got.keys().collect::<Vec<_>>(),
                want.keys().collect::<Vec<_>>()
            );
            for (k, w) in want {
                // JSON text round trip: equal to 1e-12, nulls where undefined.
                match (got[k].as_f64(), w.as_f64()) {
                    (Some(g), Some(w)) => {
                        assert!((g - w).abs() < 1e-12, "{name}: {k} = {g}, library {w}")
                    }
                    (g, w) => assert_eq!(g, w, "{name}: {k}"),
                }
            }
        } else {
            assert!(r["metrics"].is_null(), "{name}: metrics without runtimes");
        }
    }
    // Overall: per task; the tile score is the mean over kernels with runtimes.
    let tile = &doc["overall"]["tile"];
    assert_eq!(tile["graphs"], 2);
    assert_eq!(tile["graphs_with_runtimes"], 1);
    assert_eq!(
        tile["kaggle_tile_score"],
        reported[2]["metrics"]["kaggle_tile_score"]
    );
    assert_eq!(doc["overall"]["layout"]["graphs"], 2);
}

#[test]
fn eval_table_for_people() {
    let paths: Vec<String> = [
        LAYOUT,
        LAYOUT_TEST,
        TILE,
        TILE_TEST,
        "tile_xla_train_retinanet.npz",
    ]
    .iter()
    .map(|f| rel(f))
    .collect();
    let mut args = vec!["eval", "--model", "reference"];
    args.extend(paths.iter().map(String::as_str));
    let out = succeeded(hlo_cost(&args));
    insta::assert_snapshot!("eval_reference_table", stdout(&out));
}

#[test]
fn batch_size_does_not_change_predictions() {
    let run = |batch: &str| {
        eval_predictions(&["--model", "reference", "--batch", batch], &rel(TILE_TEST))
    };
    let one = run("1");
    assert_eq!(one.as_array().expect("array").len(), 807);
    assert_eq!(one, run("7"));
    assert_eq!(one, run("65536"));
}

#[test]
fn predictions_in_the_table_are_in_config_order() {
    let out = succeeded(hlo_cost(&[
        "eval",
        "--model",
        "reference",
        "--predictions",
        &rel(TILE),
    ]));
    let text = stdout(&out);
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("predictions for"))
        .skip(1)
        .collect();
    assert_eq!(lines.len(), 9);
    for (i, l) in lines.iter().enumerate() {
        assert!(l.trim_start().starts_with(&format!("{i} ")), "{l}");
    }
}

#[test]
fn errors_are_rendered_and_other_files_still_evaluated() {
    let corrupt = tmp("corrupt.npz");
    let bytes = std::fs::read(npz(TILE)).expect("fixture");
    std::fs::write(&corrupt, &bytes[..bytes.len() / 2]).expect("write");
    let corrupt = corrupt.display().to_string();
    let out = hlo_cost(&[
        "eval",
        "--model",
        "reference",
        "no/such/file.npz",
        &corrupt,
        &rel(TILE),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("hlo-cost: error: npz no/such/file.npz: cannot open"),
        "{err}"
    );
    assert!(
        err.contains(&format!("hlo-cost: error: npz {corrupt}:")),
        "{err}"
    );
    let text = stdout(&out);
    assert!(
        text.contains("tile_xla_valid_inception_v3.npz  tile"),
        "{text}"
    );
    assert_eq!(text.matches("error (see above)").count(), 2, "{text}");

    // The same in JSON: one entry per file, errors included.
    let out = hlo_cost(&[
        "eval",
        "--model",
        "reference",
        "--json",
        "no/such/file.npz",
        &rel(TILE),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let doc = json(&out);
    assert_eq!(doc["errors"], 1);
    assert!(doc["files"][0]["error"]
        .as_str()
        .expect("error")
        .contains("cannot open"));
    assert_eq!(doc["files"][1]["task"], "tile");
}

#[test]
fn a_published_file_with_unsorted_ids_evaluates_next_to_a_bad_one() {
    // The mask_rcnn slice keeps the published, non-increasing node_config_ids.
    let unsorted = rel("layout_xla_mask_rcnn_unsorted_ids.npz");
    let out = hlo_cost(&[
        "eval",
        "--model",
        "reference",
        "--json",
        &unsorted,
        "no/such/file.npz",
        &rel(LAYOUT),
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "one bad file: exit 1 at the end"
    );
    let doc = json(&out);
    assert_eq!(doc["errors"], 1);
    assert_eq!(doc["files"][0]["num_configs"], 20);
    assert!(doc["files"][0]["metrics"]["kendall_tau"].is_f64(), "{doc}");
    assert!(doc["files"][1]["error"]
        .as_str()
        .expect("error")
        .contains("cannot open"));
    assert!(doc["files"][2]["metrics"].is_object(), "{doc}");
    assert_eq!(doc["overall"]["layout"]["graphs_with_runtimes"], 2);
}

#[test]
fn wrong_task_and_bad_model_are_errors() {
    let out = hlo_cost(&[
        "eval",
        "--model",
        "reference",
        "--task",
        "tile",
        &rel(LAYOUT),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a layout file, but --task tile"));

    let bad_model = tmp("not_a_model.onnx");
    std::fs::write(&bad_model, b"definitely not onnx").expect("write");
    let out = hlo_cost(&[
        "eval",
        "--model",
        &bad_model.display().to_string(),
        &rel(TILE),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("hlo-cost: error:"));

    // Flags are checked by clap: exit status 2.
    assert_eq!(
        hlo_cost(&["eval", "--batch", "0", &rel(TILE)])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(hlo_cost(&["eval"]).status.code(), Some(2));
}

/// Each configuration of `ours` (rows `mine`) is a row of `published`
/// (rows `theirs`) with the same measured runtime.
fn each_run_is_a_published_row(
    ours: &NpzGraphFile,
    mine: &costmodel::ConfigBatch,
    published: &NpzGraphFile,
    theirs: &costmodel::ConfigBatch,
) {
    let row = mine.nodes_per_config * 18;
    for (i, &rt) in ours.runtimes().iter().enumerate() {
        let mine_row = &mine.feat[i * row..(i + 1) * row];
        let found = published
            .runtimes()
            .iter()
            .enumerate()
            .any(|(j, &prt)| prt == rt && &theirs.feat[j * row..(j + 1) * row] == mine_row);
        assert!(found, "run {i} (runtime {rt}) has no equal published row");
    }
}

#[test]
fn featurize_unet_3d_with_its_runs_matches_the_published_npz() {
    let out_path = tmp("unet_3d.npz");
    let out = succeeded(featurize(
        "layout",
        &tpugraphs(&format!("{UNET}.hlo")),
        Some(&tpugraphs(&format!("{UNET}.runs.json"))),
        &out_path,
    ));
    assert!(
        stdout(&out).contains("layout task, 3163 nodes"),
        "{}",
        stdout(&out)
    );
    let ours = NpzGraphFile::open(&out_path).expect("ours");
    let published = NpzGraphFile::open(tpugraphs(&format!("{UNET}.npz"))).expect("published");
    assert_eq!(ours.task(), Task::Layout);
    let (g, p) = (ours.graph(), published.graph());
    assert_eq!(g.node_opcode, p.node_opcode);
    assert_eq!(g.edge_index, p.edge_index);
    assert_eq!(g.node_config_ids, p.node_config_ids);
    assert_eq!(g.node_splits, p.node_splits);
    // 112 successful runs; each run's row is a published row with the same runtime.
    assert_eq!(ours.num_configs(), 112);
    let (mine, theirs) = (
        ours.all_configs().expect("ours"),
        published.all_configs().expect("published"),
    );
    each_run_is_a_published_row(&ours, &mine, &published, &theirs);
}

#[test]
fn featurize_tile_kernel_with_runs_and_evaluate_it() {
    let dir = repo().join("testdata/tpugraphs/tile_kernels");
    let out_path = tmp("kernel_00.npz");
    succeeded(featurize(
        "tile",
        &dir.join("kernel_00.hlo"),
        Some(&dir.join("kernel_00.runs.json")),
        &out_path,
    ));
    let f = NpzGraphFile::open(&out_path).expect("open");
    assert_eq!(f.task(), Task::Tile);
    assert_eq!(f.num_configs(), 61);
    // Normalizer: the default run's runtime (the first run of kernel_00).
    assert_eq!(f.runtime_normalizers().expect("normalizers")[0], 57188);
    let c = f.configs(0..1).expect("config 0");
    // Default run: output bounds [2, 26, 4, 2], sum 34, product 416.
    assert_eq!(
        &c.feat[8..16],
        &[2.0, 26.0, 4.0, 2.0, 0.0, 0.0, 34.0, 416.0]
    );
    let out = succeeded(hlo_cost(&[
        "eval",
        "--model",
        "reference",
        "--json",
        &out_path.display().to_string(),
    ]));
    assert!(json(&out)["files"][0]["metrics"]["kendall_tau"].is_number());
}

#[test]
fn featurize_without_runs_writes_the_default_layout() {
    let out_path = tmp("brax_es.npz");
    succeeded(featurize(
        "layout",
        &tpugraphs("layout_xla_brax_es.hlo"),
        None,
        &out_path,
    ));
    let f = NpzGraphFile::open(&out_path).expect("open");
    assert_eq!(f.graph().num_config_nodes(), 81);
    assert_eq!(f.num_configs(), 1);
    assert!(f
        .all_configs()
        .expect("configs")
        .feat
        .iter()
        .all(|&v| v == -1.0));
    assert!(!f.has_runtimes());
}

#[test]
fn featurize_errors_are_rendered() {
    let bad = tmp("bad.hlo");
    std::fs::write(
        &bad,
        "HloModule m\n\nENTRY e {\n  ROOT x = f32[] bogus-op()\n}\n",
    )
    .expect("write");
    let out = featurize("tile", &bad, None, &tmp("bad.npz"));
    assert_eq!(out.status.code(), Some(1));
    // Invalid HLO: rendered as hlo-opt renders it, position, source line, caret.
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[0].starts_with(&format!("{}:4:", bad.display())) && lines[0].contains(": error: "),
        "{err}"
    );
    assert_eq!(lines.get(1), Some(&"  ROOT x = f32[] bogus-op()"), "{err}");
    assert!(
        lines.get(2).is_some_and(|l| l.trim_end().ends_with('^')),
        "{err}"
    );
    let out = featurize("layout", Path::new("no/such.hlo"), None, &tmp("x.npz"));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("hlo-cost: error: no/such.hlo"), "{err}");
}

#[test]
fn featurized_files_load_in_numpy_like_published_ones() {
    let Some(py) = hlo_opt_python("HLO_OPT_PYTHON is not set") else {
        return;
    };
    report::ran();
    let ours = tmp("unet_numpy.npz");
    succeeded(featurize(
        "layout",
        &tpugraphs(&format!("{UNET}.hlo")),
        Some(&tpugraphs(&format!("{UNET}.runs.json"))),
        &ours,
    ));
    let script = r#"
import sys, numpy as np
ref, ours = np.load(sys.argv[1]), np.load(sys.argv[2])
assert sorted(ref.files) == sorted(ours.files), (ref.files, ours.files)
for k in ref.files:
    a, b = ref[k], ours[k]
    assert a.dtype == b.dtype, (k, a.dtype, b.dtype)
    assert a.ndim == b.ndim and a.shape[1:] == b.shape[1:] or k in ("node_config_feat",), (k, a.shape, b.shape)
assert ours["node_config_feat"].shape[1:] == ref["node_config_feat"].shape[1:]
print("ok")
"#;
    let published = tpugraphs(&format!("{UNET}.npz"));
    let run = Command::new(&py)
        .arg("-c")
        .arg(script)
        .arg(&published)
        .arg(&ours)
        .output()
        .expect("python");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

#[test]
fn eval_with_the_default_onnx_models() {
    if std::env::var_os("ORT_DYLIB_PATH").is_none() {
        report::skipped("ORT_DYLIB_PATH is not set");
        return;
    }
    report::ran();
    let paths: Vec<String> = [LAYOUT, LAYOUT_TEST, TILE, TILE_TEST]
        .iter()
        .map(|f| rel(f))
        .collect();
    let mut args = vec!["eval", "--json", "--predictions", "--threads", "1"];
    args.extend(paths.iter().map(String::as_str));
    let out = succeeded(hlo_cost(&args));
    let doc = json(&out);
    assert_eq!(doc["model"], "default (embedded ONNX model)");
    for (r, name) in
        doc["files"]
            .as_array()
            .expect("files")
            .iter()
            .zip([LAYOUT, LAYOUT_TEST, TILE, TILE_TEST])
    {
        let f = NpzGraphFile::open(npz(name)).expect("open");
        let p = r["predictions"].as_array().expect("predictions");
        assert_eq!(p.len(), f.num_configs(), "{name}");
        assert!(
            p.iter().all(Value::is_number),
            "{name}: non-finite prediction"
        );
        assert_eq!(r["metrics"].is_null(), !f.has_runtimes(), "{name}");
    }
    // The inception kernel's 9 tile configs have runtimes: metrics are numbers.
    assert!(doc["files"][2]["metrics"]["kaggle_tile_score"].is_number());

    // A custom model file: the default tile model given as a path scores the same.
    let out = hlo_cost(&[
        "eval",
        "--json",
        "--predictions",
        "--threads",
        "1",
        "--model",
        "costmodel/models/tile.hlocm",
        &rel(TILE),
        &rel(LAYOUT),
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the layout file has no layout model"
    );
    let custom = json(&out);
    assert_eq!(
        custom["files"][0]["predictions"],
        doc["files"][2]["predictions"]
    );
    let err = custom["files"][1]["error"].as_str().expect("error");
    assert!(
        err.contains("tile model") && err.contains("layout"),
        "{err}"
    );

    // `--model xla-cpu` is the built-in XLA:CPU layout model: it scores as its
    // file does, and not as the default (TPU) model.
    let scores =
        |model: &str| eval_predictions(&["--threads", "1", "--model", model], &rel(LAYOUT));
    let builtin = scores("xla-cpu");
    assert_eq!(builtin, scores("costmodel/models/layout-xla-cpu.hlocm"));
    assert_ne!(builtin, doc["files"][0]["predictions"]);
}

// ---------------------------------------------------------------------------
// Raw TpuGraphs autotuner records (`ModuleTuningData`, `TuningData`)

#[test]
fn featurize_the_raw_unet_3d_record_gives_the_published_npz_rows() {
    // The raw record TpuGraphs made the published npz from: its module proto
    // and its 122 runs (112 successful) with their measured runtimes.
    let out_path = tmp("unet_3d_raw.npz");
    let out = succeeded(hlo_cost(&[
        "featurize",
        "--task",
        "layout",
        &tpugraphs(&format!("{UNET}.pb")).display().to_string(),
        "-o",
        &out_path.display().to_string(),
    ]));
    assert!(
        stdout(&out).contains("3163 nodes, 5112 edges, 62 configurable nodes, 112 configurations"),
        "{}",
        stdout(&out)
    );
    // Fields of the 2023 module proto the IR does not model (a module field
    // XLA has since removed, #9) are named, not dropped silently; its
    // device assignment is held, so not named.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning")
            && err.contains("HloModuleProto field #9")
            && !err.contains("device_assignment"),
        "{err}"
    );
    let ours = NpzGraphFile::open(&out_path).expect("ours");
    let published = NpzGraphFile::open(tpugraphs(&format!("{UNET}.npz"))).expect("published");
    // The graph: every array exactly the published one (features included).
    assert!(ours.graph() == published.graph());
    // Each successful run: a published row with the same measured runtime.
    assert_eq!(ours.num_configs(), 112);
    let (mine, theirs) = (
        ours.all_configs().expect("ours"),
        published.all_configs().expect("published"),
    );
    each_run_is_a_published_row(&ours, &mine, &published, &theirs);
    // The same file as the text + .runs.json decoded from this record.
    let via_json = tmp("unet_3d_json.npz");
    succeeded(featurize(
        "layout",
        &tpugraphs(&format!("{UNET}.hlo")),
        Some(&tpugraphs(&format!("{UNET}.runs.json"))),
        &via_json,
    ));
    let json_file = NpzGraphFile::open(&via_json).expect("via json");
    assert_eq!(ours.runtimes(), json_file.runtimes());
    assert_eq!(mine.feat, json_file.all_configs().expect("configs").feat);
}

/// A `TuningData` of the given tile kernels (`testdata/tpugraphs/tile_kernels`),
/// each module written by hlo-opt's proto writer and its runs taken from the
/// kernel's `.runs.json`.
fn tile_tuning_data(kernels: &[&str]) -> Vec<u8> {
    use costmodel::tuning::{
        ConfigProfile, ExecutionProfile, HloOpConfig, ModuleTuningData, TileSizeConfig, TuningData,
    };
    use prost::Message;
    let dir = repo().join("testdata/tpugraphs/tile_kernels");
    let modules = kernels
        .iter()
        .map(|k| {
            let text = std::fs::read_to_string(dir.join(format!("{k}.hlo"))).expect("kernel");
            let m = hlo::parse_module(&text).expect("parses");
            let doc: Value = serde_json::from_str(
                &std::fs::read_to_string(dir.join(format!("{k}.runs.json"))).expect("runs"),
            )
            .expect("json");
            let ints = |v: &Value| -> Vec<i64> {
                v.as_array()
                    .map(|a| a.iter().filter_map(Value::as_i64).collect())
                    .unwrap_or_default()
            };
            let runs = doc["runs"]
                .as_array()
                .expect("runs")
                .iter()
                .map(|r| ConfigProfile {
                    op_config: Some(HloOpConfig {
                        tile_size_config: Some(TileSizeConfig {
                            kernel_bounds: ints(&r["tile"]["kernel_bounds"]),
                            output_bounds: ints(&r["tile"]["output_bounds"]),
                            input_bounds: ints(&r["tile"]["input_bounds"]),
                            iteration_bounds: ints(&r["tile"]["iteration_bounds"]),
                        }),
                    }),
                    module_config: None,
                    error: r["error"].as_bool().unwrap_or(false),
                    profile: Some(ExecutionProfile {
                        compute_cycle_count: 0,
                        compute_time_ns: r["compute_time_ns"].as_i64().unwrap_or(0),
                        compute_and_transfer_time_ns: 0,
                    }),
                    is_default: r["is_default"].as_bool().unwrap_or(false),
                })
                .collect();
            ModuleTuningData {
                module: hlo::proto::to_bytes(&m).expect("writes"),
                fingerprint: doc["fingerprint"].as_u64().unwrap_or(0),
                runs,
                config_index_to_node: vec![],
            }
        })
        .collect();
    TuningData { modules }.encode_to_vec()
}

/// `(config rows, runtimes, normalizers, graph arrays)` of an npz.
#[allow(clippy::type_complexity)]
fn tile_npz(path: &Path) -> (Vec<f32>, Vec<i64>, Vec<i64>, costmodel::Graph) {
    let f = NpzGraphFile::open(path).expect("open");
    (
        f.all_configs().expect("configs").feat,
        f.runtimes().to_vec(),
        f.runtime_normalizers().expect("normalizers").to_vec(),
        f.graph().clone(),
    )
}

#[test]
fn featurize_a_tile_tuning_data_record_like_its_runs_json() {
    let record = tmp("kernels.pb");
    std::fs::write(&record, tile_tuning_data(&["kernel_00", "kernel_02"])).expect("write");
    let record_arg = record.display().to_string();
    let dir = repo().join("testdata/tpugraphs/tile_kernels");
    for (index, kernel) in ["kernel_00", "kernel_02"].iter().enumerate() {
        let from_record = tmp(&format!("{kernel}_record.npz"));
        succeeded(hlo_cost(&[
            "featurize",
            "--task",
            "tile",
            &record_arg,
            "--module",
            &index.to_string(),
            "-o",
            &from_record.display().to_string(),
        ]));
        let from_json = tmp(&format!("{kernel}_json.npz"));
        succeeded(featurize(
            "tile",
            &dir.join(format!("{kernel}.hlo")),
            Some(&dir.join(format!("{kernel}.runs.json"))),
            &from_json,
        ));
        assert!(
            tile_npz(&from_record) == tile_npz(&from_json),
            "{kernel}: the record and its .runs.json give different npz files"
        );
    }
    // Several modules and no --module, or one out of range: an error naming the count.
    let no_pick = hlo_cost(&[
        "featurize",
        "--task",
        "tile",
        &record_arg,
        "-o",
        &tmp("x.npz").display().to_string(),
    ]);
    assert_eq!(no_pick.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&no_pick.stderr)
        .contains("holds 2 modules; pick one with --module"));
    let out_of_range = hlo_cost(&[
        "featurize",
        "--task",
        "tile",
        &record_arg,
        "--module",
        "2",
        "-o",
        &tmp("x.npz").display().to_string(),
    ]);
    assert_eq!(out_of_range.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out_of_range.stderr).contains("--module 2"));
}

#[test]
fn bad_raw_records_are_clear_errors() {
    let raw = std::fs::read(tpugraphs(&format!("{UNET}.pb"))).expect("record");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "truncated",
            raw[..raw.len() / 2].to_vec(),
            "not a TpuGraphs ModuleTuningData record",
        ),
        // field 3 (runs) declaring 4 GiB in a few bytes
        (
            "huge",
            vec![0x1a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00],
            "not a TpuGraphs ModuleTuningData record",
        ),
        (
            "garbage",
            vec![0xff; 64],
            "not a TpuGraphs ModuleTuningData record",
        ),
        // a well-formed record whose module field is not a module
        ("no module", vec![0x0a, 0x02, 0x08, 0x01], "its module"),
    ];
    for (label, bytes, want) in cases {
        let path = tmp(&format!("bad_{}.pb", label.replace(' ', "_")));
        std::fs::write(&path, &bytes).expect("write");
        let out = hlo_cost(&[
            "featurize",
            "--task",
            "layout",
            &path.display().to_string(),
            "-o",
            &tmp("bad.npz").display().to_string(),
        ]);
        assert_eq!(out.status.code(), Some(1), "{label}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("hlo-cost: error: ") && err.contains(want),
            "{label}: {err}"
        );
    }
    // A record carries its runs: --runs as well is refused.
    let out = featurize(
        "layout",
        &tpugraphs(&format!("{UNET}.pb")),
        Some(&tpugraphs(&format!("{UNET}.runs.json"))),
        &tmp("both.npz"),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("carries its runs"));
}

#[test]
fn collect_kernels_refuses_flags_it_does_not_take() {
    let dot = "testdata/stablehlo/dot.mlir";
    let dir = tmp("kernels_flags").display().to_string();
    // Layout sampling flags: a command-line error.
    let out = hlo_cost(&["collect", "--kernels", dot, "-o", &dir, "--configs", "3"]);
    assert_eq!(out.status.code(), Some(2));
    // Another device: jaxlib's own CPU client is what it measures with.
    let out = hlo_cost(&[
        "collect",
        "--kernels",
        dot,
        "-o",
        &dir,
        "--device",
        "pjrt:/x.so",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("jaxlib's own CPU client"));
    // Mixed devices: only where a Python driver keeps per-device records.
    let out = hlo_cost(&["collect", dot, "-o", &dir, "--allow-mixed-devices"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ray and --kernels"));
    // A Python without jax is named, with what to install.
    let out = Command::new(env!("CARGO_BIN_EXE_hlo-cost"))
        .args(["collect", "--kernels", dot, "-o", &dir])
        .env("HLO_OPT_PYTHON", "/no/such/python")
        .current_dir(repo())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--kernels needs Python with jax"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!Path::new(&dir).join("dot.npz").exists());
}

#[test]
fn collect_kernels_times_every_candidate_with_jaxlib_and_resumes() {
    let Some(py) = hlo_opt_python("HLO_OPT_PYTHON is not set (collect --kernels needs jax)") else {
        return;
    };
    let has_jax = Command::new(&py)
        .args(["-c", "import jax, hlo_opt"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_jax {
        report::skipped("HLO_OPT_PYTHON has no jax or hlo_opt (collect --kernels needs both)");
        return;
    }
    report::ran();
    let dir = tmp("kernels");
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.display().to_string();
    let args = [
        "collect",
        "--kernels",
        "testdata/stablehlo/dot.mlir",
        "-o",
        &d,
        "--measure-budget",
        "0.05",
    ];
    let first = succeeded(hlo_cost(&args));
    assert!(
        String::from_utf8_lossy(&first.stdout).contains("measured 1 programs now"),
        "{}",
        String::from_utf8_lossy(&first.stdout)
    );
    let hlo = std::fs::read_to_string(dir.join("dot.hlo")).expect("the module's HLO text");
    assert!(hlo.starts_with("HloModule"), "{hlo}");
    // A Python check of the npz (its asserts fail the test).
    let npz_holds = |script: &str| {
        let check = Command::new(&py)
            .args([
                "-c",
                &format!("import sys, json, numpy as np; z = np.load(sys.argv[1]); {script}"),
            ])
            .arg(dir.join("dot.npz"))
            .output()
            .expect("python");
        assert!(
            check.status.success(),
            "{}",
            String::from_utf8_lossy(&check.stderr)
        );
    };
    npz_holds(
        "from hlo_opt import xla_cpu; \
         assert [str(c) for c in z['candidates']] == xla_cpu.CANDIDATE_NAMES, z['candidates']; \
         assert z['ratio'][0] == 1.0 and z['ok'][0]",
    );
    // Run again: what is measured is kept, nothing is timed again.
    let again = succeeded(hlo_cost(&args));
    assert!(String::from_utf8_lossy(&again.stdout).contains("measured 0 programs now"));
    // --collections 2: one more measurement, pooled with the first.
    let twice = succeeded(hlo_cost(&[&args[..], &["--collections", "2"]].concat()));
    assert!(
        String::from_utf8_lossy(&twice.stdout).contains("measured 1 programs now"),
        "{}",
        String::from_utf8_lossy(&twice.stdout)
    );
    npz_holds(
        "assert z['runs_ratio'].shape[0] == 2, z['runs_ratio'].shape; \
         assert json.loads(str(z['meta']))['collections'] == 2",
    );
}
