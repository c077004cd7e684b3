//! Bad input, over the shared corpus's `xla/invalid` (skipped when `../shared`
//! is absent): every `negative` and `fragment` module is rejected with a
//! positioned error and no panic; `newer` modules (syntax newer than
//! jaxlib 0.10.2) are counted; the ones listed in `NEWER_UNSUPPORTED` are
//! the only ones allowed to fail.

mod common;

use common::*;

/// `newer` modules this parser does not accept yet, with the reason.
const NEWER_UNSUPPORTED: &[(&str, &str)] = &[];

#[test]
fn shared_invalid_corpus() {
    let Some(shared) = shared() else {
        println!("skipped: ../shared is absent");
        return;
    };
    let dir = shared.join("corpus/xla");
    let Ok(manifest) = std::fs::read_to_string(dir.join("MANIFEST.tsv")) else {
        println!("skipped: corpus/xla/MANIFEST.tsv is absent");
        return;
    };
    let mut problems = Vec::new();
    let (mut rejected, mut must_reject, mut newer_ok, mut newer) = (0, 0, 0, 0);
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
                        if pos.line == 0 || pos.col == 0 || message.is_empty() {
                            problems.push(format!("{file}: error without a position or message"));
                        }
                    }
                    Err(e) => {
                        rejected += 1;
                        problems.push(format!("{file}: rejected without a position: {e}"));
                    }
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
    println!("invalid corpus: {rejected} of {must_reject} negative/fragment rejected; {newer_ok} of {newer} newer accepted");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
