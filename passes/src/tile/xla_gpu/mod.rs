//! The tile pass for XLA:GPU (`--pass=tile --tile-target=xla-gpu`, or a
//! module holding Triton GEMM fusions). Two paths, both here:
//! - the legacy one ([`select`], [`write_outputs`]): for every fusion whose
//!   `backend_config` says `"fusion_backend_config":{"kind":"__triton_gemm"}`,
//!   choose a Triton tile configuration with [`heuristic_config`] (a
//!   documented size rule, a baseline, not a learned decision; `--explain`
//!   says so), write it into the fusion's backend config as
//!   `triton_gemm_config` (as XLA's autotuner does), and, on request, into
//!   XLA's persisted autotuning formats keyed exactly as XLA keys them
//!   ([`key`]): a per-fusion cache directory and/or an `AutotuneResults`
//!   file. Then XLA uses these configurations and does not autotune those
//!   fusions.
//! - XLA's new autotuner's ([`select_for_autotuner`], `--autotune-env`): for
//!   every GEMM fusion of a module XLA compiled with autotuning off, its key
//!   ([`autotuner`]) and the config of a learned model, the ranker
//!   ([`ranker`], the default) or kNN ([`model`]), written as the new
//!   autotuner's cache; the module is not changed.
//!
//! The pieces, one owner each: [`config`] the Triton config type and its
//! forms; [`dot`] the reader of a GEMM fusion's dot; [`search_space`] XLA's
//! candidate set and the ranker's features; [`candidates`] the ranker's
//! training data; [`proto`] and [`textproto`] XLA's autotuning messages and
//! their text; [`key`] the legacy cache key.
//!
//! Invariants: only `backend_config` of Triton GEMM fusions changes; a
//! fusion that already has a `triton_gemm_config` keeps it (XLA does not
//! autotune it either) but is still written to the cache; a fusion that
//! cannot be read (no dot, a backend config that is not JSON) is left
//! unchanged with a warning naming it; output is deterministic (fusions in
//! module order, files written in key order).

pub mod autotuner;
pub mod candidates;
pub mod config;
pub mod dot;
pub mod key;
pub mod model;
pub mod proto;
pub mod ranker;
pub mod search_space;
pub mod textproto;

use std::path::PathBuf;

use hlo::{AttrValue, InstId, Module, Opcode};

use serde_json::{Map, Value};

pub use config::TritonConfig;
pub use dot::DotProblem;
pub use key::CacheKey;

/// The `kind` XLA gives a Triton GEMM fusion in its backend config.
pub const TRITON_GEMM_KIND: &str = "__triton_gemm";

/// Where the XLA:GPU tile pass writes, besides the module.
#[derive(Clone, Debug, Default)]
pub struct XlaGpuOptions {
    /// The device description string of the cache key (XLA's
    /// `DeviceDescriptionToCacheKey`; read it from an `AutotuneResults`
    /// file XLA wrote on that GPU). Needed for the cache outputs.
    pub device: Option<String>,
    /// The key version (`None`: [`key::DEFAULT_KEY_VERSION`]).
    pub key_version: Option<i32>,
    /// Write one `AutotuneResult` text file per fusion here.
    pub cache_dir: Option<PathBuf>,
    /// Write an `AutotuneResults` file here (text when the name ends in
    /// `.txt`/`.textproto`/`.txtpb`/`.pbtxt`/`.prototxt`, else binary).
    pub results_file: Option<PathBuf>,
    /// XLA's new autotuner (jax 0.11 and later): the device, codegen and
    /// backend versions its cache keys hold, read from a logs or results
    /// file XLA wrote on that GPU. With it, the pass reads a module XLA
    /// compiled with autotuning off and writes the new cache format
    /// (`cache_dir/<device>/<fingerprint>.pb`), choosing with the learned
    /// model ([`model`]).
    pub autotuner_env: Option<autotuner::Environment>,
    /// The learned tile model: builtin name or JSON path of a kNN model
    /// (default the builtin `xla-gpu-h200`), or the ranker
    /// ([`ranker::BUILTIN_NAME`] or a path ending in `.onnx`).
    pub model: Option<String>,
}

/// One choice for XLA's new autotuner: fusion name, key, config, and where
/// it came from (for `--explain`).
#[derive(Clone, Debug)]
pub struct AutotunerChoice {
    pub fusion: String,
    pub hlo_fingerprint: String,
    pub config: TritonConfig,
    pub why: String,
}

/// What chooses each GEMM fusion's config on the new autotuner's path
/// (`--gpu-tile-model`).
enum Chooser {
    /// The learned ranker: the best scored of the candidates XLA's default
    /// search space holds for the dot, generated for the device of
    /// `--gpu-device`, else an H100 SXM / H200.
    Ranker(ranker::Ranker, search_space::Device),
    /// The kNN model ([`model::TileModel::choose`]); the size heuristic when
    /// it is empty.
    Knn(std::sync::Arc<model::TileModel>),
}

impl Chooser {
    /// The ranker for its builtin name or an `.onnx` path (the default),
    /// else the kNN model of that builtin name or JSON path.
    fn load(opts: &XlaGpuOptions) -> Result<Chooser, String> {
        let name = opts.model.as_deref().unwrap_or(ranker::BUILTIN_NAME);
        if name == ranker::BUILTIN_NAME || name.ends_with(".onnx") {
            let rk = ranker::Ranker::load(name)?;
            let device = match &opts.device {
                Some(s) => search_space::Device::from_device_string(s)?,
                None => search_space::Device::HOPPER_132,
            };
            return Ok(Chooser::Ranker(rk, device));
        }
        Ok(Chooser::Knn(model::TileModel::shared(name)?))
    }

    /// Where the configurations come from, for the explain header.
    fn origin(&self) -> String {
        match self {
            Chooser::Ranker(rk, d) => format!(
                "the ranker {} over XLA's default candidates ({} SMs, compute capability {}.{})",
                rk.origin, d.core_count, d.cc_major, d.cc_minor
            ),
            Chooser::Knn(tm) => format!(
                "the learned model ({} training fusions, k={}; {})",
                tm.records.len(),
                tm.k,
                tm.provenance
            ),
        }
    }

    /// The dot of fusion `id` as this chooser reads it (the ranker's search
    /// space refuses a scaled dot).
    fn dot(&self, m: &Module, id: InstId) -> Result<DotProblem, String> {
        match self {
            Chooser::Ranker(..) => search_space::dot_problem(m, id),
            Chooser::Knn(_) => DotProblem::of_fusion(m, id),
        }
    }

    /// The config for `p` and why.
    fn choose(&self, p: &DotProblem) -> Result<(TritonConfig, String), String> {
        match self {
            Chooser::Ranker(rk, d) => {
                let (config, score, n) = rk.choose(p, d)?;
                Ok((
                    config,
                    format!("ranker: best of {n} candidates (score {score:.3})"),
                ))
            }
            Chooser::Knn(tm) => Ok(match tm.choose(p) {
                Some((c, near)) => (
                    c,
                    format!(
                        "nearest measured GEMM {}:{} (batch {} M {} N {} K {})",
                        near.program,
                        near.fusion,
                        near.gemm[0],
                        near.gemm[1],
                        near.gemm[2],
                        near.gemm[3]
                    ),
                ),
                None => (
                    heuristic_config(p.gemm_columns()).for_new_autotuner(),
                    "size heuristic (the model is empty)".into(),
                ),
            }),
        }
    }

    /// Batch, M, N, K and the operand bits this chooser reads (the ranker:
    /// the lhs's, as the search space; kNN: the widest), for the explain
    /// line.
    fn explain_columns(&self, p: &DotProblem) -> [i64; 5] {
        match self {
            Chooser::Ranker(..) => [p.batch, p.m, p.n, p.k, p.lhs_bits],
            Chooser::Knn(_) => p.gemm_columns(),
        }
    }
}

/// The new autotuner's path: for every GEMM fusion of `m` (a module XLA
/// compiled, autotuning off or on), its key and the config of the model
/// `--gpu-tile-model` names (the ranker or kNN); writes the cache directory when
/// asked. A fusion whose dot cannot be read is skipped with a warning. The
/// module is not changed.
pub fn select_for_autotuner(
    m: &Module,
    opts: &XlaGpuOptions,
    explain: &mut String,
) -> Result<(Vec<AutotunerChoice>, Vec<String>), String> {
    opts.autotuner_env
        .as_ref()
        .ok_or("no autotuner environment")?;
    let chooser = Chooser::load(opts)?;
    let fusions = instructions_where(m, autotuner::is_gemm_fusion);
    explain.push_str(&format!(
        "tile (xla-gpu, new autotuner): {} GEMM fusion{}; configurations from {}\n",
        fusions.len(),
        if fusions.len() == 1 { "" } else { "s" },
        chooser.origin()
    ));
    let mut choices = Vec::new();
    let mut warnings = Vec::new();
    for id in fusions {
        let name = m.inst(id).name.to_string();
        let problem = match chooser.dot(m, id) {
            Ok(p) => p,
            Err(e) => {
                warnings.push(skipped(&name, &e));
                continue;
            }
        };
        let fp = match autotuner::fusion_fingerprint(m, id)? {
            Some((fp, _)) => fp,
            None => continue,
        };
        let (config, why) = chooser.choose(&problem)?;
        let [batch, dm, dn, dk, bits] = chooser.explain_columns(&problem);
        explain.push_str(&format!(
            "tile %{name}: batch {batch} M {dm} N {dn} K {dk} ({bits}-bit): {} [{why}], key {fp}\n",
            config.describe()
        ));
        choices.push(AutotunerChoice {
            fusion: name,
            hlo_fingerprint: fp,
            config,
            why,
        });
    }
    write_autotuner_outputs(opts, choices, warnings, explain)
}

/// Writes the cache directory of `choices` when asked; the warnings go to
/// `explain` too.
fn write_autotuner_outputs(
    opts: &XlaGpuOptions,
    choices: Vec<AutotunerChoice>,
    mut warnings: Vec<String>,
    explain: &mut String,
) -> Result<(Vec<AutotunerChoice>, Vec<String>), String> {
    let env = opts
        .autotuner_env
        .as_ref()
        .ok_or("no autotuner environment")?;
    let mut lines = Vec::new();
    if let Some(dir) = &opts.cache_dir {
        let pairs: Vec<(String, TritonConfig)> = choices
            .iter()
            .map(|c| (c.hlo_fingerprint.clone(), c.config))
            .collect();
        let n = autotuner::write_cache_dir(dir, env, &pairs)?;
        lines.push(format!(
            "tile (xla-gpu): wrote {n} cache entr{} to {} (XLA_FLAGS=--xla_gpu_per_fusion_autotune_cache_dir={})",
            if n == 1 { "y" } else { "ies" },
            // `cache/` and `cache` alike: one separator.
            dir.join(&env.device).display(),
            dir.display()
        ));
    }
    if opts.results_file.is_some() {
        warnings.push("warning: tile: --autotune-results is the legacy format; with --autotune-env use --autotune-cache-dir".into());
    }
    explain_warnings(explain, &warnings);
    Ok((choices, [warnings, lines].concat()))
}

/// The backend config of `id` as a JSON object, when it has one.
fn backend_json(m: &Module, id: InstId) -> Result<Map<String, Value>, String> {
    let raw = match m.inst(id).attr("backend_config") {
        None => None,
        Some(AttrValue::Raw(s)) => Some(&**s),
        Some(AttrValue::Str(b)) => {
            Some(std::str::from_utf8(b).map_err(|_| "backend_config is not UTF-8")?)
        }
        Some(_) => return Err("backend_config is not text".into()),
    };
    super::backend::parse_backend_config(raw)
}

/// The `fusion_backend_config.kind` of fusion `id`'s backend config, if
/// it has one.
fn fusion_kind(m: &Module, id: InstId) -> Option<String> {
    if m.inst(id).opcode != Opcode::Fusion {
        return None;
    }
    let o = backend_json(m, id).ok()?;
    o.get("fusion_backend_config")
        .and_then(|f| f.get("kind"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Whether `id` is a Triton GEMM fusion (its backend config's
/// `fusion_backend_config.kind` is `__triton_gemm`).
pub fn is_triton_gemm_fusion(m: &Module, id: InstId) -> bool {
    fusion_kind(m, id).as_deref() == Some(TRITON_GEMM_KIND)
}

/// The instructions of `m` that `pick` keeps, in module order.
fn instructions_where(m: &Module, pick: impl Fn(&Module, InstId) -> bool) -> Vec<InstId> {
    m.computations()
        .flat_map(|c| m.comp(c).order.iter().copied())
        .filter(|&i| pick(m, i))
        .collect()
}

/// The Triton GEMM fusions of `m`, in module order.
pub fn triton_gemm_fusions(m: &Module) -> Vec<InstId> {
    instructions_where(m, is_triton_gemm_fusion)
}

fn pow2_clamp(x: i64, lo: i64, hi: i64) -> i64 {
    let p = if x <= 1 {
        1
    } else {
        1i64.checked_shl(64 - (x - 1).leading_zeros()).unwrap_or(hi)
    };
    p.clamp(lo, hi)
}

/// The baseline tile rule (not learned; docs/xla-gpu.md, "The heuristic")
/// on a dot's GEMM columns ([`DotProblem::gemm_columns`]: batch, M, N, K,
/// the widest operand's bits):
/// - block_m, block_n: M and N rounded up to a power of two, within [16, 128];
/// - block_k: K rounded up to a power of two, within [16, 64] for operands
///   of 16 bits or fewer, [16, 32] for wider ones (32 at least for 8-bit
///   operands, which Triton needs);
/// - num_stages: 3 when K spans at least 4 blocks of block_k, 2 when it spans
///   2 or 3, else 1;
/// - num_warps: 8 for a 128x128 output tile, 4 from 64x64, else 2;
/// - split_k 1, num_ctas 1, no TMA, no warp specialization.
pub fn heuristic_config([_batch, m, n, k, operand_bits]: [i64; 5]) -> TritonConfig {
    let block_m = pow2_clamp(m, 16, 128);
    let block_n = pow2_clamp(n, 16, 128);
    let k_hi = if operand_bits <= 16 { 64 } else { 32 };
    let k_lo = if operand_bits <= 8 { 32 } else { 16 };
    let block_k = pow2_clamp(k, k_lo, k_hi);
    let k_blocks = (k + block_k - 1) / block_k;
    let num_stages = match k_blocks {
        b if b >= 4 => 3,
        2 | 3 => 2,
        _ => 1,
    };
    let num_warps = match block_m * block_n {
        a if a >= 128 * 128 => 8,
        a if a >= 64 * 64 => 4,
        _ => 2,
    };
    TritonConfig {
        block_m,
        block_n,
        block_k,
        split_k: 1,
        num_stages,
        num_warps,
        num_ctas: 1,
        is_tma_allowed: false,
        is_warp_specialization_allowed: false,
        waves_per_eu: 0,
        group_size: 0,
    }
}

/// The configuration a fusion's backend config already holds, if any.
pub fn existing_config(m: &Module, id: InstId) -> Result<Option<TritonConfig>, String> {
    let o = backend_json(m, id)?;
    match o
        .get("fusion_backend_config")
        .and_then(|f| f.get("triton_gemm_config"))
    {
        None => Ok(None),
        Some(v) => TritonConfig::from_backend_json(v).map(Some),
    }
}

/// `id`'s backend config with `fusion_backend_config.triton_gemm_config`
/// set to `k` (every other key kept in its order).
pub fn with_config(m: &Module, id: InstId, k: &TritonConfig) -> Result<String, String> {
    let mut o = backend_json(m, id)?;
    let fbc = o
        .entry("fusion_backend_config")
        .or_insert_with(|| Value::Object(Map::new()));
    let fbc = fbc
        .as_object_mut()
        .ok_or("fusion_backend_config is not an object")?;
    fbc.insert("triton_gemm_config".into(), k.to_backend_json());
    serde_json::to_string(&Value::Object(o)).map_err(|e| e.to_string())
}

/// What the XLA:GPU tile pass did to one module.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// (fusion name, key, configuration) of every fusion handled, in module order.
    pub chosen: Vec<(String, Option<CacheKey>, TritonConfig)>,
    /// Warnings, one per fusion left unchanged.
    pub warnings: Vec<String>,
}

/// The configuration of Triton GEMM fusion `id` (named `name`): the one its
/// backend config holds, else the heuristic's, written into its backend
/// config; the explain line goes to `explain`.
fn config_for(
    m: &mut Module,
    id: InstId,
    name: &str,
    explain: &mut String,
) -> Result<TritonConfig, String> {
    if let Some(k) = existing_config(m, id)? {
        explain.push_str(&format!(
            "tile %{name}: kept its triton_gemm_config ({})\n",
            k.describe_as_written()
        ));
        return Ok(k);
    }
    let shape = DotProblem::of_fusion(m, id)?;
    let k = heuristic_config(shape.gemm_columns());
    let text = with_config(m, id, &k)?;
    m.inst_mut(id)
        .set_attr("backend_config", AttrValue::Raw(text.into()));
    explain.push_str(&format!(
        "tile %{name}: batch {} M {} N {} K {} ({}-bit operands): {}\n",
        shape.batch,
        shape.m,
        shape.n,
        shape.k,
        shape.widest_operand_bits(),
        k.describe_as_written()
    ));
    Ok(k)
}

/// The warning for a fusion left unchanged.
fn skipped(name: &str, e: &str) -> String {
    format!("warning: tile: skipped fusion %{name}: {e}")
}

/// Appends one line per warning to `explain`.
fn explain_warnings(explain: &mut String, warnings: &[String]) {
    for w in warnings {
        explain.push_str(w);
        explain.push('\n');
    }
}

/// Runs the XLA:GPU tile selection on `m`: writes each Triton GEMM fusion's
/// configuration and returns what it chose (the cache files are written by
/// [`write_outputs`]). `explain` receives the report lines.
pub fn select(
    m: &mut Module,
    opts: &XlaGpuOptions,
    explain: &mut String,
) -> Result<Report, String> {
    let version = opts.key_version.unwrap_or(key::DEFAULT_KEY_VERSION);
    let wants_cache = opts.cache_dir.is_some() || opts.results_file.is_some();
    if wants_cache && opts.device.is_none() {
        return Err("the autotuning cache outputs need the GPU's device description (--gpu-device \"CUDA: 9.0, Cores: 132, ...\", as XLA writes it in an AutotuneResults file)".into());
    }
    let mut report = Report::default();
    let fusions = triton_gemm_fusions(m);
    explain.push_str(&format!(
        "tile (xla-gpu): {} Triton GEMM fusion{}; configurations from the size heuristic (a baseline rule, not a learned model: docs/xla-gpu.md)\n",
        fusions.len(),
        if fusions.len() == 1 { "" } else { "s" }
    ));
    for id in fusions {
        let name = m.inst(id).name.to_string();
        let chosen = match config_for(m, id, &name, explain) {
            Ok(k) => k,
            Err(e) => {
                report.warnings.push(skipped(&name, &e));
                continue;
            }
        };
        let key = match &opts.device {
            Some(device) => match CacheKey::of_fusion(m, id, device, version) {
                Ok(k) => Some(k),
                Err(e) => {
                    report.warnings.push(format!(
                        "warning: tile: no cache key for fusion %{name}: {e}"
                    ));
                    None
                }
            },
            None => None,
        };
        report.chosen.push((name, key, chosen));
    }
    explain_warnings(explain, &report.warnings);
    Ok(report)
}

/// The `AutotuneResults` of a report's keyed choices (one entry a distinct
/// key; sorted by device and HLO, as XLA sorts them).
pub fn results_of(report: &Report) -> proto::AutotuneResults {
    let mut entries: std::collections::BTreeMap<(String, String, i32), TritonConfig> =
        std::collections::BTreeMap::new();
    for (_, key, k) in &report.chosen {
        if let Some(key) = key {
            entries
                .entry((key.device.clone(), key.hlo.clone(), key.version))
                .or_insert(*k);
        }
    }
    proto::AutotuneResults {
        version: key::RESULTS_FORMAT_VERSION,
        results: entries
            .into_iter()
            .map(|((device, hlo, version), k)| proto::AutotuneResultsEntry {
                device,
                hlo,
                result: Some(k.autotune_result()),
                version,
            })
            .collect(),
    }
}

/// Writes the cache outputs `opts` asks for; returns a line per output.
pub fn write_outputs(report: &Report, opts: &XlaGpuOptions) -> Result<Vec<String>, String> {
    use prost::Message as _;
    let mut lines = Vec::new();
    if let Some(dir) = &opts.cache_dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut written = std::collections::BTreeMap::new();
        for (_, key, k) in &report.chosen {
            if let Some(key) = key {
                written.entry(key.file_name()).or_insert(*k);
            }
        }
        for (file, k) in &written {
            let path = dir.join(file);
            let text = textproto::result_to_text(&k.autotune_result())?;
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        lines.push(format!(
            "tile (xla-gpu): wrote {} per-fusion cache file{} to {} (XLA_FLAGS=--xla_gpu_per_fusion_autotune_cache_dir={})",
            written.len(),
            if written.len() == 1 { "" } else { "s" },
            dir.display(),
            dir.display()
        ));
    }
    if let Some(path) = &opts.results_file {
        let results = results_of(report);
        let bytes = if textproto::is_text_path(path) {
            textproto::results_to_text(&results)?.into_bytes()
        } else {
            results.encode_to_vec()
        };
        std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        lines.push(format!(
            "tile (xla-gpu): wrote {} autotuning result{} to {} (XLA_FLAGS=--xla_gpu_load_autotune_results_from={})",
            results.results.len(),
            if results.results.len() == 1 { "" } else { "s" },
            path.display(),
            path.display()
        ));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (batch, M, N, K, operand bits) -> (block_m, block_n, block_k,
    /// num_stages, num_warps).
    #[test]
    fn heuristic_clamps_to_powers_of_two() {
        for (gemm, want) in [
            ([1, 1000, 20, 4096, 16], (128, 32, 64, 3, 4)),
            ([1, 8, 8, 8, 32], (16, 16, 16, 1, 2)),
            // 8-bit operands: block_k at least 32.
            ([1, 64, 64, 16, 8], (64, 64, 32, 1, 4)),
        ] {
            let k = heuristic_config(gemm);
            assert_eq!(
                (k.block_m, k.block_n, k.block_k, k.num_stages, k.num_warps),
                want,
                "{gemm:?}"
            );
        }
    }
}
