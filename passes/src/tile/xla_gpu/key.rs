//! XLA:GPU's autotuning cache key and the names of its per-fusion cache
//! files (`xla/service/gpu/autotuning/autotune_cache_key.cc`,
//! `autotuner_cache.cc`):
//! - the key is the device description string, the canonical text of the
//!   fusion's called computation ([`hlo::CanonicalOptions::autotune_key`]),
//!   and the key version;
//! - its string form is `<key model='DEVICE', hlo='HLO', version=N>`;
//! - a per-fusion cache file (`--xla_gpu_per_fusion_autotune_cache_dir`)
//!   is named by the SHA-256 of that string in URL-safe base64 without
//!   padding (tsl's `Base64Encode`), plus `.textproto`, and holds the
//!   `AutotuneResult` as text.

use base64ct::Encoding as _;
use hlo::{InstId, Module, Opcode};
use sha2::Digest as _;

/// The key version of the XLA sources read for this
/// (`AutotuneCacheKey::kCurrentVersion` = 36). XLA only uses an entry whose
/// version equals its own: the GPU collection records the version its XLA
/// writes (docs/xla-gpu.md), and `--autotune-key-version` sets it.
pub const DEFAULT_KEY_VERSION: i32 = 36;

/// `AutotuneResults.version` of the XLA sources read for this (`kVersion`
/// in `autotuner_cache.cc`); XLA refuses a results file of another version.
pub const RESULTS_FORMAT_VERSION: i32 = 3;

/// One autotuning cache key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// The device description (`DeviceDescriptionToCacheKey`), e.g.
    /// `CUDA: 9.0, Cores: 132, GPU clock: 1.98 GHz, Memory bandwidth: 3352 GB/s, L2 cache: 50 MB, DNN version: 9.8.0`.
    pub device: String,
    /// The canonical text of the fusion's called computation.
    pub hlo: String,
    pub version: i32,
}

impl CacheKey {
    /// The key of fusion `fusion` of `m`; `Err` when it is not a fusion or
    /// calls no computation.
    pub fn of_fusion(
        m: &Module,
        fusion: InstId,
        device: &str,
        version: i32,
    ) -> Result<Self, String> {
        let inst = m.inst(fusion);
        if inst.opcode != Opcode::Fusion {
            return Err(format!(
                "%{} is a {}, not a fusion",
                inst.name,
                inst.opcode.name()
            ));
        }
        let callee = inst
            .called_computations()
            .next()
            .ok_or_else(|| format!("fusion %{} calls no computation", inst.name))?;
        Ok(CacheKey {
            device: device.to_string(),
            hlo: hlo::print_computation_canonical(
                m,
                callee,
                &hlo::CanonicalOptions::autotune_key(),
            ),
            version,
        })
    }

    /// `AutotuneCacheKey::ToString()`.
    pub fn key_string(&self) -> String {
        format!(
            "<key model='{}', hlo='{}', version={}>",
            self.device, self.hlo, self.version
        )
    }

    /// The name of the key's file in a per-fusion cache directory.
    pub fn file_name(&self) -> String {
        let digest = sha2::Sha256::digest(self.key_string().as_bytes());
        format!(
            "{}.textproto",
            base64ct::Base64UrlUnpadded::encode_string(&digest)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_name_is_url_safe_unpadded_base64_of_sha256() {
        let k = CacheKey {
            device: "d".into(),
            hlo: "{\n}".into(),
            version: 1,
        };
        assert_eq!(k.key_string(), "<key model='d', hlo='{\n}', version=1>");
        let name = k.file_name();
        // 32 bytes -> 43 characters, no padding, `-` and `_` for 62 and 63.
        assert_eq!(name.len(), 43 + ".textproto".len());
        assert!(!name.contains('=') && !name.contains('+') && !name.contains('/'));
        // Python: base64.urlsafe_b64encode(hashlib.sha256(key).digest()).rstrip(b"=").
        assert_eq!(
            name,
            "JH2uDmjWHpZx-rDim-oSxsSvayYJfj1r7DUBdk3rph8.textproto"
        );
        // SHA-256("abc") in URL-safe base64, the standard test vector.
        let abc = sha2::Sha256::digest(b"abc");
        assert_eq!(
            base64ct::Base64UrlUnpadded::encode_string(&abc),
            "ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0"
        );
    }
}
