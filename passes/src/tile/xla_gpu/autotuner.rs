//! XLA:GPU's new autotuner (`xla/backends/autotuner`, the one jax 0.11's
//! XLA runs): its cache key, its cache entries and its logs, and the GPU
//! sessions' files that hold those logs ([`SessionFiles`],
//! [`autotuned_gemm_fusions`]).
//!
//! Facts, read off what jax 0.11.2's XLA wrote on an H200
//! (`testdata/xla_gpu/session1`) and checked there byte for byte:
//! - An autotuned instruction's key is `hlo_fingerprint`: the hex of
//!   `tsl::Fingerprint128` (FarmHash's 128-bit fingerprint, which is
//!   CityHash128 v1.1), high half first, of the instruction printed alone
//!   with `HloPrintOptions::Fingerprint()` plus its backend config (keys
//!   sorted) and operand shapes ([`fingerprint_text`]). At that point a
//!   Triton GEMM fusion's backend config says only
//!   `"fusion_backend_config":{"kind":"__triton_gemm"}`, and the other
//!   fusions it tunes (loop and input fusions: native or block-level
//!   emitter) have none.
//! - The key also holds the device (a 64-bit hex fingerprint of the device
//!   description) and the environment's `codegen_version`; a cache entry's
//!   value is the chosen backend, its config and the backend's version.
//!   [`Environment`] reads all three from a logs or results file XLA wrote
//!   on that GPU.
//! - `--xla_gpu_per_fusion_autotune_cache_dir=DIR` holds one binary
//!   `AutotuneEntry` per key at `DIR/<device>/<hlo_fingerprint>.pb`.
//! - The post-optimization module keeps each GEMM fusion's computation but
//!   marks it `__triton_nested_gemm_fusion` with a `block_level_fusion_config`,
//!   and gives its dot a `backend_config`; [`fingerprint_text`] reads either
//!   form back to the pre-autotuning one (backend configs inside the body
//!   are not printed).

use std::path::{Path, PathBuf};

use hlo::{AttrValue, CanonicalOptions, InstId, Module, Opcode};
use serde_json::{Map, Value};

use super::config::TritonConfig;
use super::textproto::{self, Fields};

/// Fusion kinds XLA gives a Triton GEMM fusion before and after autotuning.
pub const GEMM_KINDS: [&str; 2] = [super::TRITON_GEMM_KIND, "__triton_nested_gemm_fusion"];

/// JSON with every object's keys sorted (XLA's `sort_backend_config`),
/// written compactly.
pub fn sorted_json(v: &Value) -> Value {
    match v {
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for k in keys {
                out.insert(k.clone(), sorted_json(&o[k]));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted_json).collect()),
        other => other.clone(),
    }
}

/// What XLA's new autotuner tunes in a fusion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tuned {
    /// A Triton GEMM fusion: a Triton tile configuration (or cuBLAS).
    Gemm,
    /// Any other fusion: native or block-level emitter.
    Emitter,
}

/// Whether `id` is a GEMM fusion before or after XLA's autotuning.
pub fn is_gemm_fusion(m: &Module, id: InstId) -> bool {
    super::fusion_kind(m, id).is_some_and(|k| GEMM_KINDS.contains(&k.as_str()))
}

/// The text XLA fingerprints for fusion `id` as it was when the autotuner
/// saw it ([module docs](self)), and what is tuned there; `None` for an
/// instruction that is not a fusion.
pub fn fingerprint_text(m: &Module, id: InstId) -> Result<Option<(String, Tuned)>, String> {
    if m.inst(id).opcode != Opcode::Fusion {
        return Ok(None);
    }
    let opts = CanonicalOptions::fingerprint();
    if is_gemm_fusion(m, id) {
        let mut o = super::backend_json(m, id)?;
        let mut fbc = Map::new();
        fbc.insert("kind".into(), Value::String(GEMM_KINDS[0].into()));
        o.insert("fusion_backend_config".into(), Value::Object(fbc));
        let bc =
            serde_json::to_string(&sorted_json(&Value::Object(o))).map_err(|e| e.to_string())?;
        Ok(Some((
            hlo::print_instruction_canonical(m, id, &opts, Some(&bc)),
            Tuned::Gemm,
        )))
    } else {
        Ok(Some((
            hlo::print_instruction_canonical(m, id, &opts, None),
            Tuned::Emitter,
        )))
    }
}

/// `tsl::Fingerprint128(text)` as XLA's autotuner writes it: 32 hex digits,
/// the high 64 bits first.
pub fn hlo_fingerprint(text: &str) -> String {
    let h = cityhash_rs::cityhash_110_128(text.as_bytes());
    // cityhash-rs returns FarmHash's (low, high) halves as (high, low) of its u128.
    format!("{:016x}{:016x}", h as u64, (h >> 64) as u64)
}

/// The fingerprint of fusion `id` (see [`fingerprint_text`]).
pub fn fusion_fingerprint(m: &Module, id: InstId) -> Result<Option<(String, Tuned)>, String> {
    Ok(fingerprint_text(m, id)?.map(|(t, k)| (hlo_fingerprint(&t), k)))
}

// ---------------------------------------------------------------------------
// cache entries (binary), field numbers as XLA writes them

/// `AutotuneEntry`: one key and its value (a file of the cache directory).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AutotuneEntry {
    #[prost(message, optional, tag = "1")]
    pub key: Option<EntryKey>,
    #[prost(message, optional, tag = "2")]
    pub value: Option<EntryValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct EntryKey {
    #[prost(message, optional, tag = "1")]
    pub target: Option<TargetKey>,
    #[prost(message, optional, tag = "2")]
    pub environment: Option<EnvironmentKey>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TargetKey {
    #[prost(string, tag = "1")]
    pub device: String,
    #[prost(string, tag = "3")]
    pub hlo_fingerprint: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct EnvironmentKey {
    #[prost(string, tag = "1")]
    pub codegen_version: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct EntryValue {
    #[prost(message, optional, tag = "1")]
    pub optimal_config: Option<BackendChoice>,
    #[prost(string, tag = "2")]
    pub optimal_backend_version: String,
}

/// A backend and its config (`config { backend: TRITON backend_config { triton {..} } }`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct BackendChoice {
    #[prost(int32, tag = "1")]
    pub backend: i32,
    #[prost(message, optional, tag = "2")]
    pub backend_config: Option<BackendConfigs>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct BackendConfigs {
    #[prost(message, optional, tag = "2")]
    pub triton: Option<TritonConfig>,
    #[prost(message, optional, tag = "6")]
    pub native_emitter: Option<Empty>,
}

#[derive(Clone, Copy, PartialEq, prost::Message)]
pub struct Empty {}

/// XLA's backend enum values seen in its cache entries.
pub const BACKEND_TRITON: i32 = 2;
pub const BACKEND_NATIVE_EMITTER: i32 = 10;

// ---------------------------------------------------------------------------
// the environment: device, codegen version, backend versions

/// What a cache entry needs besides the choice, read from a file XLA wrote
/// on the GPU (its autotuning logs or results, text).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Environment {
    pub device: String,
    pub codegen_version: String,
    /// `per_backend_versions` of the logs (backend name -> version).
    pub backend_versions: Vec<(String, String)>,
}

impl Environment {
    pub fn backend_version(&self, backend: &str) -> Option<&str> {
        self.backend_versions
            .iter()
            .find(|(b, _)| b == backend)
            .map(|(_, v)| v.as_str())
    }

    /// Reads `device`, `codegen_version` and the backends' versions from an
    /// XLA autotuning logs file or results file (text).
    pub fn from_text(text: &str) -> Result<Self, String> {
        let fields = textproto::parse(text)?;
        let mut env = Environment::default();
        walk(&fields, &mut env);
        if env.device.is_empty() || env.codegen_version.is_empty() {
            return Err("no `device:` and `codegen_version:` in it (give a file XLA wrote with --xla_gpu_dump_autotune_logs_to or --xla_gpu_dump_autotune_results_to)".into());
        }
        if env.backend_version("TRITON").is_none() {
            return Err("no TRITON backend version in it (per_backend_versions, or an entry whose optimal_config is TRITON)".into());
        }
        Ok(env)
    }

    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::from_text(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

fn scalar(v: &textproto::Value) -> Option<String> {
    match v {
        textproto::Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
        textproto::Value::Scalar(s) => Some(s.clone()),
        textproto::Value::Message(_) => None,
    }
}

fn get<'a>(f: &'a Fields, name: &str) -> Option<&'a textproto::Value> {
    f.iter().find(|(n, _, _)| n == name).map(|(_, v, _)| v)
}

fn walk(fields: &Fields, env: &mut Environment) {
    for (name, v, _) in fields {
        match (name.as_str(), v) {
            ("device", v) if env.device.is_empty() => env.device = scalar(v).unwrap_or_default(),
            ("codegen_version", v) if env.codegen_version.is_empty() => {
                env.codegen_version = scalar(v).unwrap_or_default()
            }
            ("per_backend_versions", textproto::Value::Message(m)) => {
                if let (Some(k), Some(val)) = (get(m, "key"), get(m, "value")) {
                    if let (Some(k), Some(val)) = (scalar(k), scalar(val)) {
                        if !env.backend_versions.iter().any(|(b, _)| *b == k) {
                            env.backend_versions.push((k, val));
                        }
                    }
                }
            }
            ("value", textproto::Value::Message(m)) => {
                // A results entry: optimal_config { backend: X } + optimal_backend_version.
                let backend = match get(m, "optimal_config") {
                    Some(textproto::Value::Message(c)) => get(c, "backend").and_then(scalar),
                    _ => None,
                };
                if let (Some(b), Some(ver)) =
                    (backend, get(m, "optimal_backend_version").and_then(scalar))
                {
                    if !env.backend_versions.iter().any(|(x, _)| *x == b) {
                        env.backend_versions.push((b, ver));
                    }
                }
                walk(m, env);
            }
            (_, textproto::Value::Message(m)) => walk(m, env),
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------
// the logs: every candidate XLA measured

/// One candidate of an autotuned instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The backend's name (`TRITON`, `CUBLASLT_FISSION`, `NATIVE_EMITTER`, ...).
    pub backend: String,
    /// The Triton config, for a TRITON candidate.
    pub triton: Option<TritonConfig>,
    /// Measured time in nanoseconds; `None` when it failed or has none.
    pub nanos: Option<i64>,
    pub failed: bool,
}

/// One autotuned instruction of the logs.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    pub hlo_fingerprint: String,
    /// The instruction's name in `hlo_text` (without `%`).
    pub name: String,
    pub hlo_text: String,
    pub candidates: Vec<Candidate>,
}

fn int_of(f: &Fields, name: &str) -> Result<i64, String> {
    match get(f, name) {
        None => Ok(0),
        Some(v) => {
            let s = scalar(v).unwrap_or_default();
            s.parse()
                .map_err(|_| format!("`{name}: {s}` is not an integer"))
        }
    }
}

/// Reads the new autotuner's logs (`--xla_gpu_dump_autotune_logs_to`, text):
/// its `instruction_profiles`, each candidate with its time or failure.
pub fn read_profiles(text: &str) -> Result<(Environment, Vec<Profile>), String> {
    let fields = textproto::parse(text)?;
    let mut env = Environment::default();
    let mut profiles = Vec::new();
    for (name, v, line) in &fields {
        match (name.as_str(), v) {
            ("device", v) => env.device = scalar(v).unwrap_or_default(),
            ("codegen_version", v) => env.codegen_version = scalar(v).unwrap_or_default(),
            ("per_backend_versions", textproto::Value::Message(_)) => {
                walk(&vec![(name.clone(), v.clone(), *line)], &mut env)
            }
            ("instruction_profiles", textproto::Value::Message(p)) => {
                let hlo_fingerprint = get(p, "hlo_fingerprint")
                    .and_then(scalar)
                    .unwrap_or_default();
                let hlo_text = get(p, "hlo_text").and_then(scalar).unwrap_or_default();
                let iname = hlo_text
                    .trim_start()
                    .trim_start_matches("ROOT ")
                    .split(" = ")
                    .next()
                    .unwrap_or("")
                    .trim_start_matches('%')
                    .to_string();
                let mut candidates = Vec::new();
                for (n, cv, cline) in p {
                    let (n, textproto::Value::Message(c)) = (n.as_str(), cv) else {
                        continue;
                    };
                    if n != "config_profiles" {
                        continue;
                    }
                    let Some(textproto::Value::Message(cfg)) = get(c, "config") else {
                        return Err(format!("line {cline}: a config_profiles without config"));
                    };
                    let backend = get(cfg, "backend").and_then(scalar).unwrap_or_default();
                    let triton = match get(cfg, "backend_config") {
                        Some(textproto::Value::Message(bc)) => match get(bc, "triton") {
                            Some(textproto::Value::Message(t)) => Some(textproto::triton(t)?),
                            _ => None,
                        },
                        _ => None,
                    };
                    let failed = get(c, "failure").is_some();
                    let nanos = match get(c, "run_time") {
                        Some(textproto::Value::Message(d)) if !failed => {
                            let s = int_of(d, "seconds")?;
                            let ns = int_of(d, "nanos")?;
                            s.checked_mul(1_000_000_000).and_then(|x| x.checked_add(ns))
                        }
                        _ => None,
                    };
                    candidates.push(Candidate {
                        backend,
                        triton,
                        nanos,
                        failed,
                    });
                }
                profiles.push(Profile {
                    hlo_fingerprint,
                    name: iname,
                    hlo_text,
                    candidates,
                });
            }
            _ => {}
        }
    }
    Ok((env, profiles))
}

/// The GEMM fusions XLA autotuned in one program: each profile of its logs
/// (text) whose instruction is a GEMM fusion of `off_module`, the module
/// compiled with autotuning off, with that fusion; in the logs' order.
pub fn autotuned_gemm_fusions(
    logs: &str,
    off_module: &Module,
) -> Result<Vec<(Profile, InstId)>, String> {
    let (_, profiles) = read_profiles(logs)?;
    let by_name: std::collections::BTreeMap<String, InstId> = off_module
        .computations()
        .flat_map(|c| off_module.comp(c).order.clone())
        .map(|i| (off_module.inst(i).name.to_string(), i))
        .collect();
    Ok(profiles
        .into_iter()
        .filter_map(|p| {
            let id = *by_name.get(&p.name)?;
            is_gemm_fusion(off_module, id).then_some((p, id))
        })
        .collect())
}

// ---------------------------------------------------------------------------
// writing the cache directory

/// The cache entry choosing Triton config `c` for fingerprint `fp`.
pub fn triton_entry(env: &Environment, fp: &str, c: &TritonConfig) -> AutotuneEntry {
    AutotuneEntry {
        key: Some(EntryKey {
            target: Some(TargetKey {
                device: env.device.clone(),
                hlo_fingerprint: fp.to_string(),
            }),
            environment: Some(EnvironmentKey {
                codegen_version: env.codegen_version.clone(),
            }),
        }),
        value: Some(EntryValue {
            optimal_config: Some(BackendChoice {
                backend: BACKEND_TRITON,
                backend_config: Some(BackendConfigs {
                    triton: Some(*c),
                    native_emitter: None,
                }),
            }),
            optimal_backend_version: env
                .backend_version("TRITON")
                .unwrap_or_default()
                .to_string(),
        }),
    }
}

/// Where XLA reads the entry of `fp` in cache directory `dir`.
pub fn entry_path(dir: &Path, env: &Environment, fp: &str) -> PathBuf {
    dir.join(&env.device).join(format!("{fp}.pb"))
}

/// Writes one entry per (fingerprint, config), each through a temporary
/// file and a rename; returns how many files were written.
pub fn write_cache_dir(
    dir: &Path,
    env: &Environment,
    choices: &[(String, TritonConfig)],
) -> Result<usize, String> {
    use prost::Message as _;
    if env.device.is_empty() || env.device.contains(['/', '\\']) || env.device.starts_with('.') {
        return Err(format!("device `{}` cannot name a folder", env.device));
    }
    let sub = dir.join(&env.device);
    std::fs::create_dir_all(&sub).map_err(|e| format!("{}: {e}", sub.display()))?;
    let mut seen = std::collections::BTreeMap::new();
    for (fp, c) in choices {
        if fp.len() != 32 || !fp.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("`{fp}` is not a 128-bit hex fingerprint"));
        }
        seen.entry(fp.clone()).or_insert(*c);
    }
    for (fp, c) in &seen {
        let path = entry_path(dir, env, fp);
        let tmp = sub.join(format!(".tmp_{fp}_{}", std::process::id()));
        std::fs::write(&tmp, triton_entry(env, fp, c).encode_to_vec())
            .map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(seen.len())
}

/// The value of `AttrValue::Raw` backend configs, for tests and tools.
pub fn raw_backend_config(m: &Module, id: InstId) -> Option<String> {
    match m.inst(id).attr("backend_config") {
        Some(AttrValue::Raw(s)) => Some(s.to_string()),
        _ => None,
    }
}

/// A GPU session's `core.tar.xz`, unpacked (docs/xla-gpu.md): for each
/// program its autotuning logs, `logs/<program>.textproto`, and the module
/// XLA compiled with autotuning off, `hlo/<program>.off.hlo`; and the
/// session's `provenance.json`.
pub struct SessionFiles {
    pub files: std::collections::BTreeMap<String, Vec<u8>>,
}

/// One program of a [`SessionFiles`].
pub struct SessionProgram<'a> {
    /// Its logs' path in the archive (error messages name it).
    pub logs_path: &'a str,
    pub program: &'a str,
    pub logs: &'a str,
    pub module: Module,
}

impl SessionFiles {
    pub fn read(path: &Path) -> Result<Self, String> {
        Ok(SessionFiles {
            files: read_tar_xz(path, 512 << 20)?.into_iter().collect(),
        })
    }

    /// Every program with both its logs and its module, in name order.
    pub fn programs(&self) -> Result<Vec<SessionProgram<'_>>, String> {
        let mut out = Vec::new();
        for (name, bytes) in &self.files {
            let Some(prog) = name
                .strip_prefix("logs/")
                .and_then(|p| p.strip_suffix(".textproto"))
            else {
                continue;
            };
            let Some(off) = self.files.get(&format!("hlo/{prog}.off.hlo")) else {
                continue;
            };
            let logs = std::str::from_utf8(bytes).map_err(|_| format!("{name}: not UTF-8"))?;
            let module = hlo::parse_module(
                std::str::from_utf8(off).map_err(|_| format!("{prog}.off.hlo: not UTF-8"))?,
            )
            .map_err(|e| format!("{prog}.off.hlo: {}", e.render()))?;
            out.push(SessionProgram {
                logs_path: name,
                program: prog,
                logs,
                module,
            });
        }
        Ok(out)
    }
}

/// The files of a `.tar.xz` (as the GPU sessions' files come back), path
/// and bytes, in archive order. At most `max_bytes` are unpacked.
pub fn read_tar_xz(path: &Path, max_bytes: u64) -> Result<Vec<(String, Vec<u8>)>, String> {
    use std::io::Read as _;
    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let f = std::fs::File::open(path).map_err(|e| at(&e))?;
    let mut xz = std::io::BufReader::new(f);
    // The unpacked size is capped as it is written (a corrupt or hostile
    // archive stops there).
    struct Capped(Vec<u8>, usize);
    impl std::io::Write for Capped {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.0.len() + b.len() > self.1 {
                return Err(std::io::Error::other("too large"));
            }
            self.0.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut capped = Capped(Vec::new(), usize::try_from(max_bytes).unwrap_or(usize::MAX));
    lzma_rs::xz_decompress(&mut xz, &mut capped)
        .map_err(|e| at(&format!("{e} (at most {max_bytes} bytes unpacked)")))?;
    let tar_bytes = capped.0;
    let mut out = Vec::new();
    let mut archive = tar::Archive::new(&tar_bytes[..]);
    for entry in archive.entries().map_err(|e| at(&e))? {
        let mut entry = entry.map_err(|e| at(&e))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = entry
            .path()
            .map_err(|e| at(&e))?
            .to_string_lossy()
            .into_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).map_err(|e| at(&e))?;
        out.push((name, bytes));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_farmhash128_high_half_first() {
        // Reference values from FarmHash's Fingerprint128 (pyfarmhash 0.4:
        // fingerprint128 returns (low, high)).
        let long = "hello world, this is a test string longer than sixteen bytes";
        assert_eq!(hlo_fingerprint(long), "de5d1b0cb657c602ecceaaad221c7eaa");
    }

    #[test]
    fn sorted_json_sorts_nested_keys() {
        let v: Value = serde_json::from_str(r#"{"b":{"d":1,"c":[{"z":0,"a":1}]},"a":"0"}"#)
            .expect("test data");
        assert_eq!(
            serde_json::to_string(&sorted_json(&v)).expect("test data"),
            r#"{"a":"0","b":{"c":[{"a":1,"z":0}],"d":1}}"#
        );
    }

    #[test]
    fn entry_bytes_match_xla() {
        use prost::Message as _;
        // The bytes of a cache file XLA wrote (smoke test, H200).
        let xla: &[u8] = &[
            0x0a, 0x4a, 0x0a, 0x34, 0x0a, 0x10, b'e', b'd', b'0', b'e', b'5', b'6', b'a', b'b',
            b'8', b'b', b'2', b'a', b'0', b'e', b'c', b'b', 0x1a, 0x20,
        ];
        let env = Environment {
            device: "ed0e56ab8b2a0ecb".into(),
            codegen_version: "fe9062d0fff82a66".into(),
            backend_versions: vec![(
                "TRITON".into(),
                "a77e7c793abc0d0c923a9afb275058e2fe57a198".into(),
            )],
        };
        let c = TritonConfig {
            block_m: 64,
            block_n: 128,
            block_k: 64,
            split_k: 0,
            num_stages: 3,
            num_warps: 4,
            num_ctas: 1,
            is_tma_allowed: true,
            is_warp_specialization_allowed: false,
            waves_per_eu: 0,
            group_size: 1,
        };
        let bytes = triton_entry(&env, "d379f9800758115bd6f1bbecc39879cf", &c).encode_to_vec();
        assert_eq!(&bytes[..xla.len()], xla);
        assert_eq!(
            AutotuneEntry::decode(&bytes[..]).expect("test data"),
            triton_entry(&env, "d379f9800758115bd6f1bbecc39879cf", &c)
        );
    }
}
