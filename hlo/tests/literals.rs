//! Constant literals are decoded once, at parse time, into typed values
//! (`hlo::attrs::literal`):
//! - a module with constants of every primitive type (range limits, -0,
//!   infinities, NaN payloads, complex values, a single value for an array, dynamic
//!   dimensions, tuples) reads back as the same values from our printed
//!   text and from our HloModuleProto;
//! - the printed text is the snapshot (floats as the shortest decimal that
//!   reads back as the element type's value);
//! - what a proto cannot hold (a dynamic dimension below its bound, an
//!   elided literal `{...}` too large to fill with XLA's values) is a clear
//!   error when writing one;
//! - a malformed literal is an error at its `file:line:col`.

mod common;

use common::*;
use hlo::attrs::literal::Literal;

fn read(name: &str) -> String {
    std::fs::read_to_string(testdata().join("hlo").join(name)).expect("readable test file")
}

/// `text` parsed, printed and the print parsed again.
fn parse_print_parse(text: &str, name: &str) -> (hlo::Module, String, hlo::Module) {
    let m1 = hlo::parse_module_named(text, name).expect("parses");
    let printed = hlo::print_module(&m1);
    let m2 = hlo::parse_module_named(&printed, "printed").expect("printed text parses");
    (m1, printed, m2)
}

/// Every constant's name and literal, in instruction order.
fn literals(m: &hlo::Module) -> Vec<(String, Literal)> {
    m.computations()
        .flat_map(|c| m.comp(c).order.iter().copied())
        .filter_map(|i| {
            let inst = m.inst(i);
            inst.literal().map(|l| (inst.name.to_string(), l.clone()))
        })
        .collect()
}

#[test]
fn literals_of_every_type_round_trip_through_text() {
    let (m1, printed, m2) = parse_print_parse(&read("own_literals.hlo"), "own_literals.hlo");
    assert_eq!(literals(&m1), literals(&m2));
    assert_eq!(literals(&m1).len(), 34);
    assert_eq!(printed, hlo::print_module(&m2));
    insta::assert_snapshot!(printed);
}

#[test]
fn literals_of_every_type_round_trip_through_a_proto() {
    let text = read("own_literals.hlo");
    let m1 = hlo::parse_module_named(&text, "own_literals.hlo").expect("parses");
    let bytes = hlo::proto::to_bytes(&m1).expect("writes a proto");
    let m2 = hlo::proto::from_bytes(&bytes).expect("reads the proto back");
    assert_eq!(literals(&m1), literals(&m2));
    // One value written for an array is its first element, the others zero
    // (as XLA's parser reads it); the proto holds them all.
    let fill = |m: &hlo::Module| {
        literals(m)
            .into_iter()
            .find(|(n, _)| n == "fill")
            .map(|(_, l)| l)
    };
    match fill(&m2) {
        Some(Literal::Array(a)) => {
            assert!(!a.is_single() && a.len() == 6);
            assert_eq!(a.element(0), 1.5f32.to_le_bytes());
            assert!((1..6).all(|k| a.element(k) == [0; 4]));
        }
        other => panic!("fill read back as {other:?}"),
    }
}

#[test]
fn literals_a_proto_cannot_hold_are_errors_when_writing_one() {
    let text = read("own_literals_text.hlo");
    let (m, _, m2) = parse_print_parse(&text, "own_literals_text.hlo");
    assert_eq!(literals(&m), literals(&m2));
    let err = hlo::proto::to_bytes(&m).expect_err("a dynamic literal below its bound");
    assert!(err.to_string().contains("below its bounds"), "{err}");
    // Elided values are XLA's made-up values (own_elided_literals.hlo and
    // the proto conformance test), up to protobuf's 2 GiB limit: XLA would
    // fill 4 GB here, and no proto can hold them. Refused before anything
    // is allocated.
    let huge = "HloModule huge\nENTRY %e () -> f32[1000000000] {\n  \
                ROOT %c = f32[1000000000] constant({...})\n}\n";
    let m = hlo::parse_module_named(huge, "huge").expect("parses");
    let err = hlo::proto::to_bytes(&m).expect_err("4 GB of made-up values");
    let msg = err.to_string();
    assert!(
        msg.contains("%c") && msg.contains("4000000000 bytes") && msg.contains("2147483647"),
        "{msg}"
    );
    // A literal at the limit fits alone, but not with its instruction's
    // other fields: the whole proto is bounded, the error names the
    // instruction that reaches the limit (still before any allocation).
    let at_limit = "HloModule at_limit\nENTRY %e () -> u8[2147483647] {\n  \
                    ROOT %full = u8[2147483647] constant({...})\n}\n";
    let m = hlo::parse_module_named(at_limit, "at_limit").expect("parses");
    let err = hlo::proto::to_bytes(&m).expect_err("a proto over 2 GiB");
    let msg = err.to_string();
    assert!(
        msg.contains("%full") && msg.contains("over protobuf's limit of 2147483647"),
        "{msg}"
    );
}

/// The proto writer generates an elided array's values straight into its
/// output, 64 KiB at a time; the message it would otherwise build holds
/// them made whole. Both must be the same bytes, across chunk boundaries
/// (the `n % 4` leftover bytes of `s8[262147]` land at byte 65536, the
/// second chunk), for raw-byte fields, packed varints (`s32`, whose negative
/// values take ten bytes each, `u64`), `pred` and an empty array.
#[test]
fn streamed_elided_literals_are_the_made_values() {
    let text = "HloModule big_elided\n\
                ENTRY %e () -> (s8[262147], s32[70001], u64[9000], pred[131077], f32[1,70000], bf16[0]) {\n  \
                %a = s8[262147] constant({...})\n  \
                %b = s32[70001] constant({...})\n  \
                %c = u64[9000] constant({...})\n  \
                %d = pred[131077] constant({...})\n  \
                %f = f32[1,70000] constant({...})\n  \
                %g = bf16[0] constant({...})\n  \
                ROOT %t = (s8[262147], s32[70001], u64[9000], pred[131077], f32[1,70000], bf16[0]) \
                tuple(%a, %b, %c, %d, %f, %g)\n}\n";
    let m = hlo::parse_module_named(text, "big_elided").expect("parses");
    let whole = prost::Message::encode_to_vec(&hlo::proto::module_to_proto(&m).expect("writes"));
    let streamed = hlo::proto::to_bytes(&m).expect("writes");
    assert!(
        whole == streamed,
        "streamed bytes differ from the made literal's"
    );
}

/// XLA's made-up values, as [`ElidedFill`]'s docs state them, computed
/// here the plain way (the whole array at once) for sizes around the
/// writer's 64 KiB chunks.
#[test]
fn elided_fill_makes_xlas_values_across_chunks() {
    use hlo::attrs::literal::ElidedFill;
    use hlo::PrimType;
    let plain = |word: &mut u32, byte: &mut u8, n: usize, mask: u8| {
        let mut data = vec![0u8; n];
        for w in data.chunks_exact_mut(4) {
            for (b, x) in w.iter_mut().zip(word.to_le_bytes()) {
                *b = x & mask;
            }
            *word = word.wrapping_add(1);
        }
        for j in 0..n % 4 {
            data[n / 4 + j] = *byte & mask;
            *byte = byte.wrapping_add(1);
        }
        data
    };
    let (mut word, mut byte) = (0u32, 0u8);
    let mut fill = ElidedFill::default();
    for (elem, n) in [
        (PrimType::S8, 3),
        (PrimType::S8, 65535),
        (PrimType::S8, 262147),
        (PrimType::Pred, 131077),
        (PrimType::S8, 0),
        (PrimType::U8, 65536 * 3 + 1),
    ] {
        let mask = if elem == PrimType::Pred { 1 } else { 0xff };
        let want = plain(&mut word, &mut byte, n, mask);
        let got = fill.array(elem, &[n as i64]).expect("fills");
        // One byte an element for these types.
        let got: Vec<u8> = (0..got.len()).map(|k| got.element(k)[0]).collect();
        assert!(got == want, "{elem}[{n}]");
    }
}

/// (constant line, `line:col` of the problem, a word the message must hold).
const MALFORMED: &[(&str, &str, &str)] = &[
    ("c = s8[2] constant({1, 128})", "6:26", "out of range"),
    ("c = f32[2] constant({1, x})", "6:27", "floating-point"),
    ("c = s32[2] constant({1, 2.5})", "6:27", "integer"),
    ("c = f32[2] constant({1, 2, 3})", "6:23", "2 elements"),
    ("c = f32[] constant({1})", "6:22", "single value"),
    ("c = bf16[] constant(nan(0x3ff))", "6:23", "payload"),
    ("c = f8e4m3fn[] constant(nan(0x1))", "6:27", "NaN payloads"),
    ("c = c64[] constant(1)", "6:22", "(real, imag)"),
    ("c = (f32[], s32[]) constant((1 2))", "6:34", "`,`"),
    ("c = (f32[], s32[]) constant((1, 2, 3))", "6:36", "`)`"),
    ("c = pred[] constant(2)", "6:23", "pred"),
    ("c = s32[<=2] constant({1, 2, 3})", "6:25", "at most 2"),
    ("c = f16[] constant(1e5)", "6:22", "out of range"),
    // `{...}` elides a whole array only, as XLA's parser reads it.
    ("c = f32[] constant({...})", "6:22", "single value"),
    (
        "c = (f32[2], s32[]) constant({...})",
        "6:32",
        "`(element, ...)`",
    ),
    (
        "c = f32[2,2] constant({{...}, {...}})",
        "6:27",
        "nest level 2",
    ),
    // The f8 types: a finite value that rounds to infinity or NaN is out of
    // range, as XLA reads it (jaxlib 0.10.2); e8m0fnu has no zero and no
    // negative values.
    ("c = f8e5m2[] constant(1e6)", "6:25", "out of range"),
    (
        "c = f8e4m3fn[2] constant({1, 465})",
        "6:32",
        "[-4.48e2, 4.48e2]",
    ),
    ("c = f8e4m3b11fnuz[] constant(1e9)", "6:32", "out of range"),
    ("c = f8e5m2fnuz[] constant(-1e6)", "6:29", "out of range"),
    ("c = f8e3m4[] constant(100)", "6:25", "out of range"),
    ("c = f8e8m0fnu[] constant(-1)", "6:28", "out of range"),
    ("c = f8e8m0fnu[] constant(0)", "6:28", "out of range"),
    ("c = f8e8m0fnu[] constant(3e38)", "6:28", "out of range"),
    // Integers of every width, at and past their ranges.
    ("c = s4[2] constant({1, 8})", "6:26", "[-8, 7]"),
    ("c = u4[] constant(16)", "6:21", "out of range"),
    ("c = u8[2] constant({1, -1})", "6:26", "out of range"),
    (
        "c = s64[] constant(9223372036854775808)",
        "6:22",
        "out of range",
    ),
    (
        "c = u64[] constant(18446744073709551616)",
        "6:22",
        "out of range",
    ),
    ("c = u32[] constant(0x10)", "6:22", "integer"),
    ("c = f64[] constant(1e400)", "6:22", "double"),
    ("c = bf16[] constant(1e39)", "6:23", "out of range"),
    ("c = c128[] constant((1, x))", "6:27", "imaginary part"),
    ("c = f32[2,2] constant({{1, 2}, {3}})", "6:34", "elements"),
];

#[test]
fn malformed_literals_are_errors_at_their_position() {
    for (line, at, word) in MALFORMED {
        let text = format!("HloModule m\n\nENTRY e {{\n  p = f32[] parameter(0)\n  n = f32[] negate(p)\n  {line}\n  ROOT t = () tuple()\n}}\n");
        let err = match hlo::parse_module_named(&text, "m.hlo") {
            Ok(_) => panic!("{line}: accepted"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(&format!("m.hlo:{at}:")), "{line}: {err}");
        assert!(err.contains(word), "{line}: {err}");
    }
}

/// Values at the edges of the f8 and f4 types read as XLA (jaxlib 0.10.2)
/// reads them: rounded into range when they round to a finite value, e2m1fn
/// saturating (it has no infinity) and reading `nan` as -0 and `-nan` as 0
/// (it has no NaN), e8m0fnu rounding a tiny value up to its smallest.
#[test]
fn small_float_edges_read_as_xla_reads_them() {
    for (line, printed) in [
        ("c = f8e4m3fn[] constant(464)", "constant(450)"),
        ("c = f8e5m2[] constant(61439)", "constant(60000)"),
        (
            "c = f4e2m1fn[4] constant({nan, -nan, 100, -inf})",
            "constant({-0.0, 0, 6, -6})",
        ),
        ("c = f8e8m0fnu[] constant(1e-50)", "constant(6e-39)"),
    ] {
        let text = format!("HloModule m\n\nENTRY e {{\n  ROOT {line}\n}}\n");
        let m = hlo::parse_module_named(&text, "m.hlo").unwrap_or_else(|e| panic!("{line}: {e}"));
        let out = hlo::print_module(&m);
        assert!(
            out.contains(printed),
            "{line}: expected `{printed}` in\n{out}"
        );
        round_trip(&text, "m.hlo").unwrap_or_else(|e| panic!("{line}: {e}"));
    }
}
