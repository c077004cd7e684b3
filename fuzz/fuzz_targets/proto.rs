//! Fuzz target: reading a serialized `HloModuleProto` never panics, and a
//! module it accepts is a fixed point of write -> read -> write (the writer's
//! declared gaps, "... cannot be written to a proto yet", aside) and prints
//! as text that parses and prints the same.
//!
//! Mutations: libFuzzer's own plus a wire-aware one (`proto_mutator.rs`)
//! that edits one field of a nested message and re-encodes the lengths, so
//! that mutants get past the wire format into the reader's module checks.
//!
//! Run (from `fuzz/`, after seeding the corpus with `seed.sh`, which writes
//! the protos of testdata's modules with `hlo-opt --emit=proto`):
//! `cargo +nightly fuzz run proto corpus/proto`, or with the stable toolchain
//! `RUSTC_BOOTSTRAP=1 cargo fuzz run proto corpus/proto`. The regular-test
//! stand-in is `hlo/tests/proto_mutation.rs`.
#![no_main]

use libfuzzer_sys::{fuzz_mutator, fuzz_target};

mod proto_mutator;
mod rng;

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    proto_mutator::mutate(data, size, max_size, seed)
});

fuzz_target!(|data: &[u8]| {
    let Ok((m, _)) = hlo::proto::from_bytes_lossy(data) else {
        return;
    };
    let once = match hlo::proto::to_bytes(&m) {
        Ok(b) => b,
        Err(e) if e.to_string().contains("cannot be written to a proto yet") => return,
        Err(e) => panic!("read, but not written: {e}"),
    };
    let (again, report) = match hlo::proto::from_bytes_lossy(&once) {
        Ok(r) => r,
        Err(e) => panic!("our own proto does not read back: {e}"),
    };
    assert!(report.ignored.is_empty(), "{:?}", report.ignored);
    let twice = match hlo::proto::to_bytes(&again) {
        Ok(b) => b,
        Err(e) => panic!("{e}"),
    };
    assert!(
        once == twice,
        "write(read(write(read(x)))) differs from write(read(x))"
    );
    // The module read prints as text the parser reads back to the same text.
    let p1 = hlo::print_module(&m);
    let m2 = match hlo::parse_module(&p1) {
        Ok(m) => m,
        Err(e) => {
            panic!("the printed text of a module read from a proto does not parse: {e}\n{p1}")
        }
    };
    assert_eq!(
        p1,
        hlo::print_module(&m2),
        "print(parse(print(read(x)))) differs from print(read(x))"
    );
});
