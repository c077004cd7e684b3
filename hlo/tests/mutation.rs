//! Random mutations of real modules (deterministic seed, bounded count): the
//! parser never panics, and every mutant it accepts round-trips
//! (`parse(print(parse(x)))` prints like `parse(x)`). A stand-in for the
//! cargo-fuzz target in `fuzz/` where cargo-fuzz is unavailable.

mod common;

use common::*;

/// Tokens worth splicing in: HLO punctuation, keywords and edge values.
const SPLICES: &[&str] = &[
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    ",",
    "=",
    "%",
    "\"",
    "ROOT ",
    "ENTRY ",
    "/*",
    "*/",
    "//",
    "\n",
    " ",
    ":",
    "->",
    "<=",
    "?",
    "T(8,128)",
    "{1,0}",
    "f32[]",
    "(f32[], s32[])",
    "parameter(0)",
    "constant(1)",
    "to_apply=",
    "calls={",
    "control-predecessors={%x}",
    "#0",
    "b(",
    "-1",
    "99999999999999999999",
    "\u{0}",
    "é",
    "{{{{{{{{",
    "))))",
    // Values of the typed attribute families: literals at type edges,
    // named shardings and mesh axes, stack frame ids, header attributes.
    "nan(0x1)",
    "-inf",
    "1e39",
    "-2147483648",
    "f8e4m3fn[]",
    "f8e8m0fnu[2]",
    "s4[2]",
    "mesh['x'=2]",
    "{'x'}",
    ", unreduced={'x'}",
    "stack_frame_id=",
    "parent_frame_id=",
    "\nStackFrames\n1 {file_location_id=1 parent_frame_id=0}\n",
    ", input_output_alias={ {}: (0, {}, may-alias) }",
    ", buffer_donor={ (0, {}) }",
    "<=[2,2]T(1,0)",
    "may-alias",
];

#[test]
fn mutated_modules_never_panic_and_round_trip_when_accepted() {
    let files = hlo_files(&testdata().join("hlo"));
    assert!(!files.is_empty());
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut accepted, mut total) = (0, 0);
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable test file");
        if text.len() > 20_000 {
            continue; // keep the test fast; large modules are covered by the round-trip tests
        }
        for _ in 0..400 {
            let mutant = mutate(&mut rng, &text, SPLICES, b"{}()[],=%\" \n0aZ:");
            total += 1;
            let res = std::panic::catch_unwind(|| round_trip(&mutant, "mutant"));
            match res {
                Err(_) => panic!("parser panicked on a mutant of {}:\n{mutant}", f.display()),
                Ok(Ok(())) => accepted += 1,
                Ok(Err(e)) if e.starts_with("parse:") => {}
                Ok(Err(e)) => panic!(
                    "accepted mutant of {} does not round-trip: {e}\n{mutant}",
                    f.display()
                ),
            }
        }
    }
    println!("{accepted} of {total} mutants accepted; all round-trip");
}

#[test]
fn deep_nesting_is_rejected_not_overflowed() {
    for open in ["(", "{", "["] {
        let text = format!(
            "HloModule m\nENTRY e {{\n  ROOT p = {}f32[] parameter(0)\n}}\n",
            open.repeat(100_000)
        );
        let e = hlo::parse_module(&text).expect_err("deep nesting must be rejected");
        assert!(e.to_string().contains("nested deeper"), "{e}");
    }
    // Deep but allowed nesting (nested tuples) still parses.
    let shape = format!("{}f32[]{}", "(".repeat(40), ")".repeat(40));
    let text = format!("HloModule m\nENTRY e {{\n  ROOT p = {shape} parameter(0)\n}}\n");
    hlo::parse_module(&text).expect("40 nested tuples parse");
}
