//! The Triton tile configuration of a GEMM fusion: XLA's
//! `AutotuneResult.TritonGemmKey` (block_m, block_n, block_k, split_k,
//! num_stages, num_warps, num_ctas, TMA, warp specialization, and the
//! fields 10 `waves_per_eu`, AMD only, and 11 `group_size`), one type for
//! every place hlo-opt reads or writes one, with its forms as methods:
//! - protobuf: the prost message itself, in the legacy `AutotuneResult`
//!   (`TritonConfig::autotune_result`, in `proto.rs`) and in the new
//!   autotuner's cache entries ([`super::autotuner`]); its text form is
//!   read and written by [`super::textproto`];
//! - a fusion's `backend_config` JSON (`triton_gemm_config`):
//!   [`TritonConfig::to_backend_json`], [`TritonConfig::from_backend_json`];
//! - ten integers (the model files, the candidate data, Python): the
//!   `[i64; 10]` conversions and serde;
//! - the explain text ([`TritonConfig::describe`],
//!   [`TritonConfig::describe_as_written`]) and the GPU tile data's
//!   `config_feat` row ([`TritonConfig::features`]).
//!
//! Two conventions meet here: the legacy path writes `split_k: 1` and no
//! group size; XLA's new autotuner leaves split_k unset (0) when it is 1,
//! writes `group_size: 1`, and its logs do not record split_k
//! ([`TritonConfig::for_new_autotuner`], [`TritonConfig::as_logged`]).

use serde_json::{Map, Value};

/// XLA's `AutotuneResult.TritonGemmKey` (field numbers as XLA's). Fields at
/// their default are not encoded, so a config of either convention encodes
/// to the bytes XLA writes for it.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    prost::Message,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(from = "[i64; 10]", into = "[i64; 10]")]
pub struct TritonConfig {
    #[prost(int64, tag = "1")]
    pub block_m: i64,
    #[prost(int64, tag = "2")]
    pub block_n: i64,
    #[prost(int64, tag = "3")]
    pub block_k: i64,
    #[prost(int64, tag = "4")]
    pub split_k: i64,
    #[prost(int64, tag = "5")]
    pub num_stages: i64,
    #[prost(int64, tag = "6")]
    pub num_warps: i64,
    #[prost(int64, tag = "7")]
    pub num_ctas: i64,
    #[prost(bool, tag = "8")]
    pub is_tma_allowed: bool,
    #[prost(bool, tag = "9")]
    pub is_warp_specialization_allowed: bool,
    /// AMD only; always 0 in what hlo-opt chooses, and not one of the ten
    /// integers.
    #[prost(int64, tag = "10")]
    pub waves_per_eu: i64,
    /// 1 in XLA's new autotuner's configs, unset (0) in the legacy ones.
    #[prost(int64, tag = "11")]
    pub group_size: i64,
}

/// In model files, the candidate data and Python a config is ten integers:
/// block_m, block_n, block_k, split_k, num_stages, num_warps, num_ctas, TMA
/// (0/1), warp specialization (0/1), group_size.
impl From<[i64; 10]> for TritonConfig {
    fn from(a: [i64; 10]) -> Self {
        TritonConfig {
            block_m: a[0],
            block_n: a[1],
            block_k: a[2],
            split_k: a[3],
            num_stages: a[4],
            num_warps: a[5],
            num_ctas: a[6],
            is_tma_allowed: a[7] != 0,
            is_warp_specialization_allowed: a[8] != 0,
            waves_per_eu: 0,
            group_size: a[9],
        }
    }
}

impl From<TritonConfig> for [i64; 10] {
    fn from(c: TritonConfig) -> Self {
        [
            c.block_m,
            c.block_n,
            c.block_k,
            c.split_k,
            c.num_stages,
            c.num_warps,
            c.num_ctas,
            i64::from(c.is_tma_allowed),
            i64::from(c.is_warp_specialization_allowed),
            c.group_size,
        ]
    }
}

impl TritonConfig {
    /// A legacy config as XLA's new autotuner writes it: split_k unset
    /// unless it splits, group size 1, no `waves_per_eu`.
    pub fn for_new_autotuner(&self) -> Self {
        TritonConfig {
            split_k: if self.split_k > 1 { self.split_k } else { 0 },
            waves_per_eu: 0,
            group_size: 1,
            ..*self
        }
    }

    /// The config as XLA's new autotuner logs it (split_k not recorded):
    /// compare logged configs in this form.
    pub fn as_logged(&self) -> Self {
        TritonConfig {
            split_k: 0,
            ..*self
        }
    }

    /// The config as XLA writes it in a backend config
    /// (`triton_gemm_config`; proto3 JSON: 64-bit integers as strings,
    /// every field but `waves_per_eu` and `group_size` written).
    pub fn to_backend_json(&self) -> Value {
        let s = |v: i64| Value::String(v.to_string());
        let mut o = Map::new();
        o.insert("block_m".into(), s(self.block_m));
        o.insert("block_n".into(), s(self.block_n));
        o.insert("block_k".into(), s(self.block_k));
        o.insert("split_k".into(), s(self.split_k));
        o.insert("num_stages".into(), s(self.num_stages));
        o.insert("num_warps".into(), s(self.num_warps));
        o.insert("num_ctas".into(), s(self.num_ctas));
        o.insert("is_tma_allowed".into(), Value::Bool(self.is_tma_allowed));
        o.insert(
            "is_warp_specialization_allowed".into(),
            Value::Bool(self.is_warp_specialization_allowed),
        );
        Value::Object(o)
    }

    /// A `triton_gemm_config` read from a backend config (numbers as
    /// strings or numbers, as proto3 JSON allows; a missing field is 0).
    pub fn from_backend_json(v: &Value) -> Result<Self, String> {
        let o = v.as_object().ok_or("triton_gemm_config is not an object")?;
        let int = |k: &str| -> Result<i64, String> {
            match o.get(k) {
                None => Ok(0),
                Some(Value::String(s)) => s
                    .parse()
                    .map_err(|_| format!("triton_gemm_config.{k}: `{s}` is not an integer")),
                Some(Value::Number(n)) => n
                    .as_i64()
                    .ok_or_else(|| format!("triton_gemm_config.{k} is not an integer")),
                Some(_) => Err(format!("triton_gemm_config.{k} is not an integer")),
            }
        };
        let flag = |k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
        Ok(TritonConfig {
            block_m: int("block_m")?,
            block_n: int("block_n")?,
            block_k: int("block_k")?,
            split_k: int("split_k")?,
            num_stages: int("num_stages")?,
            num_warps: int("num_warps")?,
            num_ctas: int("num_ctas")?,
            is_tma_allowed: flag("is_tma_allowed"),
            is_warp_specialization_allowed: flag("is_warp_specialization_allowed"),
            waves_per_eu: int("waves_per_eu")?,
            group_size: 0,
        })
    }

    /// The columns of the GPU tile data (`config_feat`) for a config of the
    /// new autotuner's logs (split_k unset counts as 1).
    pub fn features(&self) -> [f32; 10] {
        [
            self.block_m as f32,
            self.block_n as f32,
            self.block_k as f32,
            self.split_k.max(1) as f32,
            self.num_stages as f32,
            self.num_warps as f32,
            self.num_ctas as f32,
            f32::from(u8::from(self.is_tma_allowed)),
            f32::from(u8::from(self.is_warp_specialization_allowed)),
            1.0,
        ]
    }

    /// The config in an explain line of the new autotuner's path: split_k
    /// as it runs (unset is 1), TMA and warp specialization as ` tma`, ` ws`.
    pub fn describe(&self) -> String {
        format!(
            "block_m={} block_n={} block_k={} split_k={} num_stages={} num_warps={} num_ctas={}{}{}",
            self.block_m,
            self.block_n,
            self.block_k,
            self.split_k.max(1),
            self.num_stages,
            self.num_warps,
            self.num_ctas,
            if self.is_tma_allowed { " tma" } else { "" },
            if self.is_warp_specialization_allowed { " ws" } else { "" }
        )
    }

    /// The config in an explain line of the legacy path: the seven integers
    /// as the backend config holds them (a kept config is shown as written,
    /// split_k 0 included), no flags.
    pub fn describe_as_written(&self) -> String {
        format!(
            "block_m={} block_n={} block_k={} split_k={} num_stages={} num_warps={} num_ctas={}",
            self.block_m,
            self.block_n,
            self.block_k,
            self.split_k,
            self.num_stages,
            self.num_warps,
            self.num_ctas
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legacy() -> TritonConfig {
        TritonConfig {
            block_m: 128,
            block_n: 64,
            block_k: 32,
            split_k: 1,
            num_stages: 3,
            num_warps: 4,
            num_ctas: 1,
            ..Default::default()
        }
    }

    #[test]
    fn json_round_trip() {
        let k = legacy();
        assert_eq!(TritonConfig::from_backend_json(&k.to_backend_json()), Ok(k));
        assert!(TritonConfig::from_backend_json(&serde_json::json!({"block_m": "x"})).is_err());
        assert!(TritonConfig::from_backend_json(&serde_json::json!([1])).is_err());
    }

    #[test]
    fn ten_integers_round_trip() {
        let c = legacy().for_new_autotuner();
        let a: [i64; 10] = c.into();
        assert_eq!(a, [128, 64, 32, 0, 3, 4, 1, 0, 0, 1]);
        assert_eq!(TritonConfig::from(a), c);
        assert_eq!(
            serde_json::to_string(&c).expect("json"),
            "[128,64,32,0,3,4,1,0,0,1]"
        );
    }

    /// The legacy form encodes without group size, the new autotuner's
    /// without split_k: XLA's bytes for each.
    #[test]
    fn conventions_encode_as_xla_writes_them() {
        use prost::Message as _;
        let sizes = [0x08, 0x80, 0x01, 0x10, 0x40, 0x18, 0x20];
        let rest = [0x28, 0x03, 0x30, 0x04, 0x38, 0x01];
        let old = [&sizes[..], &[0x20, 0x01], &rest[..]].concat();
        let new = [&sizes[..], &rest[..], &[0x58, 0x01]].concat();
        assert_eq!(legacy().encode_to_vec(), old);
        assert_eq!(legacy().for_new_autotuner().encode_to_vec(), new);
    }
}
