//! Bad input, over the shared corpus's `xla/invalid` (skipped when `../shared`
//! is absent): every `negative` and `fragment` module is rejected with a
//! positioned error and no panic; `newer` modules (syntax newer than
//! jaxlib 0.10.2) must parse. The known gaps are listed below with reasons
//! (`KNOWN_ACCEPTED`, `NEWER_UNSUPPORTED`); everything else is enforced.

mod common;
#[path = "../../tests/support/report.rs"]
mod report;

use common::*;

/// `newer` modules this parser does not accept yet, with the reason. Empty:
/// every `newer` module parses (compact tuple-element operands `%x#i` are
/// desugared, see `compact_gte.rs`).
const NEWER_UNSUPPORTED: &[(&str, &str)] = &[];

/// `negative`/`fragment` modules this parser still accepts, with XLA's own
/// message as the reason. Empty: the rules XLA's parser applies beyond the
/// syntax (attribute formats, operand counts, required attributes,
/// conditional and custom-call fields, async wrapping, NaN payloads, typed
/// operands, ...) are checked by `hlo::semantic`, the lowering and the
/// literal checker. A module added here must be removed again once it is
/// rejected (the test enforces that).
const KNOWN_ACCEPTED: &[(&str, &str)] = &[];

#[test]
fn shared_invalid_corpus() {
    let Some(shared) = shared() else {
        report::skipped("../shared is absent");
        return;
    };
    let dir = shared.join("corpus/xla");
    let Ok(manifest) = std::fs::read_to_string(dir.join("MANIFEST.tsv")) else {
        report::skipped("corpus/xla/MANIFEST.tsv is absent");
        return;
    };
    report::ran();
    let mut problems = Vec::new();
    let (mut rejected, mut must_reject, mut newer_ok, mut newer) = (0, 0, 0, 0);
    let mut known_accepted = 0;
    for line in manifest.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        let (Some(file), Some(status), Some(category)) = (cols.first(), cols.get(1), cols.get(2))
        else {
            continue;
        };
        if *status != "invalid" {
            continue;
        }
        let path = dir.join("invalid").join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let result = std::panic::catch_unwind(|| hlo::parse_module_named(&text, file).map(|_| ()));
        let Ok(result) = result else {
            problems.push(format!("{file}: PANIC"));
            continue;
        };
        match *category {
            "negative" | "fragment" => {
                must_reject += 1;
                match result {
                    Err(hlo::Error::Parse { pos, message, .. }) => {
                        rejected += 1;
                        if KNOWN_ACCEPTED.iter().any(|(f, _)| f == file) {
                            problems.push(format!(
                                "{file}: now rejected; remove it from KNOWN_ACCEPTED"
                            ));
                        }
                        if pos.line == 0 || pos.col == 0 || message.is_empty() {
                            problems.push(format!("{file}: error without a position or message"));
                        }
                    }
                    Err(e) => {
                        rejected += 1;
                        problems.push(format!("{file}: rejected without a position: {e}"));
                    }
                    Ok(()) if KNOWN_ACCEPTED.iter().any(|(f, _)| f == file) => known_accepted += 1,
                    Ok(()) => {
                        problems.push(format!("{file} ({category}): accepted, must be rejected"))
                    }
                }
            }
            "newer" => {
                newer += 1;
                match result {
                    Ok(()) => newer_ok += 1,
                    Err(e) => {
                        if !NEWER_UNSUPPORTED.iter().any(|(f, _)| f == file) {
                            problems.push(format!("{file} (newer): {e}"));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    println!(
        "invalid corpus: {rejected} of {must_reject} negative/fragment rejected \
         ({known_accepted} known gaps); {newer_ok} of {newer} newer accepted"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
