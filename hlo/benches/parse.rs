//! Parse and print throughput on large real modules: BERT-base after XLA's
//! optimisations and the TpuGraphs unet_3d module (from `../shared` when
//! present), plus GPT-2 from `testdata/hlo` so the bench always has input.
//! `hlo/conformance/bench_vs_xla.py` compares the same files with XLA's parser.

use std::path::Path;

use criterion::{Criterion, Throughput};

fn inputs() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let candidates = [
        root.join("../shared/corpus/jax/bert_base.post.hlo"),
        root.join("../shared/data/tpugraphs/hlo/layout_xla_default_valid_unet_3d.4x4.bf16.hlo"),
        root.join("testdata/hlo/gpt2.post.hlo"),
    ];
    candidates
        .iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(p).ok()?;
            let name = p.file_name()?.to_string_lossy().into_owned();
            Some((name, text))
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    for (name, text) in inputs() {
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.sample_size(20);
        g.bench_function("parse", |b| {
            b.iter(|| hlo::parse_module(&text).map(|m| m.num_insts()))
        });
        if let Ok(m) = hlo::parse_module(&text) {
            g.bench_function("print", |b| b.iter(|| hlo::print_module(&m).len()));
        }
        g.finish();
    }
}

#[path = "../../tests/support/criterion_home.rs"]
#[macro_use]
mod criterion_home;

bench_main!(bench);
