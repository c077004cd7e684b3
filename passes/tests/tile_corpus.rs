//! The tile pass over the whole jax corpus after fusion
//! (`shared/corpus/jax/*.post.hlo`; skipped when `../shared` is absent): every
//! kernel ends with a recorded decision or a warning naming it, nothing
//! panics, and the output parses back. Run with `--nocapture` for counts.

#[path = "../../tests/support/report.rs"]
mod report;
use std::path::{Path, PathBuf};

use costmodel::reference::ReferenceModel;
use costmodel::Task;
use passes::tile::{backend, kernel, TilePass};
use passes::{Pass, PassContext, PassOptions};

#[test]
fn every_kernel_of_the_corpus_is_tiled_or_named_in_a_warning() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus/jax");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        report::skipped(&format!("{} is absent", dir.display()));
        return;
    };
    report::ran();
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".post.hlo"))
        .collect();
    files.sort();
    for p in files {
        let text = std::fs::read_to_string(&p).expect("readable");
        let Ok(mut m) = hlo::parse_module(&text) else {
            println!("{}: does not parse (not a tile pass matter)", p.display());
            continue;
        };
        let kernels = kernel::find_kernels(&m);
        let mut cx = PassContext::new(PassOptions::default());
        let mut pass = TilePass::with_model(Box::new(ReferenceModel::new(Task::Tile)));
        pass.run(&mut m, &mut cx).expect("the pass runs");
        let again = hlo::parse_module(&hlo::print_module(&m)).expect("the output parses");
        let mut tiled = 0;
        for &k in &kernels {
            let name = &m.inst(k).name;
            let decided =
                backend::read_decision(again.inst(k).raw_attr("backend_config")).is_some();
            let warned = pass
                .warnings()
                .iter()
                .any(|w| w.contains(&format!("%{name}:")));
            assert!(
                decided != warned,
                "{}: %{name} decided={decided} warned={warned}",
                p.display()
            );
            tiled += usize::from(decided);
        }
        println!(
            "{}: {} kernels, {} tiled, {} skipped{}",
            p.file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            kernels.len(),
            tiled,
            pass.warnings().len(),
            pass.warnings()
                .first()
                .map(|w| format!(" (first: {w})"))
                .unwrap_or_default()
        );
    }
}
