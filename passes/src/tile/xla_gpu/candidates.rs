//! The data a Triton config ranker learns from: for every Triton GEMM
//! fusion XLA autotuned in a GPU session, the candidates hlo-opt would
//! choose among at deploy time ([`search_space::candidates`], XLA's default
//! search space for that dot), each with its features
//! ([`search_space::features`]: one featurizer for training and the pass)
//! and the time XLA measured for it, if it did (XLA logs only the
//! candidates that compiled; a fusion tuned with the exhaustive search
//! measured the default candidates too).
//!
//! `hlo-cost gpu-candidates --session core.tar.xz -o candidates.json`
//! writes it; `costmodel/training/xla_gpu_ranker.py` trains and
//! cross-validates on it.

use serde::Serialize;

use super::autotuner;
use super::config::TritonConfig;
use super::dot::DotProblem;
use super::search_space::{self, Device, FEATURE_NAMES};

/// One candidate: the config (block_m, block_n, block_k, split_k,
/// num_stages, num_warps, num_ctas, TMA, warp specialization, group_size),
/// its features, and XLA's measured time (`None`: not measured, i.e. it
/// did not compile).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Candidate {
    pub config: [i64; 10],
    pub features: Vec<f64>,
    pub nanos: Option<i64>,
}

/// One autotuned fusion and its candidates, in XLA's order.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Fusion {
    pub program: String,
    pub fusion: String,
    /// batch, M, N, K, operand bits (the lhs's, as the search space reads
    /// them), result bits, lhs/rhs expensive (0/1).
    pub problem: [i64; 8],
    pub candidates: Vec<Candidate>,
    /// Fastest and slowest Triton time XLA measured for this fusion (any
    /// config it logged, also outside the default space).
    pub best_triton_ns: i64,
    pub worst_triton_ns: i64,
}

/// The file `hlo-cost gpu-candidates` writes.
#[derive(Clone, Debug, Serialize)]
pub struct CandidateFile {
    pub kind: &'static str,
    pub provenance: Vec<String>,
    pub feature_names: Vec<&'static str>,
    pub fusions: Vec<Fusion>,
}

/// The fusions of one program: its autotuning logs and its module compiled
/// with autotuning off.
pub fn program_fusions(
    program: &str,
    logs: &str,
    off_module: &hlo::Module,
    device: &Device,
) -> Result<Vec<Fusion>, String> {
    let mut out = Vec::new();
    for (p, id) in autotuner::autotuned_gemm_fusions(logs, off_module)? {
        let measured: Vec<(TritonConfig, i64)> = p
            .candidates
            .iter()
            .filter_map(|c| Some((c.triton?, c.nanos?)))
            .collect();
        let (Some(best), Some(worst)) = (
            measured.iter().map(|x| x.1).min(),
            measured.iter().map(|x| x.1).max(),
        ) else {
            continue;
        };
        let problem = search_space::dot_problem(off_module, id)?;
        let candidates = search_space::candidates(&problem, device, false)?
            .iter()
            .map(|c| Candidate {
                config: (*c).into(),
                features: search_space::features(&problem, device, c).to_vec(),
                nanos: measured
                    .iter()
                    .find(|m| m.0.as_logged() == c.as_logged())
                    .map(|m| m.1),
            })
            .collect();
        out.push(Fusion {
            program: program.to_string(),
            fusion: p.name.clone(),
            problem: problem_array(&problem),
            candidates,
            best_triton_ns: best,
            worst_triton_ns: worst,
        });
    }
    Ok(out)
}

fn problem_array(p: &DotProblem) -> [i64; 8] {
    [
        p.batch,
        p.m,
        p.n,
        p.k,
        p.lhs_bits,
        p.result_bits,
        i64::from(p.lhs_expensive),
        i64::from(p.rhs_expensive),
    ]
}

/// Every fusion of GPU sessions' `core.tar.xz` files, in program order.
pub fn session_file(
    paths: &[std::path::PathBuf],
    device: &Device,
) -> Result<CandidateFile, String> {
    let mut fusions = Vec::new();
    let mut provenance = Vec::new();
    for path in paths {
        let session = autotuner::SessionFiles::read(path)?;
        for p in session.programs()? {
            fusions.extend(
                program_fusions(p.program, p.logs, &p.module, device)
                    .map_err(|e| format!("{}: {e}", p.logs_path))?,
            );
        }
        provenance.push(path.display().to_string());
    }
    Ok(CandidateFile {
        kind: "xla-gpu-tile-candidates",
        provenance,
        feature_names: FEATURE_NAMES.to_vec(),
        fusions,
    })
}
