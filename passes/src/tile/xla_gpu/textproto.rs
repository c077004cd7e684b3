//! Protobuf text format for XLA's autotuning messages: a writer of
//! `AutotuneResults` and `AutotuneResult` as protobuf's `TextFormat` prints
//! them (fields in number order, proto3 defaults left out, two-space
//! indentation, strings C-escaped with octal escapes for bytes outside
//! printable ASCII), and a reader of the text XLA writes for
//! `AutotuneResults`, `AutotuningLogs` and `AutotuneResult` (any field
//! order, `#` comments, `:` optional before a message, `{}` or `<>`,
//! adjacent strings joined, an `Any` in the expanded
//! `[type.googleapis.com/xla.HloInstructionProto] { ... }` form).
//!
//! The reader parses into a generic tree first ([`parse`], also what
//! [`super::autotuner`] reads the new autotuner's logs from, with this
//! file's reader of a Triton config), then maps the fields it knows by name; a field it does not know is skipped, a known
//! field of the wrong kind is an error naming it. Errors carry the line.

use std::fmt::Write as _;

use super::config::TritonConfig;
use super::proto::*;

// ---------------------------------------------------------------------------
// writer

/// Appends `s` as a text-format string literal (protobuf's `CEscape`).
pub fn write_string(s: &[u8], out: &mut String) {
    out.push('"');
    for &b in s {
        match b {
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\{b:03o}");
            }
        }
    }
    out.push('"');
}

struct W {
    out: String,
    depth: usize,
}

impl W {
    fn line(&mut self, text: &str) {
        for _ in 0..self.depth {
            self.out.push_str("  ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }
    fn int(&mut self, name: &str, v: i64) {
        if v != 0 {
            self.line(&format!("{name}: {v}"));
        }
    }
    fn boolean(&mut self, name: &str, v: bool) {
        if v {
            self.line(&format!("{name}: true"));
        }
    }
    fn string(&mut self, name: &str, v: &str) {
        if !v.is_empty() {
            let mut s = format!("{name}: ");
            write_string(v.as_bytes(), &mut s);
            self.line(&s);
        }
    }
    fn open(&mut self, name: &str) {
        self.line(&format!("{name} {{"));
        self.depth += 1;
    }
    fn close(&mut self) {
        self.depth -= 1;
        self.line("}");
    }
    fn triton(&mut self, k: &TritonConfig) {
        self.open("triton");
        self.int("block_m", k.block_m);
        self.int("block_n", k.block_n);
        self.int("block_k", k.block_k);
        self.int("split_k", k.split_k);
        self.int("num_stages", k.num_stages);
        self.int("num_warps", k.num_warps);
        self.int("num_ctas", k.num_ctas);
        self.boolean("is_tma_allowed", k.is_tma_allowed);
        self.boolean(
            "is_warp_specialization_allowed",
            k.is_warp_specialization_allowed,
        );
        self.int("waves_per_eu", k.waves_per_eu);
        self.int("group_size", k.group_size);
        self.close();
    }
    fn result(&mut self, r: &AutotuneResult) -> Result<(), String> {
        // Fields in number order: conv 5, gemm 6, failure 7, scratch_bytes 8,
        // run_time 9, cuda_conv_plan 15, algorithm 16, triton 17, ...
        match &r.key {
            Some(ResultKey::Conv(c)) => {
                self.open("conv");
                self.int("algorithm", c.algorithm);
                self.boolean("tensor_ops_enabled", c.tensor_ops_enabled);
                self.close();
            }
            Some(ResultKey::Gemm(g)) => {
                self.open("gemm");
                self.int("algorithm", g.algorithm);
                self.int("autotune_workspace_size", g.autotune_workspace_size);
                self.close();
            }
            _ => {}
        }
        if let Some(f) = &r.failure {
            self.open("failure");
            if f.kind != 0 {
                let name = FAILURE_KINDS
                    .get(f.kind as usize)
                    .ok_or_else(|| format!("failure kind {} has no name", f.kind))?;
                self.line(&format!("kind: {name}"));
            }
            self.string("msg", &f.msg);
            self.int("buffer_address", f.buffer_address);
            self.close();
        }
        self.int("scratch_bytes", r.scratch_bytes);
        if let Some(t) = &r.run_time {
            self.open("run_time");
            self.int("seconds", t.seconds);
            self.int("nanos", i64::from(t.nanos));
            self.close();
        }
        match &r.key {
            None | Some(ResultKey::Conv(_)) | Some(ResultKey::Gemm(_)) => {}
            Some(ResultKey::CudaConvPlan(p)) => {
                self.open("cuda_conv_plan");
                self.string("exec_plan_id", &p.exec_plan_id);
                self.close();
            }
            Some(ResultKey::Algorithm(a)) => {
                self.open("algorithm");
                self.int("algo_id", a.algo_id);
                self.int("math_type", i64::from(a.math_type));
                self.boolean("is_cudnn_frontend", a.is_cudnn_frontend);
                self.close();
            }
            Some(ResultKey::Triton(k)) => self.triton(k),
            Some(ResultKey::CustomKernelFusion(k)) => {
                self.open("custom_kernel_fusion");
                self.int("kernel_index", k.kernel_index);
                self.close();
            }
            Some(ResultKey::Other(_)) => {
                return Err(
                    "a result of another backend (an Any config) is not written as text".into(),
                )
            }
        }
        Ok(())
    }
}

/// One `AutotuneResult` as text (the content of a per-fusion cache file).
pub fn result_to_text(r: &AutotuneResult) -> Result<String, String> {
    let mut w = W {
        out: String::new(),
        depth: 0,
    };
    w.result(r)?;
    Ok(w.out)
}

/// `AutotuneResults` as text (a `--xla_gpu_load_autotune_results_from`
/// file whose name ends in `.txt`, `.textproto`, `.txtpb`, `.pbtxt` or
/// `.prototxt`).
pub fn results_to_text(r: &AutotuneResults) -> Result<String, String> {
    let mut w = W {
        out: String::new(),
        depth: 0,
    };
    w.int("version", i64::from(r.version));
    for e in &r.results {
        w.open("results");
        w.string("device", &e.device);
        w.string("hlo", &e.hlo);
        if let Some(res) = &e.result {
            w.open("result");
            w.result(res)?;
            w.close();
        }
        w.int("version", i64::from(e.version));
        w.close();
    }
    Ok(w.out)
}

/// `AutotuningLogs` as text, as XLA's autotuner dumps them (the fields
/// hlo-opt declares; an `instr` holding an `xla.HloInstructionProto` in the
/// expanded `Any` form with its name, opcode and fusion kind). For tests
/// and for logs made by other tools.
pub fn logs_to_text(logs: &AutotuningLogs) -> Result<String, String> {
    use prost::Message as _;
    let mut w = W {
        out: String::new(),
        depth: 0,
    };
    for log in &logs.logs {
        w.open("logs");
        if let Some(a) = &log.instr {
            w.open("instr");
            if a.type_url.ends_with("/xla.HloInstructionProto") {
                let p = hlo::proto::xla::HloInstructionProto::decode(a.value.as_slice())
                    .map_err(|e| format!("instr: {e}"))?;
                w.open(&format!("[{}]", a.type_url));
                w.string("name", &p.name);
                w.string("opcode", &p.opcode);
                w.string("fusion_kind", &p.fusion_kind);
                w.close();
            } else {
                w.string("type_url", &a.type_url);
            }
            w.close();
        }
        for r in &log.results {
            w.open("results");
            w.result(r)?;
            w.close();
        }
        if let Some(c) = &log.cudnn_version {
            w.open("cudnn_version");
            w.int("major", i64::from(c.major));
            w.int("minor", i64::from(c.minor));
            w.int("patch", i64::from(c.patch));
            w.close();
        }
        if let Some(c) = &log.compute_capability {
            w.open("compute_capability");
            w.int("major", i64::from(c.major));
            w.int("minor", i64::from(c.minor));
            w.close();
        }
        w.string("device_pci_bus_id", &log.device_pci_bus_id);
        w.string("blas_version", &log.blas_version);
        w.string("fusion_name", &log.fusion_name);
        w.int("fusion_count", log.fusion_count);
        w.string("selected_backend", &log.selected_backend);
        w.close();
    }
    Ok(w.out)
}

/// The instruction name of a log's `instr` (an `xla.HloInstructionProto`),
/// else its `fusion_name`.
pub fn log_instruction_name(log: &AutotuningLog) -> Option<String> {
    use prost::Message as _;
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
    use prost::Message as _;
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
    use prost::Message as _;
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

/// Reads one `AutotuneResult` from text (a per-fusion cache file).
pub fn result_from_text(text: &str) -> Result<AutotuneResult, String> {
    result(&parse(text)?)
}

/// Reads `AutotuneResults` from text.
pub fn results_from_text(text: &str) -> Result<AutotuneResults, String> {
    let mut out = AutotuneResults::default();
    for (n, v, l) in parse(text)? {
        match n.as_str() {
            "version" => out.version = int32(&n, &v, l)?,
            "results" => {
                let mut e = AutotuneResultsEntry::default();
                for (n2, v2, l2) in message(&n, &v, l)? {
                    match n2.as_str() {
                        "device" => e.device = string(n2, v2, *l2)?,
                        "hlo" => e.hlo = string(n2, v2, *l2)?,
                        "result" => e.result = Some(result(message(n2, v2, *l2)?)?),
                        "version" => e.version = int32(n2, v2, *l2)?,
                        _ => {}
                    }
                }
                out.results.push(e);
            }
            "dots" | "convs" => {
                return Err(format!(
                    "line {l}: `{n}`: an AutotuneResults of the old layout (entries in dots/convs); this XLA writes `results`"
                ))
            }
            _ => {}
        }
    }
    Ok(out)
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
        assert!(text.starts_with("version: 3\nresults {\n  device: \"CUDA: 9.0, Cores: 132\"\n"));
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
            ("version: 3\nresults {\n  device: \"x\n", "line 3"),
            (
                "results {\n  version: x\n}",
                "line 2: `version: x` is not an integer",
            ),
            ("results {\n", "missing `}`"),
            (
                "results { result { triton: 5 } }",
                "`triton` is not a message",
            ),
            ("dots { }", "old layout"),
            ("results { device: \"\\q\" }", "unknown escape"),
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
