//! XLA's autotuning messages as prost messages, with XLA's field numbers:
//! `AutotuneResults` and `AutotuningLogs` (`xla/autotune_results.proto`),
//! `AutotuneResult`, `AutotuningLog` and the messages they hold
//! (`xla/autotuning.proto`), `google.protobuf.Duration` and `Any`, and the
//! fields of `stream_executor.dnn.AlgorithmProto` that name an algorithm.
//! Fields hlo-opt does not use are not declared; decoding skips them
//! (prost ignores unknown fields and checks every length: no panic on bad
//! bytes). `AutotuneResult.TritonGemmKey` is [`TritonConfig`], shared
//! with the new autotuner's entries.

use super::config::TritonConfig;

impl TritonConfig {
    /// The legacy `AutotuneResult` XLA reads for this config.
    pub fn autotune_result(&self) -> AutotuneResult {
        AutotuneResult {
            key: Some(ResultKey::Triton(*self)),
            ..Default::default()
        }
    }
}

/// `xla.AutotuneResults`: XLA's persisted autotuning results
/// (`--xla_gpu_dump_autotune_results_to`, `--xla_gpu_load_autotune_results_from`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AutotuneResults {
    /// The format version; XLA refuses a file whose version is not its own
    /// (3 in the XLA sources read for this, `autotuner_cache.cc`).
    #[prost(int32, tag = "1")]
    pub version: i32,
    /// Tags 2 (`dots`) and 3 (`convs`) are reserved: an older layout.
    #[prost(message, repeated, tag = "4")]
    pub results: Vec<AutotuneResultsEntry>,
}

/// `xla.AutotuneResults.Entry`: one key (device, canonical HLO, key
/// version) and its result.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AutotuneResultsEntry {
    #[prost(string, tag = "1")]
    pub device: String,
    #[prost(string, tag = "2")]
    pub hlo: String,
    #[prost(message, optional, tag = "3")]
    pub result: Option<AutotuneResult>,
    /// The cache key's version (`AutotuneCacheKey::kCurrentVersion`); 0 is
    /// read by XLA as its current version.
    #[prost(int32, tag = "4")]
    pub version: i32,
}

/// `xla.AutotuningLogs`: every candidate XLA's autotuner measured
/// (`--xla_gpu_dump_autotune_logs_to`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AutotuningLogs {
    #[prost(message, repeated, tag = "1")]
    pub logs: Vec<AutotuningLog>,
}

/// `xla.AutotuningLog`: one autotuned instruction and its candidates.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AutotuningLog {
    /// The instruction (an `xla.HloInstructionProto` packed in an `Any` by
    /// the new autotuner).
    #[prost(message, optional, tag = "1")]
    pub instr: Option<Any>,
    #[prost(message, repeated, tag = "2")]
    pub results: Vec<AutotuneResult>,
    #[prost(message, optional, tag = "3")]
    pub cudnn_version: Option<CudnnVersion>,
    #[prost(message, optional, tag = "4")]
    pub compute_capability: Option<ComputeCapability>,
    #[prost(string, tag = "5")]
    pub device_pci_bus_id: String,
    #[prost(string, tag = "6")]
    pub blas_version: String,
    #[prost(string, tag = "7")]
    pub fusion_name: String,
    #[prost(int64, tag = "8")]
    pub fusion_count: i64,
    #[prost(string, tag = "9")]
    pub selected_backend: String,
}

/// `xla.CudnnVersion`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CudnnVersion {
    #[prost(int32, tag = "1")]
    pub major: i32,
    #[prost(int32, tag = "2")]
    pub minor: i32,
    #[prost(int32, tag = "3")]
    pub patch: i32,
}

/// `xla.ComputeCapability`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ComputeCapability {
    #[prost(int32, tag = "1")]
    pub major: i32,
    #[prost(int32, tag = "2")]
    pub minor: i32,
}

/// `xla.AutotuneResult`: one candidate (its configuration, time, failure).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AutotuneResult {
    #[prost(message, optional, tag = "7")]
    pub failure: Option<FailureResult>,
    #[prost(int64, tag = "8")]
    pub scratch_bytes: i64,
    #[prost(message, optional, tag = "9")]
    pub run_time: Option<Duration>,
    #[prost(oneof = "ResultKey", tags = "5, 6, 15, 16, 17, 18, 19")]
    pub key: Option<ResultKey>,
}

/// The `key` oneof of `xla.AutotuneResult`: which backend and configuration.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum ResultKey {
    #[prost(message, tag = "5")]
    Conv(ConvKey),
    #[prost(message, tag = "6")]
    Gemm(GemmKey),
    #[prost(message, tag = "15")]
    CudaConvPlan(CudaConvPlanKey),
    #[prost(message, tag = "16")]
    Algorithm(AlgorithmProto),
    #[prost(message, tag = "17")]
    Triton(TritonConfig),
    #[prost(message, tag = "18")]
    CustomKernelFusion(CustomKernelFusionKey),
    #[prost(message, tag = "19")]
    Other(BackendConfigKey),
}

/// `xla.AutotuneResult.FailureResult` (kind and message; the reference
/// configuration is not declared).
#[derive(Clone, PartialEq, prost::Message)]
pub struct FailureResult {
    /// `xla.AutotuneResult.FailureKind`: 0 UNKNOWN, 1 REDZONE_MODIFIED,
    /// 2 WRONG_RESULT, 3 DISQUALIFIED.
    #[prost(int32, tag = "1")]
    pub kind: i32,
    #[prost(string, tag = "2")]
    pub msg: String,
    #[prost(int64, tag = "13")]
    pub buffer_address: i64,
}

/// The names of `xla.AutotuneResult.FailureKind`, by number.
pub const FAILURE_KINDS: [&str; 4] = [
    "UNKNOWN",
    "REDZONE_MODIFIED",
    "WRONG_RESULT",
    "DISQUALIFIED",
];

/// `xla.AutotuneResult.ConvKey` (legacy).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ConvKey {
    #[prost(int64, tag = "1")]
    pub algorithm: i64,
    #[prost(bool, tag = "2")]
    pub tensor_ops_enabled: bool,
}

/// `xla.AutotuneResult.GemmKey`: a cuBLAS algorithm.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GemmKey {
    #[prost(int64, tag = "1")]
    pub algorithm: i64,
    #[prost(int64, tag = "2")]
    pub autotune_workspace_size: i64,
}

/// `xla.AutotuneResult.CudaConvPlanKey` (legacy).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CudaConvPlanKey {
    #[prost(string, tag = "1")]
    pub exec_plan_id: String,
}

/// `xla.AutotuneResult.CustomKernelFusionKey`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CustomKernelFusionKey {
    #[prost(int64, tag = "1")]
    pub kernel_index: i64,
}

/// `xla.AutotuneResult.BackendConfigKey`: a backend's name and its config.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BackendConfigKey {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub config: Option<Any>,
}

/// `stream_executor.dnn.AlgorithmProto` (the fields that name the algorithm).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AlgorithmProto {
    #[prost(int64, tag = "1")]
    pub algo_id: i64,
    #[prost(int32, tag = "2")]
    pub math_type: i32,
    #[prost(bool, tag = "5")]
    pub is_cudnn_frontend: bool,
}

/// `google.protobuf.Duration`.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Duration {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

impl Duration {
    /// The duration in microseconds.
    pub fn micros(&self) -> f64 {
        self.seconds as f64 * 1e6 + f64::from(self.nanos) / 1e3
    }
}

/// `google.protobuf.Any`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Any {
    #[prost(string, tag = "1")]
    pub type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}
