//! The learned Triton config ranker: an ONNX model (LightGBM lambdarank,
//! `costmodel/training/xla_gpu_ranker.py --export`) that scores each of a
//! dot's candidates ([`search_space::candidates`], XLA's own default
//! search space) from its features ([`search_space::features`], the same
//! Rust featurizer the training data came from); the pass takes the best
//! scored. Run by ONNX Runtime (`ort`, through costmodel's environment).
//!
//! Leave-one-program-out on session 1 (docs/xla-gpu.md, "The ranker"):
//! 3.7% mean top-1 slowdown, against kNN's 16.3%.

use super::config::TritonConfig;
use super::dot::DotProblem;
use super::search_space::{self, Device, FEATURE_NAMES};

/// The shipped ranker (trained on `testdata/xla_gpu/session1`, H200).
pub const BUILTIN_H200: &[u8] = include_bytes!("../../../models/xla_gpu_h200_ranker.onnx");

/// Builtin name of [`BUILTIN_H200`] for `--gpu-tile-model`.
pub const BUILTIN_NAME: &str = "xla-gpu-h200-ranker";

/// A loaded ranker.
pub struct Ranker {
    rows: costmodel::rows::RowModel,
    pub origin: String,
}

impl Ranker {
    /// By builtin name ([`BUILTIN_NAME`]) or a path to an `.onnx` file.
    pub fn load(name_or_path: &str) -> Result<Ranker, String> {
        if name_or_path == BUILTIN_NAME {
            return Ranker::from_bytes(BUILTIN_H200, BUILTIN_NAME);
        }
        let bytes = std::fs::read(name_or_path).map_err(|e| format!("{name_or_path}: {e}"))?;
        Ranker::from_bytes(&bytes, name_or_path)
    }

    pub fn from_bytes(onnx: &[u8], origin: &str) -> Result<Ranker, String> {
        let rows = costmodel::rows::RowModel::from_bytes(onnx, FEATURE_NAMES.len(), origin)?;
        Ok(Ranker {
            rows,
            origin: origin.to_string(),
        })
    }

    /// One score per feature row (higher is better).
    pub fn scores(&self, rows: &[[f64; 24]]) -> Result<Vec<f32>, String> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let data: Vec<f32> = rows.iter().flatten().map(|&x| x as f32).collect();
        self.rows.run(&data, rows.len())
    }

    /// The best scored of `p`'s generated candidates on `d` (the first of
    /// equal scores), with its score and the number of candidates.
    pub fn choose(&self, p: &DotProblem, d: &Device) -> Result<(TritonConfig, f32, usize), String> {
        let cands = search_space::candidates(p, d, false)?;
        let rows: Vec<[f64; 24]> = cands
            .iter()
            .map(|c| search_space::features(p, d, c))
            .collect();
        let scores = self.scores(&rows)?;
        let mut best = 0;
        for (i, s) in scores.iter().enumerate() {
            if *s > scores[best] {
                best = i;
            }
        }
        let c = *cands.get(best).ok_or("no candidate")?;
        Ok((c, scores[best], cands.len()))
    }
}
