//! Inference speed of the embedded GNN cost models with ONNX Runtime.
//!
//! Layout: the 21,918-node NLP graph of `shared/data/tpugraphs/npz/layout/nlp/
//! default/test/` (848 configurable nodes, 1001 configs): `prepare` (k-hop
//! pruning + encoder, once per graph) and `score` on batches of configs
//! (throughput in configs/s). Tile: a real kernel from testdata. Threads:
//! `HLO_OPT_BENCH_THREADS` (default 2, this machine's cores). Peak resident
//! memory (VmHWM) is printed at the end. Skips the NLP graph when
//! `../shared` is absent (uses the small testdata graph instead).
//!
//! Run: `cargo bench -p costmodel --bench inference`.

use std::path::PathBuf;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, Throughput};

use costmodel::npz::NpzGraphFile;
use costmodel::{load_model, Task};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn layout_npz() -> PathBuf {
    let nlp = repo().join("../shared/data/tpugraphs/npz/layout/nlp/default/test/3a0c5517a87df8d82fd637b83298a3ba.npz");
    if nlp.is_file() {
        nlp
    } else {
        eprintln!("note: ../shared absent; benchmarking the small testdata layout graph instead");
        repo().join("testdata/costmodel/npz/layout_xla_default_test_cd708819.npz")
    }
}

fn threads() -> usize {
    std::env::var("HLO_OPT_BENCH_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(2)
}

fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn bench_layout(c: &mut Criterion) {
    if let Err(e) = costmodel::onnx::environment() {
        eprintln!("skipped: ONNX Runtime unavailable: {e}");
        return;
    }
    let file = NpzGraphFile::open(layout_npz()).expect("open layout npz");
    let model = load_model(None, Task::Layout, threads()).expect("layout model");
    let graph = file.graph();
    let mut g = c.benchmark_group("layout");
    g.sample_size(10);
    g.bench_function(BenchmarkId::new("prepare", graph.num_nodes()), |b| {
        b.iter(|| model.prepare(graph).expect("prepare"))
    });
    let prepared = model.prepare(graph).expect("prepare");
    let all = file.all_configs().expect("configs");
    for batch in [100usize, 500, 1000] {
        let n = batch.min(all.num_configs);
        let configs = file.configs(0..n).expect("configs");
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::new("score", n), |b| {
            b.iter(|| model.score(&prepared, &configs).expect("score"))
        });
    }
    g.finish();

    // A plain end-to-end figure for the report: encoder once + every config of
    // the file in batches of 1000.
    let t = Instant::now();
    let prepared = model.prepare(graph).expect("prepare");
    let enc = t.elapsed();
    let t = Instant::now();
    let mut scored = 0;
    for batch in file.config_batches(1000).expect("batches") {
        let batch = batch.expect("batch");
        scored += model.score(&prepared, &batch).expect("score").len();
    }
    let head = t.elapsed();
    eprintln!(
        "layout end to end: {} nodes, encoder {:.1} ms, {} configs in {:.1} ms = {:.0} configs/s (incl. npz decoding)",
        graph.num_nodes(),
        enc.as_secs_f64() * 1e3,
        scored,
        head.as_secs_f64() * 1e3,
        scored as f64 / head.as_secs_f64()
    );
}

fn bench_tile(c: &mut Criterion) {
    if costmodel::onnx::environment().is_err() {
        return;
    }
    let file = NpzGraphFile::open(repo().join("testdata/costmodel/npz/tile_xla_test_0a8a2b24.npz")).expect("tile npz");
    let model = load_model(None, Task::Tile, threads()).expect("tile model");
    let prepared = model.prepare(file.graph()).expect("prepare");
    let configs = file.all_configs().expect("configs");
    let mut g = c.benchmark_group("tile");
    g.sample_size(10);
    g.throughput(Throughput::Elements(configs.num_configs as u64));
    g.bench_function(BenchmarkId::new("score", configs.num_configs), |b| {
        b.iter(|| model.score(&prepared, &configs).expect("score"))
    });
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench_layout(&mut c);
    bench_tile(&mut c);
    c.final_summary();
    if let Some(mib) = peak_rss_mib() {
        eprintln!("peak resident memory (VmHWM): {mib:.0} MiB");
    }
}
