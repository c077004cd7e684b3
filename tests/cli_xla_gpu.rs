//! The XLA:GPU tile target end to end (docs/xla-gpu.md).
//!
//! Specification:
//! - `hlo-opt --pass=tile` on a module with Triton GEMM fusions
//!   (`testdata/xla_gpu/triton_gemm.hlo`) writes a `triton_gemm_config`
//!   into each fusion that has none and keeps one that has; with
//!   `--gpu-device` it writes XLA's per-fusion cache (one file a key, named
//!   by the SHA-256 of the key string) and an `AutotuneResults` file (text
//!   or binary by name) that read back as the same configurations, keyed by
//!   the fusion's canonical text; the explanation says the choice is the
//!   heuristic baseline;
//! - the cache outputs without `--gpu-device`, or with `--tile-target=tpu`,
//!   are refused with exit 2's sibling, 1, and a message;
//! - `hlo-cost gpu-tiles` turns autotuning logs (written here with hlo-opt's
//!   own log writer) and the module into one npz per fusion with the
//!   documented arrays; a log naming no fusion of the modules is reported.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use passes::tile::xla_gpu::proto::*;
use passes::tile::xla_gpu::{textproto, CacheKey, TritonConfig};
use prost::Message as _;

const DEVICE: &str = "CUDA: 9.0, Cores: 132, GPU clock: 1.98 GHz, Memory bandwidth: 3352 GB/s, L2 cache: 50 MB, DNN version: 9.8.0";
const MODULE: &str = "testdata/xla_gpu/triton_gemm.hlo";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tmp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli_xla_gpu")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("tmp dir");
    dir
}

fn run(exe: &str, args: &[&str]) -> Output {
    let out = Command::new(exe)
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{exe} panicked: {stderr}");
    out
}

fn module() -> hlo::Module {
    let text = std::fs::read_to_string(repo().join(MODULE)).expect("module");
    hlo::parse_module(&text).expect("parses")
}

fn fusion(m: &hlo::Module, name: &str) -> hlo::InstId {
    m.find_instruction(name).expect("fusion exists")
}

#[test]
fn tile_pass_writes_configs_and_xla_cache() {
    let dir = tmp("cache");
    let cache = dir.join("cache");
    let results = dir.join("results.textproto");
    let binary = dir.join("results.pb");
    let out_hlo = dir.join("out.hlo");
    let args = |res: &Path| {
        vec![
            MODULE.to_string(),
            "--pass=tile".into(),
            "--explain".into(),
            "--gpu-device".into(),
            DEVICE.into(),
            "--autotune-cache-dir".into(),
            cache.display().to_string(),
            "--autotune-results".into(),
            res.display().to_string(),
            "-o".into(),
            out_hlo.display().to_string(),
        ]
    };
    let a = args(&results);
    let out = run(
        env!("CARGO_BIN_EXE_hlo-opt"),
        &a.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("size heuristic (a baseline rule, not a learned model"),
        "{stderr}"
    );
    assert!(
        stderr.contains("tile %gemm_fusion_dot.2: kept its triton_gemm_config"),
        "{stderr}"
    );

    // The module: the fusion without a config got one, the other kept its own.
    let text = std::fs::read_to_string(&out_hlo).expect("output");
    let m = hlo::parse_module(&text).expect("output parses");
    let d1 = fusion(&m, "gemm_fusion_dot.1");
    let d2 = fusion(&m, "gemm_fusion_dot.2");
    let k1 = passes::tile::xla_gpu::existing_config(&m, d1)
        .expect("json")
        .expect("a config");
    let k2 = passes::tile::xla_gpu::existing_config(&m, d2)
        .expect("json")
        .expect("a config");
    assert_eq!(
        (k1.block_m, k1.block_n, k1.block_k, k1.num_warps),
        (128, 128, 64, 8)
    );
    assert_eq!((k2.block_m, k2.num_stages), (64, 4));

    // The results file: one entry a fusion, keyed by the canonical text of
    // its computation, read back with the configurations written.
    let orig = module();
    let want: Vec<(CacheKey, TritonConfig)> =
        [("gemm_fusion_dot.1", k1), ("gemm_fusion_dot.2", k2)]
            .into_iter()
            .map(|(n, k)| {
                (
                    CacheKey::of_fusion(&orig, fusion(&orig, n), DEVICE, 36).expect("key"),
                    k,
                )
            })
            .collect();
    let read = textproto::results_from_text(&std::fs::read_to_string(&results).expect("results"))
        .expect("reads");
    assert_eq!(read.version, 3);
    assert_eq!(read.results.len(), 2);
    for (key, k) in &want {
        let e = read
            .results
            .iter()
            .find(|e| e.hlo == key.hlo)
            .expect("entry for the key");
        assert_eq!((e.device.as_str(), e.version), (DEVICE, 36));
        assert_eq!(
            e.result.as_ref().and_then(|r| r.key.clone()),
            Some(ResultKey::Triton(*k))
        );
        // The per-fusion file of the key holds the same result.
        let file = cache.join(key.file_name());
        let r = textproto::result_from_text(&std::fs::read_to_string(&file).expect("cache file"))
            .expect("reads");
        assert_eq!(r.key, Some(ResultKey::Triton(*k)));
    }
    assert_eq!(std::fs::read_dir(&cache).expect("cache dir").count(), 2);

    // A binary results file holds the same message.
    let b = args(&binary);
    let out = run(
        env!("CARGO_BIN_EXE_hlo-opt"),
        &b.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert!(out.status.success());
    let decoded = AutotuneResults::decode(std::fs::read(&binary).expect("binary").as_slice())
        .expect("decodes");
    assert_eq!(decoded, read);
}

#[test]
fn cache_outputs_need_a_device_and_the_gpu_target() {
    let dir = tmp("refused");
    let cache = dir.join("c").display().to_string();
    for extra in [vec![], vec!["--tile-target=tpu", "--gpu-device", DEVICE]] {
        let mut a = vec![MODULE, "--pass=tile", "--autotune-cache-dir", &cache];
        a.extend(extra.iter().copied());
        let out = run(env!("CARGO_BIN_EXE_hlo-opt"), &a);
        assert_eq!(out.status.code(), Some(1));
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(
            e.contains("--gpu-device") || e.contains("--tile-target=tpu"),
            "{e}"
        );
    }
    assert!(!dir.join("c").exists());
}

#[test]
fn gpu_tiles_converts_logs_to_npz() {
    let dir = tmp("npz");
    let instr = |name: &str| Any {
        type_url: "type.googleapis.com/xla.HloInstructionProto".into(),
        value: hlo::proto::xla::HloInstructionProto {
            name: name.into(),
            opcode: "fusion".into(),
            ..Default::default()
        }
        .encode_to_vec(),
    };
    let cand = |m: i64, ns: i32, failed: bool| AutotuneResult {
        run_time: (!failed).then_some(Duration {
            seconds: 0,
            nanos: ns,
        }),
        failure: failed.then(|| FailureResult {
            kind: 3,
            msg: "spills".into(),
            ..Default::default()
        }),
        key: Some(ResultKey::Triton(TritonConfig {
            block_m: m,
            block_n: 64,
            block_k: 32,
            split_k: 1,
            num_stages: 2,
            num_warps: 4,
            num_ctas: 1,
            ..Default::default()
        })),
        ..Default::default()
    };
    let logs = AutotuningLogs {
        logs: vec![
            AutotuningLog {
                instr: Some(instr("gemm_fusion_dot.1")),
                results: vec![
                    cand(16, 9000, false),
                    cand(64, 7000, false),
                    cand(256, 0, true),
                ],
                ..Default::default()
            },
            AutotuningLog {
                instr: Some(instr("no_such_fusion")),
                results: vec![cand(16, 1, false)],
                ..Default::default()
            },
        ],
    };
    let log_file = dir.join("mlp.textproto");
    std::fs::write(&log_file, textproto::logs_to_text(&logs).expect("writes")).expect("write log");
    let prov = dir.join("provenance.json");
    std::fs::write(&prov, r#"{"gpu": "test"}"#).expect("write provenance");
    let out_dir = dir.join("out");
    let out = run(
        env!("CARGO_BIN_EXE_hlo-cost"),
        &[
            "gpu-tiles",
            "--logs",
            &log_file.display().to_string(),
            "--hlo",
            MODULE,
            "--provenance",
            &prov.display().to_string(),
            "-o",
            &out_dir.display().to_string(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("fusion %no_such_fusion is in none of the modules; skipped"),
        "{stderr}"
    );
    assert!(stderr.contains("gpu-tiles: wrote 1 file"), "{stderr}");
    let path = out_dir.join("mlp.gemm_fusion_dot.1.npz");
    let mut npz = npyz::npz::NpzArchive::open(&path).expect("npz");
    macro_rules! arr {
        ($npz:expr, $n:expr) => {
            $npz.by_name($n)
                .expect("readable")
                .unwrap_or_else(|| panic!("{} missing", $n))
        };
    }
    let rt: Vec<i64> = arr!(npz, "config_runtime").into_vec().expect("i64");
    assert_eq!(rt, vec![9000, 7000, -1]);
    let failed: Vec<u8> = arr!(npz, "config_failed").into_vec().expect("u8");
    assert_eq!(failed, vec![0, 0, 1]);
    let best: Vec<i64> = arr!(npz, "xla_best_index").into_vec().expect("i64");
    assert_eq!(best, vec![1]);
    let cf = arr!(npz, "config_feat");
    assert_eq!(cf.shape(), &[3, 10]);
    let cf: Vec<f32> = cf.into_vec().expect("f32");
    assert_eq!(
        &cf[10..20],
        &[64.0, 64.0, 32.0, 1.0, 2.0, 4.0, 1.0, 0.0, 0.0, 1.0]
    );
    let gemm: Vec<i64> = arr!(npz, "gemm_shape").into_vec().expect("i64");
    assert_eq!(gemm, vec![1, 128, 1024, 512, 16]);
    let nodes = arr!(npz, "node_opcode").shape().to_vec();
    // The kernel as a module: 10 fused instructions, 3 entry parameters, the fusion.
    assert_eq!(nodes, vec![14]);
    let prov: Vec<u8> = arr!(npz, "provenance_json").into_vec().expect("u8");
    assert_eq!(prov, br#"{"gpu": "test"}"#);
    let key: Vec<u8> = arr!(npz, "key_hlo").into_vec().expect("u8");
    assert!(String::from_utf8(key)
        .expect("utf8")
        .starts_with("{\n  tmp_0 = bf16[128,512]{1,0} parameter(0)\n"));
}
