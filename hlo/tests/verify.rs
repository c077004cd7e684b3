//! The verifier, specified by example.
//!
//! - `testdata/verify/*.hlo`: each file is a small module whose header comment
//!   says what is wrong with it; the verifier must reject it, and the snapshot
//!   pins the error message (which names the instruction and shows expected
//!   and actual shapes).
//! - `testdata/verify/valid/*.hlo`: well-formed modules that must verify.
//! - The whole shared corpus (`<repo>/../shared`), when present: every module
//!   XLA accepts must verify. Skipped with a message when it is absent.

#[path = "../../tests/support/report.rs"]
mod report;
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn verify_text(text: &str, name: &str) -> Result<(), String> {
    let m = hlo::parse_module_named(text, name).map_err(|e| format!("parse error: {e}"))?;
    hlo::verify(&m).map_err(|e| e.to_string())
}

#[test]
fn invalid_modules_are_rejected_with_a_clear_message() {
    insta::glob!("../../testdata/verify", "*.hlo", |path| {
        let text = std::fs::read_to_string(path).expect("read test input");
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("input");
        let m = hlo::parse_module_named(&text, name)
            .unwrap_or_else(|e| panic!("{name} must parse (only verification should fail): {e}"));
        let Err(err) = hlo::verify(&m) else {
            panic!("{name}: the verifier must reject this module");
        };
        insta::assert_snapshot!(err.to_string());
    });
}

/// Every verifier error points at its instruction in the source: rendered as
/// `file:line:col: error: in computation ..., instruction %name: ...`, then
/// the instruction's line with the caret under its name.
#[test]
fn verifier_errors_carry_the_position_of_the_instruction() {
    let dir = repo_root().join("testdata/verify");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("testdata/verify exists") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("hlo") {
            continue;
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("input");
        let text = std::fs::read_to_string(&path).expect("read");
        let m = hlo::parse_module_named(&text, name).expect("parses");
        let err = hlo::verify_in_source(&m, &text, name).expect_err("rejected");
        let hlo::Error::Verify {
            ref instruction,
            ref at,
            ..
        } = err
        else {
            continue; // a module-level error names no instruction
        };
        let (pos, snippet) = &**at
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: no position for %{instruction}: {err}"));
        let rendered = err.render();
        assert!(
            rendered.starts_with(&format!(
                "{name}:{}:{}: error: in computation ",
                pos.line, pos.col
            )),
            "{rendered}"
        );
        let at_col: String = snippet.chars().skip(pos.col - 1).collect();
        assert!(
            at_col
                .trim_start_matches('%')
                .starts_with(instruction.as_str()),
            "{name}: the caret is not on %{instruction}:\n{rendered}"
        );
        n += 1;
    }
    assert!(n > 30, "only {n} verifier errors with an instruction");
    let text = std::fs::read_to_string(dir.join("add_shape_mismatch.hlo")).expect("read");
    let m = hlo::parse_module_named(&text, "add_shape_mismatch.hlo").expect("parses");
    let err = hlo::verify_in_source(&m, &text, "add_shape_mismatch.hlo").expect_err("rejected");
    insta::assert_snapshot!(err.render());
}

#[test]
fn valid_testdata_modules_verify() {
    let dir = repo_root().join("testdata/verify/valid");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("testdata/verify/valid exists") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("hlo") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        let name = path.display().to_string();
        if let Err(e) = verify_text(&text, &name) {
            panic!("{name} must verify: {e}");
        }
        n += 1;
    }
    assert!(n > 0, "no modules in {}", dir.display());
}

fn hlo_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            hlo_files(&p, out);
        } else if p.extension().and_then(|e| e.to_str()) == Some("hlo") {
            out.push(p);
        }
    }
}

/// Modules of the valid XLA corpus that XLA's *parser* accepts but that break
/// rules XLA's *verifier* enforces (they come from pass tests that build
/// unverified modules). Each must be rejected, for the reason given.
const KNOWN_INVALID: &[(&str, &str, &str)] = &[
    // (file, instruction the error must name, what is wrong)
    (
        "algebraic_simplifier_test__347.hlo",
        "%copy1",
        "copy changes dimensions [126,16384] -> [16384,126]",
    ),
    (
        "generate_hlo_test_checks_test_input__4.hlo",
        "%call-foo.bar.baz.0",
        "call passes f32[4] to an f32[] parameter",
    ),
    (
        "generate_hlo_test_checks_test_output__4.hlo",
        "%call-foo.bar.baz.0",
        "call passes f32[4] to an f32[] parameter",
    ),
    (
        "hlo_parser_test__380.hlo",
        "%async-start",
        "async-start output f32[3,2], wrapped computation returns f32[2,3]",
    ),
    (
        "hlo_parser_test__382.hlo",
        "%async-start",
        "async-start output (), wrapped computation returns f32[3,2]",
    ),
    (
        "hlo_parser_test__297.hlo",
        "%cc-start",
        "a custom-call-start nothing continues (a parser test of an incomplete async chain; XLA's verifier: \"The async-start instruction requires one consumer, found 0\")",
    ),
    (
        "hlo_parser_test__368.hlo",
        "%tuple.0",
        "tuple of shape (s32[1024]) built from an s32[] parameter (a parser test of newer async syntax)",
    ),
    (
        "hlo_parser_test__373.hlo",
        "%fusion-start",
        "a fusion-start nothing continues (a parser test of an incomplete async chain; XLA's verifier: \"The async-start instruction requires one consumer, found 0\")",
    ),
    (
        "import__0.hlo",
        "%convolution.4",
        "convolution window size 3x3 over a kernel of spatial size 2x2 (an import test, never verified)",
    ),
    (
        "invalid_concat__0.hlo",
        "%cat.3",
        "concatenate of f32[2,1] and f32[3,1] along dimension 1 (XLA's bad-input test)",
    ),
    (
        "latency_hiding_scheduler_test__64.hlo",
        "%tuple",
        "tuple element token[] given a bf16[8] operand",
    ),
    (
        "operand_upcaster__0.hlo",
        "%result",
        "dot without contracting dimensions is an outer product [8,8], declared [8]",
    ),
    (
        "rewrite_bf16_conv_to_onednn__1.hlo",
        "%convolution",
        "convolution output [4,4,5,5,32], inferred [8,0,5,5,32]",
    ),
    (
        "while__0.hlo",
        "%broadcast.1",
        "broadcast of f32[1] into f32[3] along dimension 0",
    ),
];

/// Every module XLA accepted (the valid XLA corpus, the jax models, the
/// TpuGraphs modules, and the `newer` modules of modern XLA syntax) verifies, except the [`KNOWN_INVALID`] ones, which must
/// be rejected.
#[test]
fn shared_corpus_verifies() {
    let shared = repo_root().join("../shared");
    if !shared.is_dir() {
        report::skipped(&format!("{} is absent", shared.display()));
        return;
    }
    report::ran();
    let mut files = Vec::new();
    hlo_files(&shared.join("corpus/xla/valid"), &mut files);
    hlo_files(&shared.join("corpus/jax"), &mut files);
    hlo_files(&shared.join("data/tpugraphs"), &mut files);
    // Modern syntax that jaxlib's older parser rejected: valid in current XLA.
    let manifest =
        std::fs::read_to_string(shared.join("corpus/xla/MANIFEST.tsv")).unwrap_or_default();
    for line in manifest.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        if let [file, "invalid", "newer", ..] = cols[..] {
            files.push(shared.join("corpus/xla/invalid").join(file));
        }
    }
    let mut failures = Vec::new();
    let mut unparsed = 0;
    let mut verified = 0;
    let mut rejected_as_expected = 0;
    for path in &files {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let name = path.display().to_string();
        let m = match hlo::parse_module_named(&text, &name) {
            Ok(m) => m,
            // Parsing is the round-trip tests' concern.
            Err(_) => {
                unparsed += 1;
                continue;
            }
        };
        let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
        let known = KNOWN_INVALID.iter().find(|(f, _, _)| *f == file);
        match (hlo::verify(&m), known) {
            (Ok(()), None) => verified += 1,
            (Err(e), Some((_, inst, why))) => {
                let msg = e.to_string();
                if msg.contains(&format!("instruction {inst}:")) {
                    rejected_as_expected += 1;
                } else {
                    failures.push(format!(
                        "{name}: expected an error naming {inst} ({why}), got: {msg}"
                    ));
                }
            }
            (Err(e), None) => failures.push(format!("{name}: {e}")),
            (Ok(()), Some((_, _, why))) => failures.push(format!("{name}: accepted, but {why}")),
        }
    }
    println!(
        "shared corpus: {} files, {verified} verified, {rejected_as_expected} known-invalid rejected, \
         {} wrongly judged, {unparsed} not parsed",
        files.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "wrongly judged:\n{}",
        failures.join("\n")
    );
}

/// The `negative` modules of the XLA corpus are bad input. Those our parser
/// accepts (their fault is semantic) should be caught by the verifier; this
/// reports how many are caught, and lists the ones that slip through.
#[test]
fn shared_negative_modules_report() {
    let shared = repo_root().join("../shared");
    let Ok(manifest) = std::fs::read_to_string(shared.join("corpus/xla/MANIFEST.tsv")) else {
        report::skipped(&format!("{} is absent", shared.display()));
        return;
    };
    report::ran();
    let (mut parse_rejects, mut verify_rejects, mut accepted) = (0, 0, Vec::new());
    for line in manifest.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        let [file, "invalid", "negative", ..] = cols[..] else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(shared.join("corpus/xla/invalid").join(file)) else {
            continue;
        };
        match hlo::parse_module_named(&text, file) {
            Err(_) => parse_rejects += 1,
            Ok(m) => match hlo::verify(&m) {
                Err(_) => verify_rejects += 1,
                Ok(()) => accepted.push(file),
            },
        }
    }
    println!(
        "negative modules: {parse_rejects} rejected by the parser, {verify_rejects} by the verifier, {} accepted: {accepted:?}",
        accepted.len()
    );
}
