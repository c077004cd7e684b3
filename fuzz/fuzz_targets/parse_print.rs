//! Fuzz target: the parser never panics; its fast path gives what the
//! grammar alone gives (module or error); for any input it accepts,
//! parse -> print -> parse gives the same module (same printed text); and
//! where the proto writer accepts the module, text -> proto -> module is a
//! fixed point both ways (the proto read back writes the same bytes, and
//! its printed text parses and prints the same).
//!
//! Mutations: libFuzzer's own plus a structure-aware one that replaces
//! attribute values (`attr_mutator.rs`); `hlo.dict` adds the attribute keys
//! and values XLA defines.
//!
//! Run (from `fuzz/`, after seeding the corpus with `seed.sh`, which copies
//! testdata and the shared HLO corpus): `cargo +nightly fuzz run parse_print
//! corpus/parse_print -- -dict=hlo.dict`, or with the stable toolchain
//! `RUSTC_BOOTSTRAP=1 cargo fuzz run parse_print corpus/parse_print`.
#![no_main]

use libfuzzer_sys::{fuzz_mutator, fuzz_target};

mod attr_mutator;
mod rng;

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    attr_mutator::mutate(data, size, max_size, seed)
});

/// The largest proto whose round trip is checked (see below).
const MAX_PROTO_BYTES: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The parser's fast path (hlo/src/parse/fast.rs) gives exactly what the
    // grammar alone gives: the same module, every field, or the same error.
    let parsed = hlo::parse_module(text);
    let by_grammar = hlo::parse::parse_module_named_by_grammar(text, "<input>");
    match (&parsed, &by_grammar) {
        (Ok(a), Ok(b)) => assert_eq!(
            format!("{a:?}"),
            format!("{b:?}"),
            "the fast path and the grammar give different modules"
        ),
        (Err(a), Err(b)) => assert_eq!(
            a.to_string(),
            b.to_string(),
            "the fast path and the grammar give different errors"
        ),
        (a, b) => panic!(
            "the fast path gives {:?}, the grammar {:?}",
            a.as_ref().err(),
            b.as_ref().err()
        ),
    }
    let Ok(m1) = parsed else {
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
    // A few bytes of text can declare a constant of millions of elements
    // (`f32[5,1024,1024] constant(1)`, as XLA reads it, or an elided
    // `{...}` one, which the writer fills with XLA's made-up values up to its
    // 2 GiB bound); its proto and the text printed from that proto are
    // megabytes to gigabytes, seconds per input under the sanitizer. The
    // fixed points are checked below that size, known before writing.
    if literal_bytes(&m1) > MAX_PROTO_BYTES as u64 {
        return;
    }
    // Text -> proto -> module: the writer may refuse a module (a clear
    // error: what the proto cannot carry); one it writes must read back to
    // a fixed point.
    let Ok(once) = hlo::proto::to_bytes(&m1) else {
        return;
    };
    if once.len() > MAX_PROTO_BYTES {
        return;
    }
    let (m3, report) = match hlo::proto::from_bytes_lossy(&once) {
        Ok(r) => r,
        Err(e) => panic!("our own proto does not read back: {e}\n{p1}"),
    };
    assert!(report.ignored.is_empty(), "{:?}", report.ignored);
    let twice = match hlo::proto::to_bytes(&m3) {
        Ok(b) => b,
        Err(e) => panic!("read from our proto, but not written: {e}\n{p1}"),
    };
    // XLA's made-up values for an elided sub-byte literal `{...}` carry bits
    // above the element's width (written as XLA writes them); read back they
    // are the element's value, so the first re-write may differ in those
    // bits only, and the next must be the same (as hlo/tests/proto.rs asks).
    let (once, twice) = if p1.contains("{...}") {
        let (m5, _) = match hlo::proto::from_bytes_lossy(&twice) {
            Ok(r) => r,
            Err(e) => panic!("our own proto does not read back twice: {e}\n{p1}"),
        };
        match hlo::proto::to_bytes(&m5) {
            Ok(b) => (twice, b),
            Err(e) => panic!("read from our proto twice, but not written: {e}\n{p1}"),
        }
    } else {
        (once, twice)
    };
    assert!(
        once == twice,
        "write(read(write(parse(x)))) differs from write(parse(x))\n{p1}"
    );
    let p3 = hlo::print_module(&m3);
    let m4 = match hlo::parse_module(&p3) {
        Ok(m) => m,
        Err(e) => {
            panic!("the printed text of a module read from a proto does not parse: {e}\n{p3}")
        }
    };
    assert_eq!(
        p3,
        hlo::print_module(&m4),
        "print(parse(print(read(write(parse(x)))))) differs from print(read(write(parse(x))))"
    );
});

/// The bytes the values of the module's literals take (constants, a custom
/// call's `literal=`): element counts times element sizes, saturating.
fn literal_bytes(m: &hlo::Module) -> u64 {
    fn shape_bytes(m: &hlo::Module, s: hlo::ShapeId, depth: usize) -> u64 {
        match m.shape(s) {
            hlo::Shape::Array(a) => a.element_count().map_or(u64::MAX, |n| {
                (n as u64).saturating_mul(u64::from(a.elem.byte_size().max(1)))
            }),
            hlo::Shape::Tuple(es) if depth < 64 => es
                .iter()
                .fold(0u64, |t, &e| t.saturating_add(shape_bytes(m, e, depth + 1))),
            _ => 0,
        }
    }
    let mut total = 0u64;
    for id in m.all_instructions() {
        let inst = m.inst(id);
        if inst.opcode == hlo::Opcode::Constant {
            total = total.saturating_add(shape_bytes(m, inst.shape, 0));
        }
        for a in &inst.attrs {
            if let hlo::AttrValue::Literal(s, _) = &a.value {
                total = total.saturating_add(shape_bytes(m, *s, 0));
            }
        }
    }
    total
}
