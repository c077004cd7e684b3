//! npz reading: a slice of configurations vs the whole file, on the
//! 21,918-node NLP graph (1,001 configs x 848 nodes x 18 = 61 MB of
//! `node_config_feat`) from `../shared`, or the largest test fixture when
//! `../shared` is absent.
//!
//! - `open`: graph, runtimes and the configuration array's header;
//! - `slice_first_100` / `slice_last_100`: `configs(..)` of 100 rows (deflated:
//!   the last rows need the bytes before them inflated and dropped);
//! - `all_configs`: every configuration;
//! - `npyz_whole_file`: the baseline without streaming, every array of the
//!   archive decoded with `npyz::npz::NpzArchive`;
//! - `stored/...`: the same file written uncompressed (`np.savez`), where a
//!   slice is a seek.
//!
//! Run: `cargo bench -p costmodel --bench npz`.

use std::hint::black_box;
use std::path::{Path, PathBuf};

use costmodel::npz::{write_npz_with, NpzGraphFile, WriteOptions};
use criterion::Criterion;

fn input() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let nlp = root.join("../shared/data/tpugraphs/npz/layout/nlp/default/test");
    if let Some(p) = std::fs::read_dir(&nlp)
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .map(|e| e.path())
    {
        return p;
    }
    eprintln!(
        "note: {} absent, benchmarking the largest fixture instead",
        nlp.display()
    );
    root.join("testdata/costmodel/npz/layout_xla_default_test_cd708819.npz")
}

fn npyz_whole(path: &Path) -> usize {
    let mut archive = npyz::npz::NpzArchive::open(path).expect("npz");
    let names: Vec<String> = archive.array_names().map(str::to_string).collect();
    let mut total = 0;
    for name in names {
        let npy = archive.by_name(&name).expect("entry").expect("present");
        total += match npy.dtype() {
            npyz::DType::Plain(t) if t.type_char() == npyz::TypeChar::Float => {
                npy.into_vec::<f32>().expect("f32").len()
            }
            npyz::DType::Plain(t) if t.size_field() == 1 => npy.into_vec::<u8>().expect("u8").len(),
            _ => npy.into_vec::<i64>().expect("i64").len(),
        };
    }
    total
}

fn bench(c: &mut Criterion) {
    let path = input();
    let file = NpzGraphFile::open(&path).expect("open");
    let n = file.num_configs();
    let k = 100.min(n);
    eprintln!(
        "{}: {} nodes, {} configurable, {} configs",
        path.display(),
        file.graph().num_nodes(),
        file.graph().num_config_nodes(),
        n
    );
    let stored = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench_stored.npz");
    let configs = file.all_configs().expect("configs");
    write_npz_with(
        &stored,
        file.graph(),
        Some(&configs),
        Some(file.runtimes()),
        file.task(),
        &WriteOptions {
            stored: true,
            runtime_normalizers: None,
        },
    )
    .expect("write stored copy");
    drop(configs);

    let mut g = c.benchmark_group("npz");
    g.sample_size(10);
    g.bench_function("open", |b| {
        b.iter(|| black_box(NpzGraphFile::open(&path).expect("open")))
    });
    g.bench_function("slice_first_100", |b| {
        b.iter(|| black_box(file.configs(0..k).expect("slice")))
    });
    g.bench_function("slice_last_100", |b| {
        b.iter(|| black_box(file.configs(n - k..n).expect("slice")))
    });
    g.bench_function("all_configs", |b| {
        b.iter(|| black_box(file.all_configs().expect("all")))
    });
    g.bench_function("open_plus_slice_last_100", |b| {
        b.iter(|| {
            let f = NpzGraphFile::open(&path).expect("open");
            black_box(f.configs(n - k..n).expect("slice"))
        })
    });
    g.bench_function("npyz_whole_file", |b| {
        b.iter(|| black_box(npyz_whole(&path)))
    });
    let sf = NpzGraphFile::open(&stored).expect("open stored");
    g.bench_function("stored/slice_last_100", |b| {
        b.iter(|| black_box(sf.configs(n - k..n).expect("slice")))
    });
    g.bench_function("stored/all_configs", |b| {
        b.iter(|| black_box(sf.all_configs().expect("all")))
    });
    g.finish();
}

#[path = "../../tests/support/criterion_home.rs"]
#[macro_use]
mod criterion_home;

bench_main!(bench);
