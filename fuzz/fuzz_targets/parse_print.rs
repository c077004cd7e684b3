//! Fuzz target: the parser never panics, and for any input it accepts,
//! parse -> print -> parse gives the same module (same printed text).
//!
//! Run (from `fuzz/`, after seeding the corpus with `seed.sh`, which copies
//! testdata and the shared HLO corpus): `cargo +nightly fuzz run parse_print
//! corpus/parse_print`, or with the stable toolchain
//! `RUSTC_BOOTSTRAP=1 cargo fuzz run parse_print corpus/parse_print`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(m1) = hlo::parse_module(text) else {
        return;
    };
    let p1 = hlo::print_module(&m1);
    let m2 = match hlo::parse_module(&p1) {
        Ok(m) => m,
        Err(e) => panic!("printed text does not parse: {e}\n{p1}"),
    };
    let p2 = hlo::print_module(&m2);
    assert_eq!(
        p1, p2,
        "print(parse(print(parse(x)))) differs from print(parse(x))"
    );
});
