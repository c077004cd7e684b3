//! Protobuf text format for XLA's autotuning messages.
//!
//! Through prost-reflect's text format over hlo-opt's own declaration of the
//! messages (`passes/proto/autotuning.proto`, compiled by `passes/build.rs`
//! with protox): the writer of `AutotuneResults`, `AutotuneResult` and
//! `AutotuningLogs`, and the reader of `AutotuneResults` and
//! `AutotuneResult`, whose errors name the line and column. The thin layer
//! over the library is only where protobuf's C++ `TextFormat` (what XLA
//! writes and reads) differs: an empty message is `name {` and `}` on
//! lines of their own, not `name {}`; the text ends with a newline; and an
//! `AutotuneResults` of the old layout (`dots`, `convs`) is named as such.
//!
//! The tree reader ([`parse`]) reads what hlo-opt declares only in part:
//! `AutotuningLogs`, whose `instr` holds a whole `xla.HloInstructionProto`,
//! and the new autotuner's logs ([`super::autotuner`]); prost-reflect has no
//! way to skip a field its descriptor lacks. It keeps the fields it knows
//! by name and skips the rest; a known field of the wrong kind is an error
//! naming its line.

use std::sync::OnceLock;

use prost::Message as _;
use prost_reflect::text_format::FormatOptions;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor};

use super::config::TritonConfig;
use super::proto::*;

// ---------------------------------------------------------------------------
// through the library

/// The messages of `passes/proto/autotuning.proto` (and the well-known
/// `google.protobuf.Any` and `Duration` they hold).
fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(
            include_bytes!(concat!(env!("OUT_DIR"), "/autotuning.fds")).as_slice(),
        )
        .expect("the descriptor set build.rs compiled")
    })
}

fn descriptor(name: &str) -> MessageDescriptor {
    pool()
        .get_message_by_name(name)
        .unwrap_or_else(|| panic!("{name} is declared in passes/proto/autotuning.proto"))
}

/// `m` (a message of type `name`) as protobuf's C++ `TextFormat` prints
/// it: fields in number order, defaults left out, two-space indentation,
/// strings C-escaped (octal for bytes outside printable ASCII), an `Any`
/// of a declared type expanded.
fn to_text(m: &impl prost::Message, name: &str) -> Result<String, String> {
    let dynamic = DynamicMessage::decode(descriptor(name), m.encode_to_vec().as_slice())
        .map_err(|e| format!("{name}: {e}"))?;
    let text = dynamic.to_text_format_with_options(&FormatOptions::new().pretty(true));
    Ok(as_cpp_prints(&text))
}

/// prost-reflect's pretty text as C++ `TextFormat` prints it: a repeated
/// message field one `name {` ... `}` per element (prost-reflect: `name:
/// [{` ... `}, {` ... `}]`), an empty message over two lines (`name {}`),
/// a newline at the end. Strings stay on their line, escaped, so a line
/// that is only these brackets is structure.
fn as_cpp_prints(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    let mut lists: Vec<&str> = Vec::new();
    let mut push = |indent: &str, rest: &str| {
        out.push_str(indent);
        out.push_str(rest);
        out.push('\n');
    };
    for line in text.lines() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        if let Some(name) = body.strip_suffix(": [{") {
            lists.push(name);
            push(indent, &format!("{name} {{"));
        } else if body == "}, {" {
            push(indent, "}");
            push(
                indent,
                &format!("{} {{", lists.last().copied().unwrap_or_default()),
            );
        } else if body == "}]" {
            lists.pop();
            push(indent, "}");
        } else if let Some(open) = body.strip_suffix(" {}") {
            push(indent, &format!("{open} {{"));
            push(indent, "}");
        } else {
            push(indent, body);
        }
    }
    out
}

/// Reads text of the message type `name`; an error names its line and
/// column (`line 3:11: ...`).
fn from_text<M: prost::Message + Default>(text: &str, name: &str) -> Result<M, String> {
    use miette::Diagnostic as _;
    let dynamic = DynamicMessage::parse_text_format(descriptor(name), text).map_err(|e| {
        let at = e
            .labels()
            .and_then(|mut l| l.next())
            .map_or(text.len(), |l| l.offset());
        let before = &text[..at.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        format!("line {line}:{col}: {e}")
    })?;
    M::decode(dynamic.encode_to_vec().as_slice()).map_err(|e| format!("{name}: {e}"))
}

/// One `AutotuneResult` as text (the content of a per-fusion cache file).
pub fn result_to_text(r: &AutotuneResult) -> Result<String, String> {
    to_text(r, "xla.AutotuneResult")
}

/// `AutotuneResults` as text (a `--xla_gpu_load_autotune_results_from`
/// file whose name ends in `.txt`, `.textproto`, `.txtpb`, `.pbtxt` or
/// `.prototxt`).
pub fn results_to_text(r: &AutotuneResults) -> Result<String, String> {
    to_text(r, "xla.AutotuneResults")
}

/// `AutotuningLogs` as text, as XLA's autotuner dumps them (the fields
/// hlo-opt declares; an `instr` holding an `xla.HloInstructionProto` in the
/// expanded `Any` form with its name, opcode and fusion kind). For tests
/// and for logs made by other tools.
pub fn logs_to_text(logs: &AutotuningLogs) -> Result<String, String> {
    to_text(logs, "xla.AutotuningLogs")
}

/// Reads one `AutotuneResult` from text (a per-fusion cache file).
pub fn result_from_text(text: &str) -> Result<AutotuneResult, String> {
    from_text(text, "xla.AutotuneResult")
}

/// Reads `AutotuneResults` from text.
pub fn results_from_text(text: &str) -> Result<AutotuneResults, String> {
    from_text(text, "xla.AutotuneResults").map_err(|e| {
        if e.contains("field 'dots' not found") || e.contains("field 'convs' not found") {
            format!("{e}: an AutotuneResults of the old layout (entries in dots/convs); this XLA writes `results`")
        } else {
            e
        }
    })
}

/// The instruction name of a log's `instr` (an `xla.HloInstructionProto`),
/// else its `fusion_name`.
pub fn log_instruction_name(log: &AutotuningLog) -> Option<String> {
    if let Some(a) = &log.instr {
        if a.type_url.ends_with("/xla.HloInstructionProto") {
            if let Ok(p) = hlo::proto::xla::HloInstructionProto::decode(a.value.as_slice()) {
                if !p.name.is_empty() {
                    return Some(p.name);
                }
            }
        }
    }
    (!log.fusion_name.is_empty()).then(|| log.fusion_name.clone())
}

/// Reads `AutotuningLogs` from a file: text when XLA would write text
/// there ([`is_text_path`]) or the bytes are not a valid binary message,
/// binary otherwise.
pub fn read_logs_file(path: &std::path::Path) -> Result<AutotuningLogs, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let as_text = |b: &[u8]| -> Result<AutotuningLogs, String> {
        let t = std::str::from_utf8(b)
            .map_err(|_| "neither binary AutotuningLogs nor UTF-8 text".to_string())?;
        logs_from_text(t)
    };
    let r = if is_text_path(path) {
        as_text(&bytes)
    } else {
        AutotuningLogs::decode(bytes.as_slice()).or_else(|_| as_text(&bytes))
    };
    r.map_err(|e| format!("{}: {e}", path.display()))
}

// ---------------------------------------------------------------------------
// reader: text -> tree

/// A field value in the text.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A number, identifier or enum name, as written.
    Scalar(String),
    /// A string literal, unescaped.
    Bytes(Vec<u8>),
    Message(Fields),
}

/// The fields of a message in text order: name (or `[type url]`), value,
/// line.
pub type Fields = Vec<(String, Value, usize)>;

struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
    line: usize,
}

impl Lexer<'_> {
    fn err(&self, msg: impl std::fmt::Display) -> String {
        format!("line {}: {msg}", self.line)
    }
    fn skip_ws(&mut self) {
        while self.pos < self.s.len() {
            match self.s[self.pos] {
                b'\n' => {
                    self.line += 1;
                    self.pos += 1;
                }
                b' ' | b'\t' | b'\r' | b',' | b';' => self.pos += 1,
                b'#' => {
                    while self.pos < self.s.len() && self.s[self.pos] != b'\n' {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }
    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.pos).copied()
    }
    fn ident(&mut self) -> Result<String, String> {
        self.skip_ws();
        let start = self.pos;
        while self.pos < self.s.len()
            && (self.s[self.pos].is_ascii_alphanumeric()
                || matches!(self.s[self.pos], b'_' | b'.' | b'-' | b'+'))
        {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(self.err("expected a name or a value"));
        }
        Ok(String::from_utf8_lossy(&self.s[start..self.pos]).into_owned())
    }
    fn string(&mut self) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        while let Some(q @ (b'"' | b'\'')) = self.peek() {
            self.pos += 1;
            loop {
                let Some(&c) = self.s.get(self.pos) else {
                    return Err(self.err("unterminated string"));
                };
                self.pos += 1;
                match c {
                    b'\n' => return Err(self.err("line break in a string")),
                    _ if c == q => break,
                    b'\\' => {
                        let Some(&e) = self.s.get(self.pos) else {
                            return Err(self.err("unterminated string"));
                        };
                        self.pos += 1;
                        match e {
                            b'n' => out.push(b'\n'),
                            b'r' => out.push(b'\r'),
                            b't' => out.push(b'\t'),
                            b'a' => out.push(7),
                            b'b' => out.push(8),
                            b'f' => out.push(12),
                            b'v' => out.push(11),
                            b'"' | b'\'' | b'\\' | b'?' => out.push(e),
                            b'0'..=b'7' => {
                                let mut v = u32::from(e - b'0');
                                for _ in 0..2 {
                                    match self.s.get(self.pos) {
                                        Some(&d @ b'0'..=b'7') => {
                                            v = v * 8 + u32::from(d - b'0');
                                            self.pos += 1;
                                        }
                                        _ => break,
                                    }
                                }
                                out.push(
                                    u8::try_from(v)
                                        .map_err(|_| self.err("octal escape above 255"))?,
                                );
                            }
                            b'x' => {
                                let mut v = 0u32;
                                let mut n = 0;
                                while n < 2 {
                                    match self
                                        .s
                                        .get(self.pos)
                                        .and_then(|d| (*d as char).to_digit(16))
                                    {
                                        Some(d) => {
                                            v = v * 16 + d;
                                            self.pos += 1;
                                            n += 1;
                                        }
                                        None => break,
                                    }
                                }
                                if n == 0 {
                                    return Err(self.err("\\x without hex digits"));
                                }
                                out.push(v as u8);
                            }
                            _ => return Err(self.err(format!("unknown escape \\{}", e as char))),
                        }
                    }
                    _ => out.push(c),
                }
            }
        }
        Ok(out)
    }
    fn fields(&mut self, close: Option<u8>, depth: usize) -> Result<Fields, String> {
        if depth > 64 {
            return Err(self.err("messages nested more than 64 deep"));
        }
        let mut fields = Vec::new();
        loop {
            match (self.peek(), close) {
                (None, None) => return Ok(fields),
                (None, Some(c)) => return Err(self.err(format!("missing `{}`", c as char))),
                (Some(c), Some(want)) if c == want => {
                    self.pos += 1;
                    return Ok(fields);
                }
                _ => {}
            }
            let line = self.line;
            let name = if self.peek() == Some(b'[') {
                self.pos += 1;
                let start = self.pos;
                while self.pos < self.s.len() && self.s[self.pos] != b']' {
                    if self.s[self.pos] == b'\n' {
                        return Err(self.err("line break in `[...]`"));
                    }
                    self.pos += 1;
                }
                if self.pos >= self.s.len() {
                    return Err(self.err("missing `]`"));
                }
                let n = format!(
                    "[{}]",
                    String::from_utf8_lossy(&self.s[start..self.pos]).trim()
                );
                self.pos += 1;
                n
            } else {
                self.ident()?
            };
            let colon = self.peek() == Some(b':');
            if colon {
                self.pos += 1;
            }
            let value = match self.peek() {
                Some(b'{') => {
                    self.pos += 1;
                    Value::Message(self.fields(Some(b'}'), depth + 1)?)
                }
                Some(b'<') => {
                    self.pos += 1;
                    Value::Message(self.fields(Some(b'>'), depth + 1)?)
                }
                Some(b'"' | b'\'') if colon => Value::Bytes(self.string()?),
                Some(b'[') => {
                    return Err(self.err(format!("`{name}`: list values are not supported")))
                }
                Some(_) if colon => Value::Scalar(self.ident()?),
                _ => return Err(self.err(format!("`{name}`: expected `:` or `{{`"))),
            };
            fields.push((name, value, line));
        }
    }
}

/// Parses protobuf text into a tree of fields.
pub fn parse(text: &str) -> Result<Fields, String> {
    Lexer {
        s: text.as_bytes(),
        pos: 0,
        line: 1,
    }
    .fields(None, 0)
}

// ---------------------------------------------------------------------------
// reader: tree -> messages

fn int(name: &str, v: &Value, line: usize) -> Result<i64, String> {
    match v {
        Value::Scalar(s) => s
            .parse::<i64>()
            .map_err(|_| format!("line {line}: `{name}: {s}` is not an integer")),
        _ => Err(format!("line {line}: `{name}` is not an integer")),
    }
}

fn int32(name: &str, v: &Value, line: usize) -> Result<i32, String> {
    i32::try_from(int(name, v, line)?)
        .map_err(|_| format!("line {line}: `{name}` out of int32 range"))
}

fn boolean(name: &str, v: &Value, line: usize) -> Result<bool, String> {
    match v {
        Value::Scalar(s) if s == "true" || s == "True" || s == "t" || s == "1" => Ok(true),
        Value::Scalar(s) if s == "false" || s == "False" || s == "f" || s == "0" => Ok(false),
        _ => Err(format!("line {line}: `{name}` is not a bool")),
    }
}

fn string(name: &str, v: &Value, line: usize) -> Result<String, String> {
    match v {
        Value::Bytes(b) => {
            String::from_utf8(b.clone()).map_err(|_| format!("line {line}: `{name}` is not UTF-8"))
        }
        _ => Err(format!("line {line}: `{name}` is not a string")),
    }
}

fn message<'a>(name: &str, v: &'a Value, line: usize) -> Result<&'a Fields, String> {
    match v {
        Value::Message(f) => Ok(f),
        _ => Err(format!("line {line}: `{name}` is not a message")),
    }
}

/// A Triton config (`triton { ... }`: the legacy `AutotuneResult`'s, the
/// new autotuner's `backend_config`'s); a later field replaces an earlier.
pub(crate) fn triton(f: &Fields) -> Result<TritonConfig, String> {
    let mut k = TritonConfig::default();
    for (n, v, l) in f {
        match n.as_str() {
            "block_m" => k.block_m = int(n, v, *l)?,
            "block_n" => k.block_n = int(n, v, *l)?,
            "block_k" => k.block_k = int(n, v, *l)?,
            "split_k" => k.split_k = int(n, v, *l)?,
            "num_stages" => k.num_stages = int(n, v, *l)?,
            "num_warps" => k.num_warps = int(n, v, *l)?,
            "num_ctas" => k.num_ctas = int(n, v, *l)?,
            "is_tma_allowed" => k.is_tma_allowed = boolean(n, v, *l)?,
            "is_warp_specialization_allowed" => {
                k.is_warp_specialization_allowed = boolean(n, v, *l)?
            }
            "waves_per_eu" => k.waves_per_eu = int(n, v, *l)?,
            "group_size" => k.group_size = int(n, v, *l)?,
            _ => {}
        }
    }
    Ok(k)
}

/// An `Any`: the type URL and the message encoded. Only an
/// `xla.HloInstructionProto` in expanded form is understood (its name,
/// opcode and fusion kind are kept); another type keeps its URL alone.
fn any(f: &Fields) -> Result<Any, String> {
    let mut a = Any::default();
    for (n, v, l) in f {
        match n.as_str() {
            "type_url" => a.type_url = string(n, v, *l)?,
            "value" => match v {
                Value::Bytes(b) => a.value = b.clone(),
                _ => return Err(format!("line {l}: `value` is not bytes")),
            },
            _ if n.starts_with('[') => {
                let url = n.trim_start_matches('[').trim_end_matches(']').to_string();
                let body = message(n, v, *l)?;
                if url.ends_with("/xla.HloInstructionProto") {
                    let mut p = hlo::proto::xla::HloInstructionProto::default();
                    for (n2, v2, l2) in body {
                        match n2.as_str() {
                            "name" => p.name = string(n2, v2, *l2)?,
                            "opcode" => p.opcode = string(n2, v2, *l2)?,
                            "fusion_kind" => p.fusion_kind = string(n2, v2, *l2)?,
                            _ => {}
                        }
                    }
                    a.value = p.encode_to_vec();
                }
                a.type_url = url;
            }
            _ => {}
        }
    }
    Ok(a)
}

fn result(f: &Fields) -> Result<AutotuneResult, String> {
    let mut r = AutotuneResult::default();
    for (n, v, l) in f {
        let l = *l;
        match n.as_str() {
            "scratch_bytes" => r.scratch_bytes = int(n, v, l)?,
            "run_time" => {
                let mut d = Duration::default();
                for (n2, v2, l2) in message(n, v, l)? {
                    match n2.as_str() {
                        "seconds" => d.seconds = int(n2, v2, *l2)?,
                        "nanos" => d.nanos = int32(n2, v2, *l2)?,
                        _ => {}
                    }
                }
                r.run_time = Some(d);
            }
            "failure" => {
                let mut fr = FailureResult::default();
                for (n2, v2, l2) in message(n, v, l)? {
                    match n2.as_str() {
                        "kind" => {
                            fr.kind = match v2 {
                                Value::Scalar(s) => match FAILURE_KINDS.iter().position(|k| k == s)
                                {
                                    Some(i) => i as i32,
                                    None => int32(n2, v2, *l2)?,
                                },
                                _ => return Err(format!("line {l2}: `kind` is not an enum")),
                            }
                        }
                        "msg" => fr.msg = string(n2, v2, *l2)?,
                        "buffer_address" => fr.buffer_address = int(n2, v2, *l2)?,
                        _ => {}
                    }
                }
                r.failure = Some(fr);
            }
            "triton" => r.key = Some(ResultKey::Triton(triton(message(n, v, l)?)?)),
            "gemm" => {
                let mut g = GemmKey::default();
                for (n2, v2, l2) in message(n, v, l)? {
                    match n2.as_str() {
                        "algorithm" => g.algorithm = int(n2, v2, *l2)?,
                        "autotune_workspace_size" => g.autotune_workspace_size = int(n2, v2, *l2)?,
                        _ => {}
                    }
                }
                r.key = Some(ResultKey::Gemm(g));
            }
            "algorithm" => {
                let mut a = AlgorithmProto::default();
                for (n2, v2, l2) in message(n, v, l)? {
                    match n2.as_str() {
                        "algo_id" => a.algo_id = int(n2, v2, *l2)?,
                        "is_cudnn_frontend" => a.is_cudnn_frontend = boolean(n2, v2, *l2)?,
                        _ => {}
                    }
                }
                r.key = Some(ResultKey::Algorithm(a));
            }
            "custom_kernel_fusion" => {
                let mut k = CustomKernelFusionKey::default();
                for (n2, v2, l2) in message(n, v, l)? {
                    if n2 == "kernel_index" {
                        k.kernel_index = int(n2, v2, *l2)?;
                    }
                }
                r.key = Some(ResultKey::CustomKernelFusion(k));
            }
            "other" => {
                let mut k = BackendConfigKey::default();
                for (n2, v2, l2) in message(n, v, l)? {
                    match n2.as_str() {
                        "name" => k.name = string(n2, v2, *l2)?,
                        "config" => k.config = Some(any(message(n2, v2, *l2)?)?),
                        _ => {}
                    }
                }
                r.key = Some(ResultKey::Other(k));
            }
            _ => {}
        }
    }
    Ok(r)
}

/// Reads `AutotuningLogs` from text.
pub fn logs_from_text(text: &str) -> Result<AutotuningLogs, String> {
    let mut out = AutotuningLogs::default();
    for (n, v, l) in parse(text)? {
        if n != "logs" {
            continue;
        }
        let mut log = AutotuningLog::default();
        for (n2, v2, l2) in message(&n, &v, l)? {
            let l2 = *l2;
            match n2.as_str() {
                "instr" => log.instr = Some(any(message(n2, v2, l2)?)?),
                "results" => log.results.push(result(message(n2, v2, l2)?)?),
                "device_pci_bus_id" => log.device_pci_bus_id = string(n2, v2, l2)?,
                "blas_version" => log.blas_version = string(n2, v2, l2)?,
                "fusion_name" => log.fusion_name = string(n2, v2, l2)?,
                "fusion_count" => log.fusion_count = int(n2, v2, l2)?,
                "selected_backend" => log.selected_backend = string(n2, v2, l2)?,
                "compute_capability" => {
                    let mut c = ComputeCapability::default();
                    for (n3, v3, l3) in message(n2, v2, l2)? {
                        match n3.as_str() {
                            "major" => c.major = int32(n3, v3, *l3)?,
                            "minor" => c.minor = int32(n3, v3, *l3)?,
                            _ => {}
                        }
                    }
                    log.compute_capability = Some(c);
                }
                "cudnn_version" => {
                    let mut c = CudnnVersion::default();
                    for (n3, v3, l3) in message(n2, v2, l2)? {
                        match n3.as_str() {
                            "major" => c.major = int32(n3, v3, *l3)?,
                            "minor" => c.minor = int32(n3, v3, *l3)?,
                            "patch" => c.patch = int32(n3, v3, *l3)?,
                            _ => {}
                        }
                    }
                    log.cudnn_version = Some(c);
                }
                _ => {}
            }
        }
        out.logs.push(log);
    }
    Ok(out)
}

/// Whether XLA reads a results file of this name as text (its
/// `IsTextProtoPath`); otherwise as binary.
pub fn is_text_path(path: &std::path::Path) -> bool {
    let s = path.to_string_lossy();
    [".txt", ".txtpb", ".textproto", ".prototxt", ".pbtxt"]
        .iter()
        .any(|e| s.ends_with(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(m: i64) -> TritonConfig {
        TritonConfig {
            block_m: m,
            block_n: 32,
            block_k: 64,
            split_k: 1,
            num_stages: 3,
            num_warps: 4,
            num_ctas: 1,
            is_tma_allowed: true,
            ..Default::default()
        }
    }

    #[test]
    fn results_text_round_trip() {
        let r = AutotuneResults {
            version: 3,
            results: vec![AutotuneResultsEntry {
                device: "CUDA: 9.0, Cores: 132".into(),
                hlo: "{\n  tmp_0 = f32[] parameter(0)\n  x=\"q\\\" \u{e9}\n}".into(),
                result: Some(AutotuneResult {
                    scratch_bytes: 0,
                    run_time: Some(Duration {
                        seconds: 0,
                        nanos: 12_345,
                    }),
                    failure: None,
                    key: Some(ResultKey::Triton(key(64))),
                }),
                version: 36,
            }],
        };
        let text = results_to_text(&r).expect("writes");
        assert!(
            text.starts_with("version: 3\nresults {\n  device: \"CUDA: 9.0, Cores: 132\"\n"),
            "{text}"
        );
        // Non-ASCII bytes as octal escapes, quotes and backslashes escaped.
        assert!(text.contains(r#"x=\"q\\\" \303\251\n}""#), "{text}");
        assert!(text.contains(
            "    run_time {\n      nanos: 12345\n    }\n    triton {\n      block_m: 64\n"
        ));
        assert!(text.contains("      is_tma_allowed: true\n"));
        assert!(!text.contains("is_warp_specialization_allowed"));
        assert_eq!(results_from_text(&text), Ok(r));
    }

    #[test]
    fn reads_logs_as_xla_writes_them() {
        let text = r#"logs {
  instr {
    [type.googleapis.com/xla.HloInstructionProto] {
      name: "gemm_fusion_dot.1"
      opcode: "fusion"
      shape { element_type: F32 dimensions: 128 }
      fusion_kind: "kCustom"
    }
  }
  results {
    scratch_bytes: 0
    run_time { nanos: 8192 }
    triton { block_m: 16 block_n: 32 block_k: 64 split_k: 1 num_stages: 1 num_warps: 2 num_ctas: 1 }
  }
  results {
    failure { kind: DISQUALIFIED msg: "out of \"shared\" memory" }
    triton { block_m: 256 block_n: 256 block_k: 128 split_k: 1 num_stages: 4 num_warps: 8 num_ctas: 1 }
  }
  # a comment
  fusion_name: "gemm_fusion_dot.1"
}
"#;
        let logs = logs_from_text(text).expect("reads");
        assert_eq!(logs.logs.len(), 1);
        let log = &logs.logs[0];
        assert_eq!(log.results.len(), 2);
        assert_eq!(log.results[0].run_time.map(|d| d.micros()), Some(8.192));
        let f = log.results[1].failure.as_ref().expect("a failure");
        assert_eq!((f.kind, f.msg.as_str()), (3, "out of \"shared\" memory"));
        let instr = log.instr.as_ref().expect("instr");
        assert_eq!(
            instr.type_url,
            "type.googleapis.com/xla.HloInstructionProto"
        );
        use prost::Message as _;
        let p =
            hlo::proto::xla::HloInstructionProto::decode(instr.value.as_slice()).expect("decodes");
        assert_eq!(
            (p.name.as_str(), p.opcode.as_str()),
            ("gemm_fusion_dot.1", "fusion")
        );
    }

    #[test]
    fn bad_text_is_an_error_with_its_line() {
        for (text, want) in [
            ("version: 3\nresults {\n  device: \"x\n", "line 3:"),
            (
                "results {\n  version: x\n}",
                "line 2:12: expected an integer, but found 'x'",
            ),
            ("results {\n", "line 2:1: expected '}' or a field name, but reached end of input"),
            ("results { result { triton: 5 } }", "line 1:28: expected '{' or '<', but found '5'"),
            ("dots { }", "line 1:1: field 'dots' not found for message 'xla.AutotuneResults': an AutotuneResults of the old layout"),
            ("results { device: \"\\q\" }", "line 1:"),
            ("results {\n  device: \"a\"\n  hlo: 7\n}", "line 3:8: expected a string"),
        ] {
            let e = results_from_text(text).expect_err(text);
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let deep = "a {".repeat(100);
        assert!(parse(&deep).is_err_and(|e| e.contains("64 deep")));
    }

    #[test]
    fn a_per_fusion_file_reads_back() {
        let r = AutotuneResult {
            key: Some(ResultKey::Triton(key(128))),
            ..Default::default()
        };
        let text = result_to_text(&r).expect("writes");
        assert_eq!(
            text,
            "triton {\n  block_m: 128\n  block_n: 32\n  block_k: 64\n  split_k: 1\n  num_stages: 3\n  num_warps: 4\n  num_ctas: 1\n  is_tma_allowed: true\n}\n"
        );
        assert_eq!(result_from_text(&text), Ok(r));
    }
}
