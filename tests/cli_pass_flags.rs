//! `hlo-opt`'s pass flags, end to end: what it refuses, what it warns
//! about, and that its output does not depend on the thread count.
//!
//! Specification:
//! - `--top-k 0`, `--budget 0`, `--min-gain -1` and a `--pass` list with an
//!   empty entry (`layout,,tile`, a trailing comma) are command-line errors
//!   (status 2, a message naming the flag), never silently adjusted; so is
//!   a `--trust-radius` that is neither a count nor `all`;
//! - a pass listed twice, pass flags given without `--pass`, and `--threads`
//!   beyond the available parallelism are warnings on stderr; the run goes on
//!   (`--threads` capped);
//! - `hlo-cost featurize --task tile` refuses a whole module (several
//!   kernels) and warns when it writes no configuration;
//! - with ONNX Runtime (`ORT_DYLIB_PATH`): the same input, model and seed give
//!   byte-identical output at 1, 2 and 0 (= all cores) threads, run after run,
//!   for both passes.

use std::path::PathBuf;

#[path = "support/report.rs"]
mod report;
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(bin: &str, args: &[&str]) -> Output {
    let out = Command::new(bin)
        .args(args)
        .current_dir(repo())
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{bin} panicked: {stderr}");
    out
}

fn hlo_opt(args: &[&str]) -> Output {
    run(env!("CARGO_BIN_EXE_hlo-opt"), args)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const BERT: &str = "testdata/layout/transformer_bert.hlo";
const RESNET: &str = "testdata/tile/modules/resnet50_conv3x3.post.hlo";
/// Exposed the thread-dependent tile scores (testdata/determinism/README.md).
const RESNET_CUT: &str = "testdata/determinism/resnet50_cut80.post.hlo";

/// Refused as a bad command line (status 2) with a message containing `says`.
fn assert_refused(args: &[&str], says: &str) {
    let o = hlo_opt(args);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    assert!(o.stdout.is_empty(), "{args:?}: no module printed on error");
}

#[test]
fn top_k_zero_is_refused() {
    assert_refused(&["--pass=layout", "--top-k", "0", BERT], "--top-k");
}

#[test]
fn budget_zero_is_refused() {
    assert_refused(&["--pass=layout", "--budget", "0", BERT], "--budget");
}

#[test]
fn a_negative_min_gain_is_refused() {
    assert_refused(&["--pass=layout", "--min-gain=-1", BERT], "--min-gain");
}

#[test]
fn a_trust_radius_that_is_not_a_count_or_all_is_refused() {
    for bad in ["-1", "three", "1.5", ""] {
        let o = hlo_opt(&["--pass=layout", &format!("--trust-radius={bad}"), BERT]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("--trust-radius") && stderr(&o).contains("`all`"),
            "{bad}: {}",
            stderr(&o)
        );
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn empty_entries_of_the_pass_list_are_refused() {
    for list in ["--pass=layout,,tile", "--pass=layout,", "--pass=,"] {
        let o = hlo_opt(&[list, BERT]);
        assert_eq!(o.status.code(), Some(2), "{list}: {}", stderr(&o));
        assert!(stderr(&o).contains("--pass"), "{list}: {}", stderr(&o));
    }
    assert_refused(&["--pass=layout,,tile", BERT], "empty entry");
}

#[test]
fn a_pass_listed_twice_is_a_warning() {
    // Without ONNX Runtime the run itself may fail; the warning comes first.
    let o = hlo_opt(&["--pass=tile,tile", "--budget", "50", RESNET]);
    assert!(
        stderr(&o).contains("warning: --pass lists `tile` more than once"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn pass_flags_without_pass_are_a_warning() {
    let o = hlo_opt(&["--budget", "5", "--explain", BERT]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains(
            "warning: --explain, --budget only apply to passes; without --pass no pass runs"
        ),
        "{e}"
    );
    assert!(!o.stdout.is_empty(), "the module is still printed");
    let quiet = hlo_opt(&[BERT]);
    assert!(stderr(&quiet).is_empty(), "{}", stderr(&quiet));
}

#[test]
fn threads_beyond_the_cores_are_capped_with_a_warning() {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let o = hlo_opt(&["--pass=tile", "--threads", "100000", RESNET]);
    assert!(
        stderr(&o).contains(&format!(
            "warning: --threads 100000 capped at {cores}, the available parallelism"
        )),
        "{}",
        stderr(&o)
    );
    if std::env::var_os("ORT_DYLIB_PATH").is_some() {
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let within = hlo_opt(&["--pass=tile", "--threads", &cores.to_string(), RESNET]);
    assert!(!stderr(&within).contains("capped"), "{}", stderr(&within));
}

#[test]
fn featurize_tile_refuses_a_whole_module_and_warns_without_configurations() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_pass_flags");
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let out = dir.join("tile.npz");
    let out_s = out.display().to_string();
    let _ = std::fs::remove_file(&out);
    let o = run(
        env!("CARGO_BIN_EXE_hlo-cost"),
        &[
            "featurize",
            "--task",
            "tile",
            "testdata/tile/modules/mlp.post.hlo",
            "-o",
            &out_s,
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("featurizes one kernel"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists(), "nothing written");
    let o = run(
        env!("CARGO_BIN_EXE_hlo-cost"),
        &[
            "featurize",
            "--task",
            "tile",
            "testdata/tile/kernels/kernel_00.hlo",
            "-o",
            &out_s,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning") && stderr(&o).contains("no configurations"),
        "{}",
        stderr(&o)
    );
    let runs = "testdata/tile/kernels/kernel_00.runs.json";
    let o = run(
        env!("CARGO_BIN_EXE_hlo-cost"),
        &[
            "featurize",
            "--task",
            "tile",
            "testdata/tile/kernels/kernel_00.hlo",
            "--runs",
            runs,
            "-o",
            &out_s,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
}

/// Same input, model and seed: byte-identical output at 1, 2 and 0 threads,
/// three runs each. Before the tile model ran its scatter-adds on one
/// thread, the resnet50 module's tiles changed between runs at 0 and 2
/// threads.
#[test]
fn both_passes_give_the_same_bytes_at_every_thread_count() {
    if std::env::var_os("ORT_DYLIB_PATH").is_none() {
        report::skipped("ORT_DYLIB_PATH is not set (the passes need ONNX Runtime)");
        return;
    }
    report::ran();
    for (pass, file) in [("--pass=layout", BERT), ("--pass=tile", RESNET_CUT)] {
        let mut first: Option<Vec<u8>> = None;
        for threads in ["1", "2", "0", "1", "2", "0", "2", "0"] {
            let o = hlo_opt(&[pass, "--threads", threads, "--min-gain", "0", file]);
            assert!(o.status.success(), "{pass} {threads}: {}", stderr(&o));
            match &first {
                None => first = Some(o.stdout),
                Some(f) => assert!(
                    *f == o.stdout,
                    "{pass} {file}: the output at --threads {threads} differs from the output at --threads 1"
                ),
            }
        }
    }
}
