//! The layout and tile passes over every text module of the generated jax
//! corpus `testdata/jax_gen` (see `hlo/tests/jax_gen.rs`): each runs
//! without an error or a panic, with the verifier between passes, gives the
//! same bytes twice, and (with `HLO_OPT_PYTHON`, a Python with the pinned
//! jaxlib) its output is read by XLA's own parser.

mod common;
#[path = "../../tests/support/report.rs"]
mod report;

use std::io::Read as _;
use std::path::PathBuf;

use costmodel::reference::ReferenceModel;
use costmodel::Task;
use passes::layout::LayoutPass;
use passes::tile::TilePass;
use passes::{Pass, PassContext};

/// The corpus's text modules, decompressed: (name, text).
fn text_modules() -> Vec<(String, String)> {
    let dir = common::root().join("testdata/jax_gen");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("testdata/jax_gen")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            let n = p.to_string_lossy();
            n.ends_with(".hlo") || n.ends_with(".hlo.gz")
        })
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let raw = std::fs::read(&p).expect("read");
            let name = p
                .file_name()
                .expect("name")
                .to_string_lossy()
                .trim_end_matches(".gz")
                .to_string();
            let mut text = String::new();
            if p.extension().is_some_and(|x| x == "gz") {
                flate2::read::GzDecoder::new(&raw[..])
                    .read_to_string(&mut text)
                    .expect("gzip text");
            } else {
                text = String::from_utf8(raw).expect("utf-8");
            }
            (name, text)
        })
        .collect()
}

/// Layout, then tile, on `text`: the printed module, or what went wrong.
fn run_passes(text: &str, name: &str) -> Result<String, String> {
    let mut m = hlo::parse_module_named(text, name).map_err(|e| format!("parse: {e}"))?;
    let mut cx = PassContext::new(common::options(16, 7));
    LayoutPass::with_model(common::reference())
        .run(&mut m, &mut cx)
        .map_err(|e| format!("layout: {e}"))?;
    passes::verify_module(&m).map_err(|e| format!("verify after layout: {e}"))?;
    TilePass::with_model(Box::new(ReferenceModel::new(Task::Tile)))
        .run(&mut m, &mut cx)
        .map_err(|e| format!("tile: {e}"))?;
    passes::verify_module(&m).map_err(|e| format!("verify after tile: {e}"))?;
    Ok(hlo::print_module(&m))
}

const XLA_PARSES: &str = r#"
import os, sys
from jax._src.lib import hlo
bad = 0
for path in sys.argv[1:]:
    try:
        hlo.hlo_module_from_text(open(path, encoding="utf-8").read())
    except Exception as e:
        bad += 1
        print("XLA rejects", os.path.basename(path), str(e).splitlines()[0][:200])
print("xla: %d of %d outputs parse" % (len(sys.argv) - 1 - bad, len(sys.argv) - 1))
sys.exit(1 if bad else 0)
"#;

#[test]
fn layout_and_tile_run_on_every_generated_module() {
    let modules = text_modules();
    assert!(modules.len() >= 100, "only {} text modules", modules.len());
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("jax-gen-passes");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).expect("create folder");
    let mut failures = Vec::new();
    let mut files = Vec::new();
    for (name, text) in &modules {
        let first = std::panic::catch_unwind(|| run_passes(text, name));
        let first = match first {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
            Err(_) => {
                failures.push(format!("{name}: panicked"));
                continue;
            }
        };
        match run_passes(text, name) {
            Ok(second) if second == first => {}
            Ok(_) => failures.push(format!("{name}: two runs give different output")),
            Err(e) => failures.push(format!("{name}: second run: {e}")),
        }
        let path = out.join(name);
        std::fs::write(&path, &first).expect("write output");
        files.push(path);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!("layout and tile: {} modules, deterministic", modules.len());
    let Ok(python) = std::env::var("HLO_OPT_PYTHON") else {
        report::skipped("HLO_OPT_PYTHON is not set (XLA's parser checks the outputs)");
        return;
    };
    report::ran();
    let res = std::process::Command::new(python)
        .arg("-c")
        .arg(XLA_PARSES)
        .args(&files)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&res.stdout);
    println!("{stdout}");
    assert!(
        res.status.success(),
        "XLA rejects outputs of the passes:\n{stdout}"
    );
}
