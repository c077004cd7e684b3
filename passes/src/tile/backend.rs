//! The tile decision in a kernel's `backend_config`.
//!
//! The decision is one JSON object under the key [`KEY`], merged into the
//! kernel's existing backend config (every other key is kept, in its order):
//!
//! ```json
//! {"hlo_opt_tile": {
//!    "kernel_bounds": [4, 1], "output_bounds": [16, 32], "input_bounds": [],
//!    "predicted": 0.25,          // model score of the choice (lower = faster)
//!    "candidates": 16,           // configurations ranked
//!    "measured": 81234.0,        // only with a measurement callback: its runtime
//!    "top_k": [ {"kernel_bounds": .., "output_bounds": .., "input_bounds": .., "predicted": ..}, .. ]
//!                                // only with --top-k K > 1: the K best, best first
//! }}
//! ```
//!
//! Bounds are counts of layout tiles per dimension, major to minor (see
//! [`super::space`]). XLA reads a backend config either as a JSON object or as
//! a quoted string holding one; both are accepted, and the result is written
//! as a JSON object.

use serde_json::{Map, Number, Value};

use super::space::TileConfig;

/// The key of the tile decision in `backend_config`.
pub const KEY: &str = "hlo_opt_tile";

/// An `f32` score as a JSON number with its shortest decimal spelling.
pub fn score_number(x: f32) -> Value {
    format!("{x}")
        .parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// The JSON form of one configuration (with its score when given).
pub fn config_json(c: &TileConfig, predicted: Option<f32>) -> Map<String, Value> {
    let mut o = Map::new();
    let list = |v: &[i64]| Value::Array(v.iter().map(|&b| Value::from(b)).collect());
    o.insert("kernel_bounds".into(), list(&c.kernel_bounds));
    o.insert("output_bounds".into(), list(&c.output_bounds));
    o.insert("input_bounds".into(), list(&c.input_bounds));
    if let Some(p) = predicted {
        o.insert("predicted".into(), score_number(p));
    }
    o
}

/// Parses an existing `backend_config` attribute value (raw HLO text) into a
/// JSON object; `Err` with a reason when it is not one.
pub fn parse_backend_config(raw: Option<&str>) -> Result<Map<String, Value>, String> {
    let Some(raw) = raw.map(str::trim) else {
        return Ok(Map::new());
    };
    let text: String = if raw.starts_with('"') {
        serde_json::from_str::<String>(raw)
            .map_err(|e| format!("backend_config is not a valid quoted string: {e}"))?
    } else {
        raw.to_string()
    };
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) => Err("backend_config is JSON but not an object".into()),
        Err(e) => Err(format!("backend_config is not JSON: {e}")),
    }
}

/// The new `backend_config` text: `existing` with [`KEY`] set to `decision`.
pub fn merge(raw: Option<&str>, decision: Map<String, Value>) -> Result<String, String> {
    let mut obj = parse_backend_config(raw)?;
    obj.insert(KEY.into(), Value::Object(decision));
    serde_json::to_string(&Value::Object(obj)).map_err(|e| e.to_string())
}

/// Reads a recorded decision back (for tests and tools).
pub fn read_decision(raw: Option<&str>) -> Option<TileConfig> {
    let obj = parse_backend_config(raw).ok()?;
    let d = obj.get(KEY)?.as_object()?;
    let list =
        |k: &str| -> Option<Vec<i64>> { d.get(k)?.as_array()?.iter().map(Value::as_i64).collect() };
    Some(TileConfig {
        kernel_bounds: list("kernel_bounds")?,
        output_bounds: list("output_bounds")?,
        input_bounds: list("input_bounds")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision() -> Map<String, Value> {
        config_json(
            &TileConfig {
                kernel_bounds: vec![4, 1],
                output_bounds: vec![16, 32],
                input_bounds: vec![],
            },
            Some(0.25),
        )
    }

    #[test]
    fn merge_keeps_existing_keys_in_order() {
        let raw = r#"{"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}"#;
        let out = merge(Some(raw), decision()).expect("merges");
        assert_eq!(
            out,
            r#"{"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[],"hlo_opt_tile":{"kernel_bounds":[4,1],"output_bounds":[16,32],"input_bounds":[],"predicted":0.25}}"#
        );
        assert_eq!(
            read_decision(Some(&out)).map(|c| c.output_bounds),
            Some(vec![16, 32])
        );
    }

    #[test]
    fn quoted_and_empty_configs_are_objects() {
        assert!(parse_backend_config(Some(r#""{\"a\":1}""#))
            .is_ok_and(|o| o.get("a") == Some(&Value::from(1))));
        assert!(parse_backend_config(Some(r#""""#)).is_ok_and(|o| o.is_empty()));
        assert!(parse_backend_config(None).is_ok_and(|o| o.is_empty()));
    }

    #[test]
    fn a_second_decision_replaces_the_first() {
        let once = merge(None, decision()).expect("merges");
        let twice = merge(Some(&once), decision()).expect("merges");
        assert_eq!(once, twice);
    }

    #[test]
    fn non_json_and_non_objects_are_errors() {
        assert!(merge(Some("{not json"), decision()).is_err_and(|e| e.contains("not JSON")));
        assert!(merge(Some("[1,2]"), decision()).is_err_and(|e| e.contains("not an object")));
    }

    #[test]
    fn scores_print_short() {
        assert_eq!(score_number(0.1).to_string(), "0.1");
        assert_eq!(score_number(f32::NAN), Value::Null);
    }
}
