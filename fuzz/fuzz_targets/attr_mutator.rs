//! Structure-aware mutation of HLO text, shared by the `parse_print` and
//! `passes` targets: most mutations are libFuzzer's own (byte edits, the
//! `-dict=hlo.dict` tokens, cross-over); one in three picks an attribute
//! value (`key=value`, the value up to the next top-level `,`, `)` or line
//! end, braces balanced) and replaces it with a value of another typed kind,
//! the value of another attribute of the input, or the same value with one
//! character changed. Byte-level mutation rarely keeps a module parseable up
//! to the attribute it edits; this reaches every typed decoder with values
//! that are almost right.
//!
//! Invariant: the result is at most `max_size` bytes and deterministic in
//! `seed`.

use crate::rng::Rng;

/// Values of every typed attribute kind, some malformed or at an edge.
const VALUES: &[&str] = &[
    "0",
    "-1",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "4294967296",
    "1e39",
    "nan",
    "-inf",
    "true",
    "false",
    "{}",
    "{0}",
    "{1,0}",
    "{0,1,2,3,4,5,6,7}",
    "{-1}",
    "{true,false}",
    "{{0,1},{1,0}}",
    "{{}}",
    "{size=2x2 stride=2x2 pad=0_0x1_1 lhs_dilate=1x2 rhs_dilate=2x1 rhs_reversal=0x1}",
    "{size=3 pad=-1_-1}",
    "0_0_0x1_1_1",
    "{[0:4:2], [0:3]}",
    "{[4:0]}",
    "{replicated}",
    "{maximal device=0}",
    "{manual}",
    "{unknown}",
    "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dims={manual}}",
    "{devices=[2,2]0,1,2,3 last_tile_dim_replicate}",
    "{devices=[2]<=[4]}",
    "{{replicated}, {maximal device=1}}",
    "{mesh['x'=2,'y'=2], [{'x'}, {?}]}",
    "{mesh['x'=2], [{'y'}]}",
    "{mesh['x'=2], [], unreduced={'x'}}",
    "{replicated shard_as 1}",
    "[2,2]<=[4]",
    "[2,2]<=[2,2]T(1,0)",
    "[4]<=[4]",
    "mesh['a'=2,'b'=2] {'b'}",
    "mesh['a'=2] {'c'}",
    "{op_type=\"Neg\" op_name=\"a\" source_file=\"f.py\" source_line=3 stack_frame_id=1}",
    "{profile_type={FLAG} deduplicated_name=\"d\" preserve_layout=true}",
    "{a=\"1\",b=\"2\"}",
    "{composite.attributes={n = 1 : i32}}",
    "{{0}: (0, {}), {1}: (1, {0})}",
    "{{0}: (0, {}, may-alias)}",
    "{ {0}: (0, {}, must-alias) }",
    "{(0, {})}",
    "b01f_01io->b01f",
    "bf_io->bf",
    "?bf_i?o->bf?",
    "{kind=\"sharding\", entry={maximal device=0}, exit={replicated}}",
    "{visualizing_index=1,stat-1=33.5}",
    "{mode=highest}",
    "{tolerance={atol=0.1,rtol=0,ulps=2}}",
    "\"x\\\"y\\t\\101\"",
    "\"\"",
    "kLoop",
    "kCustom",
    "TOTALORDER",
    "LT",
    "rng_philox",
    "IRFFT",
    "ADJOINT",
    "API_VERSION_TYPED_FFI",
    "SCHEDULE_LATEST",
    "dot_bf16_bf16_f32",
    "{highest,default}",
    "{f32[4,6]{0,1}, f32[]}",
    "{(f32[2]{0}, s32[]), f32[<=3]}",
    "{(f32[4,6]{1,0}, f32[6,8]{1,0})->f32[4,6]{1,0}}",
    "{{0}: (\"p\", {1})}",
    "{{1}: (0, {0}), {0}: (\"\", {})}",
    "{L=0 R=1 N=2}",
    "{L.2:4}",
    "{1, 2, 3}",
    "{...}",
    "(1, 2)",
    "nan(0x7fffff)",
];

/// Where each `key=value` of `text` has its value: (start, end) byte offsets.
fn value_spans(text: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    for (i, &b) in text.iter().enumerate() {
        // `key=`: a word character before `=`, not `==` or `<=`.
        if b != b'=' || i == 0 || !(text[i - 1].is_ascii_alphanumeric() || text[i - 1] == b'_') {
            continue;
        }
        let start = i + 1;
        let (mut depth, mut end, mut quoted) = (0i32, start, false);
        while end < text.len() {
            let c = text[end];
            if quoted {
                if c == b'\\' {
                    end += 1;
                } else if c == b'"' {
                    quoted = false;
                }
            } else {
                match c {
                    b'"' => quoted = true,
                    b'{' | b'[' | b'(' => depth += 1,
                    b'}' | b']' | b')' if depth == 0 => break,
                    b'}' | b']' | b')' => depth -= 1,
                    b',' | b' ' if depth == 0 => break,
                    b'\n' => break,
                    _ => {}
                }
            }
            end += 1;
        }
        if end > start {
            spans.push((start, end.min(text.len())));
        }
    }
    spans
}

/// Mutates `data[..size]` in place; returns the new size (at most `max_size`).
pub fn mutate(data: &mut [u8], size: usize, max_size: usize, seed: u32) -> usize {
    let mut rng = Rng(seed | 1);
    if rng.below(3) != 0 {
        return libfuzzer_sys::fuzzer_mutate(data, size, max_size);
    }
    let text = &data[..size];
    let spans = value_spans(text);
    if spans.is_empty() {
        return libfuzzer_sys::fuzzer_mutate(data, size, max_size);
    }
    let (start, end) = spans[rng.below(spans.len())];
    let new: Vec<u8> = match rng.below(3) {
        0 => VALUES[rng.below(VALUES.len())].as_bytes().to_vec(),
        1 => {
            let (s, e) = spans[rng.below(spans.len())];
            text[s..e].to_vec()
        }
        _ => {
            let mut v = text[start..end].to_vec();
            let at = rng.below(v.len());
            const CHARS: &[u8] = b"0123456789-_x,{}[]()=:.'\"?<>T ";
            match rng.below(3) {
                0 => v[at] = CHARS[rng.below(CHARS.len())],
                1 => {
                    v.remove(at);
                }
                _ => v.insert(at, CHARS[rng.below(CHARS.len())]),
            }
            v
        }
    };
    let out: Vec<u8> = [&text[..start], &new[..], &text[end..]].concat();
    if out.len() > max_size {
        return libfuzzer_sys::fuzzer_mutate(data, size, max_size);
    }
    data[..out.len()].copy_from_slice(&out);
    out.len()
}
