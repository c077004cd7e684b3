//! Bad input, over the shared corpus's `xla/invalid` (skipped when `../shared`
//! is absent): every `negative` and `fragment` module is rejected with a
//! positioned error and no panic; `newer` modules (syntax newer than
//! jaxlib 0.10.2) must parse. The known gaps are listed below with reasons
//! (`KNOWN_ACCEPTED`, `NEWER_UNSUPPORTED`); everything else is enforced.

mod common;

use common::*;

/// `newer` modules this parser does not accept yet, with the reason.
const NEWER_UNSUPPORTED: &[(&str, &str)] = &[
    (
        "hlo_parser_test__185.hlo",
        "tuple-element operand `%x#i` (newer XLA syntax) is not supported",
    ),
    (
        "hlo_parser_test__187.hlo",
        "tuple-element operand `%x#i` (newer XLA syntax) is not supported",
    ),
    (
        "hlo_parser_test__189.hlo",
        "tuple-element operand `%x#i` (newer XLA syntax) is not supported",
    ),
    (
        "hlo_parser_test__191.hlo",
        "tuple-element operand `%x#i` (newer XLA syntax) is not supported",
    ),
    (
        "hlo_parser_test__193.hlo",
        "tuple-element operand `%x#i` (newer XLA syntax) is not supported",
    ),
    (
        "hlo_parser_test__195.hlo",
        "tuple-element operand `%x#i` (newer XLA syntax) is not supported",
    ),
    (
        "hlo_parser_test__218.hlo",
        "tuple-element operand `%x#i` (newer XLA syntax) is not supported",
    ),
    (
        "hlo_parser_test__219.hlo",
        "tuple-element operand `%x#i` (newer XLA syntax) is not supported",
    ),
];

/// `negative`/`fragment` modules this parser still accepts: XLA rejects them
/// for semantic reasons the parser does not check yet (literal contents and
/// ranges, per-opcode attribute sets and formats, async wrapping rules, ...).
/// XLA's own message is the reason. Shrinking this list is future work; a
/// module rejected by us must be removed from it (the test enforces that).
const KNOWN_ACCEPTED: &[(&str, &str)] = &[
    ("hlo_parser_test__198.hlo", "unexpected attribute 'debug_attributes'. Allowed attributes: alias_passthrough_params, all"),
    ("hlo_parser_test__201.hlo", "expects opcode"),
    ("hlo_parser_test__210.hlo", "vector::_M_range_check: __n (which is 0) >= this->size() (which is 0)"),
    ("hlo_parser_test__245.hlo", "tries to set NaN payload 0x3ff to a literal in shape bf16[1] at linear index 0, but the Na"),
    ("hlo_parser_test__246.hlo", "tries to set NaN payload 0x1 to a literal in shape f8e4m3fn[1] at linear index 0, but f8e4"),
    ("hlo_parser_test__247.hlo", "tries to set NaN payload 0x1 to a literal in shape f8e4m3b11fnuz[1] at linear index 0, but"),
    ("hlo_parser_test__253.hlo", "expects padding_low and padding_high separated by '_'"),
    ("hlo_parser_test__273.hlo", "expects integer"),
    ("hlo_parser_test__274.hlo", "Expects '{' at the start of ShapeIndex"),
    ("hlo_parser_test__276.hlo", "expects integer"),
    ("hlo_parser_test__278.hlo", "expects integer"),
    ("hlo_parser_test__279.hlo", "expects integer"),
    ("hlo_parser_test__284.hlo", "DynamicReshape requires at least one operand."),
    ("hlo_parser_test__285.hlo", "infeed must have a non-empty tuple shape"),
    ("hlo_parser_test__292.hlo", "Expected 2 operand layout constraints, 1 given"),
    ("hlo_parser_test__293.hlo", "Operand layout constraint shape f32[555,5]{1,0} for operand 1 is not compatible with opera"),
    ("hlo_parser_test__294.hlo", "expects custom-call API version but sees: API_VERSION_THAT_DOESNT_EXIST, error: Unknown AP"),
    ("hlo_parser_test__295.hlo", "Invalid API version: API_VERSION_UNSPECIFIED"),
    ("hlo_parser_test__299.hlo", "cannot parse as an instruction name or as a nested instruction:"),
    ("hlo_parser_test__300.hlo", "The first operand must be a scalar"),
    ("hlo_parser_test__301.hlo", "The first operand must be a scalar of PRED or S32"),
    ("hlo_parser_test__302.hlo", "unexpected attribute 'branch_computations'. Allowed attributes: backend_config, control-pr"),
    ("hlo_parser_test__320.hlo", "Layout has physical shape, but is not for a sparse array: {1,0:T(128,8)P(f32[10,10]{1,0})}"),
    ("hlo_parser_test__322.hlo", "AsyncStart expects the op shape to be in the form of ((async-operands), async-outputs, sta"),
    ("hlo_parser_test__324.hlo", "AsyncStart expects the op shape to be in the form of ((async-operands), async-outputs, sta"),
    ("hlo_parser_test__325.hlo", "AsyncUpdate expects the op shape to be the same as the operand shape."),
    ("hlo_parser_test__328.hlo", "AsyncUpdate and AsyncDone expect a single async op as their operand."),
    ("hlo_parser_test__329.hlo", "AsyncUpdate and AsyncDone expect a single async op as their operand."),
    ("hlo_parser_test__330.hlo", "AsyncUpdate and AsyncDone expect a single async op as their operand."),
    ("hlo_parser_test__331.hlo", "Expect async wrapped opcode to be custom-call, but got add"),
    ("hlo_parser_test__332.hlo", "Expect async wrapped opcode to be custom-call, but got add"),
    ("hlo_parser_test__333.hlo", "INVALID_ARGUMENT: Computation async_wrapped is called by more than one async op."),
    ("hlo_parser_test__334.hlo", "Expect async_wrapped_computation to be async_wrapped.0, but got async_wrapped.1"),
    ("hlo_parser_test__335.hlo", "Expect async_wrapped_computation to be async_wrapped.0, but got async_wrapped.1"),
    ("hlo_parser_test__337.hlo", "Expect async_execution_thread to be main, but got foo_thread"),
    ("hlo_parser_test__344.hlo", "expects ResultAccuracy type but sees: high, error: Unknown accuracy mode"),
    ("hlo_parser_test__378.hlo", "AsyncUpdate and AsyncDone expect a single async op as their operand."),
    ("hlo_parser_test__379.hlo", "AsyncUpdate and AsyncDone expect a single async op as their operand."),
    ("hlo_parser_test__381.hlo", "AsyncUpdate expects the op shape to be the same as the operand shape."),
    ("hlo_parser_test__383.hlo", "AsyncUpdate and AsyncDone expect a single async op as their operand."),
    ("hlo_parser_test__384.hlo", "AsyncUpdate expects the op shape to be the same as the operand shape."),
];

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
