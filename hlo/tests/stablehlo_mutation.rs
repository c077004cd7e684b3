//! Random mutations of the StableHLO spec cases (testdata/stablehlo,
//! deterministic seed, bounded count): `parse_stablehlo` never panics, and
//! what it refuses is an error with a `line:col` position. Mutants cut
//! strings, brackets and types short, splice MLIR punctuation in, and put
//! non-ASCII text where the reader steps byte by byte.

mod common;

use common::*;

/// MLIR pieces worth splicing in.
const SPLICES: &[&str] = &[
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    "<",
    ">",
    "<{",
    "}>",
    ",",
    "=",
    "%",
    "%0",
    "%0#1",
    "%r:2",
    "\"",
    "\\",
    "\\\"",
    ":",
    "->",
    "^bb1:",
    "^bb0(%x: tensor<f32>):",
    "tensor<",
    "tensor<?x",
    "tensor<2x",
    "xf32>",
    "complex<",
    "tuple<",
    "!stablehlo.token",
    "!dialect.t<",
    "loc(",
    "loc(\"x\")",
    "//",
    "\n",
    " ",
    "dense<",
    "array<i64: 1, 2>",
    "#stablehlo.dot<",
    "é",
    "\u{0}",
    "99999999999999999999",
    "\"stablehlo.add\"(%0, %0) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n",
];

#[test]
fn mutated_stablehlo_never_panics_and_errors_have_a_position() {
    let files = files_with_extension(&testdata().join("stablehlo"), "mlir");
    assert!(files.len() >= 6, "expected the testdata/stablehlo cases");
    let mut rng = Rng(0x005e_ed0f_5ab1_e41c);
    let (mut accepted, mut total) = (0, 0);
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable test file");
        hlo::parse_stablehlo(&text).unwrap_or_else(|e| panic!("{}: {}", f.display(), e.render()));
        for _ in 0..300 {
            let mutant = mutate(&mut rng, &text, SPLICES, b"{}()[]<>,=%\"\\ \n0x:^#-");
            total += 1;
            match std::panic::catch_unwind(|| hlo::parse_stablehlo(&mutant)) {
                Err(_) => panic!(
                    "parse_stablehlo panicked on a mutant of {}:\n{mutant}",
                    f.display()
                ),
                Ok(Ok(_)) => accepted += 1,
                Ok(Err(e)) => {
                    let shown = e.render();
                    let positioned = shown
                        .split(':')
                        .any(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()));
                    assert!(
                        positioned,
                        "an error without a line:col for a mutant of {}: {shown}",
                        f.display()
                    );
                }
            }
        }
    }
    // Some mutants (a changed value name, an extra space) are still modules.
    assert!(
        accepted > 0 && accepted < total,
        "{accepted} of {total} accepted"
    );
    println!("{accepted} of {total} mutants accepted");
}

#[test]
fn strings_and_brackets_cut_short_are_errors() {
    let head = "\"builtin.module\"() <{sym_name = ";
    for tail in [
        "\"abc\\",
        "\"abc\\\"",
        "\"abc",
        "dense<[1, 2>",
        "#x<(>",
        "[[",
        "\"\\",
    ] {
        let text = format!("{head}{tail}");
        let e = hlo::parse_stablehlo(&text).expect_err(&text);
        assert!(e.render().contains(":1:"), "{}", e.render());
    }
}
