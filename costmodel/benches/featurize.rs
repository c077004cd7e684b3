//! Featurization speed (issue 3): the 3,163-node unet_3d module (target
//! < 5 ms) and the largest HLO modules of the shared corpus (when
//! `../shared` is present). Parsing is outside the timed region.
//!
//! Run: `cargo bench -p costmodel --bench featurize`.

use std::path::{Path, PathBuf};

use costmodel::features::featurize;
use costmodel::Task;
use criterion::Criterion;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn load(path: &Path) -> Option<hlo::Module> {
    let text = std::fs::read_to_string(path).ok()?;
    match hlo::parse_module(&text) {
        Ok(m) => Some(m),
        Err(e) => {
            eprintln!("skipped {}: {e}", path.display());
            None
        }
    }
}

fn bench(c: &mut Criterion) {
    let mut inputs = vec![
        (
            "unet_3d",
            root().join("testdata/tpugraphs/layout_xla_default_valid_unet_3d.4x4.bf16.hlo"),
        ),
        (
            "brax_es",
            root().join("testdata/tpugraphs/layout_xla_brax_es.hlo"),
        ),
    ];
    let shared = root().join("../shared/corpus/xla/valid");
    for name in ["large_loop_slow_compile_time__0", "hlo_gemma4_2b_bf16__0"] {
        let p = shared.join(format!("{name}.hlo"));
        if p.exists() {
            inputs.push((name, p));
        } else {
            eprintln!("skipped {name}: {} is absent", p.display());
        }
    }
    for (name, path) in inputs {
        let Some(m) = load(&path) else { continue };
        let nodes = m.instruction_count();
        let id = format!("featurize/{name} ({nodes} nodes)");
        c.bench_function(&id, |b| {
            b.iter(|| featurize(std::hint::black_box(&m), Task::Layout).expect("featurize"))
        });
    }
}

#[path = "../../tests/support/criterion_home.rs"]
#[macro_use]
mod criterion_home;

bench_main!(bench);
