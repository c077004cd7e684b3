//! The attribute kinds whose typed form is one of XLA's proto messages
//! ([`crate::ir::xla`]: shardings, op metadata, frontend attributes, replica
//! groups, aliasing, domains, statistics, result accuracy, original values,
//! ...): their one decoding path. The parser decodes them from text at parse
//! time; the `write_*` functions print them in XLA's spelling; the proto
//! reader checks a message (`*_from_proto`) instead of going through text.
//!
//! Every decoder takes the attribute's verbatim text and returns the message
//! or a message saying what is wrong; nothing here panics on any text.

use std::fmt::Write as _;

pub use crate::ir::values::{
    DomainShardings, IotaList, OriginalArray, OriginalNode, OriginalValue, RecoveryEntry,
    RecoveryTable, ReplicaGroups,
};
use crate::ir::xla;
use smallvec::SmallVec;

type R<T> = Result<T, String>;

/// A cursor over attribute text.
pub(crate) struct Cur<'s> {
    pub s: &'s str,
    pub i: usize,
}

impl<'s> Cur<'s> {
    pub fn new(s: &'s str) -> Self {
        Cur { s, i: 0 }
    }
    pub fn rest(&self) -> &'s str {
        self.s.get(self.i..).unwrap_or("")
    }
    /// Skips white space and `/* ... */` comments (XLA prints `/*index=5*/`
    /// inside long tuple shardings; its lexer reads comments as white space).
    pub fn ws(&mut self) {
        let b = self.s.as_bytes();
        loop {
            // Most calls stand at a token already: one byte look.
            match b.get(self.i) {
                Some(c) if c.is_ascii_whitespace() => self.i += 1,
                Some(b'/') if b.get(self.i + 1) == Some(&b'*') => {
                    match self.s.get(self.i + 2..).and_then(|c| c.find("*/")) {
                        Some(end) => self.i += 2 + end + 2,
                        None => return,
                    }
                }
                Some(c) if *c >= 0x80 => {
                    // Other white space of Unicode, as `str::trim_start` reads it.
                    let r = self.rest();
                    let n = r.len() - r.trim_start().len();
                    if n == 0 {
                        return;
                    }
                    self.i += n;
                }
                _ => return,
            }
        }
    }
    pub fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.as_bytes().get(self.i).copied()
    }
    pub fn at_end(&mut self) -> bool {
        self.peek().is_none()
    }
    pub fn eat(&mut self, t: &str) -> bool {
        self.ws();
        if self.rest().starts_with(t) {
            self.i += t.len();
            true
        } else {
            false
        }
    }
    pub fn expect(&mut self, t: &str) -> R<()> {
        if self.eat(t) {
            Ok(())
        } else {
            Err(format!("expected `{t}` at `{}`", snippet(self.rest())))
        }
    }
    /// A word of letters, digits, `_`, `.`, `-` (may be empty).
    pub fn word(&mut self) -> &'s str {
        self.ws();
        let r = self.rest();
        let n = r
            .bytes()
            .position(|b| !(b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-'))
            .unwrap_or(r.len());
        self.i += n;
        &r[..n]
    }
    pub fn int(&mut self) -> R<i64> {
        self.ws();
        let r = self.rest();
        let n = r
            .bytes()
            .enumerate()
            .position(|(k, b)| !(b.is_ascii_digit() || (k == 0 && (b == b'-' || b == b'+'))))
            .unwrap_or(r.len());
        let v = r[..n]
            .parse()
            .map_err(|_| format!("expected an integer at `{}`", snippet(r)))?;
        self.i += n;
        Ok(v)
    }
    /// `{a,b,c}` of integers.
    pub fn int_list(&mut self) -> R<Vec<i64>> {
        self.expect("{")?;
        let mut v = Vec::new();
        if self.eat("}") {
            return Ok(v);
        }
        loop {
            v.push(self.int()?);
            if self.eat("}") {
                return Ok(v);
            }
            self.expect(",")?;
        }
    }
    /// `[a,b,c]` of integers.
    pub fn bracket_list(&mut self) -> R<Vec<i64>> {
        self.expect("[")?;
        let mut v = Vec::new();
        if self.eat("]") {
            return Ok(v);
        }
        loop {
            v.push(self.int()?);
            if self.eat("]") {
                return Ok(v);
            }
            self.expect(",")?;
        }
    }
    /// A double-quoted C-escaped string, unescaped to bytes.
    pub fn quoted_bytes(&mut self) -> R<Vec<u8>> {
        self.ws();
        let r = self.rest();
        if !r.starts_with('"') {
            return Err(format!("expected a quoted string at `{}`", snippet(r)));
        }
        let b = r.as_bytes();
        let mut out = Vec::new();
        let mut k = 1;
        while k < b.len() {
            // Copy the run up to the next quote or backslash at once.
            let run = memchr::memchr2(b'"', b'\\', &b[k..]).unwrap_or(b.len() - k);
            out.extend_from_slice(&b[k..k + run]);
            k += run;
            if k >= b.len() {
                break;
            }
            match b[k] {
                b'"' => {
                    self.i += k + 1;
                    return Ok(out);
                }
                b'\\' => {
                    let Some(&e) = b.get(k + 1) else { break };
                    k += 2;
                    match e {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'0'..=b'7' => {
                            let mut v = u32::from(e - b'0');
                            let mut n = 1;
                            while n < 3 && matches!(b.get(k), Some(b'0'..=b'7')) {
                                v = v * 8 + u32::from(b[k] - b'0');
                                k += 1;
                                n += 1;
                            }
                            out.push(v as u8);
                        }
                        b'x' => {
                            let mut v = 0u32;
                            while let Some(d) = b.get(k).and_then(|c| (*c as char).to_digit(16)) {
                                v = (v * 16 + d) & 0xff;
                                k += 1;
                            }
                            out.push(v as u8);
                        }
                        o => out.push(o),
                    }
                }
                c => {
                    out.push(c);
                    k += 1;
                }
            }
        }
        Err(format!("unterminated string at `{}`", snippet(r)))
    }
    pub fn quoted(&mut self) -> R<String> {
        // Text is UTF-8 already: a string without escapes is its own value.
        self.ws();
        let r = self.rest();
        if let Some(body) = r.strip_prefix('"') {
            if let Some(end) = memchr::memchr2(b'"', b'\\', body.as_bytes()) {
                if body.as_bytes()[end] == b'"' {
                    self.i += end + 2;
                    return Ok(body[..end].to_string());
                }
            }
        }
        let b = self.quoted_bytes()?;
        String::from_utf8(b).map_err(|_| "a string is not valid UTF-8".to_string())
    }
    /// The text of a balanced `{...}` group (including the braces), skipping
    /// quoted strings.
    pub fn braced(&mut self) -> R<&'s str> {
        self.ws();
        let start = self.i;
        let b = self.s.as_bytes();
        if b.get(start) != Some(&b'{') {
            return Err(format!("expected `{{` at `{}`", snippet(self.rest())));
        }
        let mut depth = 0usize;
        let mut k = start;
        let mut in_str = false;
        while k < b.len() {
            let c = b[k];
            if in_str {
                if c == b'\\' {
                    k += 1;
                } else if c == b'"' {
                    in_str = false;
                }
            } else if c == b'"' {
                in_str = true;
            } else if c == b'{' {
                depth += 1;
            } else if c == b'}' {
                depth -= 1;
                if depth == 0 {
                    self.i = k + 1;
                    return Ok(&self.s[start..=k]);
                }
            }
            k += 1;
        }
        Err(format!(
            "unbalanced braces in `{}`",
            snippet(&self.s[start..])
        ))
    }
    pub fn end(&mut self) -> R<()> {
        if self.at_end() {
            Ok(())
        } else {
            Err(format!("unexpected text `{}`", snippet(self.rest())))
        }
    }
}

fn snippet(s: &str) -> String {
    s.chars().take(40).collect()
}

/// A quoted string attribute value, unescaped (`"a\"b"` -> `a"b`); bare
/// text is returned as written.
pub fn string_value(text: &str) -> R<Vec<u8>> {
    let t = text.trim();
    if t.starts_with('"') {
        let mut c = Cur::new(t);
        let v = c.quoted_bytes()?;
        c.end()?;
        Ok(v)
    } else {
        Ok(t.as_bytes().to_vec())
    }
}

/// `metadata={op_type="..." op_name="..." source_file="..." source_line=N ...}`.
pub fn metadata(text: &str) -> R<xla::OpMetadata> {
    let mut c = Cur::new(text);
    c.expect("{")?;
    let m = metadata_fields(&mut c)?;
    c.end()?;
    Ok(m)
}

/// The fields of a metadata group after its `{`, through its `}`; each at
/// most once, as XLA's parser requires.
fn metadata_fields(c: &mut Cur) -> R<xla::OpMetadata> {
    let mut m = xla::OpMetadata::default();
    // The fields seen so far (the text is short: a scan of the keys).
    let mut seen: SmallVec<[&str; 8]> = SmallVec::new();
    loop {
        if c.eat("}") {
            return Ok(m);
        }
        let key = c.word();
        if seen.contains(&key) {
            return Err(format!("metadata field `{key}` is given twice"));
        }
        seen.push(key);
        c.expect("=")?;
        let int32 = |c: &mut Cur| -> R<i32> {
            let v = c.int()?;
            i32::try_from(v).map_err(|_| format!("`{key}` {v} does not fit 32 bits"))
        };
        match key {
            "op_type" => m.op_type = c.quoted()?,
            "op_name" => m.op_name = c.quoted()?,
            "source_file" => m.source_file = c.quoted()?,
            "source_line" => m.source_line = int32(c)?,
            "source_end_line" => m.source_end_line = int32(c)?,
            "source_column" => m.source_column = int32(c)?,
            "source_end_column" => m.source_end_column = int32(c)?,
            "deduplicated_name" => m.deduplicated_name = c.quoted()?,
            "scheduling_name" => m.scheduling_name = c.quoted()?,
            "stack_frame_id" => m.stack_frame_id = int32(c)?,
            "size_of_generated_code_in_bytes" => m.size_of_generated_code_in_bytes = c.int()?,
            "size_of_memory_working_set_in_bytes" => {
                m.size_of_memory_working_set_in_bytes = c.int()?
            }
            "profile_type" => {
                c.expect("{")?;
                loop {
                    if c.eat("}") {
                        break;
                    }
                    let w = c.word();
                    m.profile_type.push(match w {
                        "INVALID" => 0,
                        "WINDOW" => 1,
                        "FLAG" => 2,
                        "INTEGER" => 3,
                        // XLA writes and reads the enum's number.
                        _ => match w.parse::<i32>() {
                            Ok(n) => n,
                            Err(_) => return Err(format!("unknown profile type `{w}`")),
                        },
                    });
                    c.eat(",");
                }
            }
            "" => {
                return Err(format!(
                    "expected a metadata field at `{}`",
                    snippet(c.rest())
                ))
            }
            other => return Err(format!("metadata field `{other}` is not supported")),
        }
        c.eat(",");
    }
}

/// XLA's C escaping of a string for text (absl's `CEscape`), quoted: `"`
/// `'` `\\` `\n` `\t` `\r` escaped, other control bytes (and invalid UTF-8) as octal `\NNN`; the
/// characters of valid UTF-8 text are kept as they are.
pub(crate) fn write_quoted(s: &[u8], o: &mut String) {
    o.push('"');
    let plain = |b: u8| (0x20..=0x7e).contains(&b) && !matches!(b, b'"' | b'\'' | b'\\');
    if let Some(t) = std::str::from_utf8(s)
        .ok()
        .filter(|_| s.iter().all(|&b| plain(b)))
    {
        o.push_str(t);
    } else if s.iter().any(|&b| b >= 0x80) && std::str::from_utf8(s).is_ok() {
        for ch in String::from_utf8_lossy(s).chars() {
            match ch {
                '"' => o.push_str("\\\""),
                '\'' => o.push_str("\\'"),
                '\\' => o.push_str("\\\\"),
                '\n' => o.push_str("\\n"),
                '\t' => o.push_str("\\t"),
                '\r' => o.push_str("\\r"),
                c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                    let _ = write!(o, "\\{:03o}", c as u32);
                }
                c => o.push(c),
            }
        }
    } else {
        for &b in s {
            match b {
                b'"' => o.push_str("\\\""),
                b'\'' => o.push_str("\\'"),
                b'\\' => o.push_str("\\\\"),
                b'\n' => o.push_str("\\n"),
                b'\t' => o.push_str("\\t"),
                b'\r' => o.push_str("\\r"),
                0x20..=0x7e => o.push(b as char),
                _ => {
                    let _ = write!(o, "\\{:03o}", b);
                }
            }
        }
    }
    o.push('"');
}

/// [`write_quoted`] into a new string.
pub(crate) fn quote(s: &[u8]) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    write_quoted(s, &mut o);
    o
}

/// Op metadata in XLA's spelling, `{op_type="..." op_name="..." ...}`: the
/// fields [`metadata`] reads, those at their default value left out, in
/// XLA's order.
pub fn write_metadata(m: &xla::OpMetadata, o: &mut String) {
    o.push('{');
    let mut first = true;
    let mut key = |o: &mut String, k: &str| {
        if !first {
            o.push(' ');
        }
        first = false;
        o.push_str(k);
        o.push('=');
    };
    for (k, v) in [
        ("op_type", &m.op_type),
        ("op_name", &m.op_name),
        ("source_file", &m.source_file),
    ] {
        if !v.is_empty() {
            key(o, k);
            write_quoted(v.as_bytes(), o);
        }
    }
    for (k, v) in [
        ("source_line", m.source_line),
        ("source_end_line", m.source_end_line),
        ("source_column", m.source_column),
        ("source_end_column", m.source_end_column),
    ] {
        if v != 0 {
            key(o, k);
            let _ = write!(o, "{v}");
        }
    }
    if !m.profile_type.is_empty() {
        key(o, "profile_type");
        o.push('{');
        for (n, &p) in m.profile_type.iter().enumerate() {
            if n > 0 {
                o.push(',');
            }
            // XLA prints (and reads) the enum's numbers.
            let _ = write!(o, "{p}");
        }
        o.push('}');
    }
    for (k, v) in [
        ("deduplicated_name", &m.deduplicated_name),
        ("scheduling_name", &m.scheduling_name),
    ] {
        if !v.is_empty() {
            key(o, k);
            write_quoted(v.as_bytes(), o);
        }
    }
    if m.stack_frame_id != 0 {
        key(o, "stack_frame_id");
        let _ = write!(o, "{}", m.stack_frame_id);
    }
    for (k, v) in [
        (
            "size_of_generated_code_in_bytes",
            m.size_of_generated_code_in_bytes,
        ),
        (
            "size_of_memory_working_set_in_bytes",
            m.size_of_memory_working_set_in_bytes,
        ),
    ] {
        if v != 0 {
            key(o, k);
            let _ = write!(o, "{v}");
        }
    }
    o.push('}');
}

/// [`write_metadata`] into a new string.
pub fn metadata_text(m: &xla::OpMetadata) -> String {
    let mut o = String::new();
    write_metadata(m, &mut o);
    o
}

/// `frontend_attributes={key="value",...}`.
pub fn frontend_attributes(text: &str) -> R<xla::FrontendAttributes> {
    let mut c = Cur::new(text);
    c.expect("{")?;
    let mut fa = xla::FrontendAttributes::default();
    loop {
        if c.eat("}") {
            break;
        }
        let key = if c.peek() == Some(b'"') {
            c.quoted()?
        } else {
            c.word().to_string()
        };
        if key.is_empty() {
            return Err(format!("expected a key at `{}`", snippet(c.rest())));
        }
        c.expect("=")?;
        // XLA also takes a braced value as written (MLIR attribute
        // dictionaries of composite calls).
        let value = match c.peek() {
            Some(b'"') => c.quoted()?,
            Some(b'{') => c.braced()?.to_string(),
            _ => c.word().to_string(),
        };
        fa.map.insert(key, value);
        if !c.eat(",") {
            c.expect("}")?;
            break;
        }
        // `{a="b",}`: XLA's parser wants another attribute after a comma.
        if c.peek() == Some(b'}') {
            return Err("expected a key after `,`, found `}`".into());
        }
    }
    c.end()?;
    Ok(fa)
}

/// Frontend attributes in XLA's spelling, `{key="value",...}` in key order
/// (a key that is not a plain word of letters, digits, `_` `.` `-` is
/// quoted), as [`frontend_attributes`] reads them.
pub fn write_frontend_attributes(f: &xla::FrontendAttributes, o: &mut String) {
    let word = |k: &str| {
        k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
    };
    o.push('{');
    for (n, (k, v)) in f.map.iter().enumerate() {
        if n > 0 {
            o.push(',');
        }
        if word(k) && !k.is_empty() {
            o.push_str(k);
        } else {
            write_quoted(k.as_bytes(), o);
        }
        o.push('=');
        write_quoted(v.as_bytes(), o);
    }
    o.push('}');
}

/// Frontend attributes read from a proto: as they are, unless a key is
/// empty (which text cannot carry).
pub fn frontend_attributes_from_proto(f: &xla::FrontendAttributes) -> R<xla::FrontendAttributes> {
    if f.map.contains_key("") {
        return Err("a frontend attribute has an empty key".into());
    }
    Ok(f.clone())
}

/// `{{0,1},{2,3}}` (or `{}`): lists of integer lists.
pub fn int_list_list(text: &str) -> R<Vec<Vec<i64>>> {
    let mut c = Cur::new(text);
    c.expect("{")?;
    let mut out = Vec::new();
    loop {
        if c.eat("}") {
            break;
        }
        out.push(c.int_list()?);
        if !c.eat(",") {
            c.expect("}")?;
            break;
        }
    }
    c.end()?;
    Ok(out)
}

fn iota_list(c: &mut Cur) -> R<IotaList> {
    let dims = c.bracket_list()?;
    c.expect("<=")?;
    let reshape = c.bracket_list()?;
    let perm = if c.eat("T(") {
        let mut p = Vec::new();
        loop {
            p.push(c.int()?);
            if c.eat(")") {
                break;
            }
            c.expect(",")?;
        }
        p
    } else {
        (0..reshape.len() as i64).collect()
    };
    Ok(IotaList {
        dims,
        reshape,
        perm,
    })
}

pub fn replica_groups(text: &str) -> R<ReplicaGroups> {
    let t = text.trim();
    if let Some(rest) = t.strip_prefix("mesh") {
        let mut c = Cur::new(rest);
        let axes = mesh_axes(&mut c)?;
        let mut mesh = xla::MeshProto::default();
        // `mesh['x'=4,'y'=2], device_ids=([2,4]T(1,0)) {'x'}`.
        if c.eat(",") {
            c.expect("device_ids=")?;
            mesh_device_ids(&mut c, &mut mesh)?;
        }
        let refs = axis_refs(&mut c, &axes)?;
        c.end()?;
        mesh.axes = axes;
        check_mesh(&mesh, &refs)?;
        canonicalize_iota(&mut mesh);
        // XLA's parser (not its proto reader) wants groups of two or more.
        let per_group: i64 = refs
            .iter()
            .map(|a| match &a.sub_axis_info {
                Some(s) => s.size,
                None => mesh.axes[a.mesh_axis_index as usize].size,
            })
            .fold(1i64, |p, n| p.saturating_mul(n));
        if per_group <= 1 {
            return Err(format!(
                "mesh replica groups must have more than one device per group, not {per_group}"
            ));
        }
        return Ok(ReplicaGroups::Mesh(xla::MeshAxesReplicaGroupListProto {
            mesh: Some(mesh),
            axes: refs,
        }));
    }
    if t.starts_with('[') {
        let mut c = Cur::new(t);
        let l = iota_list(&mut c)?;
        c.end()?;
        if l.dims.len() != 2 {
            return Err("an iota replica group list is `[groups,size]<=[...]`".into());
        }
        Ok(ReplicaGroups::Iota(l))
    } else {
        int_list_list(t).map(ReplicaGroups::List)
    }
}

/// Replica groups in XLA's spelling (`{{0,1},{2,3}}`, `[2,2]<=[4]`,
/// `[2,2]<=[2,2]T(1,0)`), as [`replica_groups`] reads them.
pub fn write_replica_groups(g: &ReplicaGroups, o: &mut String) {
    match g {
        ReplicaGroups::List(groups) => {
            o.push('{');
            for (k, g) in groups.iter().enumerate() {
                if k > 0 {
                    o.push(',');
                }
                o.push('{');
                write_joined(g, o);
                o.push('}');
            }
            o.push('}');
        }
        ReplicaGroups::Mesh(g) => {
            let mesh = g.mesh.clone().unwrap_or_default();
            write_mesh(&mesh, o);
            o.push_str(" {");
            for (j, a) in g.axes.iter().enumerate() {
                if j > 0 {
                    o.push(',');
                }
                write_axis_ref(a, &mesh, o);
            }
            o.push('}');
        }
        ReplicaGroups::Iota(l) => {
            o.push('[');
            write_joined(&l.dims, o);
            o.push_str("]<=[");
            write_joined(&l.reshape, o);
            o.push(']');
            let identity = l.perm.iter().enumerate().all(|(k, &p)| p == k as i64);
            // As for shardings, `T(...)` after more than one reshape dimension.
            if !identity || l.reshape.len() > 1 {
                o.push_str("T(");
                write_joined(&l.perm, o);
                o.push(')');
            }
        }
    }
}

/// `output_to_operand_aliasing={{1}: (0, {}), ...}`.
pub fn output_operand_aliasing(text: &str) -> R<Vec<xla::OutputOperandAliasing>> {
    let mut c = Cur::new(text);
    c.expect("{")?;
    let mut out = Vec::new();
    loop {
        if c.eat("}") {
            break;
        }
        let output_shape_index = c.int_list()?;
        c.expect(":")?;
        c.expect("(")?;
        let operand_index = c.int()?;
        c.expect(",")?;
        let operand_shape_index = c.int_list()?;
        c.expect(")")?;
        out.push(xla::OutputOperandAliasing {
            output_shape_index,
            operand_index,
            operand_shape_index,
        });
        if !c.eat(",") {
            c.expect("}")?;
            break;
        }
    }
    c.end()?;
    Ok(out)
}

/// Output-operand aliasing in XLA's spelling, `{{1}: (0, {}), {0}: (1, {1})}`,
/// as [`output_operand_aliasing`] reads it.
pub fn write_output_operand_aliasing(v: &[xla::OutputOperandAliasing], o: &mut String) {
    o.push('{');
    for (k, a) in v.iter().enumerate() {
        if k > 0 {
            o.push_str(", ");
        }
        o.push('{');
        write_joined(&a.output_shape_index, o);
        let _ = write!(o, "}}: ({}, {{", a.operand_index);
        write_joined(&a.operand_shape_index, o);
        o.push_str("})");
    }
    o.push('}');
}

/// `input_output_alias={ {0}: (0, {}, may-alias), ... }` of the module header.
pub fn input_output_alias(text: &str) -> R<xla::HloInputOutputAliasProto> {
    let mut c = Cur::new(text);
    c.expect("{")?;
    let mut p = xla::HloInputOutputAliasProto::default();
    loop {
        if c.eat("}") {
            break;
        }
        let output_shape_index = c.int_list()?;
        c.expect(":")?;
        c.expect("(")?;
        let parameter_number = c.int()?;
        c.expect(",")?;
        let parameter_shape_index = c.int_list()?;
        let mut kind = 1; // MAY_ALIAS
        if c.eat(",") {
            kind = match c.word() {
                "may-alias" => 1,
                "must-alias" => 2,
                w => return Err(format!("unknown alias kind `{w}`")),
            };
        }
        c.expect(")")?;
        p.entries.push(xla::AliasEntryProto {
            output_shape_index,
            parameter_number,
            parameter_shape_index,
            kind,
        });
        if !c.eat(",") {
            c.expect("}")?;
            break;
        }
    }
    c.end()?;
    Ok(p)
}

/// `buffer_donor={ (0, {}), (1, {0}) }` of the module header.
pub fn buffer_donor(text: &str) -> R<xla::HloBufferDonorProto> {
    let mut c = Cur::new(text);
    c.expect("{")?;
    let mut p = xla::HloBufferDonorProto::default();
    loop {
        if c.eat("}") {
            break;
        }
        c.expect("(")?;
        let parameter_number = c.int()?;
        c.expect(",")?;
        let parameter_shape_index = c.int_list()?;
        c.expect(")")?;
        p.entries.push(xla::BufferDonorEntryProto {
            parameter_number,
            parameter_shape_index,
        });
        if !c.eat(",") {
            c.expect("}")?;
            break;
        }
    }
    c.end()?;
    Ok(p)
}

/// `{ {0}: (0, {}, may-alias), ... }` as XLA prints an input-output alias
/// config (`{}` when empty).
pub fn write_input_output_alias(a: &xla::HloInputOutputAliasProto, o: &mut String) {
    if a.entries.is_empty() {
        o.push_str("{}");
        return;
    }
    o.push_str("{ ");
    for (k, e) in a.entries.iter().enumerate() {
        if k > 0 {
            o.push_str(", ");
        }
        write_shape_index(&e.output_shape_index, o);
        let _ = write!(o, ": ({}, ", e.parameter_number);
        write_shape_index(&e.parameter_shape_index, o);
        o.push_str(if e.kind == 2 {
            ", must-alias)"
        } else {
            ", may-alias)"
        });
    }
    o.push_str(" }");
}

/// `{ (0, {}), (1, {0}) }` as XLA prints buffer donors (`{}` when empty).
pub fn write_buffer_donor(b: &xla::HloBufferDonorProto, o: &mut String) {
    if b.entries.is_empty() {
        o.push_str("{}");
        return;
    }
    o.push_str("{ ");
    for (k, e) in b.entries.iter().enumerate() {
        if k > 0 {
            o.push_str(", ");
        }
        let _ = write!(o, "({}, ", e.parameter_number);
        write_shape_index(&e.parameter_shape_index, o);
        o.push(')');
    }
    o.push_str(" }");
}

/// A shape index `{0,1}` as XLA's `ShapeIndex::ToString` writes it.
pub(crate) fn write_shape_index(v: &[i64], o: &mut String) {
    o.push('{');
    write_joined(v, o);
    o.push('}');
}

/// Sharding type numbers of `OpSharding.Type`.
pub mod sharding_type {
    pub const REPLICATED: i32 = 0;
    pub const MAXIMAL: i32 = 1;
    pub const TUPLE: i32 = 2;
    pub const OTHER: i32 = 3;
    pub const MANUAL: i32 = 4;
    pub const UNKNOWN: i32 = 5;
    pub const UNREDUCED: i32 = 6;
}

/// `sharding={...}` (also the `entry=`/`exit=` shardings of a domain).
pub fn sharding(text: &str) -> R<xla::OpSharding> {
    let mut c = Cur::new(text);
    let s = sharding_group(&mut c)?;
    c.end()?;
    Ok(s)
}

/// What [`sharding`] says of a named sharding in syntax newer than jaxlib
/// 0.10.2 (axes with a reduction kind, `unreduced=max{'x'}`), which the IR
/// keeps as text.
pub const NAMED_SHARDING_NEWER: &str =
    "named shardings with reduction kinds (`unreduced=max{...}`) are not decoded";

/// A single-quoted mesh axis name (`'x'`; no escapes).
fn axis_name(c: &mut Cur) -> R<String> {
    c.expect("'")?;
    let r = c.rest();
    let end = r
        .find('\'')
        .ok_or_else(|| format!("unterminated axis name at `{}`", snippet(r)))?;
    let name = r[..end].to_string();
    c.i += end + 1;
    Ok(name)
}

/// An axis of `axes` by name: `'x'`, or a sub-axis `'x':(pre)size`.
fn axis_ref(c: &mut Cur, axes: &[xla::MeshAxis]) -> R<xla::AxisRefProto> {
    let name = axis_name(c)?;
    let index = axes
        .iter()
        .position(|a| a.name == name)
        .ok_or_else(|| format!("axis '{name}' is not an axis of the mesh"))?;
    let sub_axis_info = if c.eat(":") {
        c.expect("(")?;
        let pre_size = c.int()?;
        c.expect(")")?;
        let size = c.int()?;
        Some(xla::SubAxis { pre_size, size })
    } else {
        None
    };
    Ok(xla::AxisRefProto {
        mesh_axis_index: index as i64,
        sub_axis_info,
    })
}

/// `{'x', 'y':(1)2}`: axes of a mesh.
fn axis_refs(c: &mut Cur, axes: &[xla::MeshAxis]) -> R<Vec<xla::AxisRefProto>> {
    c.expect("{")?;
    let mut out = Vec::new();
    if c.eat("}") {
        return Ok(out);
    }
    loop {
        out.push(axis_ref(c, axes)?);
        if !c.eat(",") {
            c.expect("}")?;
            return Ok(out);
        }
    }
}

/// `['x'=2,'y'=2]`: the axes of a mesh (after `mesh`).
fn mesh_axes(c: &mut Cur) -> R<Vec<xla::MeshAxis>> {
    c.expect("[")?;
    let mut axes = Vec::new();
    if c.eat("]") {
        return Ok(axes);
    }
    loop {
        let name = axis_name(c)?;
        c.expect("=")?;
        let size = c.int()?;
        axes.push(xla::MeshAxis { name, size });
        if !c.eat(",") {
            c.expect("]")?;
            return Ok(axes);
        }
    }
}

/// The device order of a mesh after `device_ids=` (one token, as XLA's
/// lexer reads it): `(3,2,1,0)` (explicit ids) or an iota list, `([8])`
/// or `([2,4]T(1,0))` (the ids
/// `iota(8).reshape(2,4).transpose(1,0)`, flattened; XLA prints this form
/// for a mesh whose devices are so ordered, e.g. in the collectives of a
/// sharded program after optimization). A `T(...)` is required after more
/// than one dimension and refused after one, as XLA's parser does. An iota
/// list is kept in XLA's form ([`canonical_iota`]; one that orders the
/// devices as they are, `([8])`, `([2,4]T(0,1))`, is dropped, as XLA drops
/// it); [`check_mesh`] checks the rest.
fn mesh_device_ids(c: &mut Cur, mesh: &mut xla::MeshProto) -> R<()> {
    c.expect("(")?;
    if c.eat("[") {
        let mut reshape_dims = Vec::new();
        loop {
            reshape_dims.push(c.int()?);
            if !c.eat(",") {
                c.expect("]")?;
                break;
            }
        }
        let mut transpose_perm = Vec::new();
        if reshape_dims.len() > 1 {
            c.expect("T")?;
            c.expect("(")?;
            loop {
                transpose_perm.push(c.int()?);
                if !c.eat(",") {
                    c.expect(")")?;
                    break;
                }
            }
        } else {
            transpose_perm.push(0);
        }
        c.expect(")")?;
        mesh.iota_transform = Some(xla::IotaTransform {
            reshape_dims,
            transpose_perm,
        });
        return Ok(());
    }
    loop {
        mesh.device_ids.push(c.int()?);
        if !c.eat(",") {
            return c.expect(")");
        }
    }
}

/// An iota device order (checked by [`check_mesh`]) in the form XLA keeps
/// and prints: dimensions of size 1 dropped, dimensions that the
/// transposition keeps next to each other in order merged into one
/// (`[2,2,2]T(1,2,0)` is `[2,4]T(1,0)`, `[1,2,4]T(2,1,0)` is `[2,4]T(1,0)`).
/// `None` when that leaves one dimension or none: the devices in order.
fn canonical_iota(t: &xla::IotaTransform) -> Option<xla::IotaTransform> {
    // Dimensions larger than 1, and the transposition renumbered over them.
    let kept: Vec<usize> = (0..t.reshape_dims.len())
        .filter(|&k| t.reshape_dims[k] != 1)
        .collect();
    let perm: Vec<usize> = t
        .transpose_perm
        .iter()
        .filter_map(|&p| kept.iter().position(|&k| k as i64 == p))
        .collect();
    // Runs of the transposition that step by one: each a merged dimension.
    let mut runs: Vec<Vec<usize>> = Vec::new();
    for &p in &perm {
        match runs.last_mut() {
            Some(r) if r.last().is_some_and(|&q| q + 1 == p) => r.push(p),
            _ => runs.push(vec![p]),
        }
    }
    if runs.len() <= 1 {
        return None;
    }
    let mut by_start: Vec<usize> = (0..runs.len()).collect();
    by_start.sort_by_key(|&r| runs[r][0]);
    let reshape_dims = by_start
        .iter()
        .map(|&r| {
            runs[r]
                .iter()
                .fold(1i64, |a, &p| a.saturating_mul(t.reshape_dims[kept[p]]))
        })
        .collect();
    let transpose_perm = (0..runs.len())
        .map(|r| by_start.iter().position(|&b| b == r).unwrap_or(0) as i64)
        .collect();
    Some(xla::IotaTransform {
        reshape_dims,
        transpose_perm,
    })
}

/// Puts a mesh's iota device order (checked by [`check_mesh`] first) in
/// XLA's form ([`canonical_iota`]), dropping one that leaves the devices
/// in order, as XLA does: `device_ids=([8])` reads as no ids.
fn canonicalize_iota(mesh: &mut xla::MeshProto) {
    if let Some(t) = &mesh.iota_transform {
        mesh.iota_transform = canonical_iota(t);
    }
}

/// `mesh['x'=4,'y'=2]`, then `, device_ids=(...)` when the mesh orders
/// its devices (explicit ids, or an iota list, which the readers keep in
/// XLA's form), as XLA prints a mesh.
fn write_mesh(mesh: &xla::MeshProto, o: &mut String) {
    o.push_str("mesh[");
    for (k, a) in mesh.axes.iter().enumerate() {
        if k > 0 {
            o.push(',');
        }
        let _ = write!(o, "'{}'={}", a.name, a.size);
    }
    o.push(']');
    if let Some(t) = &mesh.iota_transform {
        o.push_str(", device_ids=([");
        write_joined(&t.reshape_dims, o);
        o.push_str("]T(");
        write_joined(&t.transpose_perm, o);
        o.push_str("))");
    } else if !mesh.device_ids.is_empty() {
        o.push_str(", device_ids=(");
        write_joined(&mesh.device_ids, o);
        o.push(')');
    }
}

/// The body of a named sharding after `mesh` (newer XLA):
/// `['x'=2,'y'=2], device_ids=(3,2,1,0), [{'x'}, {?}], replicated={'y'},
/// unreduced={...}, manual={...}`; `replicated` for no dimension list,
/// `unreduced` for no dimension list and every axis unreduced.
/// A dimension `{..., ?}` is open (`is_closed` false).
fn named_sharding(c: &mut Cur) -> R<xla::NamedShardingProto> {
    let axes = mesh_axes(c)?;
    let mut n = xla::NamedShardingProto::default();
    c.eat(",");
    if c.eat("device_ids=") {
        mesh_device_ids(c, n.mesh.get_or_insert_with(Default::default))?;
        c.eat(",");
    } else if c.rest().starts_with("device_ids") {
        return Err("expected `device_ids=` (one token, as XLA's lexer reads it)".into());
    }
    if c.eat("[") {
        if !c.eat("]") {
            loop {
                c.expect("{")?;
                let mut d = xla::DimensionSharding {
                    is_closed: true,
                    ..Default::default()
                };
                if !c.eat("}") {
                    loop {
                        if c.eat("?") {
                            d.is_closed = false;
                            c.expect("}")?;
                            break;
                        }
                        d.axes.push(axis_ref(c, &axes)?);
                        if !c.eat(",") {
                            c.expect("}")?;
                            break;
                        }
                    }
                }
                n.dim_shardings.push(d);
                if !c.eat(",") {
                    c.expect("]")?;
                    break;
                }
            }
        }
    } else {
        match c.word() {
            "replicated" => {}
            // Every axis of the mesh unreduced.
            "unreduced" => n.unreduced_axes = whole_mesh(&axes),
            _ => {
                return Err(format!(
                    "expected a dimension list `[...]`, `replicated` or `unreduced` at `{}`",
                    snippet(c.rest())
                ))
            }
        }
    }
    while c.eat(",") {
        let field = match c.word() {
            "replicated" => &mut n.replicated_axes,
            "unreduced" => &mut n.unreduced_axes,
            "manual" => &mut n.manual_axes,
            other => {
                return Err(format!(
                    "unknown named sharding field `{other}`; expected replicated=, unreduced= or manual="
                ))
            }
        };
        c.expect("=")?;
        if c.peek() != Some(b'{') {
            // `unreduced=max{'x'}`: a reduction kind (newer than jaxlib
            // 0.10.2), which `NamedShardingProto` here does not carry.
            return Err(NAMED_SHARDING_NEWER.into());
        }
        *field = axis_refs(c, &axes)?;
    }
    n.mesh.get_or_insert_with(Default::default).axes = axes;
    check_mesh(
        n.mesh.as_ref().unwrap_or(&xla::MeshProto::default()),
        named_refs(&n),
    )?;
    if let Some(m) = &mut n.mesh {
        canonicalize_iota(m);
    }
    Ok(n)
}

/// Every axis reference of a named sharding.
fn named_refs(n: &xla::NamedShardingProto) -> impl Iterator<Item = &xla::AxisRefProto> + Clone {
    n.dim_shardings
        .iter()
        .flat_map(|d| &d.axes)
        .chain(&n.replicated_axes)
        .chain(&n.unreduced_axes)
        .chain(&n.manual_axes)
}

/// What XLA's mesh and named sharding constructors check (they abort on a
/// violation, from text and from a proto alike): axis names unique, device
/// ids (if given) a permutation of as many devices as the mesh holds, axis
/// references to axes of the mesh, a sub-axis `(pre)size` with `pre >= 1`,
/// `size` less than its axis and `pre * size` dividing it, and no two
/// references overlapping (the same axis twice, an axis and a sub-axis of
/// it, sub-axes sharing a factor). Both the text decoders and the proto
/// reader call it.
fn check_mesh<'r>(
    mesh: &xla::MeshProto,
    refs: impl IntoIterator<Item = &'r xla::AxisRefProto> + Clone,
) -> R<()> {
    for (k, a) in mesh.axes.iter().enumerate() {
        if mesh.axes[..k].iter().any(|b| b.name == a.name) {
            return Err(format!("mesh axis name '{}' is given twice", a.name));
        }
    }
    let n = mesh.axes.iter().fold(1i64, |p, a| p.saturating_mul(a.size));
    if let Some(t) = &mesh.iota_transform {
        if !mesh.device_ids.is_empty() {
            return Err("a mesh has both device ids and an iota device list".into());
        }
        // XLA 0.10.2 takes any dimensions and permutation here (`[3,3]T(1,1)`
        // for 8 devices) and prints them back; they order no devices, so
        // hlo-opt refuses them (its printer never writes them).
        if t.reshape_dims.is_empty() || t.reshape_dims.iter().any(|&d| d < 1) {
            return Err(format!(
                "an iota device list needs dimensions of at least 1, not {:?}",
                t.reshape_dims
            ));
        }
        let total = t
            .reshape_dims
            .iter()
            .fold(1i64, |p, &d| p.saturating_mul(d));
        if total != n {
            return Err(format!(
                "an iota device list of {total} devices for a mesh of {n} devices"
            ));
        }
        let mut seen = vec![false; t.reshape_dims.len()];
        let ok = t.transpose_perm.len() == seen.len()
            && t.transpose_perm.iter().all(|&p| {
                match usize::try_from(p).ok().and_then(|p| seen.get_mut(p)) {
                    Some(s) if !*s => {
                        *s = true;
                        true
                    }
                    _ => false,
                }
            });
        if !ok {
            return Err(format!(
                "an iota device list's transposition {:?} is not a permutation of its {} dimensions",
                t.transpose_perm,
                seen.len()
            ));
        }
    }
    if !mesh.device_ids.is_empty() {
        if i64::try_from(mesh.device_ids.len()).ok() != Some(n) {
            return Err(format!(
                "{} device ids for a mesh of {n} devices",
                mesh.device_ids.len()
            ));
        }
        let mut seen = vec![false; mesh.device_ids.len()];
        for &d in &mesh.device_ids {
            match usize::try_from(d).ok().and_then(|d| seen.get_mut(d)) {
                Some(s) if !*s => *s = true,
                _ => {
                    return Err(format!(
                    "device ids must be a permutation of 0..{n}; {d} is out of range or repeated"
                ))
                }
            }
        }
        // XLA aborts on ids in order ("Non-iota device assignment has iota
        // device id list"): that mesh is written without ids.
        if mesh
            .device_ids
            .iter()
            .enumerate()
            .all(|(k, &d)| d == k as i64)
        {
            return Err(format!(
                "device ids in order (0..{n}) are written without `device_ids`"
            ));
        }
    }
    // Each reference as the range [lo, hi) of its axis's factors it spans.
    let span = |a: &xla::AxisRefProto| -> R<(usize, i64, i64)> {
        let k = usize::try_from(a.mesh_axis_index)
            .ok()
            .filter(|&k| k < mesh.axes.len())
            .ok_or_else(|| {
                format!(
                    "axis index {} is outside the mesh's {} axes",
                    a.mesh_axis_index,
                    mesh.axes.len()
                )
            })?;
        let full = mesh.axes[k].size;
        let Some(sub) = &a.sub_axis_info else {
            return Ok((k, 1, full));
        };
        let name = &mesh.axes[k].name;
        if sub.pre_size < 1 || sub.size < 1 {
            return Err(format!(
                "sub-axis '{name}':({}){} needs a pre-size and a size of at least 1",
                sub.pre_size, sub.size
            ));
        }
        let next = sub.pre_size.saturating_mul(sub.size);
        if sub.size >= full {
            return Err(format!(
                "sub-axis '{name}':({}){} is not smaller than its axis of size {full}",
                sub.pre_size, sub.size
            ));
        }
        if full % next != 0 {
            return Err(format!(
                "sub-axis '{name}':({}){}: {next} does not divide the axis size {full}",
                sub.pre_size, sub.size
            ));
        }
        Ok((k, sub.pre_size, next))
    };
    for (j, a) in refs.clone().into_iter().enumerate() {
        let (ka, lo_a, hi_a) = span(a)?;
        for b in refs.clone().into_iter().take(j) {
            let (kb, lo_b, hi_b) = span(b)?;
            if ka == kb && lo_a < hi_b && lo_b < hi_a {
                return Err(format!(
                    "axis '{}' is used twice (axes overlap)",
                    mesh.axes[ka].name
                ));
            }
        }
    }
    Ok(())
}

/// Every axis of a mesh, in order, as axis references.
fn whole_mesh(axes: &[xla::MeshAxis]) -> Vec<xla::AxisRefProto> {
    (0..axes.len() as i64)
        .map(|k| xla::AxisRefProto {
            mesh_axis_index: k,
            sub_axis_info: None,
        })
        .collect()
}

/// `'x'` or `'x':(pre)size`: an axis of `mesh` by name.
fn write_axis_ref(a: &xla::AxisRefProto, mesh: &xla::MeshProto, o: &mut String) {
    let name = usize::try_from(a.mesh_axis_index)
        .ok()
        .and_then(|k| mesh.axes.get(k))
        .map_or("", |x| x.name.as_str());
    let _ = write!(o, "'{name}'");
    if let Some(s) = &a.sub_axis_info {
        let _ = write!(o, ":({}){}", s.pre_size, s.size);
    }
}

/// Mesh replica groups read from a proto: as they are, or what is wrong
/// (see [`named_sharding_from_proto`]: the same mesh and axis checks).
pub fn mesh_replica_groups_from_proto(
    g: &xla::MeshAxesReplicaGroupListProto,
) -> R<xla::MeshAxesReplicaGroupListProto> {
    let n = named_sharding_from_proto(&xla::NamedShardingProto {
        mesh: g.mesh.clone(),
        replicated_axes: g.axes.clone(),
        ..Default::default()
    })?;
    Ok(xla::MeshAxesReplicaGroupListProto {
        mesh: n.mesh,
        axes: n.replicated_axes,
    })
}

/// A named sharding in XLA's spelling (inside the group's braces), as
/// [`named_sharding`] reads it.
fn write_named_sharding(n: &xla::NamedShardingProto, o: &mut String) {
    let mesh = n.mesh.clone().unwrap_or_default();
    let axis = |a: &xla::AxisRefProto, o: &mut String| write_axis_ref(a, &mesh, o);
    write_mesh(&mesh, o);
    o.push_str(", ");
    let no_lists = n.replicated_axes.is_empty() && n.manual_axes.is_empty();
    if n.dim_shardings.is_empty() && no_lists && n.unreduced_axes.is_empty() {
        o.push_str("replicated");
        return;
    }
    if n.dim_shardings.is_empty() && no_lists && n.unreduced_axes == whole_mesh(&mesh.axes) {
        o.push_str("unreduced");
        return;
    }
    {
        o.push('[');
        for (k, d) in n.dim_shardings.iter().enumerate() {
            if k > 0 {
                o.push_str(", ");
            }
            o.push('{');
            for (j, a) in d.axes.iter().enumerate() {
                if j > 0 {
                    o.push_str(", ");
                }
                axis(a, o);
            }
            if !d.is_closed {
                o.push_str(if d.axes.is_empty() { "?" } else { ", ?" });
            }
            o.push('}');
        }
        o.push(']');
    }
    for (key, list) in [
        ("replicated", &n.replicated_axes),
        ("unreduced", &n.unreduced_axes),
        ("manual", &n.manual_axes),
    ] {
        if !list.is_empty() {
            let _ = write!(o, ", {key}={{");
            for (j, a) in list.iter().enumerate() {
                if j > 0 {
                    o.push_str(", ");
                }
                axis(a, o);
            }
            o.push('}');
        }
    }
}

/// A named sharding read from a proto: the fields its text carries, or
/// what is wrong (an axis index outside the mesh, an axis name that text
/// cannot carry, metadata, which the text form here does not write, a
/// mesh [`check_mesh`] refuses).
fn named_sharding_from_proto(n: &xla::NamedShardingProto) -> R<xla::NamedShardingProto> {
    let mesh = n.mesh.clone().unwrap_or_default();
    if !n.metadata.is_empty() {
        return Err("a named sharding's metadata is not supported".into());
    }
    for a in &mesh.axes {
        // A quote ends the name; a bracket, brace or parenthesis inside the
        // quotes unbalances the parser's bracket scan (found by the proto
        // fuzzer: an axis named `]`); a control character is not text.
        if a.name.is_empty()
            || a.name.chars().any(|ch| {
                matches!(ch, '\'' | '"' | '[' | ']' | '{' | '}' | '(' | ')') || ch.is_control()
            })
        {
            return Err(format!(
                "mesh axis name `{}` cannot be written in HLO text",
                a.name.escape_debug()
            ));
        }
    }
    // XLA's text parser takes an axis of size 0 (or less); its proto
    // reader aborts on one.
    if let Some(a) = mesh.axes.iter().find(|a| a.size <= 0) {
        return Err(format!(
            "mesh axis '{}' has size {}; a mesh axis size must be positive",
            a.name, a.size
        ));
    }
    check_mesh(&mesh, named_refs(n))?;
    let mut mesh = mesh;
    canonicalize_iota(&mut mesh);
    Ok(xla::NamedShardingProto {
        mesh: Some(mesh),
        dim_shardings: n.dim_shardings.clone(),
        replicated_axes: n.replicated_axes.clone(),
        unreduced_axes: n.unreduced_axes.clone(),
        manual_axes: n.manual_axes.clone(),
        metadata: Vec::new(),
    })
}

fn sharding_group(c: &mut Cur) -> R<xla::OpSharding> {
    use sharding_type::*;
    c.expect("{")?;
    let mut s = xla::OpSharding::default();
    // A tuple: `{{...}, {...}}` or the empty tuple `{}`.
    if c.peek() == Some(b'{') || c.peek() == Some(b'}') {
        s.r#type = TUPLE;
        loop {
            if c.eat("}") {
                return Ok(s);
            }
            s.tuple_shardings.push(sharding_group(c)?);
            if !c.eat(",") {
                c.expect("}")?;
                return Ok(s);
            }
        }
    }
    loop {
        if c.eat("}") {
            return Ok(s);
        }
        let w = c.word();
        match w {
            "replicated" => s.r#type = REPLICATED,
            "manual" => s.r#type = MANUAL,
            "unknown" => s.r#type = UNKNOWN,
            "unreduced" => s.r#type = UNREDUCED,
            "maximal" => {
                s.r#type = MAXIMAL;
                c.expect("device")?;
                c.expect("=")?;
                s.tile_assignment_dimensions = vec![1];
                s.tile_assignment_devices = vec![c.int()?];
            }
            "devices" => {
                s.r#type = OTHER;
                c.expect("=")?;
                let dims = c.bracket_list()?;
                if c.eat("<=") {
                    s.iota_reshape_dims = c.bracket_list()?;
                    // `<=[]` would print as an empty device list.
                    if s.iota_reshape_dims.is_empty() {
                        return Err("an iota tile assignment `<=[...]` needs a dimension".into());
                    }
                    s.iota_transpose_perm = if c.eat("T(") {
                        let mut p = Vec::new();
                        loop {
                            let v = c.int()?;
                            p.push(i32::try_from(v).map_err(|_| "permutation out of range")?);
                            if c.eat(")") {
                                break;
                            }
                            c.expect(",")?;
                        }
                        p
                    } else {
                        (0..s.iota_reshape_dims.len() as i32).collect()
                    };
                } else {
                    loop {
                        s.tile_assignment_devices.push(c.int()?);
                        if !c.eat(",") {
                            break;
                        }
                    }
                }
                s.tile_assignment_dimensions = dims;
            }
            "last_tile_dim_replicate" => s.replicate_on_last_tile_dim = true,
            "last_tile_dims" => {
                c.expect("=")?;
                c.expect("{")?;
                loop {
                    if c.eat("}") {
                        break;
                    }
                    let t = c.word();
                    s.last_tile_dims.push(match t {
                        "replicated" => REPLICATED,
                        "manual" => MANUAL,
                        "unreduced" => UNREDUCED,
                        "maximal" => MAXIMAL,
                        "unknown" => UNKNOWN,
                        _ => return Err(format!("unknown subgroup type `{t}`")),
                    });
                    c.eat(",");
                }
            }
            "shard_as" | "shard_like" => {
                s.is_shard_group = true;
                s.shard_group_id = c.int()?;
                s.shard_group_type = i32::from(w == "shard_like");
            }
            "metadata" => {
                c.expect("=")?;
                c.expect("{")?;
                if c.peek() == Some(b'{') {
                    loop {
                        if c.eat("}") {
                            break;
                        }
                        c.expect("{")?;
                        s.metadata.push(metadata_fields(c)?);
                        c.eat(",");
                    }
                } else {
                    s.metadata.push(metadata_fields(c)?);
                }
            }
            "" => return Err(format!("unexpected sharding text `{}`", snippet(c.rest()))),
            "mesh" => {
                // A named sharding is the whole group.
                s.named_sharding = Some(named_sharding(c)?);
                c.expect("}")?;
                return Ok(s);
            }
            other => {
                return Err(format!(
                    "unknown sharding keyword `{other}`; expected replicated, maximal, manual, unknown, unreduced, devices=, last_tile_dim_replicate, last_tile_dims=, shard_as, shard_like or metadata="
                ))
            }
        }
        c.eat(",");
    }
}

/// The name of a sharding (or subgroup) type in text; `None` for a number
/// `OpSharding.Type` does not define (or `TUPLE`, which has no keyword).
fn sharding_type_name(t: i32) -> Option<&'static str> {
    use sharding_type::*;
    Some(match t {
        REPLICATED => "replicated",
        MAXIMAL => "maximal",
        MANUAL => "manual",
        UNKNOWN => "unknown",
        UNREDUCED => "unreduced",
        _ => return None,
    })
}

fn write_joined<T: std::fmt::Display>(v: &[T], o: &mut String) {
    for (k, x) in v.iter().enumerate() {
        if k > 0 {
            o.push(',');
        }
        let _ = write!(o, "{x}");
    }
}

/// A sharding in XLA's spelling (`{devices=[2,1]0,1 last_tile_dim_replicate}`,
/// `{{replicated}, {maximal device=0}}`): every field [`sharding`] reads, so
/// that reading the text back gives the same message. A type number
/// `OpSharding` does not define is written as that number (which does not
/// read back); [`sharding_from_proto`] refuses such messages.
pub fn write_sharding(s: &xla::OpSharding, o: &mut String) {
    use sharding_type::*;
    o.push('{');
    if let Some(n) = &s.named_sharding {
        write_named_sharding(n, o);
        o.push('}');
        return;
    }
    if s.r#type == TUPLE {
        for (k, e) in s.tuple_shardings.iter().enumerate() {
            if k > 0 {
                o.push_str(", ");
            }
            // As XLA marks long tuples (a comment to its parser).
            if k > 0 && k % 5 == 0 {
                let _ = write!(o, "/*index={k}*/");
            }
            write_sharding(e, o);
        }
        o.push('}');
        return;
    }
    match s.r#type {
        MAXIMAL => {
            o.push_str("maximal device=");
            let _ = write!(o, "{}", s.tile_assignment_devices.first().unwrap_or(&0));
        }
        OTHER => {
            o.push_str("devices=[");
            write_joined(&s.tile_assignment_dimensions, o);
            o.push(']');
            if !s.iota_reshape_dims.is_empty() {
                o.push_str("<=[");
                write_joined(&s.iota_reshape_dims, o);
                o.push(']');
                // XLA's parser needs `T(...)` after more than one
                // reshape dimension, even the identity.
                let identity = s
                    .iota_transpose_perm
                    .iter()
                    .enumerate()
                    .all(|(k, &p)| p == k as i32);
                if !identity || s.iota_reshape_dims.len() > 1 {
                    o.push_str("T(");
                    write_joined(&s.iota_transpose_perm, o);
                    o.push(')');
                }
            } else {
                write_joined(&s.tile_assignment_devices, o);
            }
        }
        t => match sharding_type_name(t) {
            Some(name) => o.push_str(name),
            None => {
                let _ = write!(o, "{t}");
            }
        },
    }
    if s.replicate_on_last_tile_dim {
        o.push_str(" last_tile_dim_replicate");
    }
    if !s.last_tile_dims.is_empty() {
        o.push_str(" last_tile_dims={");
        for (k, &t) in s.last_tile_dims.iter().enumerate() {
            if k > 0 {
                o.push_str(", ");
            }
            match sharding_type_name(t) {
                Some(name) => o.push_str(name),
                None => {
                    let _ = write!(o, "{t}");
                }
            }
        }
        o.push('}');
    }
    if s.is_shard_group {
        o.push_str(if s.shard_group_type == 1 {
            " shard_like "
        } else {
            " shard_as "
        });
        let _ = write!(o, "{}", s.shard_group_id);
    }
    match &s.metadata[..] {
        [] => {}
        [one] => {
            o.push_str(" metadata=");
            write_metadata(one, o);
        }
        many => {
            o.push_str(" metadata={");
            for (k, m) in many.iter().enumerate() {
                if k > 0 {
                    o.push_str(", ");
                }
                write_metadata(m, o);
            }
            o.push('}');
        }
    }
    o.push('}');
}

/// Op metadata without the profile fields, which HLO text does not carry.
pub(crate) fn strip_profile(m: &xla::OpMetadata) -> xla::OpMetadata {
    xla::OpMetadata {
        size_of_generated_code_in_bytes: 0,
        size_of_memory_working_set_in_bytes: 0,
        profile_info: None,
        metadata_payload: None,
        ..m.clone()
    }
}

/// The sharding a module holds for an `OpSharding` read from a proto: the
/// fields HLO text carries (as [`sharding`] would read them back from
/// [`write_sharding`]'s text), or what is wrong: a named sharding text
/// cannot carry (see `named_sharding_from_proto`), a type or subgroup type
/// `OpSharding` does not define, a maximal sharding without a device.
pub fn sharding_from_proto(s: &xla::OpSharding) -> R<xla::OpSharding> {
    use sharding_type::*;
    if let Some(n) = &s.named_sharding {
        return Ok(xla::OpSharding {
            named_sharding: Some(named_sharding_from_proto(n)?),
            ..Default::default()
        });
    }
    let mut out = xla::OpSharding {
        r#type: s.r#type,
        ..Default::default()
    };
    match s.r#type {
        TUPLE => {
            out.tuple_shardings = s
                .tuple_shardings
                .iter()
                .map(sharding_from_proto)
                .collect::<R<_>>()?;
            return Ok(out);
        }
        REPLICATED | MANUAL | UNKNOWN | UNREDUCED => {}
        MAXIMAL => {
            let d = s
                .tile_assignment_devices
                .first()
                .ok_or("a maximal sharding without a device")?;
            out.tile_assignment_dimensions = vec![1];
            out.tile_assignment_devices = vec![*d];
        }
        OTHER => {
            out.tile_assignment_dimensions = s.tile_assignment_dimensions.clone();
            if s.iota_reshape_dims.is_empty() {
                // Text has no spelling for tile dimensions without devices
                // (`devices=[4,2] last_tile_dim_replicate` does not parse;
                // found by the proto fuzzer).
                if s.tile_assignment_devices.is_empty() {
                    return Err("a tiled sharding without devices or an iota".into());
                }
                out.tile_assignment_devices = s.tile_assignment_devices.clone();
            } else {
                out.iota_reshape_dims = s.iota_reshape_dims.clone();
                out.iota_transpose_perm = if s.iota_transpose_perm.is_empty() {
                    (0..s.iota_reshape_dims.len() as i32).collect()
                } else {
                    s.iota_transpose_perm.clone()
                };
            }
        }
        t => return Err(format!("unknown sharding type {t}")),
    }
    out.replicate_on_last_tile_dim = s.replicate_on_last_tile_dim;
    for &t in &s.last_tile_dims {
        if sharding_type_name(t).is_none() {
            return Err(format!("unknown subgroup type {t}"));
        }
        out.last_tile_dims.push(t);
    }
    if s.is_shard_group {
        out.is_shard_group = true;
        out.shard_group_id = s.shard_group_id;
        out.shard_group_type = i32::from(s.shard_group_type == 1);
    }
    out.metadata = s.metadata.iter().map(strip_profile).collect();
    Ok(out)
}

/// `domain={kind="sharding", entry={...}, exit={...}}`: the entry and exit
/// shardings.
pub fn domain(text: &str) -> R<DomainShardings> {
    let mut c = Cur::new(text);
    c.expect("{")?;
    let (mut entry, mut exit) = (None, None);
    loop {
        if c.eat("}") {
            break;
        }
        let key = c.word();
        c.expect("=")?;
        match key {
            "kind" => {
                let k = c.quoted()?;
                if k != "sharding" {
                    return Err(format!("domain kind `{k}` is not supported"));
                }
            }
            "entry" => entry = Some(sharding_group(&mut c)?),
            "exit" => exit = Some(sharding_group(&mut c)?),
            _ => return Err(format!("unknown domain field `{key}`")),
        }
        c.eat(",");
    }
    c.end()?;
    match (entry, exit) {
        (Some(entry), Some(exit)) => Ok(DomainShardings { entry, exit }),
        _ => Err("a sharding domain needs `entry` and `exit`".into()),
    }
}

/// A sharding domain in XLA's spelling, as [`domain`] reads it.
pub fn write_domain(d: &DomainShardings, o: &mut String) {
    o.push_str("{kind=\"sharding\", entry=");
    write_sharding(&d.entry, o);
    o.push_str(", exit=");
    write_sharding(&d.exit, o);
    o.push('}');
}

/// A float as XLA's text writes it: the shortest decimal that reads back,
/// exponent form outside [1e-5, 1e16), `nan`, `-nan`, `inf`, `-inf`.
pub(crate) fn float_text(v: f64) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "inf" }.into();
    }
    let a = v.abs();
    if a != 0.0 && !(1e-5..1e16).contains(&a) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// An `f32` attribute (`epsilon=`) as XLA prints it (`absl::StrCat` of a
/// float: six significant digits, `%g` style: `0.001`, `1e-05`) when that
/// reads back as the same value, else the shortest decimal that does (so
/// printing never changes the value).
pub fn write_f32_attr(v: f32, o: &mut String) {
    if !v.is_finite() {
        o.push_str(&float_text(f64::from(v)));
        return;
    }
    let g = g6(f64::from(v));
    if g.parse::<f32>() == Ok(v) {
        o.push_str(&g);
    } else if v != 0.0 && !(1e-5..1e16).contains(&v.abs()) {
        let _ = write!(o, "{v:e}");
    } else {
        let _ = write!(o, "{v}");
    }
}

/// C's `%.6g` of a finite value.
fn g6(x: f64) -> String {
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let sci = format!("{x:.5e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mant), exp.abs())
    } else {
        let decimals = usize::try_from(5 - exp).unwrap_or(0);
        trim(&format!("{x:.decimals$}"))
    }
}

/// `PrecisionConfig.Algorithm` names in XLA's text spelling, by number.
pub const DOT_ALGORITHMS: [&str; 14] = [
    "unset",
    "dot_any_f8_any_f8_f32",
    "dot_any_f8_any_f8_f32_fast_accum",
    "dot_f16_f16_f16",
    "dot_f16_f16_f32",
    "dot_bf16_bf16_bf16",
    "dot_bf16_bf16_f32",
    "dot_bf16_bf16_f32_x3",
    "dot_bf16_bf16_f32_x6",
    "dot_tf32_tf32_f32",
    "dot_tf32_tf32_f32_x3",
    "dot_f32_f32_f32",
    "dot_f64_f64_f64",
    "dot_bf16_bf16_f32_x9",
];

/// `algorithm=dot_bf16_bf16_f32`: the number of a `PrecisionConfig.Algorithm`
/// ([`DOT_ALGORITHMS`]; ASCII case and an `ALG_` prefix ignored).
pub fn dot_algorithm(text: &str) -> R<i32> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.strip_prefix("alg_").unwrap_or(&t);
    DOT_ALGORITHMS
        .iter()
        .position(|n| *n == t)
        .map(|p| p as i32)
        .ok_or_else(|| format!("unknown dot algorithm `{}`", text.trim()))
}

/// `result_accuracy={mode=highest}` or `{tolerance={atol=0,rtol=0,ulps=1}}`.
pub fn result_accuracy(text: &str) -> R<xla::ResultAccuracy> {
    let mut c = Cur::new(text);
    c.expect("{")?;
    let key = c.word();
    c.expect("=")?;
    let mut r = xla::ResultAccuracy::default();
    match key {
        "mode" => {
            let m = c.word();
            r.mode = Some(
                RESULT_ACCURACY_MODES
                    .iter()
                    .position(|k| k.eq_ignore_ascii_case(m))
                    .ok_or_else(|| {
                        format!(
                            "unknown result accuracy mode `{m}`; expected one of {}",
                            RESULT_ACCURACY_MODES.join(", ")
                        )
                    })? as i32,
            );
        }
        "tolerance" => {
            c.expect("{")?;
            let mut t = xla::Tolerance::default();
            loop {
                if c.eat("}") {
                    break;
                }
                let k = c.word();
                c.expect("=")?;
                let v = c.word();
                let num = || {
                    v.parse::<f64>()
                        .map_err(|_| format!("`{v}` is not a number"))
                };
                match k {
                    "atol" => t.atol = num()?,
                    "rtol" => t.rtol = num()?,
                    "ulps" => t.ulps = v.parse().map_err(|_| format!("`{v}` is not an integer"))?,
                    _ => return Err(format!("unknown tolerance field `{k}`")),
                }
                c.eat(",");
            }
            check_tolerance(&t)?;
            r.tolerance = Some(t);
        }
        _ => return Err(format!("unknown result accuracy field `{key}`")),
    }
    c.expect("}")?;
    c.end()?;
    Ok(r)
}

/// Result accuracy modes (`ResultAccuracy::Mode`, by number), matched
/// case-insensitively as XLA does.
pub const RESULT_ACCURACY_MODES: [&str; 3] = ["default", "highest", "tolerance"];

/// A result accuracy in XLA's spelling (`{mode=highest}`,
/// `{tolerance={atol=0,rtol=0,ulps=1}}`), as [`result_accuracy`] reads it.
pub fn write_result_accuracy(r: &xla::ResultAccuracy, o: &mut String) {
    match (&r.tolerance, r.mode) {
        (Some(t), _) => {
            let _ = write!(
                o,
                "{{tolerance={{atol={},rtol={},ulps={}}}}}",
                float_text(t.atol),
                float_text(t.rtol),
                t.ulps
            );
        }
        (None, m) => {
            let m = m.unwrap_or(0);
            let name = usize::try_from(m)
                .ok()
                .and_then(|k| RESULT_ACCURACY_MODES.get(k));
            match name {
                Some(n) => {
                    let _ = write!(o, "{{mode={n}}}");
                }
                None => {
                    let _ = write!(o, "{{mode={m}}}");
                }
            }
        }
    }
}

/// A result accuracy read from a proto: the tolerance when there is one,
/// else the mode; `None` for the default mode (nothing to write); an error
/// for a mode `ResultAccuracy` does not define.
pub fn result_accuracy_from_proto(r: &xla::ResultAccuracy) -> R<Option<xla::ResultAccuracy>> {
    if let Some(t) = &r.tolerance {
        check_tolerance(t)?;
        return Ok(Some(xla::ResultAccuracy {
            mode: None,
            tolerance: Some(t.clone()),
        }));
    }
    match r.mode.unwrap_or(0) {
        0 => Ok(None),
        m if usize::try_from(m).is_ok_and(|k| k < RESULT_ACCURACY_MODES.len()) => {
            Ok(Some(xla::ResultAccuracy {
                mode: Some(m),
                tolerance: None,
            }))
        }
        m => Err(format!("unknown result accuracy mode {m}")),
    }
}

/// A result accuracy tolerance as XLA's instructions take it (they refuse
/// others, from text and from a proto): `atol`, `rtol` and `ulps` not
/// negative (nor NaN).
fn check_tolerance(t: &xla::Tolerance) -> R<()> {
    if t.atol >= 0.0 && t.rtol >= 0.0 && t.ulps >= 0 {
        return Ok(());
    }
    Err(format!(
        "a result accuracy tolerance must not be negative: atol={} rtol={} ulps={}",
        float_text(t.atol),
        float_text(t.rtol),
        t.ulps
    ))
}

/// Statistics in XLA's spelling, `{visualizing_index=1,stat-1=33,stat-2=44}`,
/// as [`statistics`] reads them.
pub fn write_statistics(s: &xla::StatisticsViz, o: &mut String) {
    let _ = write!(o, "{{visualizing_index={}", s.stat_index_to_visualize);
    for x in &s.statistics {
        let _ = write!(o, ",{}={}", x.stat_name, float_text(x.stat_val));
    }
    o.push('}');
}

/// Statistics read from a proto: as they are, unless a name is not a word
/// text can carry (letters, digits, `_` `.` `-`).
pub fn statistics_from_proto(s: &xla::StatisticsViz) -> R<xla::StatisticsViz> {
    for x in &s.statistics {
        let word = !x.stat_name.is_empty()
            && x.stat_name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-');
        if !word || x.stat_name == "visualizing_index" {
            return Err(format!(
                "statistic name `{}` cannot be written in HLO text",
                x.stat_name.escape_debug()
            ));
        }
    }
    Ok(s.clone())
}

/// `statistics={visualizing_index=1,stat-1=33,stat-2=44}`.
pub fn statistics(text: &str) -> R<xla::StatisticsViz> {
    let mut c = Cur::new(text);
    c.expect("{")?;
    let mut s = xla::StatisticsViz::default();
    loop {
        if c.eat("}") {
            break;
        }
        let k = c.word();
        c.expect("=")?;
        let v = c.word();
        if k == "visualizing_index" {
            s.stat_index_to_visualize =
                v.parse().map_err(|_| format!("`{v}` is not an integer"))?;
        } else {
            s.statistics.push(xla::Statistic {
                stat_name: k.to_string(),
                stat_val: v.parse().map_err(|_| format!("`{v}` is not a number"))?,
            });
        }
        c.eat(",");
    }
    c.end()?;
    Ok(s)
}

/// The `FileNames`/`FunctionNames`/`FileLocations`/`StackFrames` sections
/// of a module's text, as XLA's stack frame index (ids as the proto counts
/// them: the text's `parent_frame_id` is one more than the proto's). An
/// error carries the byte offset in `text` of the line it is about.
pub fn stack_frame_index(text: &str) -> Result<xla::StackFrameIndexProto, (usize, String)> {
    let mut p = xla::StackFrameIndexProto::default();
    let mut section = "";
    let mut start = 0usize;
    for raw in text.split_inclusive('\n') {
        let line_start = start;
        start += raw.len();
        let l = raw.trim();
        if l.is_empty() {
            continue;
        }
        let at = line_start + (raw.len() - raw.trim_start().len());
        stack_frame_line(l, &mut section, &mut p).map_err(|(o, e)| (at + o, e))?;
    }
    Ok(p)
}

/// The fields of a `FileLocations` entry and of a `StackFrames` entry, each
/// required exactly once (XLA's parser: "sub-attribute ... is expected but
/// not seen", "attribute ... already exists").
const LOCATION_FIELDS: [&str; 6] = [
    "file_name_id",
    "function_name_id",
    "line",
    "end_line",
    "column",
    "end_column",
];
const FRAME_FIELDS: [&str; 2] = ["file_location_id", "parent_frame_id"];

/// One non-empty line of [`stack_frame_index`]: a section name or an entry
/// of the current section. An error carries the byte offset in `l` of what
/// it is about (the entry's `{` for a missing field, the key of a repeated
/// or unknown one).
fn stack_frame_line(
    l: &str,
    section: &mut &'static str,
    p: &mut xla::StackFrameIndexProto,
) -> Result<(), (usize, String)> {
    for name in ["FileNames", "FunctionNames", "FileLocations", "StackFrames"] {
        if l == name {
            *section = name;
            return Ok(());
        }
    }
    let mut c = Cur::new(l);
    let _index = c.int().map_err(|e| (0, e))?;
    let at = |c: &mut Cur, e: String| {
        c.ws();
        (c.i, e)
    };
    match *section {
        "FileNames" => p.file_names.push(c.quoted().map_err(|e| at(&mut c, e))?),
        "FunctionNames" => p
            .function_names
            .push(c.quoted().map_err(|e| at(&mut c, e))?),
        "FileLocations" | "StackFrames" => {
            let fields: &[&str] = if *section == "FileLocations" {
                &LOCATION_FIELDS
            } else {
                &FRAME_FIELDS
            };
            c.ws();
            let open = c.i;
            c.expect("{").map_err(|e| at(&mut c, e))?;
            let mut values = [0i32; 6];
            let mut seen = [false; 6];
            loop {
                if c.eat("}") {
                    break;
                }
                c.ws();
                let key_at = c.i;
                let k = c.word();
                let slot = fields.iter().position(|f| *f == k).ok_or_else(|| {
                    (
                        key_at,
                        format!(
                            "unknown field `{k}` in {section}; expected {}",
                            fields.join(", ")
                        ),
                    )
                })?;
                if std::mem::replace(&mut seen[slot], true) {
                    return Err((key_at, format!("field `{k}` is given twice")));
                }
                c.expect("=").map_err(|e| at(&mut c, e))?;
                let v = c.int().map_err(|e| at(&mut c, e))?;
                values[slot] = i32::try_from(v)
                    .map_err(|_| (key_at, format!("`{k}={v}` does not fit 32 bits")))?;
                c.eat(",");
            }
            if let Some(missing) = fields.iter().zip(seen).find(|(_, s)| !s) {
                return Err((open, format!("field `{}` is missing", missing.0)));
            }
            if fields.len() == LOCATION_FIELDS.len() {
                let [file_name_id, function_name_id, line, end_line, column, end_column] = values;
                p.file_locations.push(xla::FileLocation {
                    file_name_id,
                    function_name_id,
                    line,
                    end_line,
                    column,
                    end_column,
                });
            } else {
                // The text counts parents from 1 where the proto counts
                // from 0 (0 = no parent in the proto).
                let v = values[1];
                p.stack_frames.push(xla::StackFrame {
                    file_location_id: values[0],
                    parent_frame_id: v
                        .checked_sub(1)
                        .ok_or_else(|| (open, format!("parent_frame_id {v} is not a frame id")))?,
                });
            }
        }
        _ => {
            return Err((
                0,
                format!("unexpected line `{}` before a section name", snippet(l)),
            ))
        }
    }
    c.end().map_err(|e| at(&mut c, e))
}

/// The sections [`stack_frame_index`] reads, as XLA prints them (sections
/// with entries only, a blank line between; no trailing newline).
pub fn write_stack_frame_index(sf: &xla::StackFrameIndexProto, o: &mut String) {
    let mut first = true;
    let mut section = |o: &mut String, name: &str, n: usize, f: &dyn Fn(usize, &mut String)| {
        if n == 0 {
            return;
        }
        if !first {
            o.push_str("\n\n");
        }
        first = false;
        o.push_str(name);
        for k in 0..n {
            let _ = write!(o, "\n{} ", k + 1);
            f(k, o);
        }
    };
    section(o, "FileNames", sf.file_names.len(), &|k, o| {
        write_quoted(sf.file_names[k].as_bytes(), o)
    });
    section(o, "FunctionNames", sf.function_names.len(), &|k, o| {
        write_quoted(sf.function_names[k].as_bytes(), o)
    });
    section(o, "FileLocations", sf.file_locations.len(), &|k, o| {
        let l = &sf.file_locations[k];
        let _ = write!(
            o,
            "{{file_name_id={} function_name_id={} line={} end_line={} column={} end_column={}}}",
            l.file_name_id, l.function_name_id, l.line, l.end_line, l.column, l.end_column
        );
    });
    section(o, "StackFrames", sf.stack_frames.len(), &|k, o| {
        let f = &sf.stack_frames[k];
        let _ = write!(
            o,
            "{{file_location_id={} parent_frame_id={}}}",
            f.file_location_id,
            i64::from(f.parent_frame_id) + 1
        );
    });
}

/// Nesting bound of an `origin=` tree (as deep as a shape may nest).
const MAX_ORIGIN_DEPTH: usize = 64;

/// `origin={...}` (see [`OriginalValue`]).
pub fn original_value(text: &str) -> R<OriginalValue> {
    let mut c = Cur::new(text);
    c.expect("{")?;
    let v = if c.eat("[") {
        c.expect("synthetic_call")?;
        c.expect("]")?;
        OriginalValue {
            synthetic_call: true,
            tree: None,
        }
    } else {
        OriginalValue {
            synthetic_call: false,
            tree: Some(original_node(&mut c, 0)?),
        }
    };
    c.expect("}")?;
    c.end()?;
    Ok(v)
}

fn original_node(c: &mut Cur, depth: usize) -> R<OriginalNode> {
    if depth > MAX_ORIGIN_DEPTH {
        return Err("an original value nests too deeply".into());
    }
    if c.eat("(") {
        let mut elems = Vec::new();
        if !c.eat(")") {
            loop {
                elems.push(original_node(c, depth + 1)?);
                if !c.eat(",") {
                    c.expect(")")?;
                    break;
                }
            }
        }
        return Ok(OriginalNode::Tuple(elems));
    }
    Ok(OriginalNode::Leaf(braced_original_array(c)?))
}

/// `{}` (None) or `{"name"}` / `{"name" {0,1}}`: one original array in
/// braces, as both an original value's leaf and a recovery table's entry
/// read it. The cursor stands at the `{`.
fn braced_original_array(c: &mut Cur) -> R<Option<OriginalArray>> {
    c.expect("{")?;
    if c.eat("}") {
        return Ok(None);
    }
    let name = c.quoted()?;
    let index = if c.peek() == Some(b'{') {
        c.int_list()?
    } else {
        Vec::new()
    };
    c.expect("}")?;
    Ok(Some((name, index)))
}

/// An original value in XLA's spelling, as [`original_value`] reads it.
pub fn write_original_value(v: &OriginalValue, o: &mut String) {
    o.push('{');
    if v.synthetic_call {
        o.push_str("[synthetic_call]");
    } else if let Some(t) = &v.tree {
        write_original_node(t, o);
    }
    o.push('}');
}

fn write_original_node(n: &OriginalNode, o: &mut String) {
    match n {
        OriginalNode::Tuple(elems) => {
            o.push('(');
            for (k, e) in elems.iter().enumerate() {
                if k > 0 {
                    o.push_str(", ");
                }
                write_original_node(e, o);
            }
            o.push(')');
        }
        OriginalNode::Leaf(None) => o.push_str("{}"),
        OriginalNode::Leaf(Some((name, index))) => {
            o.push('{');
            write_quoted(name.as_bytes(), o);
            if !index.is_empty() {
                o.push_str(" {");
                for (k, i) in index.iter().enumerate() {
                    if k > 0 {
                        o.push(',');
                    }
                    let _ = write!(o, "{i}");
                }
                o.push('}');
            }
            o.push('}');
        }
    }
}

impl RecoveryTable {
    /// Sorts the entries into XLA's order; an original array named twice is
    /// an error (`what` says where the entries come from).
    pub fn sorted(mut entries: Vec<RecoveryEntry>) -> R<RecoveryTable> {
        entries.sort_by(|a, b| a.old.cmp(&b.old));
        if let Some(w) = entries.windows(2).find(|w| w[0].old == w[1].old) {
            let mut a = String::new();
            write_original_array(&w[0].old, &mut a);
            return Err(format!(
                "original array {{{a}}} is recovered twice (XLA keeps one entry per original array)"
            ));
        }
        Ok(RecoveryTable { entries })
    }
}

/// `"name"` or `"name" {0,1}` inside braces; `{}` is the empty name (XLA
/// reads it so and prints it `{""}`). The cursor stands at the `{`.
fn original_array(c: &mut Cur) -> R<OriginalArray> {
    Ok(braced_original_array(c)?.unwrap_or_default())
}

/// An original array in XLA's spelling (without the braces around it).
pub fn write_original_array(a: &OriginalArray, o: &mut String) {
    write_quoted(a.0.as_bytes(), o);
    if !a.1.is_empty() {
        o.push_str(" {");
        for (k, i) in a.1.iter().enumerate() {
            if k > 0 {
                o.push(',');
            }
            let _ = write!(o, "{i}");
        }
        o.push('}');
    }
}

/// `origin_recovery_table={...}` (see [`RecoveryTable`]): entries
/// `{old} : {new}`, each followed by `, "module text"` when it has a
/// recovery module (an HLO module as a C-escaped string, parsed here with
/// the module parser; a module without the `HloModule` line is named
/// `module_<entry>`, as XLA names it). Errors carry their byte offset in
/// `text`; an error inside a recovery module written without escapes is
/// placed where it is in `text`, otherwise at the string's opening quote.
/// `parse_module` is the module parser (the text format's, which reads this
/// attribute: a recovery module is a module written in text).
pub fn recovery_table(
    text: &str,
    parse_module: &dyn Fn(&str) -> crate::error::Result<crate::ir::Module>,
) -> Result<RecoveryTable, (usize, String)> {
    let mut c = Cur::new(text);
    let at = |c: &mut Cur| {
        c.ws();
        c.i
    };
    c.expect("{").map_err(|e| (at(&mut c), e))?;
    let mut entries = Vec::new();
    while !c.eat("}") {
        let start = at(&mut c);
        let old = original_array(&mut c).map_err(|e| (at(&mut c), e))?;
        c.expect(":").map_err(|e| (at(&mut c), e))?;
        let new = original_array(&mut c).map_err(|e| (at(&mut c), e))?;
        let module = if c.eat(",") {
            let quote = at(&mut c);
            let body = c.quoted().map_err(|e| (quote, e))?;
            let raw = text.get(quote + 1..c.i.saturating_sub(1)).unwrap_or("");
            let m = parse_module(&body).map_err(|e| {
                let mut a = String::new();
                write_original_array(&old, &mut a);
                match e {
                    crate::error::Error::Parse { pos, message, .. } if raw == body => (
                        quote + 1 + offset_of(&body, pos.line, pos.col),
                        format!("in the recovery module of {{{a}}}: {message}"),
                    ),
                    e => (
                        quote,
                        format!("the recovery module of {{{a}}} is not a module: {e}"),
                    ),
                }
            })?;
            Some(Box::new(m))
        } else {
            None
        };
        entries.push((start, RecoveryEntry { old, new, module }));
    }
    c.end().map_err(|e| (at(&mut c), e))?;
    // A duplicate is reported at its second occurrence in the text.
    let mut seen = std::collections::HashSet::new();
    for (start, e) in &entries {
        if !seen.insert(&e.old) {
            let mut a = String::new();
            write_original_array(&e.old, &mut a);
            return Err((
                *start,
                format!("original array {{{a}}} is recovered twice (XLA keeps one entry per original array)"),
            ));
        }
    }
    RecoveryTable::sorted(entries.into_iter().map(|(_, e)| e).collect()).map_err(|e| (0, e))
}

/// The byte offset of 1-based `line` and `col` (in characters) in `text`
/// (clamped to its end).
fn offset_of(text: &str, line: usize, col: usize) -> usize {
    let mut start = 0;
    for _ in 1..line {
        match memchr::memchr(b'\n', &text.as_bytes()[start..]) {
            Some(p) => start += p + 1,
            None => return text.len(),
        }
    }
    text[start..]
        .char_indices()
        .nth(col.saturating_sub(1))
        .map_or(text.len(), |(k, _)| start + k)
}

/// An original value as XLA's `OriginalValueProto`: one element per known
/// leaf, at its shape index in the tree.
pub fn original_value_proto(v: &OriginalValue) -> xla::OriginalValueProto {
    fn walk(n: &OriginalNode, at: &mut Vec<i64>, out: &mut Vec<xla::OriginalValueElementProto>) {
        match n {
            OriginalNode::Tuple(elems) => {
                for (k, e) in elems.iter().enumerate() {
                    at.push(k as i64);
                    walk(e, at, out);
                    at.pop();
                }
            }
            // XLA writes an unknown leaf as an element without an array.
            OriginalNode::Leaf(None) => out.push(xla::OriginalValueElementProto {
                shape_index: at.clone(),
                original_array: None,
            }),
            OriginalNode::Leaf(Some((name, index))) => out.push(xla::OriginalValueElementProto {
                shape_index: at.clone(),
                original_array: Some(xla::OriginalArrayProto {
                    instruction_name: name.clone(),
                    shape_index: index.clone(),
                }),
            }),
        }
    }
    let mut elements = Vec::new();
    if let Some(t) = &v.tree {
        walk(t, &mut Vec::new(), &mut elements);
    }
    xla::OriginalValueProto {
        elements,
        is_synthetic_call: v.synthetic_call,
    }
}

/// An `OriginalValueProto` of an instruction of shape `shape` as its tree:
/// the tree follows the shape's tuples, one element a leaf (an element
/// without an original array is an unknown leaf, `{}`). A leaf without an
/// element, an element at a shape index that is not a leaf of the shape,
/// or two at one index is an error.
pub fn original_value_from_proto(
    p: &xla::OriginalValueProto,
    shape: &xla::ShapeProto,
) -> R<OriginalValue> {
    if p.is_synthetic_call {
        if !p.elements.is_empty() {
            return Err("a synthetic-call original value has elements".into());
        }
        return Ok(OriginalValue {
            synthetic_call: true,
            tree: None,
        });
    }
    type Leaves = std::collections::HashMap<Vec<i64>, Option<(String, Vec<i64>)>>;
    let mut by_index: Leaves = std::collections::HashMap::new();
    for e in &p.elements {
        let a = e
            .original_array
            .as_ref()
            .map(|a| (a.instruction_name.clone(), a.shape_index.clone()));
        let old = by_index.insert(e.shape_index.clone(), a);
        if old.is_some() {
            return Err(format!(
                "two original value elements at shape index {:?}",
                e.shape_index
            ));
        }
    }
    fn build(s: &xla::ShapeProto, at: &mut Vec<i64>, by_index: &mut Leaves) -> R<OriginalNode> {
        if at.len() > MAX_ORIGIN_DEPTH {
            return Err("an original value's shape nests too deeply".into());
        }
        // 13: TUPLE.
        if s.element_type == 13 {
            let mut elems = Vec::with_capacity(s.tuple_shapes.len());
            for (k, t) in s.tuple_shapes.iter().enumerate() {
                at.push(k as i64);
                elems.push(build(t, at, by_index)?);
                at.pop();
            }
            return Ok(OriginalNode::Tuple(elems));
        }
        match by_index.remove(at.as_slice()) {
            Some(leaf) => Ok(OriginalNode::Leaf(leaf)),
            // XLA's text has no spelling for a leaf without an element.
            None => Err(format!(
                "an original value has no element at shape index {at:?}"
            )),
        }
    }
    let tree = build(shape, &mut Vec::new(), &mut by_index)?;
    if let Some(idx) = by_index.keys().next() {
        return Err(format!(
            "an original value element at shape index {idx:?}, not a leaf of the instruction's shape"
        ));
    }
    Ok(OriginalValue {
        synthetic_call: false,
        tree: Some(tree),
    })
}

/// `sparsity_config={rhs={sparsity=3x4 dimension=0 stride=1}}` of a dot or
/// convolution (`N`x`M`: `N` non-zero values in each block of `M`), as
/// XLA's `SparsityConfig`.
pub fn sparsity_config(text: &str) -> R<xla::SparsityConfig> {
    let mut c = Cur::new(text);
    c.expect("{")?;
    let mut out = xla::SparsityConfig::default();
    if !c.eat("}") {
        loop {
            let side = c.word();
            let slot = match side {
                "lhs" => &mut out.lhs,
                "rhs" => &mut out.rhs,
                other => return Err(format!("expected lhs= or rhs=, found `{other}`")),
            };
            c.expect("=")?;
            c.expect("{")?;
            let mut t = xla::TensorSparsityConfig::default();
            while !c.eat("}") {
                let key = c.word();
                c.expect("=")?;
                match key {
                    "sparsity" => {
                        t.num_non_zero = c.int()?;
                        c.expect("x")?;
                        t.block_size = c.int()?;
                    }
                    "dimension" => t.dimension = c.int()?,
                    "stride" => t.stride = c.int()?,
                    other => {
                        return Err(format!(
                            "unknown sparsity field `{other}`; expected sparsity=, dimension= or stride="
                        ))
                    }
                }
                c.eat(",");
            }
            *slot = Some(t);
            // The sides are separated by a space.
            if c.eat("}") {
                break;
            }
        }
    }
    c.end()?;
    Ok(out)
}

/// A sparsity config in XLA's spelling, as [`sparsity_config`] reads it.
pub fn write_sparsity_config(s: &xla::SparsityConfig, o: &mut String) {
    o.push('{');
    let mut first = true;
    for (side, t) in [("lhs", &s.lhs), ("rhs", &s.rhs)] {
        if let Some(t) = t {
            if !first {
                o.push(' ');
            }
            first = false;
            let _ = write!(
                o,
                "{side}={{sparsity={}x{} dimension={} stride={}}}",
                t.num_non_zero, t.block_size, t.dimension, t.stride
            );
        }
    }
    o.push('}');
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn result_accuracy_modes_are_case_insensitive() {
        assert_eq!(
            result_accuracy("{mode=DEFAULT}").map(|r| r.mode),
            Ok(Some(0))
        );
        assert_eq!(
            result_accuracy("{mode=highest}").map(|r| r.mode),
            Ok(Some(1))
        );
        assert!(result_accuracy("{tolerance={atol=0,rtol=0,ulps=10}}")
            .is_ok_and(|r| r.tolerance.is_some()));
        assert!(result_accuracy("{mode=high}").is_err());
    }

    /// A sharding read from a proto is what its text reads back as: the
    /// writer and the text decoder agree on every field text carries.
    #[test]
    fn sharding_from_proto_reads_back_from_its_text() {
        use sharding_type::*;
        let md = xla::OpMetadata {
            op_name: "a\"b".into(),
            size_of_generated_code_in_bytes: 7,
            ..Default::default()
        };
        let cases = [
            xla::OpSharding {
                r#type: OTHER,
                tile_assignment_dimensions: vec![2, 1, 2],
                iota_reshape_dims: vec![4],
                ..Default::default()
            },
            xla::OpSharding {
                r#type: OTHER,
                tile_assignment_dimensions: vec![2, 2],
                iota_reshape_dims: vec![2, 2],
                iota_transpose_perm: vec![1, 0],
                last_tile_dims: vec![MANUAL, REPLICATED],
                is_shard_group: true,
                shard_group_id: 4,
                shard_group_type: 1,
                ..Default::default()
            },
            xla::OpSharding {
                r#type: TUPLE,
                tuple_shardings: vec![
                    xla::OpSharding {
                        r#type: MAXIMAL,
                        tile_assignment_devices: vec![3],
                        metadata: vec![md.clone(), md.clone()],
                        ..Default::default()
                    },
                    xla::OpSharding {
                        r#type: OTHER,
                        tile_assignment_dimensions: vec![1, 2],
                        tile_assignment_devices: vec![1, 0],
                        replicate_on_last_tile_dim: true,
                        metadata: vec![md],
                        ..Default::default()
                    },
                ],
                ..Default::default()
            },
            xla::OpSharding::default(),
        ];
        for s in &cases {
            let typed = sharding_from_proto(s).unwrap();
            let mut text = String::new();
            write_sharding(&typed, &mut text);
            assert_eq!(sharding(&text).unwrap(), typed, "{text}");
        }
        let axis = |k: i64| xla::AxisRefProto {
            mesh_axis_index: k,
            sub_axis_info: None,
        };
        let mut named = xla::OpSharding {
            named_sharding: Some(xla::NamedShardingProto {
                mesh: Some(xla::MeshProto {
                    axes: vec![
                        xla::MeshAxis {
                            name: "x".into(),
                            size: 2,
                        },
                        xla::MeshAxis {
                            name: "y".into(),
                            size: 4,
                        },
                    ],
                    device_ids: vec![7, 6, 5, 4, 3, 2, 1, 0],
                    iota_transform: None,
                }),
                dim_shardings: vec![
                    xla::DimensionSharding {
                        axes: vec![xla::AxisRefProto {
                            mesh_axis_index: 1,
                            sub_axis_info: Some(xla::SubAxis {
                                pre_size: 1,
                                size: 2,
                            }),
                        }],
                        is_closed: false,
                    },
                    xla::DimensionSharding {
                        axes: vec![],
                        is_closed: true,
                    },
                ],
                replicated_axes: vec![axis(0)],
                ..Default::default()
            }),
            ..Default::default()
        };
        let typed = sharding_from_proto(&named).unwrap();
        let mut text = String::new();
        write_sharding(&typed, &mut text);
        assert_eq!(
            text,
            "{mesh['x'=2,'y'=4], device_ids=(7,6,5,4,3,2,1,0), [{'y':(1)2, ?}, {}], replicated={'x'}}"
        );
        assert_eq!(sharding(&text).unwrap(), typed, "{text}");
        if let Some(n) = &mut named.named_sharding {
            n.unreduced_axes = vec![axis(2)];
        }
        assert!(
            sharding_from_proto(&named).is_err(),
            "an axis outside the mesh"
        );
        let bad_type = xla::OpSharding {
            r#type: 42,
            ..Default::default()
        };
        assert!(sharding_from_proto(&bad_type).is_err());
    }
}
