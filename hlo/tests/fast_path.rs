//! The parser's fast path (`parse/fast.rs`, instruction lines delimited by
//! hand) gives exactly what the grammar alone gives: for every module of
//! `testdata/` and of the shared corpus (when `../shared` exists), and for
//! mutants of the testdata modules and of sampled corpus modules, parsing
//! with and without it yields the same module (compared field by field,
//! source offsets included) or the same error.

mod common;
#[path = "../../tests/support/report.rs"]
mod report;

use common::*;

/// The module (its `Debug` form, every field) or the error message.
fn outcome(r: hlo::Result<hlo::Module>) -> String {
    match r {
        Ok(m) => format!("ok {m:?}"),
        Err(e) => format!("error {e}"),
    }
}

/// `None` when both paths agree, else a description of the difference.
fn differs(text: &str) -> Option<String> {
    let fast = outcome(hlo::parse_module_named(text, "m"));
    let grammar = outcome(hlo::parse::parse_module_named_by_grammar(text, "m"));
    if fast == grammar {
        return None;
    }
    let at = fast
        .bytes()
        .zip(grammar.bytes())
        .position(|(a, b)| a != b)
        .unwrap_or(fast.len().min(grammar.len()));
    let show = |s: &str| {
        s.get(at.saturating_sub(80)..(at + 160).min(s.len()))
            .unwrap_or("")
            .to_string()
    };
    Some(format!(
        "fast:    ...{}\ngrammar: ...{}",
        show(&fast),
        show(&grammar)
    ))
}

/// Pieces of HLO spliced into the mutants (`common::mutate`).
const SPLICES: &[&str] = &[
    " ",
    "\n",
    "\t",
    ",",
    "=",
    "%",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "\"",
    "/*x*/",
    "//c\n",
    "ROOT ",
    "ROOT",
    "f32[2]{0} ",
    "(f32[], s32[]) ",
    "{1,0}",
    " {0}",
    "#1",
    "\\",
    "é",
    ", a=b",
    ",x={1}",
    "={",
    "add(",
    "%p, ",
    "constant(1)",
    "parameter(0)",
    "b(f32[2])",
    "ENTRY ",
    "ENTRY",
    " -> ",
    "->",
    ": ",
    ":",
    "(s32[], (f32[2]{0}, u8[]))",
    "{}",
];

fn check_files(files: &[std::path::PathBuf], mutants: usize, max_mutated_len: usize) {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut failures = Vec::new();
    let (mut modules, mut tried) = (0, 0);
    for f in files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        modules += 1;
        if let Some(d) = differs(&text) {
            failures.push(format!("{}:\n{d}", f.display()));
        }
        if text.len() > max_mutated_len {
            continue;
        }
        for _ in 0..mutants {
            let mutant = mutate(&mut rng, &text, SPLICES, b" \n,=%(){}[]\"/*#:0aZ-.");
            tried += 1;
            if let Some(d) = differs(&mutant) {
                failures.push(format!(
                    "mutant of {}:\n{d}\n--- mutant ---\n{mutant}",
                    f.display()
                ));
            }
        }
    }
    println!("{modules} modules and {tried} mutants: fast path and grammar agree");
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n\n")
    );
}

#[test]
fn testdata_fast_path_matches_grammar() {
    let mut files = hlo_files(&testdata().join("hlo"));
    for dir in [
        "invalid",
        "compact_gte",
        "regress",
        "verify",
        "layout",
        "tile",
    ] {
        files.extend(hlo_files(&testdata().join(dir)));
    }
    assert!(!files.is_empty(), "testdata has no .hlo files");
    check_files(&files, 200, 20_000);
}

#[test]
fn shared_corpus_fast_path_matches_grammar() {
    let Some(shared) = shared() else {
        report::skipped("../shared is absent");
        return;
    };
    let mut files = hlo_files_in(&shared, &SHARED_VALID);
    files.extend(hlo_files(&shared.join("corpus/xla/invalid")));
    check_files(&files, 3, 4_000);
    report::ran();
}
