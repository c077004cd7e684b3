//! What a new user's first mistakes get: messages that name the cause.
//!
//! Specification:
//! - binary input is read as a serialized `HloModuleProto`: a truncated
//!   proto, or bytes that are neither HLO text nor a proto, are reported as
//!   such, with the byte offset and the field where decoding stopped, on one
//!   line; no raw bytes (control characters, invalid UTF-8, the U+FFFD of a
//!   lossy echo) reach the terminal;
//! - an output (`-o`, `--explain-json`) that cannot be written (its folder
//!   missing, or not a folder) is refused before the work, naming the path
//!   and why; `-o /dev/null` still works;
//! - a numeric flag out of its range is a bad command line (status 2) whose
//!   message gives the range, in both tools;
//! - an unknown `--layout-model` name lists the built-in models.

#[path = "support/report.rs"]
mod report;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BERT: &str = "testdata/layout/transformer_bert.hlo";

fn tmp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli_input_errors");
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir.join(name)
}

fn run(exe: &str, args: &[&str]) -> Output {
    Command::new(exe)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the tool runs")
}

fn hlo_opt(args: &[&str]) -> Output {
    run(env!("CARGO_BIN_EXE_hlo-opt"), args)
}

fn hlo_cost(args: &[&str]) -> Output {
    run(env!("CARGO_BIN_EXE_hlo-cost"), args)
}

/// Stderr as text, after checking that it is printable: UTF-8, no control
/// character but line feed and tab, no U+FFFD standing for a raw byte.
fn printable_stderr(o: &Output) -> String {
    let text = std::str::from_utf8(&o.stderr)
        .unwrap_or_else(|e| panic!("stderr is not UTF-8 ({e}): {:?}", o.stderr));
    let bad: Vec<char> = text
        .chars()
        .filter(|&c| (c.is_control() && c != '\n' && c != '\t') || c == '\u{FFFD}')
        .collect();
    assert!(bad.is_empty(), "raw bytes on stderr {bad:?}:\n{text}");
    text.to_string()
}

/// The proto of BERT, written by hlo-opt itself.
fn bert_proto() -> Vec<u8> {
    let path = tmp("bert.pb");
    let o = hlo_opt(&[BERT, "--emit=proto", "-o", path.to_str().expect("path")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read(&path).expect("the proto")
}

#[test]
fn a_truncated_proto_is_reported_as_one_with_offset_and_field() {
    let proto = bert_proto();
    // The case: the first 20 KB of a larger proto.
    let cut = &proto[..proto.len().min(20_000)];
    assert!(cut.len() < proto.len(), "BERT's proto is over 20 KB");
    let path = tmp("bert_20k.pb");
    std::fs::write(&path, cut).expect("write");
    let o = hlo_opt(&[path.to_str().expect("path"), "--pass=layout"]);
    assert_eq!(o.status.code(), Some(1));
    let err = printable_stderr(&o);
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one line, no source line: {err}"
    );
    assert!(
        err.starts_with(&format!("{}: error: ", path.display())),
        "{err}"
    );
    for cause in [
        "not a whole HloModuleProto (truncated or corrupt)",
        "at byte ",
        "HloModuleProto.computations",
    ] {
        assert!(err.contains(cause), "`{cause}` missing: {err}");
    }
    assert!(!err.contains("UTF-8"), "not a text error: {err}");
}

#[test]
fn binary_garbage_is_neither_text_nor_a_proto_and_is_not_echoed() {
    // Bytes of a small linear congruential generator: the same every run.
    let mut x: u32 = 12345;
    let garbage: Vec<u8> = (0..4096)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) as u8
        })
        .collect();
    let path = tmp("garbage.bin");
    std::fs::write(&path, &garbage).expect("write");
    for args in [vec![path.to_str().expect("path")], vec!["-"]] {
        let o = if args == ["-"] {
            Command::new(env!("CARGO_BIN_EXE_hlo-opt"))
                .arg("-")
                .stdin(std::fs::File::open(&path).expect("open"))
                .output()
                .expect("run")
        } else {
            hlo_opt(&args)
        };
        assert_eq!(o.status.code(), Some(1));
        let err = printable_stderr(&o);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        for cause in ["not HLO text", "HloModuleProto", "at byte "] {
            assert!(err.contains(cause), "`{cause}` missing: {err}");
        }
    }
    // hlo-cost reads modules the same way.
    let o = hlo_cost(&[
        "cpu-features",
        path.to_str().expect("path"),
        "-o",
        tmp("garbage.jsonl").to_str().expect("path"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = printable_stderr(&o);
    assert!(err.contains("not HLO text"), "{err}");
}

#[test]
fn an_output_that_cannot_be_written_is_refused_before_the_work() {
    let file_as_folder = format!("{BERT}/out.hlo");
    for (flag, out, cause) in [
        (
            "-o",
            "/nonexistent_dir/out.hlo",
            "No such file or directory",
        ),
        ("-o", file_as_folder.as_str(), "is not a folder"),
        (
            "--explain-json",
            "/nonexistent_dir/r.json",
            "No such file or directory",
        ),
    ] {
        // The layout pass would run for seconds: a refusal before it prints
        // none of its report.
        let mut args = vec![BERT, "--pass=layout", "--explain", flag, out];
        if flag != "-o" {
            args.extend(["-o", "/dev/null"]);
        }
        let o = hlo_opt(&args);
        assert_eq!(o.status.code(), Some(1), "{flag} {out}");
        let err = printable_stderr(&o);
        assert!(
            err.contains(flag) && err.contains(out) && err.contains(cause),
            "{flag} {out}: {err}"
        );
        assert!(!err.contains("layout:"), "the pass ran first: {err}");
    }
    // A device that exists is written in place, as before.
    let o = hlo_opt(&[BERT, "-o", "/dev/null"]);
    assert_eq!(o.status.code(), Some(0), "{}", printable_stderr(&o));
}

#[test]
fn numeric_flags_out_of_range_are_bad_command_lines_with_their_range() {
    let npz = "testdata/costmodel/npz/layout_xla_mask_rcnn_unsorted_ids.npz";
    let opt = |flag: &str, value: &str| {
        // `--flag=value`: clap reads a bare `-1` as a flag.
        let v = vec![
            BERT.to_string(),
            "--pass=layout".into(),
            format!("{flag}={value}"),
        ];
        (true, v)
    };
    let cost = |args: &[&str]| (false, args.iter().map(|a| a.to_string()).collect());
    let cases: Vec<((bool, Vec<String>), &str)> = vec![
        (opt("--trust-radius", "99999999999"), "from 0 to 1000000"),
        (opt("--min-gain", "500"), "from 0 to less than 100"),
        (opt("--min-gain", "-1"), "from 0 to less than 100"),
        (opt("--budget", "0"), "1 to 100000000"),
        (opt("--budget", "999999999999"), "from 1 to 100000000"),
        (opt("--top-k", "0"), "1 to 1000"),
        (opt("--top-k", "5000"), "from 1 to 1000"),
        (opt("--measure-budget", "1e9"), "from 0 to 86400"),
        (opt("--threads", "-1"), "0 = one per available core"),
        (opt("--autotune-key-version", "-1"), "0.."),
        (cost(&["eval", "--batch", "0", npz]), "1..=65536"),
        (cost(&["eval", "--batch", "100000", npz]), "1..=65536"),
        (
            cost(&["gpu-tile-model", "--session", "x.tar.xz", "--k", "0"]),
            "from 1 to 1000",
        ),
        (
            cost(&["collect", BERT, "-o", "d", "--configs", "0"]),
            "1..=100000",
        ),
        (
            cost(&["collect", BERT, "-o", "d", "--chunk", "300"]),
            "1..=256",
        ),
        (
            cost(&["collect", BERT, "-o", "d", "--random-fraction", "2"]),
            "from 0 to 1",
        ),
        (
            cost(&["collect", BERT, "-o", "d", "--measure-budget", "5000"]),
            "from 0 to 3600",
        ),
    ];
    for ((is_opt, args), range) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = if is_opt {
            hlo_opt(&args)
        } else {
            hlo_cost(&args)
        };
        let err = printable_stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(range),
            "{args:?}: the range `{range}` is not named: {err}"
        );
    }
}

#[test]
fn an_unknown_model_name_lists_the_built_in_ones() {
    if std::env::var_os("ORT_DYLIB_PATH").is_none() {
        report::skipped("ORT_DYLIB_PATH is not set (the layout pass needs ONNX Runtime)");
        return;
    }
    report::ran();
    let o = hlo_opt(&[
        BERT,
        "--pass=layout",
        "--layout-model",
        "nosuch",
        "-o",
        "/dev/null",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = printable_stderr(&o);
    assert!(
        err.contains("nosuch") && err.contains("built-in ones are xla-cpu"),
        "{err}"
    );
}
