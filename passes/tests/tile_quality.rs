//! Quality of the tile ranking on real TPU runtimes: the top-1 and top-5
//! slowdown of the model's choice among the configurations the TPU autotuner
//! measured (`min runtime of the k best-scored / min runtime - 1`; the
//! TpuGraphs paper's baseline on its test set: 9.1% top-1, 4.2% top-5).
//!
//! Data: the sample kernels (`testdata/tile/kernels`, scored through the same
//! path as the pass: kernel module -> featurize -> one batch) and, when
//! `../shared` is present, the published tile npz files with runtimes
//! (`shared/data/tpugraphs/npz/tile/xla/{train,valid}`). Models: the
//! embedded ONNX tile model (skipped with a message when ONNX Runtime cannot
//! be loaded) and the reference model. Run with `--nocapture` for the report.

#[path = "../../tests/support/report.rs"]
mod report;
use std::path::{Path, PathBuf};

use costmodel::metrics::top_k_slowdown;
use costmodel::npz::NpzGraphFile;
use costmodel::reference::ReferenceModel;
use costmodel::{CostModel, Task};
use passes::tile::{extract, kernel, runs, score_configs, KernelError};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[derive(Default)]
struct Totals {
    top1: Vec<f64>,
    top5: Vec<f64>,
}

impl Totals {
    fn add(&mut self, t1: f64, t5: f64) {
        self.top1.push(t1);
        self.top5.push(t5);
    }
    fn mean(v: &[f64]) -> f64 {
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    }
    fn line(&self, what: &str) -> String {
        format!(
            "{what}: top-1 slowdown {:.1}%, top-5 slowdown {:.1}% over {} kernels",
            100.0 * Self::mean(&self.top1),
            100.0 * Self::mean(&self.top5),
            self.top1.len()
        )
    }
}

fn check(t1: Option<f64>, t5: Option<f64>, what: &str) -> (f64, f64) {
    let (Some(t1), Some(t5)) = (t1, t5) else {
        panic!("{what}: no slowdown")
    };
    assert!(
        t1.is_finite() && t1 >= 0.0 && t5 >= 0.0 && t5 <= t1,
        "{what}: top-1 {t1}, top-5 {t5}"
    );
    (t1, t5)
}

/// Slowdowns on the sample kernels; returns the totals.
fn sample_kernels(model: &dyn CostModel, label: &str) -> Totals {
    let dir = repo_root().join("testdata/tile/kernels");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("testdata/tile/kernels")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "hlo"))
        .collect();
    files.sort();
    let mut totals = Totals::default();
    let mut xla_default = Totals::default();
    for p in files {
        let text = std::fs::read_to_string(&p).expect("readable");
        let m = hlo::parse_module(&text).expect("parses");
        let k = kernel::find_kernels(&m)[0];
        let runs_text = std::fs::read_to_string(p.with_extension("runs.json")).expect("runs");
        let all_runs = runs::parse_runs(&runs_text).expect("runs parse");
        let measured = runs::measured(&all_runs);
        let configs: Vec<_> = measured.iter().map(|(c, _)| c.clone()).collect();
        let runtime: Vec<f64> = measured.iter().map(|(_, t)| *t as f64).collect();
        let km = extract::extract_kernel(&m, k);
        let scores = match score_configs(&km, &configs, model) {
            Ok(s) => s,
            Err(KernelError::Skip(e)) => panic!("{}: {e}", p.display()),
            Err(KernelError::Model(e)) => panic!("{}: {e}", p.display()),
        };
        let pred: Vec<f64> = scores.iter().map(|&s| f64::from(s)).collect();
        let name = p
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (t1, t5) = check(
            top_k_slowdown(&pred, &runtime, 1),
            top_k_slowdown(&pred, &runtime, 5),
            &name,
        );
        // XLA's own default, for scale
        let best = runtime.iter().copied().fold(f64::INFINITY, f64::min);
        if let Some(d) = all_runs.iter().find(|r| r.is_default) {
            if let Some((_, t)) = measured.iter().find(|(c, _)| *c == d.config) {
                xla_default.add(*t as f64 / best - 1.0, *t as f64 / best - 1.0);
            }
        }
        println!(
            "[{label}] {name}: {} measured configs, top-1 {:.1}%, top-5 {:.1}%",
            configs.len(),
            100.0 * t1,
            100.0 * t5
        );
        totals.add(t1, t5);
    }
    println!("[{label}] {}", totals.line("sample kernels"));
    println!(
        "[{label}] {}",
        xla_default.line("XLA's default tile (for scale)")
    );
    totals
}

/// Slowdowns on the published npz tile files that carry runtimes.
fn npz_files(model: &dyn CostModel, label: &str) -> Option<Totals> {
    let base = repo_root().join("../shared/data/tpugraphs/npz/tile/xla");
    if !base.exists() {
        report::skipped(&format!(
            "[{label}] npz files: {} is absent",
            base.display()
        ));
        return None;
    }
    report::ran();
    let mut totals = Totals::default();
    for split in ["train", "valid", "test"] {
        let Ok(entries) = std::fs::read_dir(base.join(split)) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for p in files {
            let f = NpzGraphFile::open(&p).expect("npz opens");
            if !f.has_runtimes() {
                continue;
            }
            let prepared = model.prepare(f.graph()).expect("prepare");
            let batch = f.all_configs().expect("configs");
            let scores = model.score(&prepared, &batch).expect("score");
            let pred: Vec<f64> = scores.iter().map(|&s| f64::from(s)).collect();
            let runtime: Vec<f64> = f.runtimes().iter().map(|&t| t as f64).collect();
            let name = format!(
                "{split}/{}",
                p.file_name()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            );
            let (t1, t5) = check(
                top_k_slowdown(&pred, &runtime, 1),
                top_k_slowdown(&pred, &runtime, 5),
                &name,
            );
            println!(
                "[{label}] {name}: {} configs, top-1 {:.1}%, top-5 {:.1}%",
                pred.len(),
                100.0 * t1,
                100.0 * t5
            );
            totals.add(t1, t5);
        }
    }
    println!("[{label}] {}", totals.line("npz files with runtimes"));
    Some(totals)
}

#[test]
fn quality_of_the_onnx_tile_model() {
    let model = match costmodel::load_model(None, Task::Tile, 1) {
        Ok(m) => {
            report::ran();
            m
        }
        Err(e) => {
            report::skipped(&format!("the ONNX tile model cannot be loaded: {e}"));
            return;
        }
    };
    let mut all = sample_kernels(model.as_ref(), "onnx");
    // A regression guard, not a target: the paper's baseline is 4.2% top-5.
    let top5 = Totals::mean(&all.top5);
    assert!(
        top5 <= 0.10,
        "the ONNX tile model's top-5 slowdown on the sample kernels is {:.1}%",
        100.0 * top5
    );
    if let Some(npz) = npz_files(model.as_ref(), "onnx") {
        all.top1.extend(npz.top1);
        all.top5.extend(npz.top5);
    }
    println!("[onnx] {}", all.line("overall"));
}

#[test]
fn quality_of_the_reference_model() {
    let model = ReferenceModel::new(Task::Tile);
    let mut all = sample_kernels(&model, "reference");
    if let Some(npz) = npz_files(&model, "reference") {
        all.top1.extend(npz.top1);
        all.top5.extend(npz.top5);
    }
    println!("[reference] {}", all.line("overall"));
}
