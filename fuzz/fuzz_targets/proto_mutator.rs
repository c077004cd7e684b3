//! Wire-aware mutation of a serialized protobuf, for the `proto` target:
//! most mutations are libFuzzer's own (byte edits, cross-over); one in two
//! parses the input as protobuf fields, walks down a random path of nested
//! messages (a length-delimited field whose bytes parse as fields is taken
//! for a message) and changes one field there: an integer set to an edge
//! value or moved by one, a float set to NaN/infinity, bytes truncated or
//! emptied, a field removed, repeated, or given the value of a sibling with
//! the same number. Lengths are re-encoded, so the result stays valid on the
//! wire and reaches the reader's module checks (ids, shapes, literals,
//! shardings, stack frames, ...) rather than the wire decoder.
//!
//! Invariant: the result is at most `max_size` bytes and deterministic in
//! `seed`.

use crate::rng::Rng;

/// One field of a message: its number, wire type and raw value.
#[derive(Clone)]
enum Value {
    Varint(u64),
    Fixed64([u8; 8]),
    Fixed32([u8; 4]),
    Bytes(Vec<u8>),
}

#[derive(Clone)]
struct Field {
    tag: u64,
    value: Value,
}

fn varint(buf: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..70).step_by(7) {
        let (&b, rest) = buf.split_first()?;
        *buf = rest;
        if shift == 63 && b > 1 {
            return None;
        }
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn put_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The fields of `bytes`, or `None` when they are not a message.
fn parse(mut bytes: &[u8]) -> Option<Vec<Field>> {
    let mut fields = Vec::new();
    while !bytes.is_empty() {
        let key = varint(&mut bytes)?;
        let (tag, wire) = (key >> 3, key & 7);
        if tag == 0 {
            return None;
        }
        let value = match wire {
            0 => Value::Varint(varint(&mut bytes)?),
            1 => {
                let (v, rest) = bytes.split_first_chunk::<8>()?;
                bytes = rest;
                Value::Fixed64(*v)
            }
            2 => {
                let len = usize::try_from(varint(&mut bytes)?).ok()?;
                if len > bytes.len() {
                    return None;
                }
                let (v, rest) = bytes.split_at(len);
                bytes = rest;
                Value::Bytes(v.to_vec())
            }
            5 => {
                let (v, rest) = bytes.split_first_chunk::<4>()?;
                bytes = rest;
                Value::Fixed32(*v)
            }
            _ => return None,
        };
        fields.push(Field { tag, value });
    }
    Some(fields)
}

fn encode(fields: &[Field]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in fields {
        let wire = match f.value {
            Value::Varint(_) => 0,
            Value::Fixed64(_) => 1,
            Value::Bytes(_) => 2,
            Value::Fixed32(_) => 5,
        };
        put_varint(f.tag << 3 | wire, &mut out);
        match &f.value {
            Value::Varint(v) => put_varint(*v, &mut out),
            Value::Fixed64(v) => out.extend_from_slice(v),
            Value::Fixed32(v) => out.extend_from_slice(v),
            Value::Bytes(b) => {
                put_varint(b.len() as u64, &mut out);
                out.extend_from_slice(b);
            }
        }
    }
    out
}

/// Integers worth trying: ids, counts, enum values, dimensions at an edge.
const INTS: &[u64] = &[
    0,
    1,
    2,
    3,
    7,
    31,
    63,
    64,
    255,
    1 << 31,
    (1 << 31) - 1,
    1 << 32,
    1 << 62,
    i64::MAX as u64,
    u64::MAX,     // -1
    u64::MAX - 1, // -2
    1 << 63,      // i64::MIN
    0xffff_ffff,  // -1 as an int32 written as uint32
];

/// Changes one field somewhere in `fields` (recursing into nested messages).
fn mutate_fields(fields: &mut Vec<Field>, rng: &mut Rng, depth: usize) {
    if fields.is_empty() {
        return;
    }
    let i = rng.below(fields.len());
    if let Value::Bytes(b) = &fields[i].value {
        if depth < 32 && rng.below(4) != 0 {
            if let Some(mut inner) = parse(b).filter(|f| !f.is_empty()) {
                mutate_fields(&mut inner, rng, depth + 1);
                fields[i].value = Value::Bytes(encode(&inner));
                return;
            }
        }
    }
    match rng.below(8) {
        0 => {
            fields.remove(i);
        }
        1 => {
            let f = fields[i].clone();
            fields.insert(rng.below(fields.len() + 1), f);
        }
        2 => {
            // The value of a sibling with the same number (another
            // instruction, computation, dimension, ...).
            let tag = fields[i].tag;
            let same: Vec<usize> = (0..fields.len())
                .filter(|&j| fields[j].tag == tag)
                .collect();
            let j = same[rng.below(same.len())];
            fields[i].value = fields[j].value.clone();
        }
        _ => {
            let v = &mut fields[i].value;
            match v {
                Value::Varint(x) => {
                    *x = match rng.below(3) {
                        0 => INTS[rng.below(INTS.len())],
                        1 => x.wrapping_add(1),
                        _ => x.wrapping_sub(1),
                    }
                }
                Value::Fixed32(x) => {
                    let f: f32 = [f32::NAN, f32::INFINITY, -0.0, f32::MAX, 1e-45][rng.below(5)];
                    *x = f.to_le_bytes();
                }
                Value::Fixed64(x) => {
                    let f: f64 = [f64::NAN, f64::NEG_INFINITY, -0.0, f64::MAX][rng.below(4)];
                    *x = f.to_le_bytes();
                }
                Value::Bytes(b) => match rng.below(4) {
                    0 => b.clear(),
                    1 => b.truncate(rng.below(b.len() + 1)),
                    2 if !b.is_empty() => {
                        let at = rng.below(b.len());
                        b[at] = b"\0\xff-_.{}x9"[rng.below(9)];
                    }
                    _ => {
                        let piece = b[..rng.below(b.len() + 1)].to_vec();
                        b.extend_from_slice(&piece);
                    }
                },
            }
        }
    }
}

/// Mutates `data[..size]` in place; returns the new size (at most `max_size`).
pub fn mutate(data: &mut [u8], size: usize, max_size: usize, seed: u32) -> usize {
    let mut rng = Rng(seed | 1);
    if rng.below(2) == 0 {
        return libfuzzer_sys::fuzzer_mutate(data, size, max_size);
    }
    let Some(mut fields) = parse(&data[..size]) else {
        return libfuzzer_sys::fuzzer_mutate(data, size, max_size);
    };
    for _ in 0..1 + rng.below(3) {
        mutate_fields(&mut fields, &mut rng, 0);
    }
    let out = encode(&fields);
    if out.len() > max_size {
        return libfuzzer_sys::fuzzer_mutate(data, size, max_size);
    }
    data[..out.len()].copy_from_slice(&out);
    out.len()
}
