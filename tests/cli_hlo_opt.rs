//! The `hlo-opt` command line (and what it shares with `hlo-cost`), end to
//! end.
//!
//! Specification:
//! - `--help` of both tools says what each pass (or featurize task) expects,
//!   which flags apply to which pass, that the cost models need ONNX Runtime
//!   and where it is looked for, and the exit codes; the codes are the ones
//!   documented: 0 success, 1 bad input or a failed run, 2 bad command line;
//! - bad bytes are reported at `file:line:col` (invalid UTF-8, NUL, a byte
//!   order mark), verifier errors too, and a long source line is not echoed
//!   whole;
//! - an output is never an input: `-o` naming the input through another
//!   path, a hard link, a symbolic link, or stdin redirected from it, is
//!   refused and the input is unchanged; outputs leave no temporary files;
//! - ONNX Runtime installed the README's way (the checkout's `.venv`) is
//!   found by an installed binary from any folder; a truncated library is
//!   refused with a message instead of crashing the process in `dlopen`.

#[path = "support/report.rs"]
mod report;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tmp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli_hlo_opt");
    std::fs::create_dir_all(&dir).expect("tmp dir");
    dir.join(name)
}

fn run(exe: &str, args: &[&str]) -> Output {
    let out = Command::new(exe)
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{exe} panicked: {stderr}");
    out
}

fn hlo_opt(args: &[&str]) -> Output {
    run(env!("CARGO_BIN_EXE_hlo-opt"), args)
}

fn hlo_cost(args: &[&str]) -> Output {
    run(env!("CARGO_BIN_EXE_hlo-cost"), args)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const MODULE: &str = "testdata/ffi/mlp.pre.hlo";

#[test]
fn help_says_what_each_pass_expects_where_onnx_runtime_is_found_and_the_exit_codes() {
    let help = String::from_utf8_lossy(&hlo_opt(&["--help"]).stdout).into_owned();
    for needle in [
        "layout  Input: a module before XLA's layout assignment and fusion",
        "tile    Input: a module after fusion",
        "--layout-model (or --model)",
        "--tile-model (or --model)",
        "[layout, tile] Maximum number of configurations",
        "ONNX Runtime 1.31.1",
        "$ORT_DYLIB_PATH",
        ".venv of the checkout hlo-opt was built from",
        "Exit status:",
        "2  bad command line",
    ] {
        assert!(
            help.contains(needle),
            "hlo-opt --help lacks {needle:?}:\n{help}"
        );
    }
    let help = String::from_utf8_lossy(&hlo_cost(&["--help"]).stdout).into_owned();
    for needle in [
        "featurize --task layout  a whole module before XLA's layout assignment",
        "featurize --task tile    one fused kernel after fusion",
        "ONNX Runtime 1.31.1",
        "Exit status:",
        "2  bad command line",
    ] {
        assert!(
            help.contains(needle),
            "hlo-cost --help lacks {needle:?}:\n{help}"
        );
    }
}

#[test]
fn exit_codes_are_0_success_1_failed_input_2_bad_command_line() {
    assert_eq!(hlo_opt(&[MODULE]).status.code(), Some(0));
    assert_eq!(
        hlo_opt(&["testdata/invalid/own_unknown_opcode.hlo"])
            .status
            .code(),
        Some(1)
    );
    assert_eq!(hlo_opt(&["no/such/file.hlo"]).status.code(), Some(1));
    assert_eq!(hlo_opt(&["--no-such-flag", MODULE]).status.code(), Some(2));
    assert_eq!(hlo_opt(&[]).status.code(), Some(2));
    assert_eq!(
        hlo_cost(&["featurize", "--task", "layout"]).status.code(),
        Some(2)
    );
    assert_eq!(
        hlo_cost(&["eval", "--model", "reference", "no/such/file.npz"])
            .status
            .code(),
        Some(1)
    );
}

#[test]
fn bad_bytes_are_reported_at_their_position() {
    let cases: &[(&str, &[u8], &str)] = &[
        (
            "latin1.hlo",
            b"HloModule m\n\nENTRY e {\n  ROOT caf\xe9 = f32[] parameter(0)\n}\n",
            "latin1.hlo:4:11: error: invalid UTF-8: byte 0xE9",
        ),
        (
            "nul.hlo",
            b"HloModule m\n\nENTRY e {\n  ROOT p = f32[] parameter(0)\0\n}\n",
            "nul.hlo:4:30: error: NUL byte",
        ),
        (
            "bom.hlo",
            b"\xef\xbb\xbfHloModule m\n\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n",
            "bom.hlo:1:1: error: the text starts with a UTF-8 byte order mark",
        ),
    ];
    for (name, bytes, want) in cases {
        let path = tmp(name);
        std::fs::write(&path, bytes).expect("write");
        let out = hlo_opt(&[path.to_str().expect("utf-8 path")]);
        assert_eq!(out.status.code(), Some(1));
        let err = stderr(&out);
        let err = err.replace(&format!("{}", tmp("").display()), "");
        assert!(err.starts_with(want), "{name}: {err}");
    }
    // The same through stdin, and through hlo-cost.
    let out = Command::new(env!("CARGO_BIN_EXE_hlo-opt"))
        .arg("-")
        .stdin(std::fs::File::open(tmp("latin1.hlo")).expect("open"))
        .output()
        .expect("run");
    assert!(
        stderr(&out).starts_with("<stdin>:4:11: error: invalid UTF-8"),
        "{}",
        stderr(&out)
    );
    let out = hlo_cost(&[
        "featurize",
        "--task",
        "layout",
        tmp("nul.hlo").to_str().expect("path"),
        "-o",
        tmp("nul.npz").to_str().expect("path"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("nul.hlo:4:30: error: NUL byte"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_long_source_line_is_echoed_as_a_window() {
    // One 200 KB line, the error (too deep nesting) near its end.
    let mut line = String::from("HloModule m ENTRY e { ");
    for i in 0..6000 {
        line.push_str(&format!("c{i} = f32[2]{{0}} constant({{1, 2}}) "));
    }
    line.push_str(&format!(
        "ROOT r = {}f32[] parameter(0) }}\n",
        "(".repeat(200)
    ));
    let path = tmp("long_line.hlo");
    std::fs::write(&path, &line).expect("write");
    let out = hlo_opt(&[path.to_str().expect("path")]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.len() < 1000, "{} bytes of error output", err.len());
    assert!(err.contains("error: "), "{err}");
    assert!(
        err.lines().nth(1).is_some_and(|l| l.starts_with("...")),
        "{err}"
    );
}

#[test]
fn verifier_errors_carry_file_line_col() {
    let out = hlo_opt(&["testdata/verify/add_shape_mismatch.hlo"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    let first = err.lines().next().unwrap_or_default();
    let rest = first
        .strip_prefix("testdata/verify/add_shape_mismatch.hlo:")
        .unwrap_or_else(|| panic!("{err}"));
    let (line, rest) = rest.split_once(':').expect("line");
    let (col, rest) = rest.split_once(':').expect("col");
    assert!(
        line.parse::<usize>().is_ok() && col.parse::<usize>().is_ok(),
        "{err}"
    );
    assert!(
        rest.starts_with(" error: in computation main, instruction %sum: "),
        "{err}"
    );
    assert!(
        err.contains("sum = "),
        "the instruction's line is shown: {err}"
    );
}

/// A copy of the test module in a fresh folder (tests run in parallel).
fn scratch_input(dir_name: &str) -> (PathBuf, String) {
    let dir = tmp(dir_name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let input = dir.join("in.hlo");
    let text = std::fs::read_to_string(repo().join(MODULE)).expect("read");
    std::fs::write(&input, &text).expect("write");
    (input, text)
}

#[test]
fn an_output_that_is_the_input_is_refused() {
    let (input, text) = scratch_input("same_file");
    let dir = input.parent().expect("dir").to_path_buf();
    let hard = dir.join("hard_link.hlo");
    std::fs::hard_link(&input, &hard).expect("hard link");
    let soft = dir.join("symlink.hlo");
    std::os::unix::fs::symlink(&input, &soft).expect("symlink");
    let dotted = dir.join(".").join("in.hlo");
    for out in [&input, &hard, &soft, &dotted] {
        let o = hlo_opt(&[input.to_str().expect("p"), "-o", out.to_str().expect("p")]);
        assert_eq!(o.status.code(), Some(1), "-o {}", out.display());
        assert!(stderr(&o).contains("refusing to write"), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("same file, by device and inode"),
            "{}",
            stderr(&o)
        );
    }
    // stdin redirected from the input.
    let o = Command::new(env!("CARGO_BIN_EXE_hlo-opt"))
        .args(["-", "-o", hard.to_str().expect("p")])
        .stdin(std::fs::File::open(&input).expect("open"))
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&input).expect("read"), text);
    // A fresh output is written, with no temporary file left beside it.
    let fresh = dir.join("out.hlo");
    let o = hlo_opt(&[input.to_str().expect("p"), "-o", fresh.to_str().expect("p")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&fresh)
        .expect("read")
        .starts_with("HloModule"));
    let names: Vec<String> = std::fs::read_dir(&dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.contains(".tmp-")), "{names:?}");
}

#[test]
fn featurize_never_writes_onto_its_inputs() {
    let dir = tmp("featurize_same_file");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let input = dir.join("kernel.hlo");
    let runs = dir.join("kernel.runs.json");
    let kernel = repo().join("testdata/tile/kernels/kernel_00.hlo");
    std::fs::copy(&kernel, &input).expect("copy");
    std::fs::copy(kernel.with_extension("runs.json"), &runs).expect("copy");
    let hard = dir.join("hard.npz");
    std::fs::hard_link(&input, &hard).expect("hard link");
    let before = (
        std::fs::read(&input).expect("r"),
        std::fs::read(&runs).expect("r"),
    );
    for out in [&input, &runs, &hard] {
        let o = hlo_cost(&[
            "featurize",
            "--task",
            "tile",
            input.to_str().expect("p"),
            "--runs",
            runs.to_str().expect("p"),
            "-o",
            out.to_str().expect("p"),
        ]);
        assert_eq!(o.status.code(), Some(1), "-o {}", out.display());
        assert!(stderr(&o).contains("refusing to write"), "{}", stderr(&o));
    }
    assert_eq!(
        (
            std::fs::read(&input).expect("r"),
            std::fs::read(&runs).expect("r")
        ),
        before
    );
}

/// An installed binary (a copy outside the checkout, as `cargo install`
/// makes) run from `/`, with no ORT_DYLIB_PATH and no python3 on PATH,
/// finds the library in the checkout's `.venv`.
#[test]
fn an_installed_binary_finds_onnx_runtime_from_any_folder() {
    let venv_lib = std::fs::read_dir(repo().join(".venv/lib"))
        .ok()
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("site-packages/onnxruntime/capi"))
        .find(|p| p.is_dir());
    if venv_lib.is_none() {
        report::skipped("no onnxruntime in the checkout's .venv (scripts/quickstart installs it)");
        return;
    }
    report::ran();
    let bin_dir = std::env::temp_dir().join(format!("hlo-opt-installed-{}", std::process::id()));
    std::fs::create_dir_all(&bin_dir).expect("dir");
    let exe = bin_dir.join("hlo-opt");
    std::fs::copy(env!("CARGO_BIN_EXE_hlo-opt"), &exe).expect("copy the binary");
    let run = || {
        Command::new(&exe)
            .args(["--pass=layout", "--budget", "50"])
            .arg(repo().join(MODULE))
            .current_dir("/")
            .env_remove("ORT_DYLIB_PATH")
            .env_remove("HLO_OPT_PYTHON")
            .env_remove("HLO_OPT_HOME")
            .env("XDG_DATA_HOME", &bin_dir)
            .env("PATH", &bin_dir)
            .output()
    };
    // A test running beside this one may fork while the copy is still open
    // for writing; its child holds the file until it execs, and running the
    // copy then fails with ETXTBSY ("Text file busy"): try again briefly.
    let mut out = run();
    for _ in 0..50 {
        match &out {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                out = run();
            }
            _ => break,
        }
    }
    let out = out.expect("run");
    let _ = std::fs::remove_dir_all(&bin_dir);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// The library found as the README says, cut to half its size: refused with
/// a message (the loader would die of SIGBUS inside `dlopen`).
#[test]
fn a_truncated_onnx_runtime_library_is_refused() {
    let lib = match std::env::var_os("ORT_DYLIB_PATH") {
        Some(p) if Path::new(&p).is_file() => PathBuf::from(p),
        _ => {
            report::skipped("ORT_DYLIB_PATH is not set (scripts/test sets it)");
            return;
        }
    };
    report::ran();
    let bytes = std::fs::read(&lib).expect("read the library");
    let cut = tmp("libonnxruntime.so.1.31.1");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).expect("write");
    for args in [
        vec!["--pass=layout", MODULE],
        vec!["--pass=tile", "testdata/tile/kernels/kernel_00.hlo"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_hlo-opt"))
            .args(&args)
            .current_dir(repo())
            .env("ORT_DYLIB_PATH", &cut)
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("truncated or corrupt"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}
