//! The TPU autotuner's record of a tile kernel (`tile_kernels/kernel_NN.runs.json`):
//! every configuration it tried with its measured runtime. Quality metrics
//! over them are `costmodel::metrics` (top-k slowdown).
//!
//! Format: `{"runs": [{"error": bool, "is_default": bool, "tile": {"kernel_bounds":
//! [..], "output_bounds": [..], "input_bounds": [..], "iteration_bounds": [..]},
//! "compute_time_ns": int, ..}, ..]}`.

use serde_json::Value;

use super::space::TileConfig;

/// One autotuner run.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    pub config: TileConfig,
    pub compute_time_ns: i64,
    pub is_default: bool,
    pub error: bool,
}

/// Parses a `.runs.json` text.
pub fn parse_runs(text: &str) -> Result<Vec<Run>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let runs = v
        .get("runs")
        .and_then(Value::as_array)
        .ok_or("no `runs` array")?;
    let list = |t: &Value, k: &str| -> Result<Vec<i64>, String> {
        match t.get(k) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|x| {
                    x.as_i64()
                        .ok_or_else(|| format!("`{k}` holds a non-integer"))
                })
                .collect(),
            Some(_) => Err(format!("`{k}` is not a list")),
        }
    };
    runs.iter()
        .map(|r| {
            let tile = r.get("tile").ok_or("run without `tile`")?;
            Ok(Run {
                config: TileConfig {
                    kernel_bounds: list(tile, "kernel_bounds")?,
                    output_bounds: list(tile, "output_bounds")?,
                    input_bounds: list(tile, "input_bounds")?,
                },
                compute_time_ns: r
                    .get("compute_time_ns")
                    .and_then(Value::as_i64)
                    .unwrap_or(0),
                is_default: r
                    .get("is_default")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                error: r.get("error").and_then(Value::as_bool).unwrap_or(false),
            })
        })
        .collect()
}

/// The measured configurations of a kernel, one per distinct configuration
/// (its fastest run), in first-seen order; failed runs are left out.
pub fn measured(runs: &[Run]) -> Vec<(TileConfig, i64)> {
    let mut out: Vec<(TileConfig, i64)> = Vec::new();
    for r in runs.iter().filter(|r| !r.error && r.compute_time_ns > 0) {
        match out.iter_mut().find(|(c, _)| *c == r.config) {
            Some((_, t)) => *t = (*t).min(r.compute_time_ns),
            None => out.push((r.config.clone(), r.compute_time_ns)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_runs_and_dedups_configs() {
        let text = r#"{"runs":[
          {"error":false,"is_default":true,"tile":{"kernel_bounds":[],"output_bounds":[2,4],"input_bounds":[]},"compute_time_ns":10},
          {"error":false,"is_default":false,"tile":{"kernel_bounds":[],"output_bounds":[2,4],"input_bounds":[]},"compute_time_ns":8},
          {"error":true,"is_default":false,"tile":{"kernel_bounds":[],"output_bounds":[1,1],"input_bounds":[]},"compute_time_ns":0}]}"#;
        let runs = parse_runs(text).expect("parses");
        assert_eq!(runs.len(), 3);
        assert!(runs[0].is_default && runs[2].error);
        let m = measured(&runs);
        assert_eq!(
            m,
            vec![(
                TileConfig {
                    kernel_bounds: vec![],
                    output_bounds: vec![2, 4],
                    input_bounds: vec![]
                },
                8
            )]
        );
        assert!(parse_runs("{}").is_err());
    }
}
