//! Snapshots of `--pass=tile --top-k 3 --explain` on small real modules
//! (`testdata/tile/kernels/*.hlo`: TPU kernels from TpuGraphs;
//! `testdata/tile/modules/*.hlo`: modules after XLA's CPU fusion), ranked
//! with the deterministic reference model so the snapshots do not depend on
//! ONNX Runtime. Each snapshot is the printed module (decisions in the
//! kernels' `backend_config`) followed by the explain report.
//!
//! The same outputs are checked with XLA's own parser when `HLO_OPT_PYTHON`
//! names a Python with jaxlib (the entry point `hlo/conformance/check_xla.py`
//! uses; that script compares round trips, this one only needs acceptance).

#[path = "../../tests/support/report.rs"]
mod report;
use std::path::{Path, PathBuf};

use costmodel::reference::ReferenceModel;
use costmodel::Task;
use passes::tile::{backend, kernel, TilePass};
use passes::{Pass, PassContext, PassOptions};

fn run_tile(text: &str, name: &str) -> (hlo::Module, String) {
    let mut m = hlo::parse_module_named(text, name).expect("test input parses");
    let mut cx = PassContext::new(PassOptions {
        top_k: 3,
        verify_each: true,
        ..PassOptions::default()
    });
    let mut pass = TilePass::with_model(Box::new(ReferenceModel::new(Task::Tile)));
    pass.run(&mut m, &mut cx).expect("the tile pass runs");
    (m, cx.explain)
}

#[test]
fn tile_pass_snapshots() {
    insta::glob!("../../testdata/tile", "*/*.hlo", |path| {
        let text = std::fs::read_to_string(path).expect("readable");
        let (m, explain) = run_tile(&text, &path.display().to_string());
        // (kernel_12, a real TPU kernel, reshapes f32 into bf16, which our verifier rejects)
        if hlo::parse_module(&text).is_ok_and(|input| hlo::verify(&input).is_ok()) {
            hlo::verify(&m).expect("the output verifies");
        }
        // every kernel that was tiled carries a decision, and the text round-trips
        let printed = hlo::print_module(&m);
        let again = hlo::parse_module(&printed).expect("the output parses");
        for k in kernel::find_kernels(&again) {
            let raw = again.inst(k).raw_attr("backend_config");
            assert!(
                backend::read_decision(raw).is_some(),
                "%{} has no decision",
                again.inst(k).name
            );
        }
        insta::assert_snapshot!(format!("{printed}\n---- explain\n{explain}"));
    });
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// What XLA's parser is asked: read each file (the entry point
/// `hlo/conformance/check_xla.py` uses) and keep the recorded decision.
const XLA_CHECK: &str = r#"
import sys
from jax._src.lib import hlo
bad = 0
for path in sys.argv[1:]:
    try:
        text = hlo.hlo_module_from_text(open(path).read()).to_string()
    except Exception as e:
        bad += 1
        print("XLA rejects", path, str(e).splitlines()[0][:200])
        continue
    if "hlo_opt_tile" not in text:
        bad += 1
        print("XLA dropped the tile decision of", path)
print("xla: %d of %d outputs parse with their decisions" % (len(sys.argv) - 1 - bad, len(sys.argv) - 1))
sys.exit(1 if bad else 0)
"#;

/// XLA's parser accepts every output of the pass (needs `HLO_OPT_PYTHON`).
#[test]
fn outputs_parse_with_xla() {
    let Ok(python) = std::env::var("HLO_OPT_PYTHON") else {
        report::skipped("HLO_OPT_PYTHON is not set");
        return;
    };
    report::ran();
    let dir = std::env::temp_dir().join(format!("hlo-opt-tile-xla-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut files = Vec::new();
    for sub in ["kernels", "modules"] {
        let mut inputs: Vec<PathBuf> =
            std::fs::read_dir(repo_root().join("testdata/tile").join(sub))
                .expect("testdata/tile")
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "hlo"))
                .collect();
        inputs.sort();
        for p in inputs {
            let text = std::fs::read_to_string(&p).expect("readable");
            let (m, _) = run_tile(&text, &p.display().to_string());
            let out = dir.join(p.file_name().expect("file name"));
            std::fs::write(&out, hlo::print_module(&m)).expect("write");
            files.push(out);
        }
    }
    let output = std::process::Command::new(python)
        .arg("-c")
        .arg(XLA_CHECK)
        .args(&files)
        .output()
        .expect("python runs");
    let _ = std::fs::remove_dir_all(&dir);
    println!("{}", String::from_utf8_lossy(&output.stdout));
    assert!(
        output.status.success(),
        "XLA's parser rejected an output of the tile pass: {}",
        String::from_utf8_lossy(&output.stdout)
    );
}
