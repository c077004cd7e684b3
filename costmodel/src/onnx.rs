//! The learned GNN cost models, run with ONNX Runtime (`ort`, `load-dynamic`).
//!
//! Owns: loading and validating model files against the contract in
//! `costmodel/MODEL.md` (a `.hlocm` zip with `model.json` and ONNX stages, or
//! a plain single-stage `.onnx` whose metadata names task and feature
//! version), locating the ONNX Runtime shared library, and [`OnnxModel`], the
//! [`CostModel`] behind the `layout` and `tile` passes. The default models are
//! embedded in the binary (`include_bytes!`), and so are the named models of
//! [`BUILTIN_MODELS`] (a `--layout-model` value that is exactly such a name
//! loads the built-in; `./NAME` loads a file of that name).
//!
//! Invariants:
//! - The ONNX Runtime environment is created once per process (global,
//!   thread-safe); each model creates its sessions once and reuses them
//!   (a `Mutex` per session, since a run needs exclusive access). A model
//!   loaded again from the same bytes, for the same task and threads,
//!   gets the sessions of an earlier load that no one holds now, and a
//!   graph prepared again its cached encoder output ([`crate::reuse`];
//!   the same bytes as a fresh computation).
//! - A model that does not match the contract is refused at load time with
//!   [`CostModelError::Model`]; bad inputs (empty graph, no configurable
//!   nodes, NaN/inf, wrong sizes) give [`CostModelError::Input`], never a panic.
//! - Layout graphs are pruned to the `khop` neighbourhood of their
//!   configurable nodes before the encoder ([`crate::prune`]); this does not
//!   change the scores (MODEL.md).
//! - Scores are "lower = predicted faster" and finite.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use ort::environment::Environment;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::{TensorElementType, TensorRef, ValueType};

use crate::graph::{
    ConfigBatch, Graph, GraphView, Task, LAYOUT_CONFIG_DIM, NODE_FEAT_DIM, TILE_CONFIG_DIM,
};
use crate::prune::{meta_edges, prune_khop};
use crate::reuse::{
    GraphKey, ModelCache, ModelKey, SharedCache, MAX_CACHED_PREPARED, MAX_PREPARED_BYTES,
};
use crate::{CostModel, CostModelError, Prepared, Result};

/// The `format` field of `model.json`.
pub const FORMAT: &str = "hlo-opt-costmodel";
/// The feature version this build produces (node features, opcodes, config
/// features as in TpuGraphs). Models for another version are refused.
pub const FEATURE_VERSION: u64 = 1;
/// The device of a model file that names none: the models trained before
/// the field existed were all trained on TpuGraphs (TPU measurements).
pub const DEFAULT_DEVICE: &str = "tpu";
/// The ONNX Runtime version the install instructions name.
pub const ORT_VERSION: &str = "1.31.1";

/// Largest model file, and largest uncompressed entry of a `.hlocm` archive,
/// accepted (the default models are 0.4 MB). An entry's declared size is
/// checked before it is inflated, and its read stops at the limit whatever
/// the archive claims (a 2 MB archive can inflate to 2 GB).
pub const MAX_MODEL_BYTES: u64 = 256 << 20;

/// The default layout model (see MODEL.md for what it was trained on).
pub static DEFAULT_LAYOUT_MODEL: &[u8] = include_bytes!("../models/layout.hlocm");
/// The default tile model.
pub static DEFAULT_TILE_MODEL: &[u8] = include_bytes!("../models/tile.hlocm");

/// Models built into the binary besides the defaults, by name: `xla-cpu`,
/// the layout model of XLA:CPU runtimes (README, "A layout model of your own
/// hardware"; costmodel/MODEL.md).
pub static BUILTIN_MODELS: &[(&str, &[u8])] =
    &[("xla-cpu", include_bytes!("../models/layout-xla-cpu.hlocm"))];

/// The built-in model `path` names: `path` is exactly one of
/// [`BUILTIN_MODELS`]' names (no folder, no extension).
pub fn builtin_model(path: &Path) -> Option<(&'static str, &'static [u8])> {
    let name = path.to_str()?;
    BUILTIN_MODELS.iter().copied().find(|(n, _)| *n == name)
}

/// Loads a model for `task`: the file at `path` (`.hlocm` or plain `.onnx`),
/// or the embedded default when `path` is `None`. `threads` is the number of
/// intra-op threads per session (0 = one per available core), capped at
/// [`max_threads`]; a stage with a scatter-add runs on one thread whatever
/// `threads` says ([`session_threads`]).
pub fn load_model(path: Option<&Path>, task: Task, threads: usize) -> Result<Box<dyn CostModel>> {
    Ok(Box::new(OnnxModel::load(path, task, threads)?))
}

/// What a model file says about itself (`model.json`, or the metadata of a
/// plain `.onnx`).
#[derive(Clone, Debug)]
pub struct ModelInfo {
    pub task: Task,
    pub feature_version: u64,
    /// Message-passing depth of the layout encoder: the graph is pruned to the
    /// configurable nodes' `khop` neighbourhood. `None`: no pruning.
    pub khop: Option<usize>,
    /// Layout models with an early join (`model.json` `meta_hops`): the head
    /// reads the configurable nodes' meta-graph of this depth
    /// ([`crate::prune::meta_edges`]) as its input `config_edge_index`.
    /// `None`: a head of two inputs.
    pub meta_hops: Option<usize>,
    /// ONNX stage names, in run order.
    pub stages: Vec<String>,
    /// The hardware whose measurements the model was trained on
    /// (`model.json` `device`, or the `device` metadata of a plain `.onnx`):
    /// `tpu` (TpuGraphs; also what a model without the field means),
    /// `xla-cpu`, `xla-cuda`, ... (`hlo-cost collect`, `train.py --device`).
    pub device: String,
    /// [`CostModel::log_runtime_per_score`] (`model.json`
    /// `log_runtime_per_score`, a positive number, or absent).
    pub log_runtime_per_score: Option<f64>,
    /// [`CostModel::log_runtime_resolution`] (`model.json`
    /// `log_runtime_resolution`, a number >= 0, or absent).
    pub log_runtime_resolution: Option<f64>,
    /// The whole `model.json` (training data, hyper-parameters, metrics), or
    /// the metadata of a plain `.onnx` as an object of strings.
    pub json: serde_json::Value,
}

enum Stages {
    /// Layout: `encoder.onnx` once per graph, `head.onnx` per batch.
    Split {
        encoder: Mutex<Session>,
        head: Mutex<Session>,
        emb_dim: usize,
        /// The head split at its sums over the configurable nodes
        /// (`model.json` `incremental_stages`; MODEL.md "Incremental stages").
        node_sum: Option<Box<NodeSumStages>>,
    },
    /// One graph from graph + configs to scores (tile; or a plain layout `.onnx`).
    Single { model: Mutex<Session> },
}

/// The incremental stages of a layout model: `head_terms.onnx` (the
/// configurable nodes' terms of the head's node sums, `[C, NC, width]`) and
/// `head_pool.onnx` (those sums, `[C, width]`, to scores).
struct NodeSumStages {
    terms: Mutex<Session>,
    pool: Mutex<Session>,
    width: usize,
}

/// The `incremental_stages` a `.hlocm` may name, in order.
pub const INCREMENTAL_STAGES: [&str; 2] = ["head_terms.onnx", "head_pool.onnx"];

/// A GNN cost model run with ONNX Runtime. Create with [`OnnxModel::load`] or
/// [`load_model`]. Its sessions come from the process's model cache when a
/// model of the same bytes, task and threads was loaded before and no one
/// holds it now ([`crate::reuse`]).
pub struct OnnxModel {
    origin: String,
    key: ModelKey,
    /// Whether the sessions came from the cache.
    reused: bool,
    loaded: Arc<Loaded>,
}

/// What loading a model file builds: its description and its sessions.
struct Loaded {
    info: ModelInfo,
    stages: Stages,
}

/// The models loaded in this process, for reuse ([`crate::reuse`]).
static MODELS: ModelCache<Loaded> = ModelCache::new();
/// The encoder's outputs, by model and graph ([`crate::reuse`]).
static PREPARED: SharedCache<(ModelKey, GraphKey), Prepared> =
    SharedCache::new(MAX_CACHED_PREPARED, MAX_PREPARED_BYTES);

/// Empties the process's caches of models and prepared graphs (models in
/// use stay alive with their users). For tests and long-lived callers that
/// want the memory back.
pub fn clear_caches() {
    MODELS.clear();
    clear_results();
}

/// Empties the process's caches of computed results (the encoder's
/// outputs, the incremental scorers' node terms), keeping the loaded
/// models' sessions.
pub fn clear_results() {
    PREPARED.clear();
    crate::incremental::clear_cache();
}

/// How many models, prepared graphs and bytes of those the process's caches
/// hold now (at most [`crate::reuse::MAX_CACHED_MODELS`],
/// [`crate::reuse::MAX_CACHED_PREPARED`] and
/// [`crate::reuse::MAX_PREPARED_BYTES`]).
pub fn cache_sizes() -> (usize, usize, usize) {
    let (prepared, bytes) = PREPARED.len_bytes();
    (MODELS.len(), prepared, bytes)
}

impl std::fmt::Debug for OnnxModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxModel")
            .field("origin", &self.origin)
            .field("task", &self.loaded.info.task)
            .field("stages", &self.loaded.info.stages)
            .field("reused", &self.reused)
            .finish()
    }
}

fn model_err(origin: &str, message: impl Into<String>) -> CostModelError {
    CostModelError::Model {
        path: origin.to_string(),
        message: message.into(),
    }
}

fn input_err(message: impl Into<String>) -> CostModelError {
    CostModelError::Input(message.into())
}

fn runtime_err(context: &str, e: impl std::fmt::Display) -> CostModelError {
    CostModelError::Runtime(format!("{context}: {e}"))
}

impl OnnxModel {
    /// Loads the model at `path`, or the embedded default for `task`.
    pub fn load(path: Option<&Path>, task: Task, threads: usize) -> Result<Self> {
        match path {
            None => {
                let bytes = match task {
                    Task::Layout => DEFAULT_LAYOUT_MODEL,
                    Task::Tile => DEFAULT_TILE_MODEL,
                };
                Self::from_bytes(
                    bytes,
                    &format!("<embedded {}.hlocm>", task.name()),
                    task,
                    threads,
                )
            }
            Some(p) => {
                if let Some((name, bytes)) = builtin_model(p) {
                    return Self::from_bytes(
                        bytes,
                        &format!("<built-in model {name}>"),
                        task,
                        threads,
                    );
                }
                let origin = p.display().to_string();
                let file = std::fs::File::open(p).map_err(|e| {
                    let names: Vec<&str> = BUILTIN_MODELS.iter().map(|(n, _)| *n).collect();
                    let hint = if e.kind() == std::io::ErrorKind::NotFound {
                        format!(
                            " (neither a model file nor a built-in model: the built-in ones are {}; without the flag the embedded default runs)",
                            names.join(", ")
                        )
                    } else {
                        String::new()
                    };
                    model_err(&origin, format!("cannot read: {e}{hint}"))
                })?;
                let mut bytes = Vec::new();
                file.take(MAX_MODEL_BYTES + 1)
                    .read_to_end(&mut bytes)
                    .map_err(|e| model_err(&origin, format!("cannot read: {e}")))?;
                if bytes.len() as u64 > MAX_MODEL_BYTES {
                    return Err(model_err(
                        &origin,
                        format!(
                            "larger than {} MiB (MAX_MODEL_BYTES): not a cost model",
                            MAX_MODEL_BYTES >> 20
                        ),
                    ));
                }
                Self::from_bytes(&bytes, &origin, task, threads)
            }
        }
    }

    /// Loads a model from the bytes of a `.hlocm` (zip) or a plain `.onnx` file;
    /// `origin` names it in errors.
    /// A model of the same bytes, task and threads loaded before in this
    /// process and not in use now gives its sessions ([`crate::reuse`]).
    pub fn from_bytes(bytes: &[u8], origin: &str, task: Task, threads: usize) -> Result<Self> {
        let effective = if threads == 0 {
            max_threads()
        } else {
            threads.min(max_threads())
        };
        let key = ModelKey::new(bytes, task, effective);
        if let Some(loaded) = MODELS.checkout(&key) {
            return Ok(OnnxModel {
                origin: origin.to_string(),
                key,
                reused: true,
                loaded,
            });
        }
        let loaded = Arc::new(if bytes.starts_with(b"PK\x03\x04") {
            Self::from_hlocm(bytes, origin, task, threads)?
        } else {
            Self::from_onnx(bytes, origin, task, threads)?
        });
        MODELS.insert(key, Arc::clone(&loaded));
        Ok(OnnxModel {
            origin: origin.to_string(),
            key,
            reused: false,
            loaded,
        })
    }

    /// Whether this model's sessions came from the process's cache (a model
    /// of the same bytes, task and threads loaded before).
    pub fn reused(&self) -> bool {
        self.reused
    }

    fn from_hlocm(bytes: &[u8], origin: &str, task: Task, threads: usize) -> Result<Loaded> {
        let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))
            .map_err(|e| model_err(origin, format!("not a valid .hlocm zip archive: {e}")))?;
        let read_entry = |zip: &mut zip::ZipArchive<std::io::Cursor<&[u8]>>,
                          name: &str|
         -> Result<Vec<u8>> {
            let f = zip
                .by_name(name)
                .map_err(|e| model_err(origin, format!("missing `{name}` in the archive: {e}")))?;
            let too_big = |bytes: u64| {
                model_err(
                        origin,
                        format!(
                            "`{name}` is {bytes} bytes uncompressed, more than the {} MiB a model entry may have (MAX_MODEL_BYTES); refused before inflating (a zip bomb?)",
                            MAX_MODEL_BYTES >> 20
                        ),
                    )
            };
            if f.size() > MAX_MODEL_BYTES {
                return Err(too_big(f.size()));
            }
            let mut buf = Vec::new();
            // The declared size may lie: stop reading at the limit anyway.
            f.take(MAX_MODEL_BYTES + 1)
                .read_to_end(&mut buf)
                .map_err(|e| model_err(origin, format!("cannot read `{name}`: {e}")))?;
            if buf.len() as u64 > MAX_MODEL_BYTES {
                return Err(too_big(buf.len() as u64));
            }
            Ok(buf)
        };
        let json_bytes = read_entry(&mut zip, "model.json")?;
        let json: serde_json::Value = serde_json::from_slice(&json_bytes)
            .map_err(|e| model_err(origin, format!("model.json is not valid JSON: {e}")))?;
        let info = parse_model_json(&json, origin)?;
        check_task_version(&info, task, origin)?;
        let expected: &[&str] = match task {
            Task::Layout => &["encoder.onnx", "head.onnx"],
            Task::Tile => &["model.onnx"],
        };
        if info.stages != expected {
            return Err(model_err(
                origin,
                format!(
                    "stages {:?}, the {} contract wants {:?}",
                    info.stages,
                    task.name(),
                    expected
                ),
            ));
        }
        let env = environment()?;
        let mut sessions = Vec::new();
        for name in expected {
            let onnx = read_entry(&mut zip, name)?;
            sessions.push(new_session(env, &onnx, origin, name, threads)?);
        }
        let stages = match task {
            Task::Layout => {
                let head = sessions.pop();
                let encoder = sessions.pop();
                let (Some(encoder), Some(head)) = (encoder, head) else {
                    return Err(model_err(origin, "missing stages"));
                };
                let emb_dim = check_layout_split(&encoder, &head, &info, origin)?;
                let node_sum = match json.get("incremental_stages") {
                    None | Some(serde_json::Value::Null) => None,
                    Some(v) => {
                        let names: Option<Vec<&str>> = v
                            .as_array()
                            .map(|a| a.iter().filter_map(|x| x.as_str()).collect());
                        if names.as_deref() != Some(&INCREMENTAL_STAGES[..]) {
                            return Err(model_err(
                                origin,
                                format!("model.json `incremental_stages` is {v}, the contract wants {INCREMENTAL_STAGES:?} or nothing"),
                            ));
                        }
                        if info.meta_hops.is_some() {
                            return Err(model_err(
                                origin,
                                "model.json names `incremental_stages` for an early-join head, which has no node-sum form (MODEL.md)",
                            ));
                        }
                        let terms = read_entry(&mut zip, INCREMENTAL_STAGES[0])?;
                        let pool = read_entry(&mut zip, INCREMENTAL_STAGES[1])?;
                        // One thread each: a call of either is small (the
                        // terms once per graph, the pooling a few dense
                        // layers per batch), and a second thread's
                        // hand-off costs more than it saves (the pooling
                        // took 3 ms a call with two on a loaded machine).
                        let terms = new_session(env, &terms, origin, INCREMENTAL_STAGES[0], 1)?;
                        let pool = new_session(env, &pool, origin, INCREMENTAL_STAGES[1], 1)?;
                        let width = check_node_sum(&terms, &pool, emb_dim, origin)?;
                        Some(Box::new(NodeSumStages {
                            terms: Mutex::new(terms),
                            pool: Mutex::new(pool),
                            width,
                        }))
                    }
                };
                Stages::Split {
                    encoder: Mutex::new(encoder),
                    head: Mutex::new(head),
                    emb_dim,
                    node_sum,
                }
            }
            Task::Tile => {
                let Some(model) = sessions.pop() else {
                    return Err(model_err(origin, "missing stage model.onnx"));
                };
                check_single(&model, task, origin)?;
                Stages::Single {
                    model: Mutex::new(model),
                }
            }
        };
        Ok(Loaded { info, stages })
    }

    fn from_onnx(bytes: &[u8], origin: &str, task: Task, threads: usize) -> Result<Loaded> {
        let env = environment()?;
        let session = new_session(env, bytes, origin, "model", threads)?;
        let meta = session
            .metadata()
            .map_err(|e| model_err(origin, format!("cannot read ONNX metadata: {e}")))?;
        let mut props = serde_json::Map::new();
        for key in meta.custom_keys().unwrap_or_default() {
            if let Some(value) = meta.custom(&key) {
                props.insert(key, serde_json::Value::String(value));
            }
        }
        drop(meta);
        let get = |k: &str| props.get(k).and_then(|v| v.as_str()).map(str::to_string);
        let task_name = get("task").ok_or_else(|| {
            model_err(
                origin,
                "a plain .onnx model needs metadata_props `task` and `feature_version` (MODEL.md)",
            )
        })?;
        let model_task = parse_task(&task_name, origin)?;
        let feature_version = get("feature_version")
            .ok_or_else(|| model_err(origin, "metadata_props lacks `feature_version` (MODEL.md)"))?
            .parse::<u64>()
            .map_err(|e| {
                model_err(
                    origin,
                    format!("metadata `feature_version` is not an integer: {e}"),
                )
            })?;
        let khop = match get("khop") {
            Some(k) => Some(k.parse::<usize>().map_err(|e| {
                model_err(origin, format!("metadata `khop` is not an integer: {e}"))
            })?),
            None => None,
        };
        let info = ModelInfo {
            task: model_task,
            feature_version,
            khop,
            meta_hops: None,
            device: get("device").unwrap_or_else(|| DEFAULT_DEVICE.to_string()),
            log_runtime_per_score: match get("log_runtime_per_score") {
                None => None,
                Some(v) => Some(positive_scale(v.parse::<f64>().ok(), origin)?),
            },
            log_runtime_resolution: match get("log_runtime_resolution") {
                None => None,
                Some(v) => Some(resolution(v.parse::<f64>().ok(), origin)?),
            },
            stages: vec!["model.onnx".to_string()],
            json: serde_json::Value::Object(props),
        };
        check_task_version(&info, task, origin)?;
        check_single(&session, task, origin)?;
        Ok(Loaded {
            info,
            stages: Stages::Single {
                model: Mutex::new(session),
            },
        })
    }

    /// What the model file says about itself.
    pub fn info(&self) -> &ModelInfo {
        &self.loaded.info
    }

    /// The file the model came from (or `<embedded ...>`).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    fn validated_graph(&self, graph: GraphView<'_>) -> Result<()> {
        validate_graph(graph, self.loaded.info.task)
    }
}

/// `log_runtime_per_score` of a model file: a positive, finite number.
fn positive_scale(v: Option<f64>, origin: &str) -> Result<f64> {
    v.filter(|k| k.is_finite() && *k > 0.0).ok_or_else(|| {
        model_err(
            origin,
            "`log_runtime_per_score` must be a positive number (MODEL.md)",
        )
    })
}

/// `log_runtime_resolution` of a model file: a finite number >= 0.
fn resolution(v: Option<f64>, origin: &str) -> Result<f64> {
    v.filter(|r| r.is_finite() && *r >= 0.0).ok_or_else(|| {
        model_err(
            origin,
            "`log_runtime_resolution` must be a number >= 0 (MODEL.md)",
        )
    })
}

fn parse_task(name: &str, origin: &str) -> Result<Task> {
    match name {
        "layout" => Ok(Task::Layout),
        "tile" => Ok(Task::Tile),
        other => Err(model_err(
            origin,
            format!("unknown task `{other}` (want layout or tile)"),
        )),
    }
}

fn parse_model_json(json: &serde_json::Value, origin: &str) -> Result<ModelInfo> {
    let format = json.get("format").and_then(|v| v.as_str()).unwrap_or("");
    if format != FORMAT {
        return Err(model_err(
            origin,
            format!("model.json format is `{format}`, want `{FORMAT}`"),
        ));
    }
    let task_name = json
        .get("task")
        .and_then(|v| v.as_str())
        .ok_or_else(|| model_err(origin, "model.json lacks `task`"))?;
    let task = parse_task(task_name, origin)?;
    let feature_version = json
        .get("feature_version")
        .and_then(|v| v.as_u64())
        .ok_or_else(|| model_err(origin, "model.json lacks an integer `feature_version`"))?;
    let stages = json
        .get("stages")
        .and_then(|v| v.as_array())
        .ok_or_else(|| model_err(origin, "model.json lacks `stages`"))?
        .iter()
        .map(|s| {
            s.as_str()
                .map(str::to_string)
                .ok_or_else(|| model_err(origin, "model.json `stages` must be strings"))
        })
        .collect::<Result<Vec<_>>>()?;
    let khop = match json.get("khop") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(v.as_u64().ok_or_else(|| {
            model_err(
                origin,
                "model.json `khop` must be a non-negative integer or null",
            )
        })? as usize),
    };
    let meta_hops = match json.get("meta_hops") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(v.as_u64().filter(|&h| h >= 1).ok_or_else(|| {
            model_err(
                origin,
                "model.json `meta_hops` must be a positive integer or null",
            )
        })? as usize),
    };
    if let (Some(h), Some(k)) = (meta_hops, khop) {
        // every meta-graph path lies within h - 1 hops of a configurable node
        if h > k + 1 {
            return Err(model_err(
                origin,
                format!("model.json `meta_hops` {h} exceeds `khop` + 1 = {}: the pruned graph would lose meta-graph paths", k + 1),
            ));
        }
    }
    let device = match json.get("device") {
        None | Some(serde_json::Value::Null) => DEFAULT_DEVICE.to_string(),
        Some(v) => v
            .as_str()
            .filter(|d| !d.trim().is_empty())
            .ok_or_else(|| model_err(origin, "model.json `device` must be a non-empty string"))?
            .to_string(),
    };
    let log_runtime_per_score = match json.get("log_runtime_per_score") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(positive_scale(v.as_f64(), origin)?),
    };
    let log_runtime_resolution = match json.get("log_runtime_resolution") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(resolution(v.as_f64(), origin)?),
    };
    Ok(ModelInfo {
        task,
        feature_version,
        khop,
        meta_hops,
        device,
        log_runtime_per_score,
        log_runtime_resolution,
        stages,
        json: json.clone(),
    })
}

fn check_task_version(info: &ModelInfo, task: Task, origin: &str) -> Result<()> {
    if info.task != task {
        return Err(model_err(
            origin,
            format!(
                "this is a {} model, a {} model is needed",
                info.task.name(),
                task.name()
            ),
        ));
    }
    if info.feature_version != FEATURE_VERSION {
        return Err(model_err(
            origin,
            format!(
                "feature_version {} does not match this build's feature version {FEATURE_VERSION}; retrain or export the model for version {FEATURE_VERSION}",
                info.feature_version
            ),
        ));
    }
    Ok(())
}

/// An expected input or output: name, element type, dims (`None` = dynamic).
struct Port<'a>(&'static str, TensorElementType, &'a [Option<i64>]);

const F32: TensorElementType = TensorElementType::Float32;
const I64: TensorElementType = TensorElementType::Int64;
const NODE_PORTS: [Port; 3] = [
    Port("node_feat", F32, &[None, Some(NODE_FEAT_DIM as i64)]),
    Port("node_opcode", I64, &[None]),
    Port("edge_index", I64, &[None, Some(2)]),
];

fn check_ports(
    session: &Session,
    stage: &str,
    origin: &str,
    inputs: &[&Port],
    outputs: &[&Port],
) -> Result<()> {
    let describe = |outlets: &[ort::value::Outlet]| {
        outlets
            .iter()
            .map(|o| format!("{}: {:?}", o.name(), o.dtype()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (kind, outlets, ports) in [
        ("input", session.inputs(), inputs),
        ("output", session.outputs(), outputs),
    ] {
        if outlets.len() != ports.len() {
            return Err(model_err(
                origin,
                format!(
                    "{stage}: has {} {kind}s ({}), the contract wants {}",
                    outlets.len(),
                    describe(outlets),
                    ports.iter().map(|p| p.0).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        for port in ports.iter() {
            let Some(outlet) = outlets.iter().find(|o| o.name() == port.0) else {
                return Err(model_err(
                    origin,
                    format!(
                        "{stage}: missing {kind} `{}` (has {})",
                        port.0,
                        describe(outlets)
                    ),
                ));
            };
            let ValueType::Tensor { ty, shape, .. } = outlet.dtype() else {
                return Err(model_err(
                    origin,
                    format!("{stage}: {kind} `{}` is not a tensor", port.0),
                ));
            };
            if *ty != port.1 {
                return Err(model_err(
                    origin,
                    format!(
                        "{stage}: {kind} `{}` has element type {ty:?}, want {:?}",
                        port.0, port.1
                    ),
                ));
            }
            let dims: &[i64] = shape;
            let ok = dims.len() == port.2.len()
                && dims.iter().zip(port.2).all(|(&d, want)| match want {
                    Some(w) => d == *w,
                    None => true,
                });
            if !ok {
                return Err(model_err(
                    origin,
                    format!(
                        "{stage}: {kind} `{}` has dims {dims:?}, want {:?} (None = any)",
                        port.0, port.2
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Checks the encoder/head pair; returns the embedding width D. The head takes
/// `config_edge_index` exactly when `model.json` names `meta_hops` (early join).
fn check_layout_split(
    encoder: &Session,
    head: &Session,
    info: &ModelInfo,
    origin: &str,
) -> Result<usize> {
    let ids = Port("node_config_ids", I64, &[None]);
    let emb_out = Port("config_node_emb", F32, &[None, None]);
    let enc_inputs = [&NODE_PORTS[0], &NODE_PORTS[1], &NODE_PORTS[2], &ids];
    check_ports(encoder, "encoder.onnx", origin, &enc_inputs, &[&emb_out])?;
    let cfg = Port(
        "config_feat",
        F32,
        &[None, None, Some(LAYOUT_CONFIG_DIM as i64)],
    );
    let score = Port("score", F32, &[None]);
    let edges = Port("config_edge_index", I64, &[None, Some(2)]);
    let head_inputs: &[&Port] = if info.meta_hops.is_some() {
        &[&emb_out, &cfg, &edges]
    } else {
        &[&emb_out, &cfg]
    };
    let has_edges = head.inputs().iter().any(|o| o.name() == edges.0);
    if has_edges && info.meta_hops.is_none() {
        return Err(model_err(
            origin,
            "head.onnx reads `config_edge_index` (an early join) but model.json names no `meta_hops`",
        ));
    }
    check_ports(head, "head.onnx", origin, head_inputs, &[&score])?;
    let dim_of = |s: &Session, outputs: bool| -> Option<i64> {
        let outlets = if outputs { s.outputs() } else { s.inputs() };
        outlets
            .iter()
            .find(|o| o.name() == "config_node_emb")
            .and_then(|o| o.dtype().tensor_shape())
            .and_then(|sh| sh.get(1).copied())
    };
    let (enc_d, head_d) = (dim_of(encoder, true), dim_of(head, false));
    match (enc_d, head_d) {
        (Some(a), Some(b)) if a > 0 && a == b => Ok(a as usize),
        _ => Err(model_err(
            origin,
            format!("config_node_emb width must be fixed and equal in both stages (encoder {enc_d:?}, head {head_d:?})"),
        )),
    }
}

/// Checks the incremental stages against the embedding width `emb_dim`;
/// returns the width of the node sums.
fn check_node_sum(terms: &Session, pool: &Session, emb_dim: usize, origin: &str) -> Result<usize> {
    let width = pool
        .inputs()
        .iter()
        .find(|o| o.name() == "pooled")
        .and_then(|o| o.dtype().tensor_shape())
        .and_then(|sh| sh.get(1).copied())
        .filter(|&w| w > 0)
        .ok_or_else(|| {
            model_err(
                origin,
                "head_pool.onnx: input `pooled` must be [C, P] with a fixed P > 0",
            )
        })?;
    let dims = [None, Some(width)];
    let dims3 = [None, None, Some(width)];
    let emb = [None, Some(emb_dim as i64)];
    let emb_in = Port("config_node_emb", F32, &emb);
    let cfg = Port(
        "config_feat",
        F32,
        &[None, None, Some(LAYOUT_CONFIG_DIM as i64)],
    );
    let nodes = Port("term_nodes", I64, &[None]);
    check_ports(
        terms,
        INCREMENTAL_STAGES[0],
        origin,
        &[&emb_in, &nodes, &cfg],
        &[&Port("node_terms", F32, &dims3)],
    )?;
    check_ports(
        pool,
        INCREMENTAL_STAGES[1],
        origin,
        &[&Port("pooled", F32, &dims)],
        &[&Port("score", F32, &[None])],
    )?;
    Ok(width as usize)
}

fn check_single(session: &Session, task: Task, origin: &str) -> Result<()> {
    let score = Port("score", F32, &[None]);
    match task {
        Task::Tile => {
            let cfg = Port("config_feat", F32, &[None, Some(TILE_CONFIG_DIM as i64)]);
            let inputs = [&NODE_PORTS[0], &NODE_PORTS[1], &NODE_PORTS[2], &cfg];
            check_ports(session, "model.onnx", origin, &inputs, &[&score])
        }
        Task::Layout => {
            let ids = Port("node_config_ids", I64, &[None]);
            let cfg = Port(
                "config_feat",
                F32,
                &[None, None, Some(LAYOUT_CONFIG_DIM as i64)],
            );
            let inputs = [&NODE_PORTS[0], &NODE_PORTS[1], &NODE_PORTS[2], &ids, &cfg];
            check_ports(session, "model.onnx", origin, &inputs, &[&score])
        }
    }
}

// ---------------------------------------------------------------- runtime --

static ENVIRONMENT: OnceLock<std::result::Result<Environment, String>> = OnceLock::new();

/// The process-wide ONNX Runtime environment, created on first use.
pub fn environment() -> Result<&'static Environment> {
    let env = ENVIRONMENT.get_or_init(|| {
        let lib = find_onnxruntime()?;
        check_shared_library(&lib)
            .map_err(|e| format!("{}: {e}; not loaded. {}", lib.display(), install_hint()))?;
        let builder = ort::init_from(&lib)
            .map_err(|e| format!("cannot load {}: {e}. {}", lib.display(), install_hint()))?;
        builder
            .with_name("hlo-opt")
            .with_telemetry(false)
            .build()
            .map_err(|e| format!("cannot create the environment from {}: {e}", lib.display()))
    });
    env.as_ref().map_err(|e| CostModelError::Runtime(e.clone()))
}

/// Checks that `path` is a whole shared library for this machine before it is
/// loaded: the dynamic loader maps the file, and touching a mapped page past
/// the end of a truncated file kills the process with SIGBUS inside `dlopen`.
/// On Linux: the ELF magic, this build's class (32/64-bit), byte order and
/// machine, a shared object, and the program headers, every loadable
/// segment and the section headers within the file. Elsewhere: not empty.
///
/// Only the headers are read (the first 64 KiB, more when the program header
/// table lies further in), not the whole library: reading ONNX Runtime's
/// 29 MB took about 30 ms of every run's start-up (issue 29).
pub fn check_shared_library(path: &Path) -> std::result::Result<(), String> {
    use std::io::{Seek, SeekFrom};
    let cannot = |e: std::io::Error| format!("cannot read: {e}");
    let mut file = std::fs::File::open(path).map_err(cannot)?;
    let len = file.metadata().map_err(cannot)?.len();
    if len == 0 {
        return Err("the file is empty".into());
    }
    if !cfg!(target_os = "linux") {
        return Ok(());
    }
    let mut want = len.min(64 << 10);
    loop {
        let mut head = Vec::new();
        file.seek(SeekFrom::Start(0)).map_err(cannot)?;
        (&mut file)
            .take(want)
            .read_to_end(&mut head)
            .map_err(cannot)?;
        match check_elf_prefix(&head, len) {
            // `need` <= len: the prefix grows, at most once past the table.
            Err(ElfCheck::Need(need)) if need > want && need <= len => want = need,
            Err(ElfCheck::Need(_)) => return Err("truncated while being read".into()),
            Err(ElfCheck::Bad(m)) => return Err(m),
            Ok(()) => return Ok(()),
        }
    }
}

/// Why [`check_elf_prefix`] did not pass a prefix of a file.
enum ElfCheck {
    Bad(String),
    /// The program header table ends past the prefix: read this many bytes.
    Need(u64),
}

/// The ELF checks of [`check_shared_library`] on a whole file's bytes.
#[cfg(test)]
fn check_elf(b: &[u8]) -> std::result::Result<(), String> {
    match check_elf_prefix(b, b.len() as u64) {
        Ok(()) => Ok(()),
        Err(ElfCheck::Bad(m)) => Err(m),
        Err(ElfCheck::Need(n)) => Err(format!("needs {n} bytes")),
    }
}

/// The ELF checks of [`check_shared_library`] on the first bytes `b` of a
/// file of `len` bytes.
fn check_elf_prefix(b: &[u8], len: u64) -> std::result::Result<(), ElfCheck> {
    use ElfCheck::Bad;
    const EM_X86_64: u16 = 62;
    const EM_AARCH64: u16 = 183;
    const EM_386: u16 = 3;
    const EM_ARM: u16 = 40;
    const PT_LOAD: u32 = 1;
    if b.len() < 16 || &b[..4] != b"\x7fELF" {
        return Err(Bad("not an ELF shared library (bad magic)".into()));
    }
    let is64 = match b[4] {
        1 => false,
        2 => true,
        c => return Err(Bad(format!("unknown ELF class {c}"))),
    };
    if is64 != cfg!(target_pointer_width = "64") {
        return Err(Bad(format!(
            "a {}-bit library, this program is {}-bit",
            if is64 { 64 } else { 32 },
            usize::BITS
        )));
    }
    if b[5] != if cfg!(target_endian = "little") { 1 } else { 2 } {
        return Err(Bad("an ELF library of the other byte order".into()));
    }
    let header_len = if is64 { 64 } else { 52 };
    if b.len() < header_len {
        return Err(Bad(format!(
            "truncated: {len} bytes, shorter than an ELF header"
        )));
    }
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    let word_at = |o: usize| -> u64 {
        if is64 {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(w)
        } else {
            u64::from(u32_at(o))
        }
    };
    if cfg!(target_endian = "big") {
        // The readers above are little-endian; big-endian hosts skip the rest.
        return Ok(());
    }
    let e_type = u16_at(16);
    if e_type != 3 {
        return Err(Bad(format!("ELF type {e_type}, not a shared object (3)")));
    }
    let machine = u16_at(18);
    let want = if cfg!(target_arch = "x86_64") {
        Some(EM_X86_64)
    } else if cfg!(target_arch = "aarch64") {
        Some(EM_AARCH64)
    } else if cfg!(target_arch = "x86") {
        Some(EM_386)
    } else if cfg!(target_arch = "arm") {
        Some(EM_ARM)
    } else {
        None
    };
    if want.is_some_and(|w| w != machine) {
        return Err(Bad(format!(
            "built for ELF machine {machine}, not this machine's ({})",
            want.unwrap_or_default()
        )));
    }
    let (phoff, shoff, sizes_at) = if is64 {
        (word_at(32), word_at(40), 54)
    } else {
        (word_at(28), word_at(32), 42)
    };
    let phentsize = u64::from(u16_at(sizes_at));
    let phnum = u64::from(u16_at(sizes_at + 2));
    let shentsize = u64::from(u16_at(sizes_at + 4));
    let shnum = u64::from(u16_at(sizes_at + 6));
    let truncated = |what: String| {
        Err(Bad(format!(
            "truncated or corrupt: {what} ends past the end of the file ({len} bytes)"
        )))
    };
    let table_end =
        |off: u64, n: u64, size: u64| n.checked_mul(size).and_then(|t| t.checked_add(off));
    if table_end(phoff, phnum, phentsize).is_none_or(|e| e > len) {
        return truncated("the program header table".into());
    }
    if shnum > 0 && table_end(shoff, shnum, shentsize).is_none_or(|e| e > len) {
        return truncated("the section header table".into());
    }
    if let Some(e) = table_end(phoff, phnum, phentsize).filter(|&e| e > b.len() as u64) {
        return Err(ElfCheck::Need(e));
    }
    let min_ph = if is64 { 56 } else { 32 };
    if phnum > 0 && phentsize < min_ph {
        return Err(Bad(format!("program header entries of {phentsize} bytes")));
    }
    for i in 0..phnum {
        let p = (phoff + i * phentsize) as usize;
        if u32_at(p) != PT_LOAD {
            continue;
        }
        let (offset, filesz) = if is64 {
            (word_at(p + 8), word_at(p + 32))
        } else {
            (word_at(p + 4), word_at(p + 16))
        };
        if offset.checked_add(filesz).is_none_or(|e| e > len) {
            return truncated(format!("loadable segment {i}"));
        }
    }
    Ok(())
}

fn install_hint() -> String {
    format!(
        "Install ONNX Runtime {ORT_VERSION} with `bash scripts/quickstart` in the hlo-opt checkout \
         (it makes .venv with `onnxruntime=={ORT_VERSION}`, which hlo-opt then finds from any folder), \
         or `python3 -m venv .venv && .venv/bin/pip install onnxruntime=={ORT_VERSION}` there, \
         or point ORT_DYLIB_PATH at the library (`libonnxruntime.so.{ORT_VERSION}` in the \
         onnxruntime package's capi/ folder), or copy it to {}",
        user_lib_dir().map_or_else(|| "~/.local/share/hlo-opt/lib".to_string(), |d| d.display().to_string())
    )
}

fn lib_names() -> Vec<String> {
    if cfg!(target_os = "windows") {
        vec!["onnxruntime.dll".into()]
    } else if cfg!(target_os = "macos") {
        vec![
            format!("libonnxruntime.{ORT_VERSION}.dylib"),
            "libonnxruntime.dylib".into(),
        ]
    } else {
        vec![
            format!("libonnxruntime.so.{ORT_VERSION}"),
            "libonnxruntime.so".into(),
        ]
    }
}

/// `dir` itself, or the first versioned `libonnxruntime.so.*` in it.
fn lib_in(dir: &Path) -> Option<PathBuf> {
    for name in lib_names() {
        let p = dir.join(name);
        if p.is_file() {
            return Some(p);
        }
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("libonnxruntime.so.") || n.starts_with("libonnxruntime.")
            }) && p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !n.contains("providers"))
        })
        .collect();
    found.sort();
    found.pop()
}

/// `<root>/.venv/lib/python3.*/site-packages/onnxruntime/capi`.
fn venv_capi(root: &Path) -> Option<PathBuf> {
    let lib = root.join(".venv").join("lib");
    let mut pys: Vec<PathBuf> = std::fs::read_dir(&lib)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("python"))
        })
        .collect();
    pys.sort();
    pys.into_iter()
        .map(|p| p.join("site-packages").join("onnxruntime").join("capi"))
        .find(|p| p.is_dir())
}

/// The folder of the source checkout this program was built from (where
/// `scripts/quickstart` makes `.venv`), recorded at build time: a binary
/// installed elsewhere (`cargo install --path .`) still finds that `.venv`.
fn build_checkout() -> Option<PathBuf> {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
}

/// The user-level folder searched for the library: `$HLO_OPT_HOME/lib`, else
/// `${XDG_DATA_HOME:-$HOME/.local/share}/hlo-opt/lib`.
pub fn user_lib_dir() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("HLO_OPT_HOME").filter(|h| !h.is_empty()) {
        return Some(PathBuf::from(home).join("lib"));
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".local").join("share"))
        })?;
    Some(data.join("hlo-opt").join("lib"))
}

/// Finds the ONNX Runtime shared library, first found wins:
/// 1. `ORT_DYLIB_PATH` (a file);
/// 2. next to the executable (or its parent folder, for `target/*/deps`);
/// 3. a `.venv` in the current folder or an ancestor of it, then in an
///    ancestor of the executable (`target/release/hlo-opt` of a checkout);
/// 4. the `.venv` of the checkout the program was built from
///    ([`build_checkout`], for `cargo install --path .`);
/// 5. the user-level folder [`user_lib_dir`];
/// 6. the `onnxruntime` package of `$HLO_OPT_PYTHON`, then of `python3`.
pub fn find_onnxruntime() -> std::result::Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        return Err(format!(
            "ORT_DYLIB_PATH={} does not name a file. {}",
            p.display(),
            install_hint()
        ));
    }
    let mut looked = Vec::new();
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf));
    if let Some(dir) = &exe_dir {
        for d in [Some(dir.as_path()), dir.parent()].into_iter().flatten() {
            if let Some(p) = lib_in(d) {
                return Ok(p);
            }
            looked.push(d.display().to_string());
        }
    }
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        roots.extend(cwd.ancestors().map(Path::to_path_buf));
    }
    if let Some(dir) = &exe_dir {
        roots.extend(dir.ancestors().map(Path::to_path_buf));
    }
    roots.extend(build_checkout());
    for root in &roots {
        if let Some(capi) = venv_capi(root) {
            if let Some(p) = lib_in(&capi) {
                return Ok(p);
            }
        }
    }
    looked.push(".venv in the current folder and its ancestors, the executable's ancestors".into());
    if let Some(b) = build_checkout() {
        looked.push(format!(
            "{}/.venv (the checkout it was built from)",
            b.display()
        ));
    }
    if let Some(dir) = user_lib_dir() {
        if let Some(p) = lib_in(&dir) {
            return Ok(p);
        }
        looked.push(dir.display().to_string());
    }
    let pythons: Vec<String> = std::env::var("HLO_OPT_PYTHON")
        .ok()
        .into_iter()
        .chain(["python3".to_string()])
        .collect();
    for py in pythons {
        let out = std::process::Command::new(&py)
            .args([
                "-c",
                "import onnxruntime,os;print(os.path.join(os.path.dirname(onnxruntime.__file__),'capi'))",
            ])
            .stderr(std::process::Stdio::null())
            .output();
        if let Ok(out) = out {
            if out.status.success() {
                let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
                if let Some(p) = lib_in(&dir) {
                    return Ok(p);
                }
            }
        }
        looked.push(format!("the onnxruntime package of `{py}`"));
    }
    Err(format!(
        "the ONNX Runtime shared library was not found (looked: ORT_DYLIB_PATH unset, {}). {}",
        looked.join(", "),
        install_hint()
    ))
}

fn new_session(
    env: &Environment,
    onnx: &[u8],
    origin: &str,
    stage: &str,
    threads: usize,
) -> Result<Session> {
    let err = |e: ort::Error| {
        model_err(
            origin,
            format!("{stage}: ONNX Runtime refused the model: {e}"),
        )
    };
    Session::builder(env)
        .map_err(err)?
        .with_optimization_level(GraphOptimizationLevel::Level3)
        .map_err(|e| err(e.into()))?
        .with_inter_threads(1)
        .map_err(|e| err(e.into()))?
        .with_intra_threads(session_threads(onnx, threads))
        .map_err(|e| err(e.into()))?
        .commit_from_memory(onnx)
        .map_err(err)
}

/// The most intra-op threads a session gets: the available parallelism
/// (more threads than cores only wait on each other; thousands of them
/// exhaust memory). Callers that take a thread count from a user say when
/// they cap it.
pub fn max_threads() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The intra-op threads of the session of the ONNX graph `onnx` when
/// `requested` were asked for (0 = [`max_threads`]).
///
/// A graph with a `ScatterND` or `ScatterElements` node runs on one thread:
/// ONNX Runtime's CPU kernels of a scatter with `reduction="add"` split the
/// updates across threads that write to the same output rows unsynchronised,
/// so with several threads a run's result depends on the thread schedule (the
/// tile pass gave a different tile on each of three identical runs of
/// resnet50; onnxruntime issue 18048). The models' neighbour sums are such
/// scatters (MODEL.md), so the encoder and the tile model run on one thread;
/// the layout head (dense layers and attention, no scatter) uses
/// `requested`, and gives the same bytes at every thread count (ONNX
/// Runtime's GEMMs split rows and columns among threads, never a sum).
/// The op type is found as its name in the serialized graph: a false match
/// (an initializer or a node name holding the bytes) only costs speed.
pub fn session_threads(onnx: &[u8], requested: usize) -> usize {
    let racy = [b"ScatterND".as_slice(), b"ScatterElements".as_slice()]
        .iter()
        .any(|op| onnx.windows(op.len()).any(|w| w == *op));
    if racy {
        1
    } else if requested == 0 {
        max_threads()
    } else {
        requested.min(max_threads())
    }
}

// ------------------------------------------------------------- validation --

/// True when every value is finite (vectorisable: no early exit).
fn all_finite(values: &[f32]) -> bool {
    !values.iter().fold(false, |bad, x| {
        bad | (x.to_bits() & 0x7f80_0000 == 0x7f80_0000)
    })
}

fn validate_graph<'a>(graph: impl Into<GraphView<'a>>, task: Task) -> Result<()> {
    let graph = graph.into();
    let n = graph.num_nodes();
    if n == 0 {
        return Err(input_err("the graph is empty (no nodes)"));
    }
    if graph.node_feat.len() != n * NODE_FEAT_DIM {
        return Err(input_err(format!(
            "node_feat has {} values, want {n} nodes x {NODE_FEAT_DIM}",
            graph.node_feat.len()
        )));
    }
    if !all_finite(graph.node_feat) {
        return Err(input_err("node_feat contains NaN or infinity"));
    }
    if let Some(e) = graph
        .edge_index
        .iter()
        .find(|e| e.iter().any(|&v| v < 0 || v as usize >= n))
    {
        return Err(input_err(format!(
            "edge {e:?} refers to a node outside 0..{n}"
        )));
    }
    if task == Task::Layout {
        if graph.node_config_ids.is_empty() {
            return Err(input_err(
                "the graph has no configurable nodes (node_config_ids is empty)",
            ));
        }
        if let Some(id) = graph
            .node_config_ids
            .iter()
            .find(|&&v| v < 0 || v as usize >= n)
        {
            return Err(input_err(format!(
                "configurable node {id} is outside 0..{n}"
            )));
        }
    }
    Ok(())
}

fn validate_configs(configs: &ConfigBatch, task: Task, nodes_per_config: usize) -> Result<()> {
    if configs.task != task {
        return Err(input_err(format!(
            "a {} config batch given to a {} model",
            configs.task.name(),
            task.name()
        )));
    }
    if configs.nodes_per_config != nodes_per_config {
        return Err(input_err(format!(
            "config batch has {} nodes per config, the graph has {nodes_per_config}",
            configs.nodes_per_config
        )));
    }
    let want = configs.num_configs * nodes_per_config * task.config_dim();
    if configs.feat.len() != want {
        return Err(input_err(format!(
            "config batch has {} values, want {} configs x {nodes_per_config} x {}",
            configs.feat.len(),
            configs.num_configs,
            task.config_dim()
        )));
    }
    if !all_finite(&configs.feat) {
        return Err(input_err("config features contain NaN or infinity"));
    }
    Ok(())
}

/// The prepared state of a layout graph is this model's: `[nc, emb_dim]`.
fn check_prepared(prepared: &Prepared, nc: usize, emb_dim: usize) -> Result<()> {
    if prepared.state_shape != [nc, emb_dim] || prepared.state.len() != nc * emb_dim {
        return Err(input_err(format!(
            "prepared state has shape {:?}, this model wants [{nc}, {emb_dim}]: prepare() with this model first",
            prepared.state_shape
        )));
    }
    Ok(())
}

struct GraphTensors<'a> {
    node_feat: &'a [f32],
    node_opcode: Vec<i64>,
    edge_index: Vec<i64>,
    node_config_ids: Vec<i64>,
    num_nodes: usize,
    num_edges: usize,
}

fn graph_tensors(graph: GraphView<'_>) -> GraphTensors<'_> {
    GraphTensors {
        node_feat: graph.node_feat,
        node_opcode: graph.node_opcode.iter().map(|&o| i64::from(o)).collect(),
        edge_index: graph.edge_index.iter().flatten().copied().collect(),
        node_config_ids: graph.node_config_ids.to_vec(),
        num_nodes: graph.num_nodes(),
        num_edges: graph.edge_index.len(),
    }
}

fn run_err(e: ort::Error) -> CostModelError {
    runtime_err("inference failed", e)
}

/// Runs a session and returns its single f32 output as (shape, values).
fn run_session(
    session: &Mutex<Session>,
    inputs: Vec<(&'static str, ort::session::SessionInputValue<'_>)>,
) -> Result<(Vec<i64>, Vec<f32>)> {
    let mut guard = session.lock().map_err(|_| {
        CostModelError::Runtime("a previous inference panicked; the session is poisoned".into())
    })?;
    let inputs: Vec<(
        std::borrow::Cow<'_, str>,
        ort::session::SessionInputValue<'_>,
    )> = inputs
        .into_iter()
        .map(|(k, v)| (std::borrow::Cow::Borrowed(k), v))
        .collect();
    let outputs = guard.run(inputs).map_err(run_err)?;
    let (shape, values) = outputs[0].try_extract_tensor::<f32>().map_err(run_err)?;
    if !all_finite(values) {
        return Err(input_err(
            "the model produced NaN or infinity for this input",
        ));
    }
    Ok((shape.to_vec(), values.to_vec()))
}

fn tensor<'a, T: ort::value::PrimitiveTensorElementType + Clone + std::fmt::Debug + 'static>(
    shape: Vec<usize>,
    data: &'a [T],
) -> Result<ort::session::SessionInputValue<'a>> {
    Ok(TensorRef::from_array_view((shape, data))
        .map_err(|e| runtime_err("cannot build an input tensor", e))?
        .into())
}

fn graph_inputs<'a>(
    t: &'a GraphTensors<'_>,
) -> Result<Vec<(&'static str, ort::session::SessionInputValue<'a>)>> {
    Ok(vec![
        (
            "node_feat",
            tensor(vec![t.num_nodes, NODE_FEAT_DIM], t.node_feat)?,
        ),
        ("node_opcode", tensor(vec![t.num_nodes], &t.node_opcode)?),
        ("edge_index", tensor(vec![t.num_edges, 2], &t.edge_index)?),
    ])
}

impl CostModel for OnnxModel {
    fn task(&self) -> Task {
        self.loaded.info.task
    }

    fn device(&self) -> Option<String> {
        Some(self.loaded.info.device.clone())
    }

    fn reuse_key(&self) -> Option<ModelKey> {
        Some(self.key)
    }

    fn log_runtime_per_score(&self) -> Option<f64> {
        self.loaded.info.log_runtime_per_score
    }
    fn log_runtime_resolution(&self) -> Option<f64> {
        self.loaded.info.log_runtime_resolution
    }

    fn prepare(&self, graph: &Graph) -> Result<Prepared> {
        self.prepare_view(graph.view())
    }

    /// Reads the graph's arrays in place: only the pruned graph is a copy.
    fn prepare_view(&self, graph: GraphView<'_>) -> Result<Prepared> {
        self.validated_graph(graph)?;
        let task = self.loaded.info.task;
        let owned = match (task, self.loaded.info.khop) {
            (Task::Layout, Some(k)) => Some(prune_khop(graph, k)),
            _ => None,
        };
        let pruned = owned.as_ref().map_or(graph, Graph::view);
        match &self.loaded.stages {
            Stages::Split {
                encoder, emb_dim, ..
            } => {
                // The encoder's output of this graph, if this model (same
                // bytes, task, threads) gave it before in this process.
                let key = (self.key, GraphKey::of(pruned));
                if let Some(p) = PREPARED.get(&key) {
                    return Ok(Prepared::clone(&p));
                }
                let t = graph_tensors(pruned);
                let mut inputs = graph_inputs(&t)?;
                inputs.push((
                    "node_config_ids",
                    tensor(vec![t.node_config_ids.len()], &t.node_config_ids)?,
                ));
                let (shape, emb) = run_session(encoder, inputs)?;
                let nc = graph.num_config_nodes();
                if shape != [nc as i64, *emb_dim as i64] {
                    return Err(runtime_err(
                        "encoder output",
                        format!("shape {shape:?}, want [{nc}, {emb_dim}]"),
                    ));
                }
                // The head needs only the embeddings; keep the configurable ids
                // (and node count via opcodes) for callers, not the features.
                let graph = Graph {
                    node_config_ids: graph.node_config_ids.to_vec(),
                    ..Graph::default()
                };
                // The pruned graph keeps the configurable nodes in order, so its
                // meta-graph positions are the original graph's.
                let meta_edges = match self.loaded.info.meta_hops {
                    Some(hops) => meta_edges(pruned, hops),
                    None => Vec::new(),
                };
                let prepared = Prepared {
                    graph,
                    state: emb,
                    state_shape: vec![nc, *emb_dim],
                    meta_edges,
                };
                let bytes = std::mem::size_of_val(prepared.state.as_slice())
                    + std::mem::size_of_val(prepared.meta_edges.as_slice())
                    + std::mem::size_of_val(prepared.graph.node_config_ids.as_slice());
                PREPARED.insert(key, Arc::new(prepared.clone()), bytes);
                Ok(prepared)
            }
            Stages::Single { .. } => Ok(Prepared {
                graph: owned.unwrap_or_else(|| graph.to_graph()),
                state: Vec::new(),
                state_shape: Vec::new(),
                meta_edges: Vec::new(),
            }),
        }
    }

    fn node_sum_width(&self) -> Option<usize> {
        match &self.loaded.stages {
            Stages::Split {
                node_sum: Some(ns), ..
            } => Some(ns.width),
            _ => None,
        }
    }

    fn node_terms(
        &self,
        prepared: &Prepared,
        nodes: &[usize],
        configs: &ConfigBatch,
    ) -> Result<Vec<f32>> {
        let Stages::Split {
            node_sum: Some(ns),
            emb_dim,
            ..
        } = &self.loaded.stages
        else {
            return Err(input_err(
                "this model has no incremental stages (node_sum_width is None)",
            ));
        };
        let nc = prepared.graph.num_config_nodes();
        let m = nodes.len();
        validate_configs(configs, Task::Layout, m)?;
        check_prepared(prepared, nc, *emb_dim)?;
        if let Some(j) = nodes.iter().find(|&&j| j >= nc) {
            return Err(input_err(format!(
                "node {j} selected of {nc} configurable nodes"
            )));
        }
        let c = configs.num_configs;
        if c == 0 || m == 0 {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = nodes.iter().map(|&j| j as i64).collect();
        let inputs = vec![
            (
                "config_node_emb",
                tensor(vec![nc, *emb_dim], &prepared.state)?,
            ),
            ("term_nodes", tensor(vec![m], &ids)?),
            (
                "config_feat",
                tensor(vec![c, m, LAYOUT_CONFIG_DIM], &configs.feat)?,
            ),
        ];
        let (shape, terms) = run_session(&ns.terms, inputs)?;
        if shape != [c as i64, m as i64, ns.width as i64] {
            return Err(runtime_err(
                "node_terms output",
                format!("shape {shape:?}, want [{c}, {m}, {}]", ns.width),
            ));
        }
        Ok(terms)
    }

    fn score_pooled(&self, pooled: &[f32], num_configs: usize) -> Result<Vec<f32>> {
        let Stages::Split {
            node_sum: Some(ns), ..
        } = &self.loaded.stages
        else {
            return Err(input_err(
                "this model has no incremental stages (node_sum_width is None)",
            ));
        };
        if pooled.len() != num_configs * ns.width {
            return Err(input_err(format!(
                "pooled has {} values, want {num_configs} configs x {}",
                pooled.len(),
                ns.width
            )));
        }
        if !all_finite(pooled) {
            return Err(input_err("node sums contain NaN or infinity"));
        }
        if num_configs == 0 {
            return Ok(Vec::new());
        }
        let inputs = vec![("pooled", tensor(vec![num_configs, ns.width], pooled)?)];
        let (shape, scores) = run_session(&ns.pool, inputs)?;
        if shape != [num_configs as i64] {
            return Err(runtime_err(
                "score output",
                format!("shape {shape:?}, want [{num_configs}]"),
            ));
        }
        Ok(scores)
    }

    fn score(&self, prepared: &Prepared, configs: &ConfigBatch) -> Result<Vec<f32>> {
        let task = self.loaded.info.task;
        let nodes_per_config = match task {
            Task::Layout => prepared.graph.num_config_nodes(),
            Task::Tile => 1,
        };
        validate_configs(configs, task, nodes_per_config)?;
        if configs.num_configs == 0 {
            return Ok(Vec::new());
        }
        let c = configs.num_configs;
        let (shape, scores) = match &self.loaded.stages {
            Stages::Split { head, emb_dim, .. } => {
                check_prepared(prepared, nodes_per_config, *emb_dim)?;
                let mut inputs = vec![
                    (
                        "config_node_emb",
                        tensor(vec![nodes_per_config, *emb_dim], &prepared.state)?,
                    ),
                    (
                        "config_feat",
                        tensor(vec![c, nodes_per_config, LAYOUT_CONFIG_DIM], &configs.feat)?,
                    ),
                ];
                if self.loaded.info.meta_hops.is_some() {
                    if prepared
                        .meta_edges
                        .iter()
                        .flatten()
                        .any(|&v| v < 0 || v as usize >= nodes_per_config)
                    {
                        return Err(input_err(
                            "prepared meta-graph names a node outside the configurable nodes: prepare() with this model first",
                        ));
                    }
                    inputs.push((
                        "config_edge_index",
                        tensor(
                            vec![prepared.meta_edges.len(), 2],
                            prepared.meta_edges.as_flattened(),
                        )?,
                    ));
                }
                run_session(head, inputs)?
            }
            Stages::Single { model } => {
                validate_graph(&prepared.graph, task)?;
                let t = graph_tensors(prepared.graph.view());
                let mut inputs = graph_inputs(&t)?;
                match task {
                    Task::Layout => {
                        inputs.push((
                            "node_config_ids",
                            tensor(vec![t.node_config_ids.len()], &t.node_config_ids)?,
                        ));
                        inputs.push((
                            "config_feat",
                            tensor(vec![c, nodes_per_config, LAYOUT_CONFIG_DIM], &configs.feat)?,
                        ));
                    }
                    Task::Tile => inputs.push((
                        "config_feat",
                        tensor(vec![c, TILE_CONFIG_DIM], &configs.feat)?,
                    )),
                }
                run_session(model, inputs)?
            }
        };
        if shape != [c as i64] {
            return Err(runtime_err(
                "score output",
                format!("shape {shape:?}, want [{c}]"),
            ));
        }
        Ok(scores)
    }
}

#[cfg(test)]
mod tests {
    use super::check_elf;

    /// A minimal 64-bit little-endian x86-64 shared-object header with one
    /// loadable segment at `seg_offset..seg_offset + seg_size`, padded to
    /// `len` bytes.
    fn elf(len: usize, seg_offset: u64, seg_size: u64) -> Vec<u8> {
        let mut b = vec![0u8; len.max(64 + 56)];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2; // 64-bit
        b[5] = 1; // little-endian
        b[6] = 1;
        b[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
        let machine: u16 = if cfg!(target_arch = "aarch64") {
            183
        } else {
            62
        };
        b[18..20].copy_from_slice(&machine.to_le_bytes());
        b[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
        b[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        b[56..58].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
        b[64..68].copy_from_slice(&1u32.to_le_bytes()); // PT_LOAD
        b[72..80].copy_from_slice(&seg_offset.to_le_bytes());
        b[96..104].copy_from_slice(&seg_size.to_le_bytes()); // p_filesz
        b.truncate(len.max(64 + 56));
        b
    }

    #[test]
    #[cfg(all(
        target_os = "linux",
        target_pointer_width = "64",
        target_endian = "little"
    ))]
    fn whole_libraries_pass_and_cut_or_foreign_ones_are_named() {
        assert_eq!(check_elf(&elf(4096, 0, 4096)), Ok(()));
        let cut = check_elf(&elf(4096, 0, 8192)).expect_err("segment past the end");
        assert!(
            cut.contains("truncated or corrupt: loadable segment 0"),
            "{cut}"
        );
        let short = check_elf(&elf(4096, 0, 4096)[..40]).expect_err("short header");
        assert!(short.contains("shorter than an ELF header"), "{short}");
        let mut text = b"not a library at all".to_vec();
        text.resize(200, b' ');
        assert!(check_elf(&text).expect_err("magic").contains("bad magic"));
        let mut b32 = elf(4096, 0, 4096);
        b32[4] = 1;
        assert!(check_elf(&b32)
            .expect_err("class")
            .contains("32-bit library"));
        let mut exe = elf(4096, 0, 4096);
        exe[16] = 2;
        assert!(check_elf(&exe)
            .expect_err("type")
            .contains("not a shared object"));
        let mut arm = elf(4096, 0, 4096);
        arm[18..20].copy_from_slice(&40u16.to_le_bytes());
        assert!(check_elf(&arm)
            .expect_err("machine")
            .contains("ELF machine 40"));
        let mut phtable = elf(4096, 0, 4096);
        phtable[56..58].copy_from_slice(&1000u16.to_le_bytes());
        assert!(check_elf(&phtable)
            .expect_err("program headers")
            .contains("the program header table"));
    }
}
