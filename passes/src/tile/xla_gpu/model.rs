//! The learned XLA:GPU tile model: nearest GEMMs in XLA's own autotuning
//! data, and the Triton config that was fastest across them.
//!
//! Data ([`records`]): every Triton GEMM fusion XLA autotuned in a GPU
//! session (its logs: each candidate's measured time) with its sizes read
//! from the module compiled with autotuning off (the module hlo-opt sees:
//! [`DotProblem::gemm_columns`], one featurizer for training and the pass).
//!
//! Model ([`TileModel`]): the training fusions, each as features
//! (log2 batch, M, N, K; operand bytes) and its measured configs. To choose
//! for a new GEMM, take its `k` nearest training fusions and, among the
//! configs measured on the nearest one, the config with the least mean
//! log-slowdown (time over that fusion's best Triton time) across the
//! neighbours that measured it (one unmeasured counts as `MISSING_PENALTY`).
//! Choosing only configs XLA generated for a GEMM of nearly that shape keeps
//! the choice inside XLA's own search space. `k` is chosen by
//! leave-one-program-out cross-validation ([`lopo`]).

use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use super::autotuner::{self, Profile};
use super::config::TritonConfig;
use super::dot::DotProblem;

/// Log-slowdown counted for a neighbour that never measured a config.
pub const MISSING_PENALTY: f64 = 0.7;

/// One autotuned Triton GEMM fusion of the data.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Record {
    pub program: String,
    pub fusion: String,
    pub hlo_fingerprint: String,
    /// batch, M, N, K, operand bits.
    pub gemm: [i64; 5],
    /// Triton configs measured, with their times in ns.
    pub triton: Vec<(TritonConfig, i64)>,
    /// The fastest non-Triton candidate (cuBLAS), ns, if any.
    pub best_other_ns: Option<i64>,
    /// The first Triton candidate: what XLA takes with autotuning off.
    pub first_triton: Option<TritonConfig>,
}

impl Record {
    pub fn best_triton_ns(&self) -> Option<i64> {
        self.triton.iter().map(|x| x.1).min()
    }
    pub fn time_of(&self, c: &TritonConfig) -> Option<i64> {
        self.triton.iter().find(|x| x.0 == *c).map(|x| x.1)
    }
}

/// Features of a GEMM's columns ([`DotProblem::gemm_columns`], as
/// [`Record::gemm`]): log2 of batch, M, N, K, and operand bytes.
pub fn features([batch, m, n, k, operand_bits]: [i64; 5]) -> [f64; 5] {
    let l = |x: i64| (x.max(1) as f64).log2();
    [l(batch), l(m), l(n), l(k), operand_bits as f64 / 8.0]
}

/// The records of one program: its logs (text) and its module compiled
/// with autotuning off.
pub fn records(program: &str, logs: &str, off_module: &hlo::Module) -> Result<Vec<Record>, String> {
    let mut out = Vec::new();
    for (p, id) in autotuner::autotuned_gemm_fusions(logs, off_module)? {
        let g = DotProblem::of_fusion(off_module, id)?;
        out.push(record_of(program, &p, g.gemm_columns()));
    }
    Ok(out)
}

fn record_of(program: &str, p: &Profile, gemm: [i64; 5]) -> Record {
    let mut triton = Vec::new();
    let mut best_other: Option<i64> = None;
    let mut first_triton = None;
    for c in &p.candidates {
        if let Some(t) = c.triton {
            if first_triton.is_none() {
                first_triton = Some(t);
            }
            if let Some(ns) = c.nanos {
                if !triton.iter().any(|(x, _): &(TritonConfig, i64)| *x == t) {
                    triton.push((t, ns));
                }
            }
        } else if let Some(ns) = c.nanos {
            best_other = Some(best_other.map_or(ns, |b| b.min(ns)));
        }
    }
    Record {
        program: program.to_string(),
        fusion: p.name.clone(),
        hlo_fingerprint: p.hlo_fingerprint.clone(),
        gemm,
        triton,
        best_other_ns: best_other,
        first_triton,
    }
}

/// The model file (JSON): neighbours and the data they come from.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TileModel {
    /// `xla-gpu-tile-knn`.
    pub kind: String,
    /// The GPU and XLA the data is from.
    pub provenance: String,
    pub k: usize,
    pub records: Vec<Record>,
}

/// The shipped model (data of `testdata/xla_gpu/session1`, H200, jax 0.11.2).
pub const BUILTIN_H200: &str = include_str!("../../../models/xla_gpu_h200_knn.json");

impl TileModel {
    pub fn from_json(text: &str) -> Result<Self, String> {
        let m: TileModel = serde_json::from_str(text).map_err(|e| format!("tile model: {e}"))?;
        if m.kind != "xla-gpu-tile-knn" {
            return Err(format!(
                "tile model: kind `{}` is not xla-gpu-tile-knn",
                m.kind
            ));
        }
        if m.k == 0 || m.records.iter().all(|r| r.triton.is_empty()) {
            return Err("tile model: k is 0 or no record has a measured config".into());
        }
        Ok(m)
    }

    /// By builtin name (`xla-gpu-h200`) or path.
    pub fn load(name_or_path: &str) -> Result<Self, String> {
        match name_or_path {
            "xla-gpu-h200" | "builtin" => Self::from_json(BUILTIN_H200),
            p => Self::from_json(&std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"))?),
        }
    }

    /// [`TileModel::load`], parsed once per process: the built-in model on
    /// first use, a file once per content (the last file's text and model
    /// are kept; a file is read on every call, and other text is parsed
    /// again). Parsing the built-in's 295 KB of JSON took about a third of
    /// a tile pass run on a two-fusion module (1.2 of 3.3 ms CPU; issue 29).
    /// A model that fails to parse is not kept.
    pub fn shared(name_or_path: &str) -> Result<Arc<Self>, String> {
        static BUILTIN: OnceLock<Result<Arc<TileModel>, String>> = OnceLock::new();
        static LAST_FILE: Mutex<Option<(String, Arc<TileModel>)>> = Mutex::new(None);
        match name_or_path {
            "xla-gpu-h200" | "builtin" => BUILTIN
                .get_or_init(|| Self::from_json(BUILTIN_H200).map(Arc::new))
                .clone(),
            p => {
                let text = std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"))?;
                let mut last = LAST_FILE
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some((t, m)) = last.as_ref() {
                    if *t == text {
                        return Ok(Arc::clone(m));
                    }
                }
                let m = Arc::new(Self::from_json(&text)?);
                *last = Some((text, Arc::clone(&m)));
                Ok(m)
            }
        }
    }

    /// The config chosen for GEMM `g`, and the nearest training fusion.
    pub fn choose(&self, g: &DotProblem) -> Option<(TritonConfig, &Record)> {
        choose_among(&self.records, self.k, &features(g.gemm_columns()), None)
    }
}

/// Squared distance; ties broken by record order (deterministic).
/// The `k` nearest records (squared distance of [`features`]).
fn neighbours<'a>(
    records: &'a [Record],
    k: usize,
    f: &[f64; 5],
    skip: Option<&str>,
) -> Vec<&'a Record> {
    let usable = |r: &Record| !r.triton.is_empty() && skip != Some(r.program.as_str());
    // Measured on session 1: restricting to the same width chose configs XLA
    // never generated for the held-out fusion more often (16 vs 10 of 98), so
    // width is a feature, not a filter.
    let same_width = false;
    let mut d: Vec<(f64, usize)> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| usable(r) && (!same_width || features(r.gemm)[4] == f[4]))
        .map(|(i, r)| {
            let g = features(r.gemm);
            (
                g.iter().zip(f).map(|(a, b)| (a - b) * (a - b)).sum::<f64>(),
                i,
            )
        })
        .collect();
    d.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    d.into_iter().take(k).map(|(_, i)| &records[i]).collect()
}

fn choose_among<'a>(
    records: &'a [Record],
    k: usize,
    f: &[f64; 5],
    skip_program: Option<&str>,
) -> Option<(TritonConfig, &'a Record)> {
    let nb = neighbours(records, k, f, skip_program);
    let nearest = *nb.first()?;
    rank_by_neighbours(&nb).first().map(|&c| (c, nearest))
}

/// Ranked configs for a record (best first), for top-5.
fn ranked(records: &[Record], k: usize, f: &[f64; 5], skip: Option<&str>) -> Vec<TritonConfig> {
    rank_by_neighbours(&neighbours(records, k, f, skip))
}

/// The configs measured on the nearest neighbour, best first: least summed
/// log-slowdown over the neighbours (`MISSING_PENALTY` where one never
/// measured it), ties by config order.
fn rank_by_neighbours(nb: &[&Record]) -> Vec<TritonConfig> {
    let Some(nearest) = nb.first() else {
        return Vec::new();
    };
    let mut scored: Vec<(f64, TritonConfig)> = nearest
        .triton
        .iter()
        .map(|(c, _)| {
            let s: f64 = nb
                .iter()
                .map(|r| {
                    let b = r.best_triton_ns().unwrap_or(1).max(1) as f64;
                    r.time_of(c)
                        .map_or(MISSING_PENALTY, |t| (t.max(1) as f64 / b).ln())
                })
                .sum();
            (s, *c)
        })
        .collect();
    scored.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    scored.into_iter().map(|x| x.1).collect()
}

/// Leave-one-program-out results of one method.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Lopo {
    pub method: String,
    /// Fusions chosen for.
    pub evaluated: usize,
    /// Of those, fusions whose choice XLA never measured (a config it did
    /// not generate, or could not compile): counted at the fusion's slowest
    /// measured Triton time.
    pub unmeasured: usize,
    /// Mean slowdown of the choice over the fusion's best Triton time, minus 1.
    pub mean_top1_slowdown: f64,
    /// Geometric mean of that ratio, minus 1.
    pub geomean_top1_slowdown: f64,
    pub max_top1_slowdown: f64,
    /// Best of the first five ranked (kNN only).
    pub mean_top5_slowdown: Option<f64>,
}

/// `ratios`: per fusion, the choice's time over the best (`None`: not
/// measured) and the slowest measured time over the best, which stands in
/// for an unmeasured choice.
fn summarize(method: &str, ratios: &[(Option<f64>, f64)], top5: Option<&[f64]>) -> Lopo {
    let got: Vec<f64> = ratios
        .iter()
        .map(|&(r, worst)| r.unwrap_or(worst))
        .collect();
    let n = got.len().max(1) as f64;
    Lopo {
        method: method.to_string(),
        evaluated: got.len(),
        unmeasured: ratios.iter().filter(|r| r.0.is_none()).count(),
        mean_top1_slowdown: got.iter().sum::<f64>() / n - 1.0,
        geomean_top1_slowdown: (got.iter().map(|x| x.ln()).sum::<f64>() / n).exp() - 1.0,
        max_top1_slowdown: got.iter().copied().fold(1.0, f64::max) - 1.0,
        mean_top5_slowdown: top5.map(|t| t.iter().sum::<f64>() / t.len().max(1) as f64 - 1.0),
    }
}

/// Leave-one-program-out: each program's fusions chosen by a model of the
/// other programs; `k` neighbours; with the size heuristic and XLA's
/// autotuning-off choice (its first candidate) beside it.
pub fn lopo(records: &[Record], k: usize) -> Vec<Lopo> {
    let mut knn = Vec::new();
    let mut top5 = Vec::new();
    let mut heur = Vec::new();
    let mut first = Vec::new();
    for r in records.iter().filter(|r| !r.triton.is_empty()) {
        let best = r.best_triton_ns().unwrap_or(1).max(1) as f64;
        let worst = r.triton.iter().map(|x| x.1).max().unwrap_or(1).max(1) as f64 / best;
        let ratio = |c: &TritonConfig| r.time_of(c).map(|t| t as f64 / best);
        let f = features(r.gemm);
        let rank = ranked(records, k, &f, Some(&r.program));
        knn.push((rank.first().and_then(ratio), worst));
        let t5 = rank
            .iter()
            .take(5)
            .map(|c| ratio(c).unwrap_or(worst))
            .fold(worst, f64::min);
        top5.push(t5);
        heur.push((
            ratio(&super::heuristic_config(r.gemm).for_new_autotuner()),
            worst,
        ));
        first.push((r.first_triton.as_ref().and_then(ratio), worst));
    }
    vec![
        summarize(&format!("kNN (k={k})"), &knn, Some(&top5)),
        summarize("size heuristic", &heur, None),
        summarize("XLA, autotuning off (first candidate)", &first, None),
    ]
}

/// The records of a GPU session's `core.tar.xz` (`logs/<program>.textproto`
/// with `hlo/<program>.off.hlo`), in program order, and its provenance line.
pub fn session_records(path: &std::path::Path) -> Result<(Vec<Record>, String), String> {
    let session = autotuner::SessionFiles::read(path)?;
    let files = &session.files;
    let mut out = Vec::new();
    for p in session.programs()? {
        out.extend(
            records(p.program, p.logs, &p.module).map_err(|e| format!("{}: {e}", p.logs_path))?,
        );
    }
    let prov = files
        .get("provenance.json")
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
        .map(|v| {
            format!(
                "{} ({}), jax {}, {}",
                v["device_kind"][0].as_str().unwrap_or("?"),
                v["nvidia_smi"].as_str().unwrap_or("?"),
                v["jax"].as_str().unwrap_or("?"),
                path.display()
            )
        })
        .unwrap_or_else(|| path.display().to_string());
    Ok((out, prov))
}

/// A markdown table of [`lopo`] results.
pub fn lopo_table(rows: &[Lopo]) -> String {
    let mut s = String::from(
        "| method | fusions | choice not measured (counted as the slowest measured) | mean top-1 slowdown | geomean | max | mean top-5 slowdown |\n|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {:.1}% | {:.1}% | {:.0}% | {} |\n",
            r.method,
            r.evaluated,
            r.unmeasured,
            100.0 * r.mean_top1_slowdown,
            100.0 * r.geomean_top1_slowdown,
            100.0 * r.max_top1_slowdown,
            r.mean_top5_slowdown
                .map_or("-".into(), |x| format!("{:.1}%", 100.0 * x))
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The built-in model is parsed once per process; a file once per
    /// content: the same text gives the same model, other text its own.
    #[test]
    fn shared_models_are_parsed_once_per_content() {
        let a = TileModel::shared("xla-gpu-h200").expect("built-in");
        let b = TileModel::shared("builtin").expect("built-in");
        assert!(Arc::ptr_eq(&a, &b), "the built-in was parsed twice");
        assert_eq!(*a, TileModel::load("xla-gpu-h200").expect("built-in"));

        let dir = std::env::temp_dir().join(format!("hlo-opt-tile-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("model.json");
        let path = path.to_str().expect("UTF-8 temp path");
        let mut m = TileModel::load("builtin").expect("built-in");
        m.k = 1;
        std::fs::write(path, serde_json::to_string(&m).expect("json")).expect("write");
        let first = TileModel::shared(path).expect("file");
        assert_eq!(first.k, 1);
        assert!(Arc::ptr_eq(&first, &TileModel::shared(path).expect("file")));
        m.k = 2;
        std::fs::write(path, serde_json::to_string(&m).expect("json")).expect("write");
        let changed = TileModel::shared(path).expect("file");
        assert_eq!(
            changed.k, 2,
            "a changed file gave the model of its old text"
        );
        std::fs::write(path, "[1, 2").expect("write");
        assert!(
            TileModel::shared(path).is_err(),
            "a broken file is not served from the cache"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn cfg(m: i64) -> TritonConfig {
        TritonConfig {
            block_m: m,
            block_n: 64,
            block_k: 32,
            num_stages: 2,
            num_warps: 4,
            num_ctas: 1,
            group_size: 1,
            ..Default::default()
        }
    }

    fn rec(p: &str, mm: i64, times: &[(i64, i64)]) -> Record {
        Record {
            program: p.into(),
            fusion: "f".into(),
            hlo_fingerprint: String::new(),
            gemm: [1, mm, 512, 512, 16],
            triton: times.iter().map(|&(b, t)| (cfg(b), t)).collect(),
            best_other_ns: None,
            first_triton: Some(cfg(16)),
        }
    }

    #[test]
    fn chooses_what_was_fastest_on_similar_gemms() {
        let rs = vec![
            rec("a", 512, &[(16, 300), (64, 100), (128, 120)]),
            rec("b", 1024, &[(16, 400), (64, 150), (128, 100)]),
            rec("c", 16, &[(16, 10), (64, 30)]),
        ];
        let (c, near) =
            choose_among(&rs, 2, &features([1, 600, 512, 512, 16]), None).expect("test data");
        assert_eq!(near.program, "a");
        // 64: (ln 1 + ln 1.5) / 2 = 0.20; 128: (ln 1.2 + ln 1) / 2 = 0.09.
        assert_eq!(c.block_m, 128);
    }
}
