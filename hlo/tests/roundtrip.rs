//! Round trip: for every module, `parse(print(parse(x)))` equals `parse(x)`.
//! Over `testdata/hlo` always; over the whole shared corpus when
//! `../shared` exists (skipped with a message otherwise).

mod common;
#[path = "../../tests/support/report.rs"]
mod report;

use common::*;

#[test]
fn testdata_modules_round_trip() {
    let files = hlo_files(&testdata().join("hlo"));
    assert!(!files.is_empty(), "testdata/hlo has no .hlo files");
    let mut failures = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable test file");
        if let Err(e) = round_trip(&text, &f.display().to_string()) {
            failures.push(format!("{}: {e}", f.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

/// Folders of the shared corpus that must all parse and round-trip.
const SHARED_VALID: &[&str] = &[
    "corpus/xla/valid",
    "corpus/jax",
    "data/tpugraphs/hlo",
    "data/tpugraphs/tile_kernels",
];

/// Valid modules of the shared corpus this parser rejects, with the reason.
/// Empty: every valid module parses and round-trips.
const KNOWN_UNSUPPORTED: &[(&str, &str)] = &[];

#[test]
fn shared_corpus_round_trips() {
    let Some(shared) = shared() else {
        report::skipped("../shared is absent");
        return;
    };
    report::ran();
    let mut total = 0;
    let mut unsupported = 0;
    let mut failures = Vec::new();
    for dir in SHARED_VALID {
        for f in hlo_files(&shared.join(dir)) {
            total += 1;
            let text = match std::fs::read_to_string(&f) {
                Ok(t) => t,
                Err(e) => {
                    failures.push(format!("{}: {e}", f.display()));
                    continue;
                }
            };
            let known = KNOWN_UNSUPPORTED
                .iter()
                .any(|(n, _)| f.file_name().is_some_and(|x| x == *n));
            match round_trip(&text, &f.display().to_string()) {
                Err(e) if !known => failures.push(format!("{}: {e}", f.display())),
                Err(_) => unsupported += 1,
                Ok(()) if known => {
                    failures.push(format!("{}: listed as unsupported but passes", f.display()))
                }
                Ok(()) => {}
            }
        }
    }
    println!(
        "shared corpus: {} of {total} modules round-trip ({unsupported} known unsupported)",
        total - failures.len() - unsupported
    );
    assert!(
        failures.is_empty(),
        "{} of {total} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
