//! Conformance of the `HloModuleProto` writer and reader with XLA (jaxlib),
//! both directions, over `testdata/hlo` and (when `../shared` exists) the
//! shared corpus:
//!
//! - writer: XLA loads the proto hlo-opt writes for each module as the same
//!   module as the original text (`hlo/conformance/check_proto.py`);
//! - reader: hlo-opt reads XLA's own proto of each module
//!   (`as_serialized_hlo_module_proto`) into a module that XLA reads, from
//!   our printed text, as the module XLA reads from its own proto
//!   (`check_proto.py --read-dir`).
//!
//! Needs `HLO_OPT_PYTHON` (a Python with the pinned jaxlib; `scripts/test`
//! sets it); skipped with a message otherwise.

mod common;
#[path = "../../tests/support/report.rs"]
mod report;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

fn run(python: &str, script: &str, args: &[std::ffi::OsString]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("conformance")
        .join(script);
    let res = Command::new(python)
        .arg(&script)
        .args(args)
        .output()
        .expect("run the conformance script");
    let stdout = String::from_utf8_lossy(&res.stdout).into_owned();
    println!("{stdout}");
    assert!(
        res.status.success(),
        "{} failed:\n{stdout}\n{}",
        script.display(),
        String::from_utf8_lossy(&res.stderr)
    );
    stdout
}

/// Known differences (testdata and shared corpus) (`writer|reader<TAB>name<TAB>reason`):
/// the remaining work, listed so that any new failure fails the test.
fn known_file() -> std::ffi::OsString {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("conformance/proto_known_differences.tsv")
        .into()
}

/// Removes a folder when dropped, unless `HLO_OPT_KEEP_CONFORMANCE` is set.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if std::env::var_os("HLO_OPT_KEEP_CONFORMANCE").is_some() {
            println!("kept {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn check(label: &str, files: &[PathBuf]) {
    let Ok(python) = std::env::var("HLO_OPT_PYTHON") else {
        report::skipped("HLO_OPT_PYTHON is not set (XLA conformance needs jaxlib)");
        return;
    };
    report::ran();
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("proto-conformance-{label}"));
    let _ = std::fs::remove_dir_all(&out);
    // Removed when the check ends, passed or failed (the shared corpus's
    // protos and texts come to gigabytes); HLO_OPT_KEEP_CONFORMANCE=1 keeps
    // them for inspection.
    let _cleanup = RemoveOnDrop(out.clone());
    let (ours, xla, read) = (out.join("ours"), out.join("xla"), out.join("read"));
    for d in [&ours, &xla, &read] {
        std::fs::create_dir_all(d).expect("create output folder");
    }
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).expect("readable module");
        let name = f
            .file_name()
            .expect("file name")
            .to_string_lossy()
            .into_owned();
        match hlo::parse_module_named(&text, &f.display().to_string()) {
            Ok(m) => match hlo::proto::to_bytes(&m) {
                Ok(b) => std::fs::write(ours.join(format!("{name}.pb")), b).expect("write proto"),
                Err(e) => std::fs::write(ours.join(format!("{name}.err")), e.to_string())
                    .expect("write error"),
            },
            Err(e) => println!("not parsed by hlo-opt: {e}"),
        }
        args.push(f.clone().into());
    }
    let mut w: Vec<std::ffi::OsString> = vec![
        "--ours-dir".into(),
        ours.clone().into(),
        "--dump-xla-dir".into(),
        xla.clone().into(),
    ];
    w.push("--known-file".into());
    w.push(known_file());
    w.extend(args.iter().cloned());
    run(&python, "check_proto.py", &w);

    // Reader: our reading of XLA's protos, printed, must be the same module.
    for f in files {
        let name = f
            .file_name()
            .expect("file name")
            .to_string_lossy()
            .into_owned();
        let Ok(bytes) = std::fs::read(xla.join(format!("{name}.pb"))) else {
            continue; // XLA rejected or skipped the original
        };
        match hlo::proto::from_bytes(&bytes) {
            Ok(m) => std::fs::write(read.join(&name), hlo::print_module(&m)).expect("write text"),
            Err(e) => println!("FAIL reading XLA's proto of {name}: {e}"),
        }
    }
    let mut r: Vec<std::ffi::OsString> = vec!["--read-dir".into(), read.into()];
    r.push("--known-file".into());
    r.push(known_file());
    r.extend(args);
    run(&python, "check_proto.py", &r);
}

#[test]
fn testdata_protos_conform_to_xla() {
    let files = hlo_files(&testdata().join("hlo"));
    assert!(!files.is_empty());
    check("testdata", &files);
}

/// Not yet in CI. Last run (23 Nov, `-- --ignored`): the writer is at its
/// known-difference list (1,981 of 2,077 match, 96 listed); the reader is
/// not (22 modules read with errors beyond the list: named shardings,
/// `original_value`, async wrapped computations, `padding_type`, and modules
/// whose text the verifier rejects), and its in-process reading phase grew
/// past 6.7 GB RSS (XLA's proto of spmd_partitioner_test__524 alone is 42 MB,
/// read through 31 MB of text) with 8.6 GB under target/tmp before it was
/// stopped. The XLA worker now restarts every `--chunk` jobs (4.0 GB peak
/// over the writer half, was 7.5 GB); the folder is removed when the check
/// ends. The remaining work is issue 12's; run it with `-- --ignored`.
#[test]
#[ignore = "the shared-corpus proto conformance is not yet at its known-difference list (issue 12)"]
fn shared_corpus_protos_conform_to_xla() {
    let Some(shared) = shared() else {
        report::skipped("../shared is absent");
        return;
    };
    let mut files = Vec::new();
    for dir in [
        "corpus/xla/valid",
        "corpus/jax",
        "data/tpugraphs/hlo",
        "data/tpugraphs/tile_kernels",
    ] {
        files.extend(hlo_files(&shared.join(dir)));
    }
    check("shared", &files);
}
