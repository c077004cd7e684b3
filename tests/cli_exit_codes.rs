//! The exit status both tools promise (README.md, "Exit status"): 0 success,
//! 1 a bad input or a failed run, 2 a bad command line.
//!
//! Specification, one table per status:
//! - every bad command line (an unknown flag, pass, subcommand or backend, a
//!   value out of range, a flag combination that cannot work) exits 2 before
//!   any input is read, with clap's `error:` message naming the flag, and
//!   prints no module;
//! - a missing or unreadable input exits 1 with a message that starts with
//!   the file's name and `error:`.
//!
//! No check here needs ONNX Runtime or a PJRT plugin: each is refused
//! before a model or a plugin is loaded.

use std::process::{Command, Output};

fn run(bin: &str, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the tool runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const BERT: &str = "testdata/layout/transformer_bert.hlo";
const NPZ: &str = "testdata/costmodel/npz/layout_xla_mask_rcnn_unsorted_ids.npz";

/// (arguments, a word the message must name)
const BAD_HLO_OPT_COMMAND_LINES: &[(&[&str], &str)] = &[
    (&["--pass=lyout", BERT], "lyout"),
    (&["--pass=layout,,tile", BERT], "--pass"),
    (&["--pass=", BERT], "--pass"),
    (&["--pass=layout", "--budget", "0", BERT], "--budget"),
    (&["--pass=layout", "--budget", "many", BERT], "--budget"),
    (&["--pass=layout", "--top-k", "0", BERT], "--top-k"),
    (&["--pass=layout", "--min-gain=-1", BERT], "--min-gain"),
    (&["--pass=layout", "--min-gain", "NaN", BERT], "--min-gain"),
    (&["--pass=layout", "--measure=bogus", BERT], "--measure"),
    (&["--pass=layout", "--measure=pjrt:", BERT], "--measure"),
    (
        &[
            "--pass=layout",
            "--measure=xla-cpu",
            "--measure-budget=-1",
            BERT,
        ],
        "--measure-budget",
    ),
    (
        &["--pass=layout", "--trust-radius", "three", BERT],
        "--trust-radius",
    ),
    (&["--pass=layout", "--explain=some", BERT], "--explain"),
    (
        &["--pass=layout,tile", "--model", "m.hlocm", BERT],
        "--model",
    ),
    (
        &["--pass=layout", "--explain-json", "-", BERT],
        "--explain-json",
    ),
    (&["--emit=json", BERT], "--emit"),
    (&["--no-such-flag", BERT], "--no-such-flag"),
    (&[], "<INPUT>"),
];

const BAD_HLO_COST_COMMAND_LINES: &[(&[&str], &str)] = &[
    (&["evaluate", NPZ], "evaluate"),
    (&["eval"], "<FILES>"),
    (&["eval", "--batch", "0", NPZ], "--batch"),
    (&["eval", "--task", "shape", NPZ], "--task"),
    (&["featurize", "--task", "layout", BERT], "--output"),
    (
        &["collect", BERT, "-o", "out", "--device", "tpu"],
        "--device",
    ),
    (
        &["collect", BERT, "-o", "out", "--budget", "10x"],
        "--budget",
    ),
    (
        &["collect", BERT, "-o", "out", "--random-fraction", "2"],
        "--random-fraction",
    ),
    (
        &["collect", BERT, "-o", "out", "--measure-budget=-1"],
        "--measure-budget",
    ),
    (
        &["collect", BERT, "-o", "out", "--configs", "0"],
        "--configs",
    ),
    (
        &["collect", BERT, "-o", "out", "--estimator", "mean"],
        "--estimator",
    ),
];

fn assert_bad_command_line(bin: &str, tool: &str, args: &[&str], names: &str) {
    let o = run(bin, args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{tool} {args:?}: {err}");
    assert!(err.starts_with("error: "), "{tool} {args:?}: {err}");
    assert!(
        err.contains(names),
        "{tool} {args:?} should name {names}: {err}"
    );
    assert!(o.stdout.is_empty(), "{tool} {args:?} printed output");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn every_bad_command_line_of_hlo_opt_exits_2() {
    for (args, names) in BAD_HLO_OPT_COMMAND_LINES {
        assert_bad_command_line(env!("CARGO_BIN_EXE_hlo-opt"), "hlo-opt", args, names);
    }
}

#[test]
fn every_bad_command_line_of_hlo_cost_exits_2() {
    for (args, names) in BAD_HLO_COST_COMMAND_LINES {
        assert_bad_command_line(env!("CARGO_BIN_EXE_hlo-cost"), "hlo-cost", args, names);
    }
}

#[test]
fn a_missing_input_exits_1_with_an_error_naming_the_file() {
    let o = run(env!("CARGO_BIN_EXE_hlo-opt"), &["no/such/file.hlo"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("no/such/file.hlo: error: "),
        "{}",
        stderr(&o)
    );
    // A pass list that names real passes does not make a missing file a
    // command-line error.
    let o = run(
        env!("CARGO_BIN_EXE_hlo-opt"),
        &["--pass=layout", "no/such/file.hlo"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("no/such/file.hlo: error: "),
        "{}",
        stderr(&o)
    );
    let o = run(env!("CARGO_BIN_EXE_hlo-cost"), &["eval", "no/such.npz"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("error: "), "{}", stderr(&o));
}

#[test]
fn a_pass_flag_without_pass_is_a_warning_in_plain_words() {
    let o = run(env!("CARGO_BIN_EXE_hlo-opt"), &["--budget", "5", BERT]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("warning: --budget only applies to passes"),
        "{}",
        stderr(&o)
    );
    let o = run(
        env!("CARGO_BIN_EXE_hlo-opt"),
        &["--budget", "5", "--seed", "1", BERT],
    );
    assert!(
        stderr(&o).contains("warning: --budget, --seed only apply to passes"),
        "{}",
        stderr(&o)
    );
}
