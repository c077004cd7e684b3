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
use passes::tile::xla_gpu::{self, textproto, CacheKey};

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
    mods.iter().enumerate().find_map(|(k, m)| {
        m.computations().find_map(|c| {
            m.comp(c)
                .order
                .iter()
                .copied()
                .find(|&i| &*m.inst(i).name == name)
                .map(|i| (k, i))
        })
    })
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
    for path in inp.logs {
        let logs = textproto::read_logs_file(path)?;
        let program = inp.program.map(str::to_string).unwrap_or_else(|| {
            let stem = path
                .file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            stem.split('.').next().unwrap_or("program").to_string()
        });
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
            let kernel = passes::tile::extract::extract_kernel(m, id);
            let f = featurize(&kernel, Task::Tile).map_err(|e| format!("%{name}: {e}"))?;
            let g = &f.graph;
            let n = g.node_opcode.len();
            let c = log.results.len();
            let mut feat = Vec::with_capacity(c * CONFIG_COLUMNS.len());
            let mut runtime = Vec::with_capacity(c);
            let mut failed = Vec::with_capacity(c);
            for r in &log.results {
                feat.extend_from_slice(&config_row(r));
                let bad = r.failure.is_some() || r.run_time.is_none();
                failed.push(u8::from(bad));
                runtime.push(match (&r.run_time, bad) {
                    (Some(t), false) => (t.seconds as i128 * 1_000_000_000 + i128::from(t.nanos))
                        .clamp(0, i64::MAX as i128) as i64,
                    _ => -1,
                });
            }
            // XLA's choice among the logged candidates: the fastest that did not fail.
            let best = (0..c)
                .filter(|&i| failed[i] == 0)
                .min_by_key(|&i| (runtime[i], i))
                .map_or(-1, |i| i as i64);
            let default = find(&off, &name)
                .and_then(|(oi, oid)| xla_gpu::existing_config(&off[oi], oid).ok().flatten())
                .map(|k| config_row(&xla_gpu::triton_result(&k)).to_vec())
                .unwrap_or_else(|| vec![-1.0; CONFIG_COLUMNS.len()]);
            let key_hlo = CacheKey::of_fusion(m, id, inp.device.unwrap_or(""), 0)
                .map(|k| k.hlo)
                .unwrap_or_default();
            let shape = xla_gpu::gemm_shape(m, id).ok();
            let gemm = shape.map_or(vec![-1; 5], |s| {
                vec![s.batch, s.m, s.n, s.k, i64::from(s.operand_bits)]
            });
            let file = inp
                .out
                .join(format!("{}.{}.npz", safe(&program), safe(&name)));
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
                w.f32("default_config_feat", &[CONFIG_COLUMNS.len()], &default)?;
                w.i64("gemm_shape", &[5], &gemm)?;
                w.u8("key_hlo", &[key_hlo.len()], key_hlo.as_bytes())?;
                let meta = serde_json::json!({
                    "program": program,
                    "fusion": name,
                    "config_columns": CONFIG_COLUMNS,
                    "gemm_shape_columns": ["batch", "m", "n", "k", "operand_bits"],
                    "selected_backend": log.selected_backend,
                    "log_file": path.file_name().map(|s| s.to_string_lossy().into_owned()),
                })
                .to_string();
                w.u8("meta_json", &[meta.len()], meta.as_bytes())?;
                w.u8("provenance_json", &[provenance.len()], &provenance)?;
                Ok(())
            })();
            r.map_err(|e| e.to_string())?;
            w.finish().map_err(|e| e.to_string())?;
            written += 1;
            lines.push(format!(
                "{}: %{name}: {c} candidates ({} failed), {n} nodes",
                file.display(),
                failed.iter().filter(|&&x| x == 1).count()
            ));
        }
    }
    Ok((written, lines))
}
