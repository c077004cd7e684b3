//! The fast path of the grammar: an instruction line in the form XLA prints
//! (`[ROOT ]%name = f32[2]{0} opcode(%a, %b), key=value, ...`) delimited by
//! hand, without pest's per-rule bookkeeping.
//!
//! Invariant: [`instruction`] returns `Some` only where `hlo.pest`'s
//! `instruction` rule (followed by the computation's `w`) matches the same
//! text, with the same tokens: the name, shape, call, opcode, operand and
//! attribute spans it returns are exactly the spans of the grammar's
//! `inst_name`, `shape`, `generic_call`, `opcode`, `operand` and `attr`
//! tokens. It follows the grammar's first successful alternative at every
//! choice and returns `None` (the caller then runs the grammar itself on the
//! line) wherever it is not certain: a tuple or buffer shape, an instruction
//! without a shape, a nested instruction or typed operand, a `constant`
//! literal that is no operand list, white space or comments other than
//! where XLA prints them, non-ASCII text outside strings, bracket groups
//! that do not close. So every accepted module lowers exactly as the
//! grammar's tokens would, and every error still comes from the grammar.

use smallvec::SmallVec;

use super::{CallParts, CompHead, InstParts, NAME_BYTE};

/// Bytes an attribute value's bare run (`value_char` in the grammar) is made
/// of: every character but white space, control characters, `,`, `"` and
/// brackets (all non-ASCII characters are value characters).
const VALUE_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0x21;
    while b < 256 {
        t[b] = !matches!(
            b as u8,
            b'"' | b'(' | b')' | b',' | b'[' | b']' | b'{' | b'}' | 0x7F
        );
        b += 1;
    }
    t
};

/// Bytes where a parenthesised or bracketed group's plain text ends
/// (`paren_rest` / `bracket_rest`): brackets of any kind and `"`.
const GROUP_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let special = b"(){}[]\"";
    let mut k = 0;
    while k < special.len() {
        t[special[k] as usize] = true;
        k += 1;
    }
    t
};

/// Deepest group nesting the fast path follows (deeper: the grammar's).
const MAX_NEST: usize = 64;

#[inline]
fn at(b: &[u8], i: usize) -> u8 {
    b.get(i).copied().unwrap_or(0)
}

/// The grammar's `w` from byte `i`: white space (`' '`, `\t`..`\r`) and
/// closed comments (`/* */`, `//` to the end of the line); returns where it
/// stops.
pub(super) fn skip_w(b: &[u8], mut i: usize) -> usize {
    loop {
        match at(b, i) {
            b' ' | b'\t'..=b'\r' => i += 1,
            b'/' => match at(b, i + 1) {
                b'*' => match memchr::memmem::find(&b[i + 2..], b"*/") {
                    Some(p) => i += 2 + p + 2,
                    None => return i,
                },
                b'/' => {
                    i = memchr::memchr(b'\n', &b[i + 2..]).map_or(b.len(), |p| i + 2 + p);
                }
                _ => return i,
            },
            _ => return i,
        }
    }
}

/// `string_rest`: the text after an opening `"` up to and including the
/// closing one (a backslash escapes the next character).
fn string_rest(b: &[u8], mut i: usize) -> Option<usize> {
    loop {
        let p = i + memchr::memchr2(b'"', b'\\', b.get(i..)?)?;
        if b[p] == b'"' {
            return Some(p + 1);
        }
        // `\` and any one character; the bytes searched for are ASCII, so
        // skipping the character's first byte is enough.
        if p + 1 >= b.len() {
            return None;
        }
        i = p + 2;
    }
}

/// `brace_rest`: a group after its `{`, where only braces and strings
/// count, up to and including its `}`.
fn brace_rest(b: &[u8], mut i: usize) -> Option<usize> {
    let mut depth = 1usize;
    loop {
        let p = i + memchr::memchr3(b'{', b'}', b'"', b.get(i..)?)?;
        match b[p] {
            b'{' => {
                depth += 1;
                if depth > MAX_NEST {
                    return None;
                }
                i = p + 1;
            }
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(p + 1);
                }
                i = p + 1;
            }
            _ => i = string_rest(b, p + 1)?,
        }
    }
}

/// `paren_rest` / `bracket_rest`: a group after its `(` or `[`, up to and
/// including `close`; groups of every kind and strings nest inside.
fn group_rest(b: &[u8], mut i: usize, close: u8, depth: usize) -> Option<usize> {
    if depth > MAX_NEST {
        return None;
    }
    loop {
        let p = i + b.get(i..)?.iter().position(|&c| GROUP_BYTE[c as usize])?;
        let c = b[p];
        if c == close {
            return Some(p + 1);
        }
        i = match c {
            b'{' => brace_rest(b, p + 1)?,
            b'"' => string_rest(b, p + 1)?,
            b'(' => group_rest(b, p + 1, b')', depth + 1)?,
            b'[' => group_rest(b, p + 1, b']', depth + 1)?,
            // A closing bracket of another kind: the grammar fails here.
            _ => return None,
        };
    }
}

/// `value_piece` at `i`: `Ok(Some(end))` for a group or a run of value
/// characters, `Ok(None)` where none starts, `Err(())` for a group that the
/// fast path does not follow to its end.
fn value_piece(b: &[u8], i: usize) -> Result<Option<usize>, ()> {
    let end = match at(b, i) {
        b'{' => brace_rest(b, i + 1),
        b'"' => string_rest(b, i + 1),
        b'(' => group_rest(b, i + 1, b')', 1),
        b'[' => group_rest(b, i + 1, b']', 1),
        c if VALUE_BYTE[c as usize] => {
            let mut j = i + 1;
            while VALUE_BYTE[at(b, j) as usize] {
                j += 1;
            }
            Some(j)
        }
        _ => return Ok(None),
    };
    end.map(Some).ok_or(())
}

/// `attr_value` at `i` (a piece, further pieces up to a `,` or line break,
/// then pieces after spaces on the same line); `None`: not followed.
fn attr_value(b: &[u8], i: usize) -> Option<usize> {
    let mut i = value_piece(b, i).ok()??;
    loop {
        if matches!(at(b, i), b',' | b'\n') {
            break;
        }
        match value_piece(b, i).ok()? {
            Some(e) => i = e,
            None => break,
        }
    }
    // The grammar's `mesh_ids` (`, device_ids=(...)` continuing a mesh's
    // value): left to the grammar.
    let mut k = i;
    while matches!(at(b, k), b' ' | b'\t') {
        k += 1;
    }
    if at(b, k) == b',' {
        k += 1;
        while matches!(at(b, k), b' ' | b'\t') {
            k += 1;
        }
        if b.get(k..).is_some_and(|r| r.starts_with(b"device_ids")) {
            return None;
        }
    }
    loop {
        let mut k = i;
        while matches!(at(b, k), b' ' | b'\t') {
            k += 1;
        }
        if k == i || at(b, k) == b'/' {
            break;
        }
        match value_piece(b, k).ok()? {
            Some(e) => i = e,
            None => break,
        }
        while let Some(e) = value_piece(b, i).ok()? {
            i = e;
        }
    }
    Some(i)
}

/// An array shape written as XLA prints it (`f32[2,3]{1,0:T(8,128)}`) at
/// `i`: the end of the grammar's `shape` token, or `None`.
fn array_shape(b: &[u8], i: usize) -> Option<usize> {
    if !at(b, i).is_ascii_alphabetic() {
        return None;
    }
    let mut j = i + 1;
    while matches!(at(b, j), b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_') {
        j += 1;
    }
    if at(b, j) != b'[' {
        return None;
    }
    j += 1;
    let p = j + memchr::memchr2(b']', b'[', b.get(j..)?)?;
    if b[p] != b']' {
        return None;
    }
    j = p + 1;
    match at(b, j) {
        b'{' => {
            if !matches!(at(b, j + 1), b'0'..=b'9' | b':' | b'}') {
                return None;
            }
            let mut k = j + 1;
            loop {
                let p = k + memchr::memchr2(b'{', b'}', b.get(k..)?)?;
                if b[p] == b'}' {
                    return Some(p + 1);
                }
                let q = p + 1 + memchr::memchr2(b'{', b'}', b.get(p + 1..)?)?;
                if b[q] != b'}' {
                    return None;
                }
                k = q + 1;
            }
        }
        // A layout after white space (`f32[2] {0}`): the grammar's. A `{`
        // that cannot open a layout (`-> f32[2] {` of a computation) ends
        // the shape at the `]`, as the grammar's optional layout does.
        b' ' => {
            let mut k = j + 1;
            while matches!(at(b, k), b' ' | b'\t') {
                k += 1;
            }
            let layout = at(b, k) == b'{' && matches!(at(b, k + 1), b'0'..=b'9' | b':' | b'}');
            (!layout).then_some(j)
        }
        _ => Some(j),
    }
}

/// A shape at `i`: an array ([`array_shape`]) or a tuple of shapes
/// (`(f32[2], /*index=1*/s32[])`, white space and comments between the
/// elements); the end of the grammar's `shape` token, or `None` (also for a
/// buffer shape `b(...)`).
fn shape(b: &[u8], i: usize, depth: usize) -> Option<usize> {
    if at(b, i) != b'(' {
        return array_shape(b, i);
    }
    if depth > MAX_NEST {
        return None;
    }
    let mut j = skip_w(b, i + 1);
    if at(b, j) != b')' {
        loop {
            j = skip_w(b, shape(b, j, depth + 1)?);
            match at(b, j) {
                b',' => j = skip_w(b, j + 1),
                b')' => break,
                _ => return None,
            }
        }
    }
    Some(j + 1)
}

/// The head of a computation at `i` (`comp_head` of the grammar: `ENTRY`,
/// name, signature, `{` and the white space after it) in the form XLA
/// prints it, and where it ends; `None` where the grammar must decide.
pub(super) fn comp_head(text: &str, i: usize) -> Option<(CompHead<'_>, usize)> {
    let b = text.as_bytes();
    let mut i = i;
    let mut entry = false;
    if b.get(i..i + 5) == Some(b"ENTRY") {
        match at(b, i + 5) {
            b' ' => {
                entry = true;
                i += 6;
                while at(b, i) == b' ' {
                    i += 1;
                }
            }
            c if NAME_BYTE[c as usize] => {}
            _ => return None,
        }
    }
    let name_end = name(b, i)?;
    let name_text = &text[i..name_end];
    i = name_end;
    if at(b, i) == b' ' {
        i += 1;
    }
    let mut params: SmallVec<[&str; 8]> = SmallVec::new();
    let mut result = None;
    if at(b, i) == b'(' {
        // `signature`: `(`, `name: shape` separated by `,`, `)`, `->`, shape.
        i = skip_w(b, i + 1);
        if at(b, i) != b')' {
            loop {
                let end = name(b, i)?;
                params.push(&text[i..end]);
                if at(b, end) != b':' || at(b, end + 1) != b' ' {
                    return None;
                }
                i = skip_w(b, shape(b, end + 2, 1)?);
                match at(b, i) {
                    b',' => i = skip_w(b, i + 1),
                    b')' => break,
                    _ => return None,
                }
            }
        }
        i = skip_w(b, i + 1);
        if b.get(i..i + 2) != Some(b"->") {
            return None;
        }
        let s = skip_w(b, i + 2);
        i = shape(b, s, 1)?;
        result = Some(&text[s..i]);
        i = skip_w(b, i);
    }
    if at(b, i) != b'{' {
        return None;
    }
    let end = skip_w(b, i + 1);
    Some((
        CompHead {
            entry,
            name: name_text,
            params,
            result,
        },
        end,
    ))
}

/// A name (`'%'? ~ name_char+`) of ASCII name bytes at `i`: where it ends.
fn name(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + usize::from(at(b, i) == b'%');
    if !NAME_BYTE[at(b, j) as usize] {
        return None;
    }
    while NAME_BYTE[at(b, j) as usize] {
        j += 1;
    }
    // A non-ASCII name character would continue the grammar's name.
    (at(b, j) < 0x80).then_some(j)
}

/// The instruction starting at byte `i` of `text` (after the white space
/// before it), and where the white space after it ends; `None` where the
/// grammar must decide (see the module doc).
pub(super) fn instruction(text: &str, i: usize) -> Option<(InstParts<'_>, usize)> {
    let b = text.as_bytes();
    let start = i;
    let mut i = i;
    // `ROOT` (`'R' ~ root_kw`: `OOT`, no name character, white space).
    let mut root = false;
    if b.get(i..i + 4) == Some(b"ROOT") {
        match at(b, i + 4) {
            b' ' => {
                root = true;
                i += 5;
                while at(b, i) == b' ' {
                    i += 1;
                }
            }
            c if NAME_BYTE[c as usize] => {}
            _ => return None,
        }
    }
    // `inst_name`: scanned to a space or `=`; every byte a name byte.
    let name_start = i;
    if at(b, i) == b'%' {
        i += 1;
    }
    if !NAME_BYTE[at(b, i) as usize] {
        return None;
    }
    while NAME_BYTE[at(b, i) as usize] {
        i += 1;
    }
    let name = &text[name_start..i];
    match (at(b, i), at(b, i + 1)) {
        (b' ', b'=') => i += 2,
        (b'=', _) => i += 1,
        _ => return None,
    }
    if at(b, i) == b' ' {
        i += 1;
    }
    // The shape, one space, the call.
    let shape_start = i;
    i = shape(b, i, 1)?;
    let shape = &text[shape_start..i];
    if at(b, i) != b' ' {
        return None;
    }
    i += 1;
    // `generic_call`: opcode, `(`, operands, `)`.
    let call_start = i;
    if !at(b, i).is_ascii_alphabetic() {
        return None;
    }
    while matches!(at(b, i), b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-') {
        i += 1;
    }
    let opcode = &text[call_start..i];
    if at(b, i) != b'(' {
        return None;
    }
    i += 1;
    let mut operands: SmallVec<[&str; 4]> = SmallVec::new();
    if at(b, i) == b')' {
        i += 1;
    } else {
        loop {
            let o = i;
            match at(b, i) {
                // `'%' ~ (!(","|")") ~ ANY)*`.
                b'%' => i += 1 + memchr::memchr2(b',', b')', b.get(i + 1..)?)?,
                // A bare name (or a scalar literal): an `operand_ref` when a
                // `,` or `)` follows at once.
                c if NAME_BYTE[c as usize] => {
                    while NAME_BYTE[at(b, i) as usize] {
                        i += 1;
                    }
                    if !matches!(at(b, i), b',' | b')') {
                        return None;
                    }
                }
                _ => return None,
            }
            operands.push(&text[o..i]);
            if at(b, i) == b')' {
                i += 1;
                break;
            }
            // `op_sep`: `,` then one space before a `%`, or `w`.
            i += 1;
            if at(b, i) == b' ' && at(b, i + 1) == b'%' {
                i += 1;
            } else {
                i = skip_w(b, i);
            }
        }
    }
    let call = &text[call_start..i];
    // `attr_list`: `w`, then (`,` separator, `key=value`, `w`)*.
    let mut attrs: SmallVec<[&str; 4]> = SmallVec::new();
    i = skip_w(b, i);
    while at(b, i) == b',' {
        i += 1;
        if at(b, i) == b' ' && at(b, i + 1).is_ascii_lowercase() {
            i += 1;
        } else {
            i = skip_w(b, i);
        }
        let a = i;
        if !NAME_BYTE[at(b, i) as usize] {
            return None;
        }
        while NAME_BYTE[at(b, i) as usize] {
            i += 1;
        }
        if at(b, i) != b'=' {
            return None;
        }
        i = attr_value(b, i + 1)?;
        attrs.push(&text[a..i]);
        i = skip_w(b, i);
    }
    Some((
        InstParts {
            at: start,
            root,
            name,
            shape: Some(shape),
            call: CallParts::Generic {
                text: call,
                opcode,
                operands,
            },
            attrs,
        },
        i,
    ))
}
