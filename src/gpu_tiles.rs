//! `hlo-cost gpu-tiles`: XLA:GPU's autotuning logs -> one npz file per Triton
//! GEMM fusion, the GPU tile format of docs/xla-gpu.md.
//!
//! For every `AutotuningLog` (XLA's `--xla_gpu_dump_autotune_logs_to`, text
//! or binary), the fusion it names is looked up by name in the given HLO
//! modules (the module before XLA's autotuner, or the optimized one); its
//! kernel graph (the fusion as a standalone module) is featurized with the
//! tile featurizer the passes use, and every candidate becomes a row:
//! its `TritonGemmKey` fields, its measured time in nanoseconds, whether it
//! failed. A log whose fusion is not found is reported and skipped (exit
//! status 1 when no file could be written at all).

use std::path::{Path, PathBuf};

use costmodel::features::featurize;
use costmodel::npz::NpzWriter;
use costmodel::Task;
use passes::tile::xla_gpu::proto::{AutotuneResult, ResultKey};
use passes::tile::xla_gpu::{self, autotuner, textproto, CacheKey};

/// The config features, in column order (`config_feat`).
pub const CONFIG_COLUMNS: [&str; 10] = [
    "block_m",
    "block_n",
    "block_k",
    "split_k",
    "num_stages",
    "num_warps",
    "num_ctas",
    "is_tma_allowed",
    "is_warp_specialization_allowed",
    "is_triton",
];

/// One row of `config_feat` for a candidate (zeros but `is_triton` = 0 for
/// a candidate of another backend, e.g. cuBLAS).
pub fn config_row(r: &AutotuneResult) -> [f32; 10] {
    match &r.key {
        Some(ResultKey::Triton(k)) => [
            k.block_m as f32,
            k.block_n as f32,
            k.block_k as f32,
            k.split_k as f32,
            k.num_stages as f32,
            k.num_warps as f32,
            k.num_ctas as f32,
            f32::from(u8::from(k.is_tma_allowed)),
            f32::from(u8::from(k.is_warp_specialization_allowed)),
            1.0,
        ],
        _ => [0.0; 10],
    }
}

/// What the conversion takes.
pub struct Inputs<'a> {
    /// GPU sessions' `core.tar.xz` (logs/<program>.textproto with
    /// hlo/<program>.off.hlo and provenance.json), converted whole.
    pub sessions: &'a [PathBuf],
    pub logs: &'a [PathBuf],
    pub modules: &'a [PathBuf],
    pub off_modules: &'a [PathBuf],
    pub provenance: Option<&'a Path>,
    pub program: Option<&'a str>,
    pub device: Option<&'a str>,
    pub out: &'a Path,
}

fn load(path: &Path) -> Result<hlo::Module, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    hlo::parse_module_named(&text, &path.display().to_string()).map_err(|e| e.render())
}

fn find(mods: &[hlo::Module], name: &str) -> Option<(usize, hlo::InstId)> {
    mods.iter()
        .enumerate()
        .find_map(|(k, m)| m.find_instruction(name).map(|i| (k, i)))
}

fn safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Converts; returns (files written, report lines).
pub fn convert(inp: &Inputs) -> Result<(usize, Vec<String>), String> {
    let modules: Vec<hlo::Module> = inp
        .modules
        .iter()
        .map(|p| load(p))
        .collect::<Result<_, _>>()?;
    let off: Vec<hlo::Module> = inp
        .off_modules
        .iter()
        .map(|p| load(p))
        .collect::<Result<_, _>>()?;
    let provenance = match inp.provenance {
        Some(p) => std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?,
        None => b"{}".to_vec(),
    };
    if serde_json::from_slice::<serde_json::Value>(&provenance).is_err() {
        return Err("--provenance is not JSON".into());
    }
    std::fs::create_dir_all(inp.out).map_err(|e| format!("{}: {e}", inp.out.display()))?;
    let mut written = 0;
    let mut lines = Vec::new();
    for session in inp.sessions {
        let (n, mut l) = convert_session(session, inp.out)?;
        written += n;
        lines.append(&mut l);
    }
    for path in inp.logs {
        let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        if is_new_format(&text) {
            let program = program_name(inp.program, path);
            let text =
                String::from_utf8(text).map_err(|_| format!("{}: not UTF-8", path.display()))?;
            let (n, mut l) = convert_profiles(&program, &text, &modules, inp.out, &provenance)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            written += n;
            lines.append(&mut l);
            continue;
        }
        let logs = textproto::read_logs_file(path)?;
        let program = program_name(inp.program, path);
        for (k, log) in logs.logs.iter().enumerate() {
            let Some(name) = textproto::log_instruction_name(log) else {
                lines.push(format!(
                    "{}: log {k}: names no instruction; skipped",
                    path.display()
                ));
                continue;
            };
            let Some((mi, id)) = find(&modules, &name) else {
                lines.push(format!(
                    "{}: log {k}: fusion %{name} is in none of the modules; skipped",
                    path.display()
                ));
                continue;
            };
            let m = &modules[mi];
            let mut rows = Vec::with_capacity(log.results.len());
            for r in &log.results {
                let bad = r.failure.is_some() || r.run_time.is_none();
                let runtime = match (&r.run_time, bad) {
                    (Some(t), false) => (t.seconds as i128 * 1_000_000_000 + i128::from(t.nanos))
                        .clamp(0, i64::MAX as i128) as i64,
                    _ => -1,
                };
                rows.push((config_row(r), runtime, u8::from(bad)));
            }
            let default = find(&off, &name)
                .and_then(|(oi, oid)| xla_gpu::existing_config(&off[oi], oid).ok().flatten())
                .map(|k| config_row(&k.autotune_result()).to_vec())
                .unwrap_or_else(|| vec![-1.0; CONFIG_COLUMNS.len()]);
            let key_hlo = CacheKey::of_fusion(m, id, inp.device.unwrap_or(""), 0)
                .map(|k| k.hlo)
                .unwrap_or_default();
            let extra = serde_json::json!({
                "selected_backend": log.selected_backend,
                "log_file": path.file_name().map(|s| s.to_string_lossy().into_owned()),
            });
            lines.push(write_one(
                inp.out,
                &program,
                &name,
                m,
                id,
                &rows,
                &default,
                &key_hlo,
                extra,
                &provenance,
            )?);
            written += 1;
        }
    }
    Ok((written, lines))
}

fn program_name(given: Option<&str>, path: &Path) -> String {
    given.map(str::to_string).unwrap_or_else(|| {
        let stem = path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        stem.split('.').next().unwrap_or("program").to_string()
    })
}

/// Whether a logs file is the new autotuner's (`instruction_profiles`).
fn is_new_format(text: &[u8]) -> bool {
    text.windows(b"instruction_profiles".len())
        .any(|w| w == b"instruction_profiles")
}

/// One row per candidate of the new autotuner's logs: Triton configs with
/// their fields, other backends (cuBLAS, cuDNN) with zeros and
/// `is_triton` 0.
fn profile_rows(p: &autotuner::Profile) -> Vec<([f32; 10], i64, u8)> {
    p.candidates
        .iter()
        .map(|c| {
            let feat = c.triton.map_or([0.0; 10], |t| t.features());
            (
                feat,
                c.nanos.unwrap_or(-1),
                u8::from(c.failed || c.nanos.is_none()),
            )
        })
        .collect()
}

/// The GEMM fusions of new-format logs, found by name in `modules` (the
/// program compiled with autotuning off). XLA's autotuning-off choice is
/// the first Triton candidate (`default_config_feat`), the key is the
/// fusion's `hlo_fingerprint` (checked against the logs'), `key_hlo` the
/// text it fingerprints.
fn convert_profiles(
    program: &str,
    text: &str,
    modules: &[hlo::Module],
    out: &Path,
    provenance: &[u8],
) -> Result<(usize, Vec<String>), String> {
    let (_, profiles) = autotuner::read_profiles(text)?;
    let mut written = 0;
    let mut lines = Vec::new();
    for p in &profiles {
        let Some((mi, id)) = find(modules, &p.name) else {
            lines.push(format!(
                "{program}: %{}: in none of the modules; skipped",
                p.name
            ));
            continue;
        };
        let m = &modules[mi];
        let Some((key_text, autotuner::Tuned::Gemm)) = autotuner::fingerprint_text(m, id)? else {
            continue; // loop and input fusions: emitter choices, not tiles
        };
        let fp = autotuner::hlo_fingerprint(&key_text);
        if fp != p.hlo_fingerprint {
            lines.push(format!(
                "{program}: %{}: hlo-opt's key {fp} is not XLA's {}; skipped",
                p.name, p.hlo_fingerprint
            ));
            continue;
        }
        let rows = profile_rows(p);
        let default = p.candidates.iter().find_map(|c| c.triton).map_or_else(
            || vec![-1.0; CONFIG_COLUMNS.len()],
            |t| t.features().to_vec(),
        );
        let extra = serde_json::json!({ "hlo_fingerprint": fp, "autotuner": "new" });
        lines.push(write_one(
            out, program, &p.name, m, id, &rows, &default, &key_text, extra, provenance,
        )?);
        written += 1;
    }
    Ok((written, lines))
}

/// Converts every program of a GPU session's `core.tar.xz`.
fn convert_session(session: &Path, out: &Path) -> Result<(usize, Vec<String>), String> {
    let files: std::collections::BTreeMap<String, Vec<u8>> =
        autotuner::read_tar_xz(session, 512 << 20)?
            .into_iter()
            .collect();
    let provenance = files
        .get("provenance.json")
        .cloned()
        .unwrap_or_else(|| b"{}".to_vec());
    let mut written = 0;
    let mut lines = Vec::new();
    for (name, bytes) in &files {
        let Some(program) = name
            .strip_prefix("logs/")
            .and_then(|p| p.strip_suffix(".textproto"))
        else {
            continue;
        };
        let Some(off) = files.get(&format!("hlo/{program}.off.hlo")) else {
            lines.push(format!(
                "{}: {program}: no hlo/{program}.off.hlo; skipped",
                session.display()
            ));
            continue;
        };
        let off_text =
            std::str::from_utf8(off).map_err(|_| format!("{program}.off.hlo: not UTF-8"))?;
        let module = hlo::parse_module_named(off_text, &format!("{program}.off.hlo"))
            .map_err(|e| e.render())?;
        let text = std::str::from_utf8(bytes).map_err(|_| format!("{name}: not UTF-8"))?;
        let (n, mut l) = convert_profiles(
            program,
            text,
            std::slice::from_ref(&module),
            out,
            &provenance,
        )
        .map_err(|e| format!("{}: {name}: {e}", session.display()))?;
        written += n;
        lines.append(&mut l);
    }
    Ok((written, lines))
}

/// Writes one fusion's npz; returns its report line.
#[allow(clippy::too_many_arguments)]
fn write_one(
    out: &Path,
    program: &str,
    name: &str,
    m: &hlo::Module,
    id: hlo::InstId,
    rows: &[([f32; 10], i64, u8)],
    default: &[f32],
    key_hlo: &str,
    extra: serde_json::Value,
    provenance: &[u8],
) -> Result<String, String> {
    let kernel = passes::tile::extract::extract_kernel(m, id);
    let f = featurize(&kernel, Task::Tile).map_err(|e| format!("%{name}: {e}"))?;
    let g = &f.graph;
    let n = g.node_opcode.len();
    let c = rows.len();
    let feat: Vec<f32> = rows.iter().flat_map(|r| r.0).collect();
    let runtime: Vec<i64> = rows.iter().map(|r| r.1).collect();
    let failed: Vec<u8> = rows.iter().map(|r| r.2).collect();
    // XLA's autotuned choice among the candidates: the fastest that did not fail.
    let best = (0..c)
        .filter(|&i| failed[i] == 0)
        .min_by_key(|&i| (runtime[i], i))
        .map_or(-1, |i| i as i64);
    let gemm =
        xla_gpu::DotProblem::of_fusion(m, id).map_or(vec![-1; 5], |p| p.gemm_columns().to_vec());
    let file = out.join(format!("{}.{}.npz", safe(program), safe(name)));
    let mut w = NpzWriter::create(&file).map_err(|e| e.to_string())?;
    let edges: Vec<i64> = g.edge_index.iter().flatten().copied().collect();
    let r = (|| -> costmodel::Result<()> {
        w.f32(
            "node_feat",
            &[n, costmodel::graph::NODE_FEAT_DIM],
            &g.node_feat,
        )?;
        w.u8("node_opcode", &[n], &g.node_opcode)?;
        w.i64("edge_index", &[g.edge_index.len(), 2], &edges)?;
        w.f32("config_feat", &[c, CONFIG_COLUMNS.len()], &feat)?;
        w.i64("config_runtime", &[c], &runtime)?;
        w.i64("config_runtime_normalizers", &[c], &vec![1; c])?;
        w.u8("config_failed", &[c], &failed)?;
        w.i64("xla_best_index", &[], &[best])?;
        w.f32("default_config_feat", &[CONFIG_COLUMNS.len()], default)?;
        w.i64("gemm_shape", &[5], &gemm)?;
        w.u8("key_hlo", &[key_hlo.len()], key_hlo.as_bytes())?;
        let mut meta = serde_json::json!({
            "program": program,
            "fusion": name,
            "config_columns": CONFIG_COLUMNS,
            "gemm_shape_columns": ["batch", "m", "n", "k", "operand_bits"],
        });
        if let (Some(o), serde_json::Value::Object(x)) = (meta.as_object_mut(), extra) {
            o.extend(x);
        }
        let meta = meta.to_string();
        w.u8("meta_json", &[meta.len()], meta.as_bytes())?;
        w.u8("provenance_json", &[provenance.len()], provenance)?;
        Ok(())
    })();
    r.map_err(|e| e.to_string())?;
    w.finish().map_err(|e| e.to_string())?;
    Ok(format!(
        "{}: %{name}: {c} candidates ({} failed), {n} nodes",
        file.display(),
        failed.iter().filter(|&&x| x == 1).count()
    ))
}
