//! In-process times of the Python package's three steps, done in Rust with
//! the same library calls, for `scripts/bench_python.py`:
//! `pipeline_speed ITERATIONS FILE...` prints one line per file:
//! `<file>\t<best read+verify s>\t<best featurize s>\t<best score s>`.
//!
//! read+verify: `hlo::load_bytes` and `Loaded::verify` (what `hlo_opt.parse`
//! calls); featurize: `costmodel::features::featurize` for the layout task
//! and the compiler-default configuration (`hlo_opt.featurize`); score: the
//! embedded layout model's `prepare` and `incremental::score_batch` of that
//! configuration (what `hlo-cost eval` calls, and
//! `hlo_opt.CostModel("layout", threads=1).score`), the model loaded once
//! beforehand, with one ONNX Runtime thread.
use std::time::Instant;

use costmodel::tuning::Configs;
use costmodel::Task;

fn best_of<T>(iters: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::INFINITY;
    let mut last = None;
    for _ in 0..iters.max(1) {
        let t = Instant::now();
        let v = f();
        best = best.min(t.elapsed().as_secs_f64());
        last = Some(v);
    }
    (best, last.expect("at least one iteration"))
}

fn main() {
    if let Err(e) = run() {
        eprintln!("pipeline_speed: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let iters: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(10);
    // One ONNX Runtime thread on both sides: on a shared machine more only
    // measure who got the cores.
    let model = costmodel::load_model(None, Task::Layout, 1).map_err(|e| e.to_string())?;
    for path in args {
        let bytes = std::fs::read(&path).map_err(|e| format!("{path}: {e}"))?;
        let (parse_s, loaded) = best_of(iters, || {
            let l = hlo::load_bytes(bytes.clone(), &path)?;
            l.verify()?;
            Ok::<_, hlo::Error>(l)
        });
        let loaded = loaded.map_err(|e| e.render())?;
        let (feat_s, f) = best_of(iters, || {
            let f = costmodel::features::featurize(&loaded.module, Task::Layout)?;
            let c = Configs::compiler_default(&f.graph, Task::Layout);
            Ok::<_, costmodel::CostModelError>((f, c))
        });
        let (f, configs) = f.map_err(|e| e.to_string())?;
        // As `hlo-cost eval` scores (and so `CostModel.score`, whose scores
        // equal eval's): through `score_batch`.
        let (score_s, scores) = best_of(iters, || {
            let p = model.prepare(&f.graph)?;
            costmodel::incremental::score_batch(model.as_ref(), &p, &configs.batch)
        });
        let scores = scores.map_err(|e| e.to_string())?;
        std::hint::black_box(scores);
        println!("{path}\t{parse_s}\t{feat_s}\t{score_s}");
    }
    Ok(())
}
