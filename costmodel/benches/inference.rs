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
    let nlp = repo().join(
        "../shared/data/tpugraphs/npz/layout/nlp/default/test/3a0c5517a87df8d82fd637b83298a3ba.npz",
    );
    if nlp.is_file() {
        nlp
    } else {
        eprintln!("note: ../shared absent; benchmarking the small testdata layout graph instead");
        repo().join("testdata/costmodel/npz/layout_xla_default_test_cd708819.npz")
    }
}

fn threads() -> usize {
    std::env::var("HLO_OPT_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
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

    // Plain figures for the report: encoder once, then every config of the
    // file (decoded beforehand) in batches of 1000; wall and CPU time (CPU
    // time is independent of other load on the machine; ONNX Runtime's
    // spinning threads make it an overestimate of the work).
    let (t, cpu) = (Instant::now(), cpu_seconds());
    let prepared = model.prepare(graph).expect("prepare");
    let (enc, enc_cpu) = (t.elapsed().as_secs_f64(), cpu_seconds() - cpu);
    let batches: Vec<_> = (0..all.num_configs)
        .step_by(1000)
        .map(|s| {
            file.configs(s..(s + 1000).min(all.num_configs))
                .expect("configs")
        })
        .collect();
    let (t, cpu) = (Instant::now(), cpu_seconds());
    let mut scored = 0;
    for batch in &batches {
        scored += model.score(&prepared, batch).expect("score").len();
    }
    let (head, head_cpu) = (t.elapsed().as_secs_f64(), cpu_seconds() - cpu);
    eprintln!(
        "layout: {} nodes, {} configurable; encoder {:.1} ms wall / {:.1} ms CPU; {} configs in {:.1} ms wall = {:.0} configs/s, {:.0} configs per CPU-second",
        graph.num_nodes(),
        graph.num_config_nodes(),
        enc * 1e3,
        enc_cpu * 1e3,
        scored,
        head * 1e3,
        scored as f64 / head,
        scored as f64 / head_cpu.max(1e-9)
    );
}

/// User + system CPU time of this process (from /proc; 0 elsewhere).
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

fn bench_tile(c: &mut Criterion) {
    if costmodel::onnx::environment().is_err() {
        return;
    }
    let file = NpzGraphFile::open(repo().join("testdata/costmodel/npz/tile_xla_test_0a8a2b24.npz"))
        .expect("tile npz");
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

#[path = "../../tests/support/criterion_home.rs"]
mod criterion_home;
use criterion_home::criterion_config;

fn main() {
    let mut c = criterion_config().configure_from_args();
    bench_layout(&mut c);
    bench_tile(&mut c);
    c.final_summary();
    if let Some(mib) = peak_rss_mib() {
        eprintln!("peak resident memory (VmHWM): {mib:.0} MiB");
    }
}
