//! Fuzz target: reading a serialized `HloModuleProto` never panics, and a
//! module it accepts is a fixed point of write -> read -> write (the writer's
//! declared gaps, "... cannot be written to a proto yet", aside).
//!
//! Run (from `fuzz/`, after seeding the corpus with `seed.sh`, which writes
//! the protos of testdata's modules with `hlo-opt --emit=proto`):
//! `cargo +nightly fuzz run proto corpus/proto`, or with the stable toolchain
//! `RUSTC_BOOTSTRAP=1 cargo fuzz run proto corpus/proto`. The regular-test
//! stand-in is `hlo/tests/proto_mutation.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

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
    assert!(once == twice, "write(read(write(read(x)))) differs from write(read(x))");
});
